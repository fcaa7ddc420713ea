#include "autograd/kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/fast_math.h"
#include "autograd/kernels/parallel_for.h"

namespace tg::kernels {

namespace {

template <class T> using Batch = xsimd::batch<T>;

// Every element, tail included, goes through the same SIMD function: a scalar tail would round
// differently and make results depend on where chunk boundaries fall (i.e. on the thread count).
template <class T, class F>
void map1(const T* x, T* y, std::int64_t n, const F& f) {
  constexpr std::int64_t W = Batch<T>::size;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) f(Batch<T>::load_unaligned(x + i)).store_unaligned(y + i);
  if (i < n) {
    alignas(64) T buf[W] = {};
    std::copy(x + i, x + n, buf);
    f(Batch<T>::load_aligned(buf)).store_aligned(buf);
    std::copy(buf, buf + (n - i), y + i);
  }
}

// Inner loop of a binary op; a_step/b_step are 1 (contiguous) or 0 (broadcast scalar).
template <class T, class F>
void map2(const T* a, std::int64_t a_step, const T* b, std::int64_t b_step, T* y, std::int64_t n, const F& f) {
  constexpr std::int64_t W = Batch<T>::size;
  std::int64_t i = 0;
  auto load = [](const T* p, std::int64_t step, std::int64_t i) {
    return step ? Batch<T>::load_unaligned(p + i) : Batch<T>(*p);
  };
  for (; i + W <= n; i += W) f(load(a, a_step, i), load(b, b_step, i)).store_unaligned(y + i);
  if (i < n) {
    alignas(64) T ba[W] = {}, bb[W] = {};
    for (std::int64_t k = i; k < n; ++k) {
      ba[k - i] = a[a_step * k];
      bb[k - i] = b[b_step * k];
    }
    f(Batch<T>::load_aligned(ba), Batch<T>::load_aligned(bb)).store_aligned(ba);
    std::copy(ba, ba + (n - i), y + i);
  }
}

// gelu's kernels fill the out-of-order window with arithmetic, so the hardware prefetcher alone
// leaves them short of the memory bandwidth: each group of 4 batches (two cache lines per stream)
// also prefetches its streams 4 KiB ahead, the output for writing.
constexpr std::int64_t kGeluGroup = 4 * Batch<float>::size, kGeluAhead = 1024, kLine = 16;
static_assert(kGeluGroup == 2 * kLine);

inline void prefetch_group(const float* read, std::int64_t i) {
  __builtin_prefetch(read + i + kGeluAhead);
  __builtin_prefetch(read + i + kGeluAhead + kLine);
}
inline void prefetch_group_for_write(float* write, std::int64_t i) {
  __builtin_prefetch(write + i + kGeluAhead, 1);
  __builtin_prefetch(write + i + kGeluAhead + kLine, 1);
}

// gelu in float32 (fast_math.h): four batches at a time, the rest through map1 (single batches,
// then the padded tail); every element takes the same operations.
void gelu_float_span(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + kGeluGroup <= n; i += kGeluGroup) {
    if (i + kGeluAhead + kGeluGroup <= n) prefetch_group(x, i), prefetch_group_for_write(y, i);
    gelu_float<4>(x + i, y + i);
  }
  map1(x + i, y + i, n - i, [](Batch<float> v) { return gelu_float(v); });
}

// gelu's backward in float32, same shapes: as gelu_float_span, the rest through map2.
void gelu_grad_float_span(const float* grad, const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + kGeluGroup <= n; i += kGeluGroup) {
    if (i + kGeluAhead + kGeluGroup <= n) prefetch_group(grad, i), prefetch_group(x, i), prefetch_group_for_write(y, i);
    gelu_grad_float<4>(grad + i, x + i, y + i);
  }
  map2(grad + i, 1, x + i, 1, y + i, n - i, [](Batch<float> g, Batch<float> v) { return gelu_grad_float(g, v); });
}

