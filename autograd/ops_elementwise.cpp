// Elementwise ops with NumPy broadcasting. Backward of a broadcast input sums the gradient back
// to that input's shape (kernels::sum_to).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/reduce.h"
#include "autograd/ops_compare.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "autograd/tape.h"

namespace tg {

namespace {
using kernels::Binary;
using kernels::Unary;
using kernels::binary;  // unqualified calls below are the kernels (found by ADL as well)
using kernels::unary;

// Differentiable backwards (create_graph) are the second lambda of record(): public ops on graph
// tensors. A factor that is piecewise constant in x (a mask, a sign) is computed with kernels: its
// derivative is zero where it is defined.

/// 1 where pred(x) holds, else 0, in x's dtype (a constant of the graph).
template <class P> Tensor indicator(const Tensor& x, P pred) {
  Tensor m = Tensor::empty(x.shape(), x.dtype());
  kernels::dispatch_floating("indicator", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* pm = m.data<T>();
    for (std::int64_t i = 0, n = x.numel(); i < n; ++i) pm[i] = pred(static_cast<double>(px[i])) ? T(1) : T(0);
  });
  return m;
}

// ---- Type promotion as PyTorch's (torch.result_type, autograd/ops_compare.h). A floating result
// converts the other operand with Tensor::to, which is differentiable: each input's gradient
// comes back in its own dtype. An int64 or bool result is computed here, without gradient.

/// The dtype a binary op computes in, or nullopt when a and b are of one floating dtype (the
/// common case, which takes each op's own path unchanged).
std::optional<DType> promotion(const char* name, const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || (a.dtype() == b.dtype() && is_floating(a.dtype()))) return std::nullopt;
  try {  // a shape error before any conversion, naming the dtypes too
    broadcast_shapes(name, a.shape(), b.shape());
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(std::string(name) + ": shapes " + std::string(dtype_name(a.dtype())) + " " + a.shape().str() +
                                " and " + std::string(dtype_name(b.dtype())) + " " + b.shape().str() +
                                " cannot be broadcast together");
  }
  return result_type(a, b);
}

enum class IntOp { add, sub, mul, maximum, minimum, pow };

[[noreturn]] void bool_sub_error(bool both) {  // torch's messages
  throw std::invalid_argument(both ? "sub: subtraction, the `-` operator, with two bool tensors is not supported; use "
                                     "logical_xor() instead"
                                   : "sub: subtraction, the `-` operator, with a bool tensor is not supported; to "
                                     "invert a mask use logical_not() instead");
}

// Integer power as torch's: a negative exponent gives 1 for base 1, ±1 for base -1, else 0.
std::int64_t int_pow(std::int64_t base, std::int64_t e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? (e % 2 ? -1 : 1) : 0;
  std::uint64_t r = 1, x = static_cast<std::uint64_t>(base);  // unsigned: wraps on overflow, as torch
  for (; e; e >>= 1, x *= x)
    if (e & 1) r *= x;
  return static_cast<std::int64_t>(r);
}

/// a op b for int64 and bool operands, computed in int64 (wrapping on overflow) and stored as t
/// (int64, or bool for add, mul, maximum and minimum of two bools: or, and, or, and).
Tensor integer_binary(const char* name, IntOp op, const Tensor& a, const Tensor& b, DType t) {
  if (t == DType::b8 && op == IntOp::pow) throw std::invalid_argument("pow: not implemented for two bool operands, as torch");
  const Shape out = broadcast_shapes(name, a.shape(), b.shape());
  const Tensor x = broadcast_to(a.to(DType::i64), out), y = broadcast_to(b.to(DType::i64), out);
  Tensor r = Tensor::empty(out, DType::i64);
  const std::int64_t *px = x.data<std::int64_t>(), *py = y.data<std::int64_t>();
  std::int64_t* pr = r.data<std::int64_t>();
  using U = std::uint64_t;
  for (std::int64_t i = 0, n = r.numel(); i < n; ++i) {
    const std::int64_t u = px[i], v = py[i];
    switch (op) {
      case IntOp::add: pr[i] = static_cast<std::int64_t>(U(u) + U(v)); break;
      case IntOp::sub: pr[i] = static_cast<std::int64_t>(U(u) - U(v)); break;
      case IntOp::mul: pr[i] = static_cast<std::int64_t>(U(u) * U(v)); break;
      case IntOp::maximum: pr[i] = std::max(u, v); break;
      case IntOp::minimum: pr[i] = std::min(u, v); break;
      case IntOp::pow: pr[i] = int_pow(u, v); break;
    }
  }
  return r.to(t);
}

