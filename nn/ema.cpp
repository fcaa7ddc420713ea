// The weight EMA: a copy of every parameter, updated in place after each step.
#include "nn/ema.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "autograd/parallel.h"

namespace tg::nn {

namespace {

template <class T> void ema_update(T* __restrict e, const T* __restrict p, std::int64_t n, T a) {
  // Aligned chunks: the vectorised body and the scalar tail meet at the same element for any
  // thread count, so the result is bitwise independent of it (FMA contraction included).
  parallel_for_aligned(n, kGrainCheap, 64, [&](std::int64_t b, std::int64_t end) {
    for (std::int64_t i = b; i < end; ++i) e[i] += a * (p[i] - e[i]);
  });
}

template <class T> void swap_values(T* a, T* b, std::int64_t n) { std::swap_ranges(a, a + n, b); }

}  // namespace

WeightEma::WeightEma(NamedTensors params, double decay, std::int64_t updates)
    : params_(std::move(params)), decay_(decay), updates_(updates) {
  if (!(decay > 0 && decay < 1))
    throw std::invalid_argument("WeightEma: decay = " + std::to_string(decay) + " is not in (0, 1)");
  if (updates < 0) throw std::invalid_argument("WeightEma: updates = " + std::to_string(updates) + " is negative");
  averages_.reserve(params_.size());
  for (const auto& [name, p] : params_) {
    if (p.dtype() != DType::f32 && p.dtype() != DType::f64)
      throw std::invalid_argument("WeightEma: parameter '" + name + "' is not float32 or float64");
    averages_.emplace_back(name, Tensor::empty(p.shape(), p.dtype()));
  }
  reset_from_parameters();
}

double WeightEma::decay_at(double decay, std::int64_t n) {
  const double nd = static_cast<double>(n);
  return std::min(decay, (1.0 + nd) / (10.0 + nd));
}

void WeightEma::update() {
  const double d = decay_at(decay_, updates_);
  for (std::size_t k = 0; k < params_.size(); ++k) {
    Tensor& e = averages_[k].second;
    const Tensor& p = params_[k].second;
    if (p.dtype() == DType::f32)
      ema_update(e.data<float>(), p.data<float>(), p.numel(), static_cast<float>(1.0 - d));
    else
      ema_update(e.data<double>(), p.data<double>(), p.numel(), 1.0 - d);
  }
  ++updates_;
}

void WeightEma::swap() {
  for (std::size_t k = 0; k < params_.size(); ++k) {
    Tensor& e = averages_[k].second;
    Tensor p = params_[k].second;
    if (p.dtype() == DType::f32) swap_values(e.data<float>(), p.data<float>(), p.numel());
    else swap_values(e.data<double>(), p.data<double>(), p.numel());
    autograd::increment_version(p);  // written in place: autocast's bf16 copy of p must be renewed
  }
}

void WeightEma::reset_from_parameters() {
  for (std::size_t k = 0; k < params_.size(); ++k) averages_[k].second.copy_(params_[k].second);
}

}  // namespace tg::nn
