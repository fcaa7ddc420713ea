#pragma once
// Normalisation over the trailing dims, fused: one pass per row forward (mean and 1/std saved per
// row) and one per row backward, instead of the ~8 tape nodes of the composite. The composites are
// kept as *_composed: the tests compare the two, and a differentiable backward can be recorded
// through them. Implemented beside their backward in autograd/ops_norm.cpp (kernels in
// autograd/kernels/norm.cpp).
#include <optional>

#include "autograd/shape.h"
#include "autograd/tensor.h"

namespace tg {

/// torch.nn.functional.layer_norm: y = (x - mean) / sqrt(var + eps) * weight + bias, mean and
/// biased variance over the trailing dims, which must equal `normalized_shape`. `weight` and
/// `bias` (each optional, shape normalized_shape, x's dtype) broadcast over the leading dims.
/// Throws std::invalid_argument naming the op and the shapes.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

/// torch.nn.functional.rms_norm (PyTorch 2.4): y = x / sqrt(mean(x²) + eps) * weight over the
/// trailing dims; no `eps` means the machine epsilon of x's dtype, as PyTorch.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

/// The same functions composed of reduction and elementwise ops (same checks): the reference the
/// fused ones are tested against, and a form whose backward is itself differentiable.
Tensor layer_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                           const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor rms_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                         std::optional<double> eps = std::nullopt);

}  // namespace tg
