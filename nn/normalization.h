#pragma once
// LayerNorm (torch.nn.LayerNorm, PyTorch 1.13) and RMSNorm (torch.nn.RMSNorm, PyTorch 2.4), through
// the fused tg::layer_norm and tg::rms_norm (autograd/ops_norm.h).
#include <cstdint>
#include <optional>
#include <string>

#include "autograd/shape.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg::nn {

/// torch.nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True):
/// y = (x - mean) / sqrt(var + eps) * weight + bias, with mean and the biased variance (divisor N)
/// over the last normalized_shape.size() dimensions, which must equal normalized_shape.
/// Parameters "weight" (ones) and "bias" (zeros) of shape normalized_shape, float32, only when
/// elementwise_affine. Several dimensions are given as a Shape: LayerNorm(Shape{2, 3}) (a bare
/// {2, 3} would also match LayerNorm(2, 3.0) through the move constructor, so it is ambiguous).
class LayerNormImpl : public Module {
 public:
  LayerNormImpl(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  /// LayerNorm({normalized_shape}, ...): normalises over the last dimension.
  explicit LayerNormImpl(std::int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNormImpl(Shape{normalized_shape}, eps, elementwise_affine) {}

  /// x (..., *normalized_shape) -> same shape. Throws std::invalid_argument naming both shapes when
  /// x does not end in normalized_shape.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }

  const Shape& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }
  bool elementwise_affine() const { return affine_; }
  /// "(8,), eps=1e-05, elementwise_affine=true" (PyTorch's repr, C++ booleans).
  std::string extra_repr() const override;

  Tensor weight;  ///< normalized_shape; undefined without elementwise_affine
  Tensor bias;    ///< normalized_shape; undefined without elementwise_affine

 private:
  Shape normalized_shape_;
  double eps_;
  bool affine_;
};
TG_MODULE(LayerNorm);

/// torch.nn.RMSNorm(normalized_shape, eps=None, elementwise_affine=True) of PyTorch 2.4:
/// y = x / sqrt(mean(x²) + eps) * weight, the mean over the last normalized_shape.size()
/// dimensions. When `eps` is not given it is the machine epsilon of the input's dtype at each call
/// (torch.finfo(x.dtype).eps: 2^-23 for float32, 2^-52 for float64), as PyTorch. Parameter
/// "weight" (ones, float32) only when elementwise_affine; RMSNorm has no bias.
class RMSNormImpl : public Module {
 public:
  RMSNormImpl(Shape normalized_shape, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  /// RMSNorm({normalized_shape}, ...).
  explicit RMSNormImpl(std::int64_t normalized_shape, std::optional<double> eps = std::nullopt,
                       bool elementwise_affine = true)
      : RMSNormImpl(Shape{normalized_shape}, eps, elementwise_affine) {}

  /// x (..., *normalized_shape) -> same shape; throws std::invalid_argument as LayerNorm.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }

  const Shape& normalized_shape() const { return normalized_shape_; }
  /// The eps given at construction (nullopt: the input dtype's machine epsilon).
  std::optional<double> eps() const { return eps_; }
  bool elementwise_affine() const { return affine_; }
  /// "(8,), eps=None, elementwise_affine=true" (PyTorch's repr, C++ booleans).
  std::string extra_repr() const override;

  Tensor weight;  ///< normalized_shape; undefined without elementwise_affine

 private:
  Shape normalized_shape_;
  std::optional<double> eps_;
  bool affine_;
};
TG_MODULE(RMSNorm);

}  // namespace tg::nn
