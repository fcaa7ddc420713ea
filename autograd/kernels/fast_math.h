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

}  // namespace tg::kernels
