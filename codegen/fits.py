"""Offline polynomial fits behind :mod:`codegen.vecmath`'s coefficient tables.

``python -m codegen.fits`` recomputes them and prints each table with its measured error;
``tests/codegen/test_fits.py`` checks that vecmath's constants are what this module
produces.  Fits run in mpmath (a sympy dependency) at 256 bits.

* ``log1p_unit``: log1p(t) for t in [0, 1] as t - (t^2/2 - s (t^2/2 + z P(z))),
  s = t / (2 + t), z = s^2 in [0, 1/9]: z P(z) = 2 atanh(s)/s - 2 = 2z/3 + 2z^2/5 + ...
  P is interpolated at Chebyshev nodes of [0, 1/9 (1 + 2^-20)] (near-minimax), each
  coefficient rounded to the format; the error quoted is the rounded polynomial's, relative
  to log1p(t), on a 2001-point grid.
"""
from __future__ import annotations

import struct

import mpmath as mp

__all__ = ["log1p_unit", "log1p_unit_error", "LOG1P_UNIT_DEGREE"]

LOG1P_UNIT_DEGREE = {"f64": 9, "f32": 4}
_Z_MAX = mp.mpf(1) / 9 * (1 + mp.mpf(2) ** -20)


def _round(value: mp.mpf, fmt: str) -> float:
    x = float(value)
    return struct.unpack("f", struct.pack("f", x))[0] if fmt == "f32" else x


def _p_exact(z: mp.mpf) -> mp.mpf:
    """P(z) = (2 atanh(s) - 2 s) / (s z), s = sqrt(z); P(0) = 2/3."""
    if z == 0:
        return mp.mpf(2) / 3
    s = mp.sqrt(z)
    return (2 * mp.atanh(s) - 2 * s) / (s * z)


def log1p_unit(fmt: str) -> list[float]:
    """P's coefficients, lowest first, rounded to ``fmt`` ("f64" or "f32")."""
    with mp.workprec(256):
        deg = LOG1P_UNIT_DEGREE[fmt]
        n = deg + 1
        nodes = [_Z_MAX / 2 * (1 - mp.cos(mp.pi * (2 * i + 1) / (2 * n))) for i in range(n)]
        a = mp.matrix([[x ** j for j in range(n)] for x in nodes])
        coeffs = mp.lu_solve(a, mp.matrix([_p_exact(x) for x in nodes]))
        return [_round(c, fmt) for c in coeffs]


def log1p_unit_error(coeffs: list[float], points: int = 2001) -> float:
    """Max relative error of log1p(t) from the polynomial ``coeffs`` (exact arithmetic
    otherwise), over z in [0, 1/9]."""
    with mp.workprec(256):
        worst = mp.mpf(0)
        for i in range(1, points):
            z = _Z_MAX * i / (points - 1)
            s = mp.sqrt(z)
            p = sum(mp.mpf(c) * z ** j for j, c in enumerate(coeffs))
            worst = max(worst, abs(s * z * (p - _p_exact(z))) / (2 * mp.atanh(s)))
        return float(worst)


def main() -> None:
    for fmt in ("f64", "f32"):
        coeffs = log1p_unit(fmt)
        err = log1p_unit_error(coeffs)
        print(f"LOG1P_UNIT_COEFFS[{fmt}] (relative error 2^{float(mp.log(err, 2)):.1f}):")
        print("   ", ", ".join(f'"{c.hex()}"' for c in coeffs))


if __name__ == "__main__":
    main()
