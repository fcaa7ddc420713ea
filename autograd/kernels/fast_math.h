#pragma once
// tanh and sigmoid for the fused hot kernels (GRU gates, attention scores), on SIMD batches and on
// scalars (for loop tails), included by kernel sources only.
//
// float32: tanh(x) = x P(x²) / Q(x²) on [-9, 9], P of degree 5 and Q of degree 3 in x², a minimax
// fit of the relative error (scripts/fit_tanh.py; 8.2e-8 in exact arithmetic); outside, x is
// clamped to ±9, where tanh rounds to ±1 in float32. Evaluated in float32 with FMAs its relative
// error stays under 3.5e-7, three float32 epsilons (tests/autograd/test_fast_math.cpp), and it
// costs one division and no exp or branch: about half of xsimd::tanh, which takes an exp, a
// division and a polynomial, blended. The fused GRU's forward runs about twice as fast with it.
// Sigmoid is 0.5 + 0.5 tanh(x / 2): absolute error under 2e-7, fine for a gate that mixes two
// values, but not relatively accurate for tiny outputs (sigmoid(-20) comes out 0), which is why the
// tanh and sigmoid ops (kernels/elementwise) keep xsimd's exp-based forms.
// float64 keeps xsimd's functions: gradient checks need full precision.
// NaN stays NaN.
#include <cmath>
#include <cstdint>
#include <iterator>

#include <xsimd/xsimd.hpp>

