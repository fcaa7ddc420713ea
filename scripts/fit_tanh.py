#!/usr/bin/python3
"""Fits the float32 tanh of autograd/kernels/fast_math.h: tanh(x) ~ x P(x^2) / Q(x^2) on (0, 9],
P of degree 5 and Q of degree 3 with Q(0) = 1, minimising the largest relative error.

Method: linearised least squares (P - tanh(x)/x Q = 0) re-weighted by 1/|Q| of the previous
iterate (Loeb) and by the previous residuals (Lawson), which walks towards the minimax fit; the
best iterate is printed. References from mpmath at 40 digits. Needs python3-numpy and
python3-mpmath (a development tool, not a build dependency). The coefficients are printed to 9
significant digits, enough to round to the nearest float32.
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
CLAMP, P_TERMS, Q_DEGREE = 9.0, 6, 3

xs = np.unique(np.concatenate([np.linspace(1e-3, CLAMP, 6000),
                               CLAMP * (1 - np.cos(np.linspace(0, np.pi / 2, 6000)))]))
xs = xs[xs > 0]
tanh = np.array([float(mp.tanh(mp.mpf(x))) for x in xs])
ratio = tanh / xs
t = xs ** 2
vp = np.vander(t, P_TERMS, increasing=True)
vq = np.vander(t, Q_DEGREE + 1, increasing=True)

q_prev, lawson, best = np.ones_like(t), np.ones_like(t), None
for _ in range(200):
    w = lawson / np.abs(q_prev)
    a = np.hstack([vp, -(ratio[:, None] * vq[:, 1:])])
    sol, *_ = np.linalg.lstsq(a * w[:, None], ratio * w, rcond=None)
    p, q = sol[:P_TERMS], np.concatenate([[1.0], sol[P_TERMS:]])
    q_values = vq @ q
    rel = (xs * (vp @ p) / q_values - tanh) / tanh
    if best is None or np.abs(rel).max() < best[0]:
        best = (np.abs(rel).max(), p, q, q_values.min())
    q_prev = q_values
    lawson = lawson * np.abs(rel) ** 0.3
    lawson /= lawson.mean()

err, p, q, q_min = best
print(f"max relative error {err:.3g} in exact arithmetic; min Q on the interval {q_min:.3g} (> 0: no pole)")
print("P (x^0, x^2, ...):", ", ".join(f"{v:.9g}" for v in p))
print("Q (x^0, x^2, ...):", ", ".join(f"{v:.9g}" for v in q))