bool is_transcendental(Unary op) {
  switch (op) {
    case Unary::exp: case Unary::log: case Unary::tanh: case Unary::sigmoid: case Unary::pow_scalar:
    case Unary::sin: case Unary::cos: case Unary::erf: case Unary::log1p: case Unary::expm1:
    case Unary::silu: case Unary::gelu: case Unary::gelu_tanh: case Unary::elu: case Unary::softplus:
    case Unary::elu_grad: case Unary::softplus_grad:
      return true;
    default:
      return false;
  }
}

bool is_transcendental(Binary op) {
  switch (op) {
    case Binary::pow: case Binary::pow_grad_base: case Binary::pow_grad_exponent: case Binary::erf_grad:
    case Binary::silu_grad: case Binary::gelu_grad: case Binary::gelu_tanh_grad:
      return true;
    default:
      return false;
  }
}

// Applies a scalar function lane by lane: for ops where libm is more accurate than xsimd (pow:
// xsimd computes exp(b log a), which loses digits for large results and returns 0 for 0^0).
template <class T, class F>
Batch<T> lanewise(Batch<T> a, Batch<T> b, const F& f) {
  constexpr std::size_t W = Batch<T>::size;
  alignas(64) T x[W], y[W];
  a.store_aligned(x);
  b.store_aligned(y);
  for (std::size_t k = 0; k < W; ++k) x[k] = f(x[k], y[k]);
  return Batch<T>::load_aligned(x);
}

// gelu_tanh's constants, as PyTorch's GeluKernel: sqrt(2 / pi) and 0.044715.
constexpr double kGeluBeta = 0.7978845608028654, kGeluKappa = 0.044715;
constexpr double kSqrt1_2 = 0.7071067811865476, kInvSqrt2Pi = 0.3989422804014327, k2InvSqrtPi = 1.1283791670955126;