namespace tg::kernels {

namespace fast_math_detail {

// min(a, limit), written so that a NaN a is returned (vminps returns its second operand then).
inline float min_keep_nan(float a, float limit) { return a > limit ? limit : a; }
inline xsimd::batch<float> min_keep_nan(xsimd::batch<float> a, float limit) {
  return xsimd::min(xsimd::batch<float>(limit), a);
}
inline float copy_sign(float magnitude, float sign) { return std::copysign(magnitude, sign); }
inline xsimd::batch<float> copy_sign(xsimd::batch<float> magnitude, xsimd::batch<float> sign) {
  return xsimd::copysign(magnitude, sign);
}

// V is float or xsimd::batch<float>: one formula, so a loop's tail rounds exactly like its body.
// Evaluated on |x| and signed at the end (exactly odd), capped at 1 (near the clamp the fit's
// error would otherwise reach 1 + 1e-7, and a gate could leave [0, 1]).
template <class V> V tanh_rational(V x) {
  const V a = min_keep_nan(xsimd::abs(x), 9.0f);
  const V t = a * a;
  V p = xsimd::fma(t, V(1.87273252e-11f), V(-1.29798326e-08f));
  p = xsimd::fma(t, p, V(9.33853787e-06f));
  p = xsimd::fma(t, p, V(0.00292892253f));
  p = xsimd::fma(t, p, V(0.129269649f));
  p = xsimd::fma(t, p, V(0.999999965f));
  V q = xsimd::fma(t, V(0.000229206046f), V(0.0237970078f));
  q = xsimd::fma(t, q, V(0.462602634f));
  q = xsimd::fma(t, q, V(1.0f));
  return copy_sign(min_keep_nan(a * p / q, 1.0f), x);
}

}  // namespace fast_math_detail

inline xsimd::batch<float> gate_tanh(xsimd::batch<float> x) { return fast_math_detail::tanh_rational(x); }
inline float gate_tanh(float x) { return fast_math_detail::tanh_rational(x); }
inline xsimd::batch<double> gate_tanh(xsimd::batch<double> x) { return xsimd::tanh(x); }
inline double gate_tanh(double x) { return std::tanh(x); }

inline xsimd::batch<float> gate_sigmoid(xsimd::batch<float> x) {
  const xsimd::batch<float> half(0.5f);
  return xsimd::fma(half, gate_tanh(half * x), half);
}
inline xsimd::batch<double> gate_sigmoid(xsimd::batch<double> x) {
  const xsimd::batch<double> one(1.0);
  return one / (one + xsimd::exp(-x));
}

// GELU in float32 (the gelu op's float kernels), K batches at a time: K = 4 interleaved chains keep
// the FMA units busy where one chain would wait on latency (measured in docs/performance.md). Every
// lane's result depends only on its own x, whatever K is and whichever lanes share its batches.
//   Phi(-a), a = |x|, is g(a)^16 for a <= 9.5: g a polynomial of degree 13 in t = a (2 / 9.5) - 1
//   (scripts/fit_gelu.py; relative error of g 1e-7 with float32 coefficients), then four squarings
//   (Phi(0) comes out one float32 ulp above 0.5: no float32 value squared four times rounds to 0.5).
//   Phi(x) = Phi(-a) for x < 0, 1 - Phi(-a) else.
//   Groups of batches holding a lane with |x| > 9.5 take a slower path: the polynomial at a clamped
//   to 9.5 (1 - Phi(-9.5) rounds to 1) and, for x < -9.5 (and -inf), Numerical Recipes' erfcc
//   (Press et al., "Numerical Recipes", 6.2): Phi(-a) = 0.5 erfc(z), z = a / sqrt(2),
//   erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), P of degree 9, fractional error under
//   1.2e-7; selected lane by lane.
//   Both are relatively accurate in the lower tail, where PyTorch's 1 + erf(x / sqrt(2)) cancels to 0.
//   The density phi(x) (the backward's) is exp(-x^2 / 2) / sqrt(2 pi), with a local exp for y <= 0:
//   y clamped at -87 (the results there are below float32's normal range), y = n ln2 + r (Cody-Waite,
//   two constants), degree-6 Taylor polynomial in r, 2^n put into the exponent bits.
// Error against the exact value (tests/autograd/test_fast_math.cpp): under 4e-6 relative (about 30
// float32 ulp) for x >= -5 and 4e-5 below; the squarings, and in the far tail the rounding of z^2 in
// the exponent, are most of it. gelu: inf -> inf, -inf -> NaN (x Phi(x) = -inf * 0, as PyTorch),
// NaN -> NaN.
// Always inlined: only inside the caller's loop are the constants hoisted and the K chains
// interleaved; GCC's heuristics had left gelu_float<4> out of line, at half the speed.
namespace fast_math_detail {

using FloatBatch = xsimd::batch<float>;

template <int K>
[[gnu::always_inline]] inline void exp_nonpositive(FloatBatch (&y)[K]) {
  using I = xsimd::batch<std::int32_t>;
  FloatBatch n[K], r[K];
  for (int k = 0; k < K; ++k) y[k] = xsimd::max(y[k], FloatBatch(-87.0f));
  for (int k = 0; k < K; ++k) n[k] = xsimd::nearbyint(y[k] * FloatBatch(1.44269504f));
  for (int k = 0; k < K; ++k)
    r[k] = xsimd::fma(n[k], FloatBatch(2.12194440e-4f), xsimd::fma(n[k], FloatBatch(-0.693359375f), y[k]));
  for (int k = 0; k < K; ++k) y[k] = xsimd::fma(FloatBatch(1.0f / 720), r[k], FloatBatch(1.0f / 120));
  for (const float c : {1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    for (int k = 0; k < K; ++k) y[k] = xsimd::fma(y[k], r[k], FloatBatch(c));
  for (int k = 0; k < K; ++k) {
    const I exponent = (xsimd::batch_cast<std::int32_t>(n[k]) + I(127)) << 23;  // n in [-126, 0]
    y[k] = y[k] * xsimd::bitwise_cast<FloatBatch>(exponent);
  }
}

// Phi(-|x|) through Numerical Recipes' erfcc, for the lanes below the polynomial's range.
template <int K>
[[gnu::always_inline]] inline void lower_cdf_erfc(const FloatBatch (&x)[K], FloatBatch (&lower)[K]) {
  FloatBatch z[K], t[K], y[K];
  for (int k = 0; k < K; ++k) z[k] = xsimd::abs(x[k]) * FloatBatch(0.707106781f);
  for (int k = 0; k < K; ++k) t[k] = FloatBatch(1.0f) / xsimd::fma(FloatBatch(0.5f), z[k], FloatBatch(1.0f));
  for (int k = 0; k < K; ++k) y[k] = xsimd::fma(FloatBatch(0.17087277f), t[k], FloatBatch(-0.82215223f));
  for (const float c : {1.48851587f, -1.13520398f, 0.27886807f, -0.18628806f, 0.09678418f, 0.37409196f, 1.00002368f,
                        -1.26551223f})
    for (int k = 0; k < K; ++k) y[k] = xsimd::fma(y[k], t[k], FloatBatch(c));
  for (int k = 0; k < K; ++k) y[k] = xsimd::fnma(z[k], z[k], y[k]);  // -z^2 + P(t)
  exp_nonpositive(y);
  for (int k = 0; k < K; ++k) lower[k] = FloatBatch(0.5f) * t[k] * y[k];
}

inline constexpr float kCdfPolynomialEnd = 9.5f;
// g(t), highest degree first (scripts/fit_gelu.py).
inline constexpr float kCdfRoot[] = {9.07296417e-05f, -0.000190598614f, -0.00023846465f, 0.000845277915f,
                                     0.000982470927f, -0.00506948959f,  -0.00358004961f,  0.0359429307f,
                                     -0.0249675792f,  -0.118290268f,    0.193063021f,     0.167842552f,
                                     -0.619729817f,   0.422143161f};

// Phi(-a) through g^16 for a = |x| in [0, 9.5] (outside, the polynomial is meaningless).
template <int K>
[[gnu::always_inline]] inline void lower_cdf_polynomial(const FloatBatch (&a)[K], FloatBatch (&lower)[K]) {
  FloatBatch t[K];
  for (int k = 0; k < K; ++k) t[k] = xsimd::fma(a[k], FloatBatch(2.0f / kCdfPolynomialEnd), FloatBatch(-1.0f));
  for (int k = 0; k < K; ++k) lower[k] = xsimd::fma(FloatBatch(kCdfRoot[0]), t[k], FloatBatch(kCdfRoot[1]));
  for (std::size_t i = 2; i < std::size(kCdfRoot); ++i)
    for (int k = 0; k < K; ++k) lower[k] = xsimd::fma(lower[k], t[k], FloatBatch(kCdfRoot[i]));
  for (int squaring = 0; squaring < 4; ++squaring)
    for (int k = 0; k < K; ++k) lower[k] = lower[k] * lower[k];
}

// Phi(-|x|) of batches that hold a lane with |x| > 9.5: the polynomial at |x| clamped to 9.5 (above,
// 1 - Phi(-|x|) rounds to 1), and the erfc form for x < -9.5, chosen lane by lane. Out of line, to
// keep the common path's registers free.
template <int K>
[[gnu::noinline]] void lower_cdf_with_tail(const FloatBatch (&x)[K], FloatBatch (&lower)[K]) {
  FloatBatch clamped[K], tail[K];
  for (int k = 0; k < K; ++k) clamped[k] = xsimd::min(xsimd::abs(x[k]), FloatBatch(kCdfPolynomialEnd));
  lower_cdf_polynomial(clamped, lower);
  lower_cdf_erfc(x, tail);
  for (int k = 0; k < K; ++k) lower[k] = xsimd::select(x[k] < FloatBatch(-kCdfPolynomialEnd), tail[k], lower[k]);
}

// `negative` where x's sign bit is set, else `other` (-0 and NaN lanes may go either way: both
// sides agree at 0 and are NaN at NaN). With SSE4.1 / AVX2 vectors, blendv reads the sign bit itself
// (AVX-512's masks are separate registers: compared there).
inline FloatBatch select_by_sign(const FloatBatch& x, const FloatBatch& negative, const FloatBatch& other) {
#if XSIMD_WITH_SSE4_1 && !XSIMD_WITH_AVX512F
  return xsimd::select(FloatBatch::batch_bool_type(x.data), negative, other);
#else
  return xsimd::select(x < FloatBatch(0.0f), negative, other);
#endif
}

// Phi(x) of K batches; with `density`, also phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
template <int K>
[[gnu::always_inline]] inline void normal_cdf(const FloatBatch (&x)[K], FloatBatch (&cdf)[K],
                                              FloatBatch* density = nullptr) {
  FloatBatch lower[K], a[K];
  for (int k = 0; k < K; ++k) a[k] = xsimd::abs(x[k]);
  FloatBatch largest = a[0];
  for (int k = 1; k < K; ++k) largest = xsimd::max(largest, a[k]);
  if (xsimd::any(largest > FloatBatch(kCdfPolynomialEnd))) [[unlikely]]
    lower_cdf_with_tail(x, lower);
  else
    lower_cdf_polynomial(a, lower);
  if (density) {
    FloatBatch e[K];
    for (int k = 0; k < K; ++k) e[k] = FloatBatch(-0.5f) * x[k] * x[k];
    exp_nonpositive(e);
    // 0 where the clamp acted: the density is below float32's normal range there (and x phi(x) at
    // x = ±inf is then inf * 0 = NaN, as PyTorch's).
    for (int k = 0; k < K; ++k)
      density[k] = xsimd::select(x[k] * x[k] > FloatBatch(174.0f), FloatBatch(0.0f), e[k] * FloatBatch(0.398942280f));
  }
  for (int k = 0; k < K; ++k) cdf[k] = select_by_sign(x[k], lower[k], FloatBatch(1.0f) - lower[k]);
}

}  // namespace fast_math_detail

/// gelu(x) = x Phi(x) of K float batches from `in` to `out` (unaligned; they may alias).
template <int K>
[[gnu::always_inline]] inline void gelu_float(const float* in, float* out) {
  using fast_math_detail::FloatBatch;
  FloatBatch x[K], cdf[K];
  for (int k = 0; k < K; ++k) x[k] = FloatBatch::load_unaligned(in + k * FloatBatch::size);
  fast_math_detail::normal_cdf(x, cdf);
  for (int k = 0; k < K; ++k) (x[k] * cdf[k]).store_unaligned(out + k * FloatBatch::size);
}
/// The same on one batch (rounds exactly like a batch of gelu_float<K>).
inline xsimd::batch<float> gelu_float(xsimd::batch<float> x) {
  const xsimd::batch<float> in[1] = {x};
  xsimd::batch<float> cdf[1];
  fast_math_detail::normal_cdf(in, cdf);
  return x * cdf[0];
}

/// gelu's backward: grad * (Phi(x) + x phi(x)) of K float batches (unaligned; out may alias).
template <int K>
[[gnu::always_inline]] inline void gelu_grad_float(const float* grad, const float* in, float* out) {
  using fast_math_detail::FloatBatch;
  FloatBatch x[K], cdf[K], density[K];
  for (int k = 0; k < K; ++k) x[k] = FloatBatch::load_unaligned(in + k * FloatBatch::size);
  fast_math_detail::normal_cdf(x, cdf, density);
  for (int k = 0; k < K; ++k)
    (FloatBatch::load_unaligned(grad + k * FloatBatch::size) * xsimd::fma(x[k], density[k], cdf[k]))
        .store_unaligned(out + k * FloatBatch::size);
}
/// The same on one batch of grad and x.
inline xsimd::batch<float> gelu_grad_float(xsimd::batch<float> grad, xsimd::batch<float> x) {
  const xsimd::batch<float> in[1] = {x};
  xsimd::batch<float> cdf[1], density[1];
  fast_math_detail::normal_cdf(in, cdf, density);
  return grad * xsimd::fma(x, density[0], cdf[0]);
}

}  // namespace tg::kernels
