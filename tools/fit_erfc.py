#!/usr/bin/env python3
"""The polynomial behind ew::ferfc_nonneg (csrc/ops/elementwise.h): erfc(a) = e^(-a^2) * P(t) with
t = 1 / (1 + a/2), for a >= 0. P is a least-squares Chebyshev fit of degree 9 of the scaled
function erfc(a) e^(a^2) over a in [0, 10] (t in [1/6, 1]; beyond a = 10 erfc is below 2e-45, zero
in float32), written in powers of t for Horner's rule. Run it to print the coefficients and the
relative error of P evaluated in float32 as the C++ does (about 3e-7).

    python tools/fit_erfc.py
"""
import math

import numpy as np

P_SCALE, A_MAX, DEGREE = 0.5, 10.0, 9


def scaled_erfc(a: np.ndarray) -> np.ndarray:
    return np.array([math.erfc(v) * math.exp(v * v) for v in a])


def main() -> None:
    t0 = 1 / (1 + P_SCALE * A_MAX)
    k = np.arange(2000)
    t = (np.cos(np.pi * (k + 0.5) / len(k)) + 1) / 2 * (1 - t0) + t0  # Chebyshev nodes in [t0, 1]
    u = 2 * (t - t0) / (1 - t0) - 1
    cheb = np.polynomial.chebyshev.chebfit(u, scaled_erfc((1 / t - 1) / P_SCALE), DEGREE)
    in_u = np.polynomial.Polynomial(np.polynomial.chebyshev.cheb2poly(cheb))
    in_t = in_u(np.polynomial.Polynomial([-1 - 2 * t0 / (1 - t0), 2 / (1 - t0)]))
    coef = in_t.coef.astype(np.float32)
    print("coefficients of t^0 .. t^%d:" % DEGREE)
    for c in coef:
        print(f"  {float(c):.9e}f")
    a = np.linspace(0, A_MAX, 100001)
    t32 = (1 / (1 + np.float32(P_SCALE) * a.astype(np.float32))).astype(np.float32)
    r = np.zeros_like(t32)
    for c in coef[::-1]:
        r = (r * t32 + c).astype(np.float32)
    want = scaled_erfc(a)
    print(f"max relative error in float32: {np.max(np.abs(r - want) / want):.2e}")


if __name__ == "__main__":
    main()
