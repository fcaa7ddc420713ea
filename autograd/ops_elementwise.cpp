// Elementwise ops with NumPy broadcasting. Backward of a broadcast input sums the gradient back
// to that input's shape (kernels::sum_to).
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/reduce.h"
#include "autograd/ops_elementwise.h"
#include "autograd/tape.h"

namespace tg {

namespace {
using kernels::Binary;
using kernels::Unary;
using kernels::binary;  // unqualified calls below are the kernels (found by ADL as well)
using kernels::unary;
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return record("add", kernels::binary(Binary::add, a, b, "add"), {a, b},
                [sa = a.shape(), sb = b.shape()](BackwardContext& ctx) {
                  ctx.accumulate(0, kernels::sum_to(ctx.grad_output(), sa));
                  ctx.accumulate(1, kernels::sum_to(ctx.grad_output(), sb));
                });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return record("sub", kernels::binary(Binary::sub, a, b, "sub"), {a, b},
                [sa = a.shape(), sb = b.shape()](BackwardContext& ctx) {
                  ctx.accumulate(0, kernels::sum_to(ctx.grad_output(), sa));
                  if (ctx.needs_grad(1)) ctx.accumulate(1, kernels::sum_to(unary(Unary::neg, ctx.grad_output()), sb));
                });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return record("mul", kernels::binary(Binary::mul, a, b, "mul"), {a, b}, [a = a.detach(), b = b.detach()](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0)) ctx.accumulate(0, kernels::sum_to(binary(Binary::mul, g, b), a.shape()));
    if (ctx.needs_grad(1)) ctx.accumulate(1, kernels::sum_to(binary(Binary::mul, g, a), b.shape()));
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor y = kernels::binary(Binary::div, a, b, "div");
  return record("div", y, {a, b}, [b = b.detach(), y, sa = a.shape()](BackwardContext& ctx) {
    const Tensor ga = binary(Binary::div, ctx.grad_output(), b);  // dL/da = g / b
    if (ctx.needs_grad(1))  // dL/db = -g * a / b^2 = -(g / b) * y
      ctx.accumulate(1, kernels::sum_to(unary(Unary::neg, binary(Binary::mul, ga, y)), b.shape()));
    if (ctx.needs_grad(0)) ctx.accumulate(0, kernels::sum_to(ga, sa));
  });
}

Tensor add(const Tensor& a, double s) {
  return record("add_scalar", unary(Unary::add_scalar, a, s), {a},
                [](BackwardContext& ctx) { ctx.accumulate(0, ctx.grad_output()); });
}

Tensor sub(const Tensor& a, double s) { return add(a, -s); }

Tensor mul(const Tensor& a, double s) {
  return record("mul_scalar", unary(Unary::mul_scalar, a, s), {a},
                [s](BackwardContext& ctx) { ctx.accumulate(0, unary(Unary::mul_scalar, ctx.grad_output(), s)); });
}

Tensor div(const Tensor& a, double s) {
  if (s == 0) throw std::invalid_argument("div: division by the scalar 0");
  return mul(a, 1.0 / s);
}

Tensor rsub(double s, const Tensor& a) {
  return record("rsub_scalar", unary(Unary::rsub_scalar, a, s), {a},
                [](BackwardContext& ctx) { ctx.accumulate(0, unary(Unary::neg, ctx.grad_output())); });
}

Tensor rdiv(double s, const Tensor& a) {
  Tensor y = unary(Unary::rdiv_scalar, a, s);
  return record("rdiv_scalar", y, {a}, [a = a.detach(), y](BackwardContext& ctx) {
    // d(s/a)/da = -s/a^2 = -y/a
    ctx.accumulate(0, unary(Unary::neg, binary(Binary::mul, ctx.grad_output(), binary(Binary::div, y, a))));
  });
}

Tensor neg(const Tensor& x) {
  return record("neg", unary(Unary::neg, x), {x},
                [](BackwardContext& ctx) { ctx.accumulate(0, unary(Unary::neg, ctx.grad_output())); });
}

Tensor exp(const Tensor& x) {
  Tensor y = unary(Unary::exp, x);
  return record("exp", y, {x}, [y](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), y)); });
}

Tensor log(const Tensor& x) {
  return record("log", unary(Unary::log, x), {x},
                [x = x.detach()](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::div, ctx.grad_output(), x)); });
}

Tensor sqrt(const Tensor& x) {
  Tensor y = unary(Unary::sqrt, x);
  return record("sqrt", y, {x}, [y](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::div, unary(Unary::mul_scalar, ctx.grad_output(), 0.5), y));
  });
}

