#include "nn/utils.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "autograd/compact_grad.h"
#include "autograd/dtype.h"
#include "autograd/memory.h"
#include "autograd/parallel.h"
#include "autograd/tape.h"
#include "nn/optim.h"

namespace tg::nn {

namespace {
/// Sum of squares in double. Four interleaved partial sums (a fixed order, so still
/// deterministic) let the loop run without waiting on one long add chain.
template <class T> double sum_squares(const T* x, std::int64_t n) {
  double acc[4] = {0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += static_cast<double>(x[i + k]) * static_cast<double>(x[i + k]);
  for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}
}  // namespace

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  // Two passes over the parameters' gradients. Each gradient's sum of squares is taken over fixed
  // blocks of kBlock elements (in parallel) and the block sums are added in order, so the norm is
  // the same for any thread count. Scratch comes from the caching allocator: a training step
  // allocates nothing here.
  // A compact gradient (autograd/compact_grad.h) gives its sum of squares and is scaled in place
  // without being made dense.
  constexpr std::int64_t kBlock = 16384;
  auto for_each_grad = [&](auto&& dense, auto&& compact) {
    for (const auto& p : params) {
      if (!p.defined()) continue;
      if (auto c = p.compact_grad()) {
        compact(*c);
        continue;
      }
      Tensor g = p.grad();
      if (g.defined()) dense(g);
    }
  };
  double total = 0.0;
  PooledVector<double> block_sums;
  for_each_grad([&](const Tensor& g) {
    const std::int64_t n = g.numel(), blocks = (n + kBlock - 1) / kBlock;
    block_sums.assign(static_cast<std::size_t>(blocks), 0.0);
    dispatch_floating("clip_grad_norm", g.dtype(), [&](auto tag) {
      const auto* x = g.data<decltype(tag)>();
      parallel_for(blocks, std::max<std::int64_t>(1, kGrainCheap / kBlock), [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t b = b0; b < b1; ++b)
          block_sums[static_cast<std::size_t>(b)] = sum_squares(x + b * kBlock, std::min(kBlock, n - b * kBlock));
      });
    });
    for (double s : block_sums) total += s;
  }, [&](const CompactGrad& c) { total += c.squared_norm(); });
  const double norm = std::sqrt(total);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    NoGradGuard no_grad;
    for_each_grad([&](Tensor& g) {
      dispatch_floating("clip_grad_norm", g.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T* p = g.data<T>();
        const T c = static_cast<T>(coef);
        parallel_for_aligned(g.numel(), kGrainCheap, 64, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) p[i] *= c;
        });
      });
    }, [&](CompactGrad& c) { c.scale(coef); });
  }
  return norm;
}

double clip_grad_norm(const NamedTensors& params, double max_norm) {
  std::vector<Tensor> ts;
  for (const auto& [_, t] : params) ts.push_back(t);
  return clip_grad_norm(ts, max_norm);
}

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const ParamGroup& g : optimizer.param_groups()) last_lrs_.push_back(g.lr());
}

void LRScheduler::apply() {
  for (double lr : last_lrs_)
    if (!(lr >= 0.0)) {
      std::ostringstream os;
      os << optimizer_.name() << ": invalid learning rate " << lr;
      throw std::invalid_argument(os.str());
    }
  auto groups = optimizer_.param_groups();
  for (std::size_t g = 0; g < last_lrs_.size(); ++g) groups[g].set_lr(last_lrs_[g]);
}

void LRScheduler::step() {
  ++last_epoch_;
  auto groups = optimizer_.param_groups();
  for (std::size_t g = 0; g < last_lrs_.size(); ++g) last_lrs_[g] = next_lr(groups[g].lr(), last_epoch_, g);
  apply();
}

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size < 1) throw std::invalid_argument("StepLR: step_size must be >= 1, got " + std::to_string(step_size));
  if (!(gamma >= 0.0)) {
    std::ostringstream os;
    os << "StepLR: invalid gamma " << gamma;
    throw std::invalid_argument(os.str());
  }
}

double StepLR::next_lr(double current, std::int64_t epoch, std::size_t) const {
  return epoch % step_size_ == 0 ? current * gamma_ : current;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, std::int64_t total_iters)
    : LRScheduler(optimizer), start_(start_factor), end_(end_factor), total_(total_iters) {
  if (!(start_factor > 0.0 && start_factor <= 1.0) || !(end_factor >= 0.0 && end_factor <= 1.0)) {
    std::ostringstream os;
    os << "LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got " << start_factor << " and "
       << end_factor;
    throw std::invalid_argument(os.str());
  }
  if (total_iters < 1) throw std::invalid_argument("LinearLR: total_iters must be >= 1, got " + std::to_string(total_iters));
  set_initial_lrs([&](std::size_t, double lr) { return lr * start_; });
}

double LinearLR::next_lr(double current, std::int64_t epoch, std::size_t) const {
  if (epoch > total_) return current;
  const double e = static_cast<double>(epoch), n = static_cast<double>(total_);
  return current * (1.0 + (end_ - start_) / (n * start_ + (e - 1.0) * (end_ - start_)));
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) {
  if (!(gamma >= 0.0)) {
    std::ostringstream os;
    os << "ExponentialLR: invalid gamma " << gamma;
    throw std::invalid_argument(os.str());
  }
}

double ExponentialLR::next_lr(double current, std::int64_t, std::size_t) const { return current * gamma_; }

WarmupInverseSqrtLR::WarmupInverseSqrtLR(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t start_step)
    : LRScheduler(optimizer), warmup_(warmup_steps), start_(start_step) {
  for (const ParamGroup& g : optimizer.param_groups()) base_lrs_.push_back(g.lr());
  if (warmup_steps < 1)
    throw std::invalid_argument("WarmupInverseSqrtLR: warmup_steps must be >= 1, got " + std::to_string(warmup_steps));
  if (start_step < 0)
    throw std::invalid_argument("WarmupInverseSqrtLR: start_step must be >= 0, got " + std::to_string(start_step));
  set_initial_lrs([&](std::size_t g, double) { return lr_at(start_ + 1, g); });
}

double WarmupInverseSqrtLR::lr_at(std::int64_t step, std::size_t group) const {
  const double s = static_cast<double>(std::max<std::int64_t>(step, 1)), w = static_cast<double>(warmup_);
  return base_lrs_.at(group) * std::min(s / w, std::sqrt(w / s));
}

double WarmupInverseSqrtLR::next_lr(double, std::int64_t epoch, std::size_t group) const {
  return lr_at(start_ + epoch + 1, group);
}

}  // namespace tg::nn