template <class T, class Fn>
void with_unary(Unary op, T p, T q, const Fn& fn) {
  using B = Batch<T>;
  const B P(p), Q(q), one(T(1)), zero(T(0)), half(T(0.5));
  switch (op) {
    case Unary::neg: return fn([](B x) { return -x; });
    case Unary::exp: return fn([](B x) { return xsimd::exp(x); });
    case Unary::log: return fn([](B x) { return xsimd::log(x); });
    case Unary::sqrt: return fn([](B x) { return xsimd::sqrt(x); });
    case Unary::tanh: return fn([](B x) { return xsimd::tanh(x); });
    case Unary::sigmoid: return fn([](B x) { return B(T(1)) / (B(T(1)) + xsimd::exp(-x)); });
    case Unary::relu: return fn([=](B x) { return xsimd::select(x < zero, zero, x); });  // NaN and -0 kept, as torch
    case Unary::square: return fn([](B x) { return x * x; });
    case Unary::abs: return fn([](B x) { return xsimd::abs(x); });
    case Unary::add_scalar: return fn([P](B x) { return x + P; });
    case Unary::mul_scalar: return fn([P](B x) { return x * P; });
    case Unary::pow_scalar:
      // PyTorch's exponents with operations of their own (PowKernel.cpp; they fix the signs of zeros
      // and infinities), the rest by libm: xsimd's pow returns 0 for 0^0 and 0^-1.
      if (p == T(0.5)) return fn([](B x) { return xsimd::sqrt(x); });
      if (p == T(-0.5)) return fn([=](B x) { return one / xsimd::sqrt(x); });
      if (p == T(2)) return fn([](B x) { return x * x; });
      if (p == T(3)) return fn([](B x) { return x * x * x; });
      if (p == T(-1)) return fn([=](B x) { return one / x; });
      if (p == T(-2)) return fn([=](B x) { return one / (x * x); });
      return fn([P](B x) { return lanewise(x, P, [](T a, T b) { return std::pow(a, b); }); });
    case Unary::rsub_scalar: return fn([P](B x) { return P - x; });
    case Unary::rdiv_scalar: return fn([P](B x) { return P / x; });
    case Unary::sign:
      return fn([=](B x) { return xsimd::select(x > zero, one, zero) - xsimd::select(x < zero, one, zero); });
    case Unary::reciprocal: return fn([=](B x) { return one / x; });
    case Unary::rsqrt: return fn([=](B x) { return one / xsimd::sqrt(x); });
    case Unary::sin: return fn([](B x) { return xsimd::sin(x); });
    case Unary::cos: return fn([](B x) { return xsimd::cos(x); });
    case Unary::erf: return fn([](B x) { return xsimd::erf(x); });
    case Unary::log1p: return fn([](B x) { return xsimd::log1p(x); });
    case Unary::expm1: return fn([](B x) { return xsimd::expm1(x); });
    case Unary::silu: return fn([=](B x) { return x / (one + xsimd::exp(-x)); });
    // erfc rather than 1 + erf: the same value where PyTorch's 1 + erf is exact, and not 0 for x << 0.
    // (float32 takes gelu_float, fast_math.h, in unary(); this is the float64 form.)
    case Unary::gelu: return fn([=](B x) { return half * x * xsimd::erfc(-x * B(T(kSqrt1_2))); });
    case Unary::gelu_tanh:
      return fn([=](B x) {
        const B inner = B(T(kGeluBeta)) * (x + B(T(kGeluKappa)) * x * x * x);
        return half * x * (one + xsimd::tanh(inner));
      });
    case Unary::leaky_relu: return fn([=](B x) { return xsimd::select(x > zero, x, x * P); });
    case Unary::elu: return fn([=](B x) { return xsimd::select(x <= zero, P * xsimd::expm1(x), x); });
    case Unary::softplus:
      // max(bx, 0) + log1p(exp(-|bx|)) is log(1 + exp(bx)) without overflow for any threshold.
      return fn([=](B x) {
        const B bx = P * x;
        return xsimd::select(bx > Q, x, (xsimd::max(bx, zero) + xsimd::log1p(xsimd::exp(-xsimd::abs(bx)))) / P);
      });
    case Unary::clamp:
      if (p != p || q != q) return fn([](B) { return B(std::numeric_limits<T>::quiet_NaN()); });
      return fn([=](B x) { return xsimd::select(xsimd::isnan(x), x, xsimd::min(xsimd::max(x, P), Q)); });
    case Unary::leaky_relu_grad: return fn([=](B x) { return xsimd::select(x > zero, one, P); });
    case Unary::elu_grad: return fn([=](B x) { return xsimd::select(x <= zero, P * xsimd::exp(x), one); });
    case Unary::softplus_grad:
      return fn([=](B x) {
        const B bx = P * x;
        return xsimd::select(bx > Q, one, one / (one + xsimd::exp(-bx)));
      });
    case Unary::clamp_grad: return fn([=](B x) { return xsimd::select((x >= P) & (x <= Q), one, zero); });
  }
}