/// An integral scalar for integer_binary (result_type gives int64 only for integral ones).
Tensor int_scalar(double s) { return Tensor::scalar(s, DType::i64); }
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  if (const auto t = promotion("add", a, b))
    return is_floating(*t) ? add(a.to(*t), b.to(*t)) : integer_binary("add", IntOp::add, a, b, *t);
  return record("add", kernels::binary(Binary::add, a, b, "add"), {a, b}, Saves::none(),
                [sa = a.shape(), sb = b.shape()](BackwardContext& ctx) {
                  ctx.accumulate(0, kernels::sum_to(ctx.grad_output(), sa));
                  ctx.accumulate(1, kernels::sum_to(ctx.grad_output(), sb));
                },
                [](GradGraphContext& ctx) {
                  ctx.accumulate_sum_to(0, ctx.grad_output());
                  ctx.accumulate_sum_to(1, ctx.grad_output());
                });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  if (const auto t = promotion("sub", a, b)) {
    if (a.dtype() == DType::b8 || b.dtype() == DType::b8) bool_sub_error(a.dtype() == b.dtype());
    return is_floating(*t) ? sub(a.to(*t), b.to(*t)) : integer_binary("sub", IntOp::sub, a, b, *t);
  }
  return record("sub", kernels::binary(Binary::sub, a, b, "sub"), {a, b}, Saves::none(),
                [sa = a.shape(), sb = b.shape()](BackwardContext& ctx) {
                  ctx.accumulate(0, kernels::sum_to(ctx.grad_output(), sa));
                  if (ctx.needs_grad(1)) ctx.accumulate(1, kernels::sum_to(unary(Unary::neg, ctx.grad_output()), sb));
                },
                [](GradGraphContext& ctx) {
                  ctx.accumulate_sum_to(0, ctx.grad_output());
                  if (ctx.needs_grad(1)) ctx.accumulate_sum_to(1, -ctx.grad_output());
                });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  if (const auto t = promotion("mul", a, b))
    return is_floating(*t) ? mul(a.to(*t), b.to(*t)) : integer_binary("mul", IntOp::mul, a, b, *t);
  // Each input's value is read for the other's gradient only.
  const Saves saves = Saves::none().and_input(0, b.requires_grad()).and_input(1, a.requires_grad());
  return record("mul", kernels::binary(Binary::mul, a, b, "mul"), {a, b}, saves, [a = a.detach(), b = b.detach()](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0)) ctx.accumulate(0, kernels::sum_to(binary(Binary::mul, g, b), a.shape()));
    if (ctx.needs_grad(1)) ctx.accumulate(1, kernels::sum_to(binary(Binary::mul, g, a), b.shape()));
  }, [a, b](GradGraphContext& ctx) {
    if (ctx.needs_grad(0)) ctx.accumulate_sum_to(0, ctx.grad_output() * b);
    if (ctx.needs_grad(1)) ctx.accumulate_sum_to(1, ctx.grad_output() * a);
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  if (const auto t = promotion("div", a, b)) {
    const DType f = is_floating(*t) ? *t : DType::f32;  // true division; integers give float32, as torch
    return div(a.to(f), b.to(f));
  }
  Tensor y = kernels::binary(Binary::div, a, b, "div");
  // b for both gradients; y (and, in the differentiable backward, a) for b's.
  const Saves saves = Saves::inputs(1).and_input(0, b.requires_grad()).and_output(b.requires_grad());
  return record("div", y, {a, b}, saves, [b = b.detach(), y, sa = a.shape()](BackwardContext& ctx) {
    const Tensor ga = binary(Binary::div, ctx.grad_output(), b);  // dL/da = g / b
    if (ctx.needs_grad(1))  // dL/db = -g * a / b^2 = -(g / b) * y
      ctx.accumulate(1, kernels::sum_to(unary(Unary::neg, binary(Binary::mul, ga, y)), b.shape()));
    if (ctx.needs_grad(0)) ctx.accumulate(0, kernels::sum_to(ga, sa));
  }, [a, b](GradGraphContext& ctx) {
    const Tensor ga = ctx.grad_output() / b;
    if (ctx.needs_grad(1)) ctx.accumulate_sum_to(1, -(ga * a) / b);
    if (ctx.needs_grad(0)) ctx.accumulate_sum_to(0, ga);
  });
}

