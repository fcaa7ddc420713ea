#pragma once
// Matrix products.
// Implemented beside their backward in autograd/ops_matmul.cpp; each
// validates its arguments and throws std::invalid_argument naming the op and the shapes.
#include <cstdint>

#include "autograd/tensor.h"

namespace tg {

/// (M,K)x(K,N); batched (B,M,K)x(B,K,N); (...,M,K)x(K,N) folds the leading dims into M.
Tensor matmul(const Tensor& a, const Tensor& b);
/// x Wᵀ + b as torch.nn.functional.linear: x (..., in), weight (out, in), bias (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace tg