template <class T, class Fn>
void with_binary(Binary op, const Fn& fn) {
  using B = Batch<T>;
  const B one(T(1)), zero(T(0));
  switch (op) {
    case Binary::add: return fn([](B a, B b) { return a + b; });
    case Binary::sub: return fn([](B a, B b) { return a - b; });
    case Binary::mul: return fn([](B a, B b) { return a * b; });
    case Binary::div: return fn([](B a, B b) { return a / b; });
    case Binary::maximum: return fn([](B a, B b) { return xsimd::max(a, b); });
    case Binary::minimum: return fn([](B a, B b) { return xsimd::min(a, b); });
    case Binary::gt: return fn([=](B a, B b) { return xsimd::select(a > b, one, zero); });
    case Binary::eq: return fn([=](B a, B b) { return xsimd::select(a == b, one, zero); });
    case Binary::tanh_grad: return fn([=](B a, B b) { return a * (one - b * b); });
    case Binary::sigmoid_grad: return fn([=](B a, B b) { return a * b * (one - b); });
    case Binary::relu_grad: return fn([=](B a, B b) { return xsimd::select(b <= zero, zero, a); });  // passes at NaN, as torch
    case Binary::maximum_nan:
      return fn([](B a, B b) { return xsimd::select(xsimd::isnan(a) | xsimd::isnan(b), a + b, xsimd::max(a, b)); });
    case Binary::minimum_nan:
      return fn([](B a, B b) { return xsimd::select(xsimd::isnan(a) | xsimd::isnan(b), a + b, xsimd::min(a, b)); });
    case Binary::max_weight:
      return fn([=](B a, B b) { return xsimd::select(a == b, B(T(0.5)), xsimd::select(a < b, zero, one)); });
    case Binary::pow:
      return fn([](B a, B b) { return lanewise(a, b, [](T x, T y) { return std::pow(x, y); }); });
    case Binary::pow_grad_base:
      return fn([](B a, B b) { return lanewise(a, b, [](T x, T y) { return y == 0 ? T(0) : y * std::pow(x, y - 1); }); });
    case Binary::pow_grad_exponent:
      return fn([](B a, B b) {
        return lanewise(a, b, [](T x, T y) { return x == 0 && y >= 0 ? T(0) : std::pow(x, y) * std::log(x); });
      });
    case Binary::erf_grad: return fn([](B a, B b) { return a * B(T(k2InvSqrtPi)) * xsimd::exp(-b * b); });
    case Binary::silu_grad:
      return fn([=](B a, B b) {
        const B s = one / (one + xsimd::exp(-b));
        return a * s * (one + b * (one - s));
      });
    case Binary::gelu_grad:  // float32 of equal shapes takes gelu_grad_float (fast_math.h) in binary()
      return fn([=](B a, B b) {
        const B cdf = B(T(0.5)) * xsimd::erfc(-b * B(T(kSqrt1_2)));
        return a * (cdf + b * B(T(kInvSqrt2Pi)) * xsimd::exp(B(T(-0.5)) * b * b));
      });
    case Binary::gelu_tanh_grad:
      // PyTorch's GeluBackward (tanh) formula, term by term.
      return fn([=](B a, B b) {
        const B x2 = b * b;
        const B t = xsimd::tanh(B(T(kGeluBeta)) * (b + B(T(kGeluKappa)) * x2 * b));
        const B left = B(T(0.5)) * b, right = one + t;
        const B dright = left * (one - t * t) * B(T(kGeluBeta)) * (one + B(T(3 * kGeluKappa)) * x2);
        return a * (B(T(0.5)) * right + dright);
      });
  }
}

// A broadcast binary op reduced to an outer odometer and a contiguous-or-scalar inner run.
struct BroadcastPlan {
  Shape out;
  int outer_ndim = 0;
  std::int64_t outer_shape[Shape::kMaxDims] = {};
  std::int64_t a_stride[Shape::kMaxDims] = {}, b_stride[Shape::kMaxDims] = {};
  std::int64_t inner = 1, a_inner_step = 1, b_inner_step = 1;
  std::int64_t outer_count = 1;
};

BroadcastPlan plan_broadcast(const char* name, const Shape& sa, const Shape& sb) {
  BroadcastPlan plan;
  plan.out = broadcast_shapes(name, sa, sb);
  const int n = plan.out.size();
  // Per-dimension strides in elements, 0 where an input is broadcast; drop size-1 dimensions.
  std::int64_t dims[Shape::kMaxDims], as[Shape::kMaxDims], bs[Shape::kMaxDims];
  int m = 0;
  std::int64_t a_acc = 1, b_acc = 1;
  std::int64_t a_str[Shape::kMaxDims], b_str[Shape::kMaxDims];
  for (int i = n - 1; i >= 0; --i) {
    const int ia = i - (n - sa.size()), ib = i - (n - sb.size());
    const std::int64_t da = ia >= 0 ? sa[ia] : 1, db = ib >= 0 ? sb[ib] : 1;
    a_str[i] = da == 1 ? 0 : a_acc;
    b_str[i] = db == 1 ? 0 : b_acc;
    a_acc *= da;
    b_acc *= db;
  }
  for (int i = 0; i < n; ++i) {
    if (plan.out[i] == 1) continue;
    // Merge with the previous kept dimension when both inputs are contiguous across the pair.
    if (m > 0 && as[m - 1] == a_str[i] * plan.out[i] && bs[m - 1] == b_str[i] * plan.out[i]) {
      dims[m - 1] *= plan.out[i];
      as[m - 1] = a_str[i];
      bs[m - 1] = b_str[i];
      continue;
    }
    dims[m] = plan.out[i];
    as[m] = a_str[i];
    bs[m] = b_str[i];
    ++m;
  }
  if (m == 0) return plan;  // every dimension is 1: one element
  plan.inner = dims[m - 1];
  plan.a_inner_step = as[m - 1];
  plan.b_inner_step = bs[m - 1];
  plan.outer_ndim = m - 1;
  for (int i = 0; i < m - 1; ++i) {
    plan.outer_shape[i] = dims[i];
    plan.a_stride[i] = as[i];
    plan.b_stride[i] = bs[i];
    plan.outer_count *= dims[i];
  }
  return plan;
}