Tensor add(const Tensor& a, double s) {
  if (a.defined() && !is_floating(a.dtype())) {
    const DType t = result_type(a, s);
    return is_floating(t) ? add(a.to(t), s) : integer_binary("add", IntOp::add, a, int_scalar(s), t);
  }
  return record("add_scalar", unary(Unary::add_scalar, a, s), {a}, Saves::none(),
                [](BackwardContext& ctx) { ctx.accumulate(0, ctx.grad_output()); },
                [](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output()); });
}

Tensor sub(const Tensor& a, double s) {
  if (a.defined() && a.dtype() == DType::b8) bool_sub_error(false);
  return add(a, -s);
}

Tensor mul(const Tensor& a, double s) {
  if (a.defined() && !is_floating(a.dtype())) {
    const DType t = result_type(a, s);
    return is_floating(t) ? mul(a.to(t), s) : integer_binary("mul", IntOp::mul, a, int_scalar(s), t);
  }
  return record("mul_scalar", unary(Unary::mul_scalar, a, s), {a}, Saves::none(),
                [s](BackwardContext& ctx) { ctx.accumulate(0, unary(Unary::mul_scalar, ctx.grad_output(), s)); },
                [s](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() * s); });
}

Tensor div(const Tensor& a, double s) {
  if (a.defined() && !is_floating(a.dtype()))  // true division in float32, as torch (not times 1 / s)
    return div(a.to(DType::f32), Tensor::scalar(s, DType::f32));
  return mul(a, 1.0 / s);  // s = 0 gives inf, -inf and NaN (0 / 0) as torch.div
}

Tensor rsub(double s, const Tensor& a) {
  if (a.defined() && !is_floating(a.dtype())) {
    if (a.dtype() == DType::b8) bool_sub_error(false);
    const DType t = result_type(a, s);
    return is_floating(t) ? rsub(s, a.to(t)) : integer_binary("rsub", IntOp::sub, int_scalar(s), a, t);
  }
  return record("rsub_scalar", unary(Unary::rsub_scalar, a, s), {a}, Saves::none(),
                [](BackwardContext& ctx) { ctx.accumulate(0, unary(Unary::neg, ctx.grad_output())); },
                [](GradGraphContext& ctx) { ctx.accumulate(0, -ctx.grad_output()); });
}

Tensor rdiv(double s, const Tensor& a) {
  if (a.defined() && !is_floating(a.dtype())) return rdiv(s, a.to(DType::f32));  // true division, as torch
  Tensor y = unary(Unary::rdiv_scalar, a, s);
  return record("rdiv_scalar", y, {a}, Saves::inputs(0).and_output(), [a = a.detach(), y](BackwardContext& ctx) {
    // d(s/a)/da = -s/a^2 = -y/a
    ctx.accumulate(0, unary(Unary::neg, binary(Binary::mul, ctx.grad_output(), binary(Binary::div, y, a))));
  }, [a, s](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() * (-s) / (a * a)); });
}

