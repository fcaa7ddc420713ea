#!/usr/bin/python3
"""Fits the float32 GELU of autograd/kernels/fast_math.h: Phi(-a) = 0.5 erfc(a / sqrt 2) ~ g(a)^16
on [0, 9.5], g a polynomial of degree 13 in t = a * (2 / 9.5) - 1, minimising the largest relative
error of g. The 16th root decays like exp(-a^2 / 32) instead of exp(-a^2 / 2), smooth enough for
a polynomial over the whole range where float32 needs the lower tail relatively accurate; the
power multiplies g's relative error by 16, so the rounding of the coefficients to float32 matters
as much as the fit: they are rounded one at a time, highest degree first, and the lower ones
fitted again each time.

Method: Chebyshev least squares weighted by 1/g, re-weighted by the previous residuals (Lawson),
which walks towards the minimax fit; the best iterate is kept. Then Phi(0) = g(-1)^16 as the kernel
evaluates it (Horner with fused multiply-adds and four squarings, emulated here in exact rational
arithmetic and rounded once per step): no float32 value squared four times rounds to exactly 0.5, so
it is reported, not forced.
References from mpmath at 30 digits. Needs python3-numpy and python3-mpmath (a development tool,
not a build dependency).
"""
from fractions import Fraction

import mpmath as mp
import numpy as np

mp.mp.dps = 30
CLAMP, DEGREE, POWER = 9.5, 13, 16

a = (1 - np.cos(np.linspace(0, np.pi, 4000))) / 2 * CLAMP
g = np.array([float((mp.erfc(mp.mpf(v) / mp.sqrt(2)) / 2) ** (mp.mpf(1) / POWER)) for v in a])
t = 2 * a / CLAMP - 1


def fit(target, degree):
    """Lawson-weighted least squares of a polynomial of `degree` to target, relative to g."""
    v = np.polynomial.chebyshev.chebvander(t, degree)
    lawson, best = np.ones_like(t), None
    for _ in range(200):
        w = np.sqrt(lawson) / g
        c, *_ = np.linalg.lstsq(v * w[:, None], target * w, rcond=None)
        err = (v @ c - target) / g
        worst = np.max(np.abs(err))
        if best is None or worst < best[0]:
            best = (worst, c)
        lawson = lawson * np.abs(err)
        lawson /= lawson.sum()
    return np.polynomial.chebyshev.cheb2poly(best[1])  # monomials in t, lowest degree first


fixed = []  # float32 coefficients, highest degree first
for degree in range(DEGREE, -1, -1):
    done = sum(c * t ** (DEGREE - i) for i, c in enumerate(fixed)) if fixed else 0.0
    free = fit(g - done, degree)
    fixed.append(np.float32(free[degree]))
poly = sum(float(c) * t ** (DEGREE - i) for i, c in enumerate(fixed))
worst = np.max(np.abs(poly - g) / g)


def f32(x):
    return Fraction(float(np.float32(float(x))))


acc = Fraction(float(fixed[0]))  # g(-1) in float32 Horner steps, each fma rounded once
for c in fixed[1:]:
    acc = f32(acc * -1 + Fraction(float(c)))
for _ in range(4):
    acc = f32(acc * acc)

print(f"largest relative error of g (float32 coefficients): {worst:.3g} (of g^{POWER}: about {POWER * worst:.3g})")
print("kCdfRoot:", ", ".join(f"{float(c):.9g}f" for c in fixed))
print(f"Phi(0) as the kernel computes it: 0.5 + {float(acc) - 0.5:.3g}")
