#pragma once
// Elementwise ops with NumPy broadcasting, and their operators.
// Implemented beside their backward in autograd/ops_elementwise.cpp; each
// validates its arguments and throws std::invalid_argument naming the op and the shapes.
//
// Type promotion as PyTorch 1.13's, in the binary ops (add, sub, mul, div, pow, maximum,
// minimum, their scalar forms, rsub, rdiv and the operators): the result dtype is
// torch.result_type (autograd/ops_compare.h): float32 with float64 gives float64, a floating
// tensor with an int64 or bool one the floating dtype, int64 with bool int64; a 0-dim tensor
// promotes only across categories. A floating input of another dtype is converted with
// Tensor::to, so its gradient comes back in its own dtype. int64 and bool results are computed
// exactly (int64 wraps on overflow), without gradient; two bools give bool (add: or, mul: and).
// div is true division: integer operands give float32. A double scalar is a Python number, an
// int when integral: int64 tensor * 2.5 is float32, int64 tensor + 1.0 stays int64 (PyTorch
// tells 1 from 1.0, C++ passes both as double). As torch: sub and neg refuse bool tensors, pow
// refuses two bools and an integer tensor to a negative integral scalar power.
#include <cstdint>
#include <optional>

#include "autograd/tensor.h"

namespace tg {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor sub(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor div(const Tensor& a, double s);  // s = 0: inf, -inf or NaN (0 / 0), as torch.div
Tensor rsub(double s, const Tensor& a);  // s - a
Tensor rdiv(double s, const Tensor& a);  // s / a
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor square(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);

// ---- PyTorch 1.13's everyday elementwise ops: same names, argument order, defaults, values and
// gradients (also at non-differentiable points), float32 and float64. Deviations from PyTorch:
// - The unary ops here take floating tensors only: integer tensors throw (PyTorch computes abs,
//   sign and clamp in the integer type and promotes to float32 for the others). The binary ones
//   (maximum, minimum, pow) promote, as above.
// - A NaN bound makes every clamp output NaN (torch.clamp keeps x when the other bound is None).
// - softplus throws for beta == 0 (PyTorch returns inf) and does not overflow for a threshold
//   above 88 (float32), where PyTorch's log1p(exp(beta x)) returns inf.
// - Values may differ from PyTorch's in the last bits (different libm/SIMD), and gelu (none)
//   returns x Phi(x) for very negative x where PyTorch rounds to -0; sign(-0.0) is +0 in both.
// - Second derivatives (create_graph) use the same choices at non-differentiable points: the
//   derivative of a piecewise constant factor (abs's sign, clamp's and relu's masks) is 0.

/// |x|. Gradient sign(x): 0 at x == 0 (and at NaN), as PyTorch.
Tensor abs(const Tensor& x);
/// -1, 0 or 1 (0 for NaN and ±0). Gradient 0 everywhere.
Tensor sign(const Tensor& x);
/// min(max(x, min), max); at least one bound is required (std::invalid_argument otherwise). With
/// min > max every element is max. The gradient passes where min <= x <= max (bounds included).
Tensor clamp(const Tensor& x, std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt);
/// max(x, min); the gradient passes where x >= min.
Tensor clamp_min(const Tensor& x, double min);
/// min(x, max); the gradient passes where x <= max.
Tensor clamp_max(const Tensor& x, double max);
/// Elementwise max of two tensors with broadcasting; NaN where either is NaN. At ties each input
/// gets half of the gradient (PyTorch's derivatives.yaml); with a NaN both get all of it.
Tensor maximum(const Tensor& a, const Tensor& b);
/// Elementwise min of two tensors, as maximum.
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor erf(const Tensor& x);
/// log(1 + x), accurate for small x.
Tensor log1p(const Tensor& x);
/// exp(x) - 1, accurate for small x.
Tensor expm1(const Tensor& x);
/// 1 / sqrt(x).
Tensor rsqrt(const Tensor& x);
/// 1 / x.
Tensor reciprocal(const Tensor& x);

/// torch.nn.functional.gelu's `approximate` ("none" | "tanh") as a typed option.
enum class GeluApproximate { none, tanh };
/// x Phi(x) (Phi: the standard normal CDF), or with GeluApproximate::tanh
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), as PyTorch.
Tensor gelu(const Tensor& x, GeluApproximate approximate = GeluApproximate::none);
/// x * sigmoid(x).
Tensor silu(const Tensor& x);
/// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (PyTorch's linear region).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
/// x > 0 ? x : negative_slope x. Gradient negative_slope at x == 0, as PyTorch.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// x > 0 ? x : alpha (exp(x) - 1). Gradient alpha at x == 0, as PyTorch (x <= 0 takes that branch).
Tensor elu(const Tensor& x, double alpha = 1.0);
/// x^y elementwise with broadcasting. As PyTorch: the gradient w.r.t. x is 0 where y == 0 (so 0^0
/// has gradient 0), the gradient w.r.t. y is x^y log(x), taken as 0 where x == 0 and y >= 0 (and
/// -inf where x == 0 and y < 0; NaN where x < 0).
Tensor pow(const Tensor& x, const Tensor& y);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);
Tensor operator-(const Tensor& x);

}  // namespace tg
