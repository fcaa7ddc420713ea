#include "nn/conv.h"

#include <stdexcept>
#include <string>

#include "nn/init.h"

namespace tg::nn {

namespace {

// PyTorch prints a conv layer's sizes as tuples: "(3, 3)"; a 1-d one as "(3,)".
std::string tuple_str(IntPair p) { return "(" + std::to_string(p.h) + ", " + std::to_string(p.w) + ")"; }
std::string tuple_str(std::int64_t v) { return "(" + std::to_string(v) + ",)"; }
// A pooling layer's, as given: "2" or "(2, 3)".
std::string int_or_pair(IntPair p) { return p.h == p.w ? std::to_string(p.h) : tuple_str(p); }

void check_channels(const char* layer, std::int64_t in, std::int64_t out, std::int64_t groups) {
  if (in <= 0 || out <= 0)
    throw std::invalid_argument(std::string(layer) + ": in_channels and out_channels must be positive, got " +
                                std::to_string(in) + " and " + std::to_string(out));
  if (groups <= 0 || in % groups != 0 || out % groups != 0)
    throw std::invalid_argument(std::string(layer) + ": groups=" + std::to_string(groups) +
                                " must be positive and divide in_channels=" + std::to_string(in) +
                                " and out_channels=" + std::to_string(out));
}

std::string padding_str(const ConvPadding& p, bool one_d) {
  if (p.mode) return *p.mode == PaddingMode::same ? "same" : "valid";
  return one_d ? tuple_str(p.value.w) : tuple_str(p.value);
}

}  // namespace

Conv2dImpl::Conv2dImpl(const Conv2dOptions& options, Generator& gen) : options_(options) {
  const auto& o = options_;
  check_channels("Conv2d", o.in_channels(), o.out_channels(), o.groups());
  if (o.kernel_size().h <= 0 || o.kernel_size().w <= 0)
    throw std::invalid_argument("Conv2d: kernel_size must be positive, got " + tuple_str(o.kernel_size()));
  weight = register_parameter(
      "weight", Tensor::empty({o.out_channels(), o.in_channels() / o.groups(), o.kernel_size().h, o.kernel_size().w}));
  if (o.bias()) bias = register_parameter("bias", Tensor::empty({o.out_channels()}));
  init::linear_default_(weight, bias, gen);  // torch's _ConvNd.reset_parameters is Linear's
}

Tensor Conv2dImpl::forward(const Tensor& x) const {
  const auto& o = options_;
  return tg::conv2d(x, weight, bias, o.stride(), o.padding(), o.dilation(), o.groups());
}

std::string Conv2dImpl::extra_repr() const {
  const auto& o = options_;
  std::string s = std::to_string(o.in_channels()) + ", " + std::to_string(o.out_channels()) +
                  ", kernel_size=" + tuple_str(o.kernel_size()) + ", stride=" + tuple_str(o.stride());
  if (o.padding().mode || o.padding().value.h != 0 || o.padding().value.w != 0)
    s += ", padding=" + padding_str(o.padding(), false);
  if (o.dilation().h != 1 || o.dilation().w != 1) s += ", dilation=" + tuple_str(o.dilation());
  if (o.groups() != 1) s += ", groups=" + std::to_string(o.groups());
  if (!o.bias()) s += ", bias=false";
  return s;
}

Conv1dImpl::Conv1dImpl(const Conv1dOptions& options, Generator& gen) : options_(options) {
  const auto& o = options_;
  check_channels("Conv1d", o.in_channels(), o.out_channels(), o.groups());
  if (o.kernel_size() <= 0)
    throw std::invalid_argument("Conv1d: kernel_size must be positive, got " + std::to_string(o.kernel_size()));
  weight = register_parameter("weight", Tensor::empty({o.out_channels(), o.in_channels() / o.groups(), o.kernel_size()}));
  if (o.bias()) bias = register_parameter("bias", Tensor::empty({o.out_channels()}));
  init::linear_default_(weight, bias, gen);
}

Tensor Conv1dImpl::forward(const Tensor& x) const {
  const auto& o = options_;
  return tg::conv1d(x, weight, bias, o.stride(), o.padding(), o.dilation(), o.groups());
}

std::string Conv1dImpl::extra_repr() const {
  const auto& o = options_;
  std::string s = std::to_string(o.in_channels()) + ", " + std::to_string(o.out_channels()) +
                  ", kernel_size=" + tuple_str(o.kernel_size()) + ", stride=" + tuple_str(o.stride());
  if (o.padding().mode || o.padding().value.w != 0) s += ", padding=" + padding_str(o.padding(), true);
  if (o.dilation() != 1) s += ", dilation=" + tuple_str(o.dilation());
  if (o.groups() != 1) s += ", groups=" + std::to_string(o.groups());
  if (!o.bias()) s += ", bias=false";
  return s;
}

Tensor MaxPool2dImpl::forward(const Tensor& x) const {
  const auto& o = options_;
  return tg::max_pool2d(x, o.kernel_size(), o.stride(), o.padding(), o.dilation(), o.ceil_mode());
}

std::string MaxPool2dImpl::extra_repr() const {
  const auto& o = options_;
  return "kernel_size=" + int_or_pair(o.kernel_size()) + ", stride=" + int_or_pair(o.stride()) +
         ", padding=" + int_or_pair(o.padding()) + ", dilation=" + int_or_pair(o.dilation()) +
         ", ceil_mode=" + (o.ceil_mode() ? "true" : "false");
}

Tensor AvgPool2dImpl::forward(const Tensor& x) const {
  const auto& o = options_;
  return tg::avg_pool2d(x, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(), o.count_include_pad(),
                        o.divisor_override());
}

std::string AvgPool2dImpl::extra_repr() const {
  const auto& o = options_;
  return "kernel_size=" + int_or_pair(o.kernel_size()) + ", stride=" + int_or_pair(o.stride()) +
         ", padding=" + int_or_pair(o.padding());
}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& x) const { return tg::adaptive_avg_pool2d(x, output_size_); }

std::string AdaptiveAvgPool2dImpl::extra_repr() const { return "output_size=" + int_or_pair(output_size_); }

}  // namespace tg::nn
