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