Tensor neg(const Tensor& x) {
  if (x.defined() && x.dtype() == DType::i64) return integer_binary("neg", IntOp::sub, int_scalar(0), x, DType::i64);
  if (x.defined() && x.dtype() == DType::b8)
    throw std::invalid_argument("neg: negation, the `-` operator, on a bool tensor is not supported; to invert a mask "
                                "use logical_not() instead");
  return record("neg", unary(Unary::neg, x), {x}, Saves::none(),
                [](BackwardContext& ctx) { ctx.accumulate(0, unary(Unary::neg, ctx.grad_output())); },
                [](GradGraphContext& ctx) { ctx.accumulate(0, -ctx.grad_output()); });
}

Tensor exp(const Tensor& x) {
  Tensor y = unary(Unary::exp, x);
  return record(
      "exp", y, {x}, Saves::output(), [y](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), y)); },
      [y](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() * ctx.output(y)); });
}

Tensor log(const Tensor& x) {
  return record("log", unary(Unary::log, x), {x}, Saves::inputs(0),
                [x = x.detach()](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::div, ctx.grad_output(), x)); },
                [x](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() / x); });
}

Tensor sqrt(const Tensor& x) {
  Tensor y = unary(Unary::sqrt, x);
  return record("sqrt", y, {x}, Saves::output(), [y](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::div, unary(Unary::mul_scalar, ctx.grad_output(), 0.5), y));
  }, [y](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() * 0.5 / ctx.output(y)); });
}

Tensor tanh(const Tensor& x) {
  Tensor y = unary(Unary::tanh, x);
  return record(
      "tanh", y, {x}, Saves::output(), [y](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::tanh_grad, ctx.grad_output(), y)); },
      [y](GradGraphContext& ctx) {
        const Tensor yo = ctx.output(y);
        ctx.accumulate(0, ctx.grad_output() * (1.0 - yo * yo));
      });
}

Tensor sigmoid(const Tensor& x) {
  Tensor y = unary(Unary::sigmoid, x);
  return record("sigmoid", y, {x}, Saves::output(),
                [y](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::sigmoid_grad, ctx.grad_output(), y)); },
                [y](GradGraphContext& ctx) {
                  const Tensor yo = ctx.output(y);
                  ctx.accumulate(0, ctx.grad_output() * (yo * (1.0 - yo)));
                });
}

Tensor relu(const Tensor& x) {
  return record("relu", unary(Unary::relu, x), {x}, Saves::inputs(0),
                [x = x.detach()](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::relu_grad, ctx.grad_output(), x)); },
                [x](GradGraphContext& ctx) {
                  ctx.accumulate(0, ctx.grad_output() * indicator(x, [](double v) { return !(v <= 0); }));
                });
}

Tensor square(const Tensor& x) {
  return record("square", unary(Unary::square, x), {x}, Saves::inputs(0), [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::mul_scalar, x, 2.0)));
  }, [x](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() * (x * 2.0)); });
}