template <class T, class F>
void run_broadcast(const BroadcastPlan& p, const T* a, const T* b, T* y, std::int64_t grain, const F& f) {
  auto rows = [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      std::int64_t rem = r, ao = 0, bo = 0;
      for (int d = p.outer_ndim - 1; d >= 0; --d) {
        const std::int64_t idx = rem % p.outer_shape[d];
        rem /= p.outer_shape[d];
        ao += idx * p.a_stride[d];
        bo += idx * p.b_stride[d];
      }
      map2(a + ao, p.a_inner_step, b + bo, p.b_inner_step, y + r * p.inner, p.inner, f);
    }
  };
  if (p.outer_count == 1) {
    // One long run: split it into SIMD-aligned chunks.
    constexpr std::int64_t W = Batch<T>::size;
    const std::int64_t chunks = (p.inner + grain - 1) / grain;
    parallel_for(chunks, 1, [&](std::int64_t c0, std::int64_t c1) {
      for (std::int64_t c = c0; c < c1; ++c) {
        const std::int64_t s = c * grain, e = std::min(p.inner, s + grain);
        static_assert(kGrainTranscendental % W == 0 && kGrainCheap % W == 0);
        map2(a + s * p.a_inner_step, p.a_inner_step, b + s * p.b_inner_step, p.b_inner_step, y + s, e - s, f);
      }
    });
  } else {
    const std::int64_t row_grain = std::max<std::int64_t>(1, grain / std::max<std::int64_t>(1, p.inner));
    parallel_for(p.outer_count, row_grain, rows);
  }
}

// The op a unary kernel serves, for the message when it is given a non-floating tensor.
const char* unary_name(Unary op) {
  switch (op) {
    case Unary::neg: return "neg";
    case Unary::exp: return "exp";
    case Unary::log: return "log";
    case Unary::sqrt: return "sqrt";
    case Unary::tanh: return "tanh";
    case Unary::sigmoid: return "sigmoid";
    case Unary::relu: return "relu";
    case Unary::square: return "square";
    case Unary::abs: return "abs";
    case Unary::add_scalar: return "add";
    case Unary::mul_scalar: return "mul";
    case Unary::pow_scalar: return "pow";
    case Unary::rsub_scalar: return "rsub";
    case Unary::rdiv_scalar: return "rdiv";
    case Unary::sign: return "sign";
    case Unary::reciprocal: return "reciprocal";
    case Unary::rsqrt: return "rsqrt";
    case Unary::sin: return "sin";
    case Unary::cos: return "cos";
    case Unary::erf: return "erf";
    case Unary::log1p: return "log1p";
    case Unary::expm1: return "expm1";
    case Unary::silu: return "silu";
    case Unary::gelu: case Unary::gelu_tanh: return "gelu";
    case Unary::leaky_relu: case Unary::leaky_relu_grad: return "leaky_relu";
    case Unary::elu: case Unary::elu_grad: return "elu";
    case Unary::softplus: case Unary::softplus_grad: return "softplus";
    case Unary::clamp: case Unary::clamp_grad: return "clamp";
  }
  return "unary";
}

void check_same(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(std::string(op) + ": dtypes differ: " + std::string(dtype_name(a.dtype())) + " " +
                                a.shape().str() + " and " + std::string(dtype_name(b.dtype())) + " " + b.shape().str());
}

}  // namespace

Tensor unary(Unary op, const Tensor& x, double param) { return unary(op, x, param, 0.0); }

