#pragma once
// Elementwise kernels (xsimd over contiguous runs, TBB for large tensors). These do no autograd;
// ops call them for both forward and backward. Installed for ops written outside the repository.
#include "autograd/tensor.h"

namespace tg::kernels {

enum class Unary {
  neg, exp, log, sqrt, tanh, sigmoid, relu, square, abs,
  add_scalar,   // x + p
  mul_scalar,   // x * p
  pow_scalar,   // x ^ p
  rsub_scalar,  // p - x
  rdiv_scalar,  // p / x
};

enum class Binary {
  add, sub, mul, div, maximum, minimum,
  gt,            // 1 where a > b, else 0
  eq,            // 1 where a == b, else 0
  tanh_grad,     // a * (1 - b^2),  a = dL/dy, b = y = tanh(x)
  sigmoid_grad,  // a * b * (1 - b), b = y = sigmoid(x)
  relu_grad,     // b > 0 ? a : 0,  b = x
};

/// y = op(x) (with scalar parameter `param` for the *_scalar ops). Same shape and dtype as x.
Tensor unary(Unary op, const Tensor& x, double param = 0.0);
/// NumPy-broadcast binary op; `name` is the op named in shape errors.
Tensor binary(Binary op, const Tensor& a, const Tensor& b, const char* name = "binary");
inline Tensor add(const Tensor& a, const Tensor& b) { return binary(Binary::add, a, b, "add"); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(Binary::mul, a, b, "mul"); }
/// dst += src, same shape and dtype.
void add_inplace(Tensor& dst, const Tensor& src);
/// dst *= s.
void scale_inplace(Tensor& dst, double s);
/// dst, viewed as (outer, size, inner), += src (outer, K, inner) at rows idx[0..K), each in
/// [0, size): every row of dst adds its sources in order of k, so the result does not depend on
/// the thread count (the backward of a gather of rows, and the sparse rows of an embedding).
void scatter_add_rows(Tensor& dst, const Tensor& src, const std::int64_t* idx, std::int64_t K, std::int64_t outer,
                      std::int64_t size, std::int64_t inner);

}  // namespace tg::kernels