Tensor pow(const Tensor& x, double exponent) {
  if (x.defined() && !is_floating(x.dtype())) {
    const DType t = result_type(x, exponent);
    if (is_floating(t)) return pow(x.to(t), exponent);
    if (exponent < 0) throw std::invalid_argument("pow: integers to negative integer powers are not allowed, as torch");
    return integer_binary("pow", IntOp::pow, x, int_scalar(exponent), t);
  }
  if (exponent == 2.0) return square(x);
  // d x^p / dx = p x^(p-1), and 0 for p = 0 as PyTorch's pow_backward (not 0 * 0^-1 = NaN at x = 0).
  return record("pow", unary(Unary::pow_scalar, x, exponent), {x}, Saves::inputs(0), [x = x.detach(), exponent](BackwardContext& ctx) {
    if (exponent == 0.0) {
      ctx.accumulate(0, Tensor::zeros(x.shape(), x.dtype()));
      return;
    }
    const Tensor d = unary(Unary::mul_scalar, unary(Unary::pow_scalar, x, exponent - 1.0), exponent);
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), d));
  }, [x, exponent](GradGraphContext& ctx) {
    if (exponent == 0.0)
      ctx.accumulate(0, Tensor::zeros(x.shape(), x.dtype()));
    else
      ctx.accumulate(0, ctx.grad_output() * (pow(x, exponent - 1.0) * exponent));
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
  return record(name, unary(Unary::clamp, x, lo, hi), {x}, Saves::inputs(0), [x = x.detach(), lo, hi](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::clamp_grad, x, lo, hi)));
  }, [x, lo, hi](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() * unary(Unary::clamp_grad, x, lo, hi)); });
}

// maximum and minimum: input i gets dL/dy times its share (1, 0.5 at ties, 0), summed to its shape.
Tensor max_min_op(const char* name, Binary op, const Tensor& a, const Tensor& b) {
  const bool is_max = op == Binary::maximum_nan;
  if (const auto t = promotion(name, a, b))
    return is_floating(*t) ? max_min_op(name, op, a.to(*t), b.to(*t))
                           : integer_binary(name, is_max ? IntOp::maximum : IntOp::minimum, a, b, *t);
  require_same_floating(name, a, b);
  return record(name, binary(op, a, b, name), {a, b}, Saves::inputs(0, 1), [a = a.detach(), b = b.detach(), is_max](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0))
      ctx.accumulate(0, kernels::sum_to(binary(Binary::mul, g, is_max ? binary(Binary::max_weight, a, b)
                                                                      : binary(Binary::max_weight, b, a)), a.shape()));
    if (ctx.needs_grad(1))
      ctx.accumulate(1, kernels::sum_to(binary(Binary::mul, g, is_max ? binary(Binary::max_weight, b, a)
                                                                      : binary(Binary::max_weight, a, b)), b.shape()));
  }, [a, b, is_max](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0))
      ctx.accumulate_sum_to(0, g * (is_max ? binary(Binary::max_weight, a, b) : binary(Binary::max_weight, b, a)));
    if (ctx.needs_grad(1))
      ctx.accumulate_sum_to(1, g * (is_max ? binary(Binary::max_weight, b, a) : binary(Binary::max_weight, a, b)));
  });
}
}  // namespace

Tensor abs(const Tensor& x) {
  require_floating("abs", x);
  return record("abs", unary(Unary::abs, x), {x}, Saves::inputs(0), [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::sign, x)));
  }, [x](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() * unary(Unary::sign, x)); });
}

Tensor sign(const Tensor& x) {
  require_floating("sign", x);
  // Recorded although its gradient is 0, so that x gets a (zero) gradient through it, as in PyTorch.
  return record("sign", unary(Unary::sign, x), {x}, Saves::none(), [s = x.shape(), dt = x.dtype()](BackwardContext& ctx) {
    ctx.accumulate(0, Tensor::zeros(s, dt));
  }, [](GradGraphContext& ctx) { ctx.accumulate(0, Tensor::zeros(ctx.input_shape(0), ctx.grad_output().dtype())); });
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
  return record("sin", unary(Unary::sin, x), {x}, Saves::inputs(0), [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::cos, x)));
  }, [x](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() * cos(x)); });
}

Tensor cos(const Tensor& x) {
  require_floating("cos", x);
  return record("cos", unary(Unary::cos, x), {x}, Saves::inputs(0), [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, unary(Unary::neg, binary(Binary::mul, ctx.grad_output(), unary(Unary::sin, x))));
  }, [x](GradGraphContext& ctx) { ctx.accumulate(0, -(ctx.grad_output() * sin(x))); });
}

