#pragma once
// Convolution and pooling layers as torch.nn.Conv1d, Conv2d, MaxPool2d, AvgPool2d and
// AdaptiveAvgPool2d (PyTorch 1.13): same parameter names, shapes and initialisation, through the
// ops of autograd/ops_conv.h.
#include <cstdint>
#include <optional>
#include <string>

#include "autograd/ops_conv.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg {
class Generator;
}

namespace tg::nn {

/// Options of Conv2d: Conv2dOptions(in, out, kernel).stride(2).padding(1). Chainable setters;
/// validated when the layer is built. Only zero padding (torch's padding_mode='zeros').
class Conv2dOptions {
 public:
  Conv2dOptions(std::int64_t in_channels, std::int64_t out_channels, IntPair kernel_size)
      : in_(in_channels), out_(out_channels), kernel_(kernel_size) {}
  Conv2dOptions& stride(IntPair v) { stride_ = v; return *this; }
  Conv2dOptions& padding(ConvPadding v) { padding_ = v; return *this; }
  Conv2dOptions& dilation(IntPair v) { dilation_ = v; return *this; }
  Conv2dOptions& groups(std::int64_t v) { groups_ = v; return *this; }
  Conv2dOptions& bias(bool v) { bias_ = v; return *this; }
  std::int64_t in_channels() const { return in_; }
  std::int64_t out_channels() const { return out_; }
  IntPair kernel_size() const { return kernel_; }
  IntPair stride() const { return stride_; }
  const ConvPadding& padding() const { return padding_; }
  IntPair dilation() const { return dilation_; }
  std::int64_t groups() const { return groups_; }
  bool bias() const { return bias_; }

 private:
  std::int64_t in_, out_;
  IntPair kernel_, stride_ = 1;
  ConvPadding padding_ = 0;
  IntPair dilation_ = 1;
  std::int64_t groups_ = 1;
  bool bias_ = true;
};

/// torch.nn.Conv2d: parameters "weight" (out, in / groups, kH, kW) and "bias" (out), float32,
/// initialised from `gen` as PyTorch (weight kaiming_uniform_(a = sqrt(5)), i.e.
/// U(±1/sqrt(fan_in)), then bias U(±1/sqrt(fan_in)), fan_in = in / groups * kH * kW).
class Conv2dImpl : public Module {
 public:
  using options_type = Conv2dOptions;
  Conv2dImpl(const Conv2dOptions& options, Generator& gen);
  /// x (N, in, H, W) or (in, H, W) -> (N, out, H_out, W_out), via tg::conv2d.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
  const Conv2dOptions& options() const { return options_; }
  /// "3, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)" (PyTorch's repr).
  std::string extra_repr() const override;

  Tensor weight;  ///< (out, in / groups, kH, kW)
  Tensor bias;    ///< (out); undefined without bias

 private:
  Conv2dOptions options_;
};
TG_MODULE(Conv2d);

/// Options of Conv1d: Conv1dOptions(in, out, kernel).stride(2).padding(1).
class Conv1dOptions {
 public:
  Conv1dOptions(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size)
      : in_(in_channels), out_(out_channels), kernel_(kernel_size) {}
  Conv1dOptions& stride(std::int64_t v) { stride_ = v; return *this; }
  Conv1dOptions& padding(ConvPadding v) { padding_ = v; return *this; }
  Conv1dOptions& dilation(std::int64_t v) { dilation_ = v; return *this; }
  Conv1dOptions& groups(std::int64_t v) { groups_ = v; return *this; }
  Conv1dOptions& bias(bool v) { bias_ = v; return *this; }
  std::int64_t in_channels() const { return in_; }
  std::int64_t out_channels() const { return out_; }
  std::int64_t kernel_size() const { return kernel_; }
  std::int64_t stride() const { return stride_; }
  const ConvPadding& padding() const { return padding_; }
  std::int64_t dilation() const { return dilation_; }
  std::int64_t groups() const { return groups_; }
  bool bias() const { return bias_; }

 private:
  std::int64_t in_, out_, kernel_, stride_ = 1;
  ConvPadding padding_ = 0;
  std::int64_t dilation_ = 1, groups_ = 1;
  bool bias_ = true;
};

/// torch.nn.Conv1d: "weight" (out, in / groups, k) and "bias" (out), initialised as Conv2d.
class Conv1dImpl : public Module {
 public:
  using options_type = Conv1dOptions;
  Conv1dImpl(const Conv1dOptions& options, Generator& gen);
  /// x (N, in, L) or (in, L) -> (N, out, L_out), via tg::conv1d.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
  const Conv1dOptions& options() const { return options_; }
  std::string extra_repr() const override;

