#pragma once
// Matrix products.
// Implemented beside their backward in autograd/ops_matmul.cpp; each
// validates its arguments and throws std::invalid_argument naming the op and the shapes.
#include <cstdint>

#include "autograd/tensor.h"

namespace tg {

/// torch.matmul: 1-D x 1-D is the dot product; a 1-D left (right) operand is a row (column) whose
/// dimension is dropped from the result; (..., M, K) x (K, N) is one GEMM with the leading dims
/// folded into M; otherwise the batch dimensions broadcast: an operand holding one matrix is shared
/// by every batch entry without a copy (a right one folds into one GEMM); only an operand broadcast
/// along some batch dimensions but not all is expanded. An operand given as x.transpose(-2, -1)
/// is read from x with a GEMM transpose flag. Floating dtypes.
Tensor matmul(const Tensor& a, const Tensor& b);
/// x Wᵀ + b as torch.nn.functional.linear: x (..., in), weight (out, in), bias (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace tg