Tensor erf(const Tensor& x) {
  require_floating("erf", x);
  return record("erf", unary(Unary::erf, x), {x}, Saves::inputs(0), [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::erf_grad, ctx.grad_output(), x));
  }, [x](GradGraphContext& ctx) {  // 2/sqrt(pi) exp(-x^2)
    ctx.accumulate(0, ctx.grad_output() * (exp(-(x * x)) * 1.1283791670955126));
  });
}

Tensor log1p(const Tensor& x) {
  require_floating("log1p", x);
  return record("log1p", unary(Unary::log1p, x), {x}, Saves::inputs(0), [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::div, ctx.grad_output(), unary(Unary::add_scalar, x, 1.0)));
  }, [x](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() / (x + 1.0)); });
}

Tensor expm1(const Tensor& x) {
  require_floating("expm1", x);
  Tensor y = unary(Unary::expm1, x);
  return record("expm1", y, {x}, Saves::output(), [y](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::add_scalar, y, 1.0)));
  }, [y](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() * (ctx.output(y) + 1.0)); });
}

Tensor rsqrt(const Tensor& x) {
  require_floating("rsqrt", x);
  Tensor y = unary(Unary::rsqrt, x);
  return record("rsqrt", y, {x}, Saves::output(), [y](BackwardContext& ctx) {  // d/dx x^(-1/2) = -y^3 / 2
    const Tensor d = unary(Unary::mul_scalar, binary(Binary::mul, unary(Unary::square, y), y), -0.5);
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), d));
  }, [y](GradGraphContext& ctx) {
    const Tensor yo = ctx.output(y);
    ctx.accumulate(0, ctx.grad_output() * (yo * yo * yo * -0.5));
  });
}

Tensor reciprocal(const Tensor& x) {
  require_floating("reciprocal", x);
  Tensor y = unary(Unary::reciprocal, x);
  return record("reciprocal", y, {x}, Saves::output(), [y](BackwardContext& ctx) {  // d/dx 1/x = -y^2
    ctx.accumulate(0, binary(Binary::mul, unary(Unary::neg, ctx.grad_output()), unary(Unary::square, y)));
  }, [y](GradGraphContext& ctx) {
    const Tensor yo = ctx.output(y);
    ctx.accumulate(0, -ctx.grad_output() * (yo * yo));
  });
}

Tensor gelu(const Tensor& x, GeluApproximate approximate) {
  require_floating("gelu", x);
  const bool tanh_form = approximate == GeluApproximate::tanh;
  return record("gelu", unary(tanh_form ? Unary::gelu_tanh : Unary::gelu, x), {x}, Saves::inputs(0),
                [x = x.detach(), tanh_form](BackwardContext& ctx) {
                  ctx.accumulate(0, binary(tanh_form ? Binary::gelu_tanh_grad : Binary::gelu_grad, ctx.grad_output(), x));
                },
                [x, tanh_form](GradGraphContext& ctx) {
                  Tensor d;
                  if (tanh_form) {  // 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2), t = tanh(c (x + k x^3))
                    constexpr double c = 0.7978845608028654, k = 0.044715;
                    const Tensor t = tanh((x + x * x * x * k) * c);
                    d = (t + 1.0) * 0.5 + x * (1.0 - t * t) * ((x * x * (3 * k) + 1.0) * (0.5 * c));
                  } else {  // Phi(x) + x phi(x)
                    d = (erf(x * 0.7071067811865476) + 1.0) * 0.5 + x * exp(x * x * -0.5) * 0.3989422804014327;
                  }
                  ctx.accumulate(0, ctx.grad_output() * d);
                });
}