  Tensor weight;  ///< (out, in / groups, k)
  Tensor bias;    ///< (out); undefined without bias

 private:
  Conv1dOptions options_;
};
TG_MODULE(Conv1d);

/// Options of MaxPool2d: MaxPool2dOptions(2).stride(1).padding(1); stride unset means kernel_size.
class MaxPool2dOptions {
 public:
  MaxPool2dOptions(std::int64_t kernel_size) : kernel_(kernel_size) {}  // NOLINT: MaxPool2d(2) reads as torch
  MaxPool2dOptions(IntPair kernel_size) : kernel_(kernel_size) {}  // NOLINT
  MaxPool2dOptions& stride(IntPair v) { stride_ = v; return *this; }
  MaxPool2dOptions& padding(IntPair v) { padding_ = v; return *this; }
  MaxPool2dOptions& dilation(IntPair v) { dilation_ = v; return *this; }
  MaxPool2dOptions& ceil_mode(bool v) { ceil_mode_ = v; return *this; }
  IntPair kernel_size() const { return kernel_; }
  IntPair stride() const { return stride_.value_or(kernel_); }
  IntPair padding() const { return padding_; }
  IntPair dilation() const { return dilation_; }
  bool ceil_mode() const { return ceil_mode_; }

 private:
  IntPair kernel_;
  std::optional<IntPair> stride_;
  IntPair padding_ = 0, dilation_ = 1;
  bool ceil_mode_ = false;
};

/// torch.nn.MaxPool2d (no parameters), via tg::max_pool2d.
class MaxPool2dImpl : public Module {
 public:
  using options_type = MaxPool2dOptions;
  MaxPool2dImpl(const MaxPool2dOptions& options) : options_(options) {}  // NOLINT: MaxPool2d(2)
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
  const MaxPool2dOptions& options() const { return options_; }
  std::string extra_repr() const override;

 private:
  MaxPool2dOptions options_;
};
TG_MODULE(MaxPool2d);

/// Options of AvgPool2d: AvgPool2dOptions(2).stride(1).padding(1).count_include_pad(false).
class AvgPool2dOptions {
 public:
  AvgPool2dOptions(std::int64_t kernel_size) : kernel_(kernel_size) {}  // NOLINT: AvgPool2d(2)
  AvgPool2dOptions(IntPair kernel_size) : kernel_(kernel_size) {}  // NOLINT
  AvgPool2dOptions& stride(IntPair v) { stride_ = v; return *this; }
  AvgPool2dOptions& padding(IntPair v) { padding_ = v; return *this; }
  AvgPool2dOptions& ceil_mode(bool v) { ceil_mode_ = v; return *this; }
  AvgPool2dOptions& count_include_pad(bool v) { count_include_pad_ = v; return *this; }
  AvgPool2dOptions& divisor_override(std::optional<std::int64_t> v) { divisor_override_ = v; return *this; }
  IntPair kernel_size() const { return kernel_; }
  IntPair stride() const { return stride_.value_or(kernel_); }
  IntPair padding() const { return padding_; }
  bool ceil_mode() const { return ceil_mode_; }
  bool count_include_pad() const { return count_include_pad_; }
  std::optional<std::int64_t> divisor_override() const { return divisor_override_; }

 private:
  IntPair kernel_;
  std::optional<IntPair> stride_;
  IntPair padding_ = 0;
  bool ceil_mode_ = false, count_include_pad_ = true;
  std::optional<std::int64_t> divisor_override_;
};

/// torch.nn.AvgPool2d (no parameters), via tg::avg_pool2d.
class AvgPool2dImpl : public Module {
 public:
  using options_type = AvgPool2dOptions;
  AvgPool2dImpl(const AvgPool2dOptions& options) : options_(options) {}  // NOLINT: AvgPool2d(2)
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
  const AvgPool2dOptions& options() const { return options_; }
  std::string extra_repr() const override;

 private:
  AvgPool2dOptions options_;
};
TG_MODULE(AvgPool2d);

/// torch.nn.AdaptiveAvgPool2d(output_size) (no parameters), via tg::adaptive_avg_pool2d.
class AdaptiveAvgPool2dImpl : public Module {
 public:
  using options_type = IntPair;  ///< the output size, so that AdaptiveAvgPool2d({1, 1}) works
  explicit AdaptiveAvgPool2dImpl(IntPair output_size) : output_size_(output_size) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
  IntPair output_size() const { return output_size_; }
  std::string extra_repr() const override;

 private:
  IntPair output_size_;
};
TG_MODULE(AdaptiveAvgPool2d);

}  // namespace tg::nn