Tensor tanh(const Tensor& x) {
  Tensor y = unary(Unary::tanh, x);
  return record("tanh", y, {x}, [y](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::tanh_grad, ctx.grad_output(), y)); });
}

Tensor sigmoid(const Tensor& x) {
  Tensor y = unary(Unary::sigmoid, x);
  return record("sigmoid", y, {x},
                [y](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::sigmoid_grad, ctx.grad_output(), y)); });
}

Tensor relu(const Tensor& x) {
  return record("relu", unary(Unary::relu, x), {x},
                [x = x.detach()](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::relu_grad, ctx.grad_output(), x)); });
}

Tensor square(const Tensor& x) {
  return record("square", unary(Unary::square, x), {x}, [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::mul_scalar, x, 2.0)));
  });
}

Tensor pow(const Tensor& x, double exponent) {
  if (exponent == 2.0) return square(x);
  return record("pow", unary(Unary::pow_scalar, x, exponent), {x}, [x = x.detach(), exponent](BackwardContext& ctx) {
    // d x^p / dx = p x^(p-1)
    const Tensor d = unary(Unary::mul_scalar, unary(Unary::pow_scalar, x, exponent - 1.0), exponent);
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), d));
  });
}

// ---- PyTorch's everyday elementwise ops. Gradients follow tools/autograd/derivatives.yaml of
// PyTorch 1.13, including its choices at non-differentiable points.

namespace {
void require_floating(const char* op, const Tensor& x) {
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string(op) + ": expects a floating-point tensor, got " +
                                std::string(dtype_name(x.dtype())) + " " + x.shape().str());
}

void require_same_floating(const char* op, const Tensor& a, const Tensor& b) {
  require_floating(op, a);
  require_floating(op, b);
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(std::string(op) + ": dtypes differ: " + std::string(dtype_name(a.dtype())) + " " +
                                a.shape().str() + " and " + std::string(dtype_name(b.dtype())) + " " + b.shape().str());
}

// clamp, clamp_min and clamp_max; an absent bound is an infinite one.
Tensor clamp_op(const char* name, const Tensor& x, double lo, double hi) {
  require_floating(name, x);
  return record(name, unary(Unary::clamp, x, lo, hi), {x}, [x = x.detach(), lo, hi](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::clamp_grad, x, lo, hi)));
  });
}

// maximum and minimum: input i gets dL/dy times its share (1, 0.5 at ties, 0), summed to its shape.
Tensor max_min_op(const char* name, Binary op, const Tensor& a, const Tensor& b) {
  require_same_floating(name, a, b);
  const bool is_max = op == Binary::maximum_nan;
  return record(name, binary(op, a, b, name), {a, b}, [a = a.detach(), b = b.detach(), is_max](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0))
      ctx.accumulate(0, kernels::sum_to(binary(Binary::mul, g, is_max ? binary(Binary::max_weight, a, b)
                                                                      : binary(Binary::max_weight, b, a)), a.shape()));
    if (ctx.needs_grad(1))
      ctx.accumulate(1, kernels::sum_to(binary(Binary::mul, g, is_max ? binary(Binary::max_weight, b, a)
                                                                      : binary(Binary::max_weight, a, b)), b.shape()));
  });
}
}  // namespace

Tensor abs(const Tensor& x) {
  require_floating("abs", x);
  return record("abs", unary(Unary::abs, x), {x}, [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::sign, x)));
  });
}

Tensor sign(const Tensor& x) {
  require_floating("sign", x);
  // Recorded although its gradient is 0, so that x gets a (zero) gradient through it, as in PyTorch.
  return record("sign", unary(Unary::sign, x), {x}, [s = x.shape(), dt = x.dtype()](BackwardContext& ctx) {
    ctx.accumulate(0, Tensor::zeros(s, dt));
  });
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  if (!min && !max) throw std::invalid_argument("clamp: at least one of min and max must be given, got neither");
  return clamp_op("clamp", x, min.value_or(-INFINITY), max.value_or(INFINITY));
}

Tensor clamp_min(const Tensor& x, double min) { return clamp_op("clamp_min", x, min, INFINITY); }

Tensor clamp_max(const Tensor& x, double max) { return clamp_op("clamp_max", x, -INFINITY, max); }

Tensor maximum(const Tensor& a, const Tensor& b) { return max_min_op("maximum", Binary::maximum_nan, a, b); }

Tensor minimum(const Tensor& a, const Tensor& b) { return max_min_op("minimum", Binary::minimum_nan, a, b); }