Tensor silu(const Tensor& x) {
  require_floating("silu", x);
  return record("silu", unary(Unary::silu, x), {x}, Saves::inputs(0),
                [x = x.detach()](BackwardContext& ctx) { ctx.accumulate(0, binary(Binary::silu_grad, ctx.grad_output(), x)); },
                [x](GradGraphContext& ctx) {  // s (1 + x (1 - s))
                  const Tensor s = sigmoid(x);
                  ctx.accumulate(0, ctx.grad_output() * (s * (x * (1.0 - s) + 1.0)));
                });
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  require_floating("softplus", x);
  if (beta == 0 || !std::isfinite(beta)) throw std::invalid_argument("softplus: beta must be finite and nonzero, got " + std::to_string(beta));
  return record("softplus", unary(Unary::softplus, x, beta, threshold), {x}, Saves::inputs(0), [x = x.detach(), beta, threshold](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::softplus_grad, x, beta, threshold)));
  }, [x, beta, threshold](GradGraphContext& ctx) {  // sigmoid(beta x), 1 in the linear region
    const Tensor linear = indicator(x, [=](double v) { return v * beta > threshold; });
    ctx.accumulate(0, ctx.grad_output() * where(linear, Tensor::scalar(1.0, x.dtype()), sigmoid(x * beta)));
  });
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  require_floating("leaky_relu", x);
  return record("leaky_relu", unary(Unary::leaky_relu, x, negative_slope), {x}, Saves::inputs(0), [x = x.detach(), negative_slope](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::leaky_relu_grad, x, negative_slope)));
  }, [x, negative_slope](GradGraphContext& ctx) {
    ctx.accumulate(0, ctx.grad_output() * unary(Unary::leaky_relu_grad, x, negative_slope));
  });
}

Tensor elu(const Tensor& x, double alpha) {
  require_floating("elu", x);
  return record("elu", unary(Unary::elu, x, alpha), {x}, Saves::inputs(0), [x = x.detach(), alpha](BackwardContext& ctx) {
    ctx.accumulate(0, binary(Binary::mul, ctx.grad_output(), unary(Unary::elu_grad, x, alpha)));
  }, [x, alpha](GradGraphContext& ctx) {  // 1 for x > 0, alpha exp(x) elsewhere
    const Tensor positive = indicator(x, [](double v) { return v > 0; });
    ctx.accumulate(0, ctx.grad_output() * where(positive, Tensor::scalar(1.0, x.dtype()), exp(x) * alpha));
  });
}

Tensor pow(const Tensor& x, const Tensor& y) {
  if (const auto t = promotion("pow", x, y))
    return is_floating(*t) ? pow(x.to(*t), y.to(*t)) : integer_binary("pow", IntOp::pow, x, y, *t);
  require_same_floating("pow", x, y);
  return record("pow", binary(Binary::pow, x, y, "pow"), {x, y}, Saves::inputs(0, 1), [x = x.detach(), y = y.detach()](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0)) ctx.accumulate(0, kernels::sum_to(binary(Binary::mul, g, binary(Binary::pow_grad_base, x, y)), x.shape()));
    if (ctx.needs_grad(1))
      ctx.accumulate(1, kernels::sum_to(binary(Binary::mul, g, binary(Binary::pow_grad_exponent, x, y)), y.shape()));
  }, [x, y](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    const Tensor zero = Tensor::scalar(0.0, x.dtype());
    if (ctx.needs_grad(0))  // y x^(y-1), 0 where y == 0
      ctx.accumulate_sum_to(0, g * where(indicator(y, [](double v) { return v == 0; }), zero, y * pow(x, y - 1.0)));
    if (ctx.needs_grad(1)) {  // x^y log x, 0 where x == 0 and y >= 0
      const Tensor at_zero = binary(Binary::mul, indicator(x, [](double v) { return v == 0; }),
                                    indicator(y, [](double v) { return v >= 0; }));
      ctx.accumulate_sum_to(1, g * where(at_zero, zero, pow(x, y) * log(x)));
    }
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