Tensor unary(Unary op, const Tensor& x, double param, double param2) {
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string(unary_name(op)) + ": expects a floating-point tensor, got " +
                                std::string(dtype_name(x.dtype())) + " " + x.shape().str());
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_floating(unary_name(op), x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const std::int64_t n = x.numel();
    const std::int64_t grain = is_transcendental(op) ? kGrainTranscendental : kGrainCheap;
    if constexpr (std::is_same_v<T, float>) {
      if (op == Unary::gelu) {
        parallel_for(n, grain, [&](std::int64_t s, std::int64_t e) { gelu_float_span(px + s, py + s, e - s); });
        return;
      }
    }
    with_unary<T>(op, static_cast<T>(param), static_cast<T>(param2), [&](const auto& f) {
      parallel_for(n, grain, [&](std::int64_t s, std::int64_t e) { map1(px + s, py + s, e - s, f); });
    });
  });
  return y;
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b, const char* name) {
  check_same(name, a, b);
  const BroadcastPlan plan = plan_broadcast(name, a.shape(), b.shape());
  Tensor y = Tensor::empty(plan.out, a.dtype());
  if (y.numel() == 0) return y;
  dispatch_floating(name, a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t grain = is_transcendental(op) ? kGrainTranscendental : kGrainCheap;
    if constexpr (std::is_same_v<T, float>) {
      if (op == Binary::gelu_grad && a.shape() == b.shape()) {
        const float *pa = a.data<float>(), *pb = b.data<float>();
        float* py = y.data<float>();
        parallel_for(y.numel(), grain, [&](std::int64_t s, std::int64_t e) {
          gelu_grad_float_span(pa + s, pb + s, py + s, e - s);
        });
        return;
      }
    }
    with_binary<T>(op, [&](const auto& f) { run_broadcast(plan, a.data<T>(), b.data<T>(), y.data<T>(), grain, f); });
  });
  return y;
}

void add_inplace(Tensor& dst, const Tensor& src) {
  if (!(dst.shape() == src.shape())) throw std::invalid_argument("add_inplace: " + dst.shape().str() + " vs " + src.shape().str());
  check_same("add_inplace", dst, src);
  dispatch_floating("add_inplace", dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    parallel_for(dst.numel(), kGrainCheap, [&](std::int64_t b, std::int64_t e) {
      map2(d + b, 1, s + b, 1, d + b, e - b, [](Batch<T> x, Batch<T> y) { return x + y; });
    });
  });
}

void scale_inplace(Tensor& dst, double s) {
  dispatch_floating("scale_inplace", dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    const Batch<T> S(static_cast<T>(s));
    parallel_for(dst.numel(), kGrainCheap,
                 [&](std::int64_t b, std::int64_t e) { map1(d + b, d + b, e - b, [S](Batch<T> x) { return x * S; }); });
  });
}

void scatter_add_rows(Tensor& dst, const Tensor& src, const std::int64_t* idx, std::int64_t K, std::int64_t outer,
                      std::int64_t size, std::int64_t inner) {
  if (src.numel() == 0) return;
  check_same("scatter_add_rows", dst, src);
  dispatch_floating("scatter_add_rows", src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* s = src.data<T>();
    T* d = dst.data<T>();
    // Work units: (outer index, chunk of the inner dimension); each owns disjoint outputs and adds
    // the K rows in index order, so the result does not depend on the split.
    constexpr std::int64_t kChunk = 1024;
    const std::int64_t chunks = (inner + kChunk - 1) / kChunk;
    const std::int64_t grain = std::max<std::int64_t>(1, kGrainCheap / std::max<std::int64_t>(1, K * std::min(inner, kChunk)));
    parallel_for(outer * chunks, grain, [&](std::int64_t u0, std::int64_t u1) {
      for (std::int64_t u = u0; u < u1; ++u) {
        const std::int64_t o = u / chunks, j0 = (u % chunks) * kChunk, j1 = std::min(inner, j0 + kChunk);
        for (std::int64_t k = 0; k < K; ++k) {
          const T* from = s + (o * K + k) * inner;
          T* to = d + (o * size + idx[k]) * inner;
          for (std::int64_t j = j0; j < j1; ++j) to[j] += from[j];
        }
      }
    });
  });
}

}  // namespace tg::kernels