Tensor sin(const Tensor& x) {
  require_floating("sin", x);
  return record("sin", unary(Unary::sin, x), {x}, [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::cos, x)));
  });
}

Tensor cos(const Tensor& x) {
  require_floating("cos", x);
  return record("cos", unary(Unary::cos, x), {x}, [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, unary(Unary::neg, binary(Binary::mul, ctx.grad_output(), unary(Unary::sin, x))));
  });
}

Tensor erf(const Tensor& x) {
  require_floating("erf", x);
  return record("erf", unary(Unary::erf, x), {x}, [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::erf_grad, ctx.grad_output(), x));
  });
}

Tensor log1p(const Tensor& x) {
  require_floating("log1p", x);
  return record("log1p", unary(Unary::log1p, x), {x}, [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::div, ctx.grad_output(), unary(Unary::add_scalar, x, 1.0)));
  });
}

Tensor expm1(const Tensor& x) {
  require_floating("expm1", x);
  Tensor y = unary(Unary::expm1, x);
  return record("expm1", y, {x}, [y](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::add_scalar, y, 1.0)));
  });
}

Tensor rsqrt(const Tensor& x) {
  require_floating("rsqrt", x);
  Tensor y = unary(Unary::rsqrt, x);
  return record("rsqrt", y, {x}, [y](BackwardContext& ctx) {  // d/dx x^(-1/2) = -y^3 / 2
    const Tensor d = unary(Unary::mul_scalar, binary(Binary::mul, unary(Unary::square, y), y), -0.5);
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), d));
  });
}

Tensor reciprocal(const Tensor& x) {
  require_floating("reciprocal", x);
  Tensor y = unary(Unary::reciprocal, x);
  return record("reciprocal", y, {x}, [y](BackwardContext& ctx) {  // d/dx 1/x = -y^2
    ctx.accumulate(0, binary(Binary::mul, unary(Unary::neg, ctx.grad_output()), unary(Unary::square, y)));
  });
}

Tensor gelu(const Tensor& x, GeluApproximate approximate) {
  require_floating("gelu", x);
  const bool tanh_form = approximate == GeluApproximate::tanh;
  return record("gelu", unary(tanh_form ? Unary::gelu_tanh : Unary::gelu, x), {x},
                [x = x.detach(), tanh_form](BackwardContext& ctx) {
                  ctx.accumulate(0, binary(tanh_form ? Binary::gelu_tanh_grad : Binary::gelu_grad, ctx.grad_output(), x));
                });
}

Tensor silu(const Tensor& x) {
  require_floating("silu", x);
  return record("silu", unary(Unary::silu, x), {x},
                [x = x.detach()](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::silu_grad, ctx.grad_output(), x)); });
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  require_floating("softplus", x);
  if (beta == 0 || !std::isfinite(beta)) throw std::invalid_argument("softplus: beta must be finite and nonzero, got " + std::to_string(beta));
  return record("softplus", unary(Unary::softplus, x, beta, threshold), {x}, [x = x.detach(), beta, threshold](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::softplus_grad, x, beta, threshold)));
  });
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  require_floating("leaky_relu", x);
  return record("leaky_relu", unary(Unary::leaky_relu, x, negative_slope), {x}, [x = x.detach(), negative_slope](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::leaky_relu_grad, x, negative_slope)));
  });
}

Tensor elu(const Tensor& x, double alpha) {
  require_floating("elu", x);
  return record("elu", unary(Unary::elu, x, alpha), {x}, [x = x.detach(), alpha](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::elu_grad, x, alpha)));
  });
}

Tensor pow(const Tensor& x, const Tensor& y) {
  require_same_floating("pow", x, y);
  return record("pow", binary(Binary::pow, x, y, "pow"), {x, y}, [x = x.detach(), y = y.detach()](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0)) ctx.accumulate(0, kernels::sum_to(binary(Binary::mul, g, binary(Binary::pow_grad_base, x, y)), x.shape()));
    if (ctx.needs_grad(1))
      ctx.accumulate(1, kernels::sum_to(binary(Binary::mul, g, binary(Binary::pow_grad_exponent, x, y)), y.shape()));
  });
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double s) { return add(a, s); }
Tensor operator-(const Tensor& a, double s) { return sub(a, s); }
Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
Tensor operator/(const Tensor& a, double s) { return div(a, s); }
Tensor operator+(double s, const Tensor& a) { return add(a, s); }
Tensor operator-(double s, const Tensor& a) { return rsub(s, a); }
Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
Tensor operator/(double s, const Tensor& a) { return rdiv(s, a); }
Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace tg
