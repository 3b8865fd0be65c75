"""Offline polynomial fits behind :mod:`codegen.vecmath`'s coefficient tables.

``python -m codegen.fits`` recomputes every fitted table and prints it with its error
next to the table vecmath uses; ``tests/codegen/test_fits.py`` checks that vecmath's
tables are as accurate as a fresh fit.  Fits run in mpmath (a sympy dependency).

Each table approximates a function on an interval by a polynomial ``P(u)`` whose error
is weighted so that the quantity minimised is the *relative* error of the whole
function (e.g. sin r = r + r^3 S(r^2): weight r^3 / sin r on S):

* :func:`remez`: the minimax polynomial (Remez exchange: solve on a reference of n+1
  points for a levelled error, move the reference to the error's alternating extrema,
  found on a Chebyshev grid and refined by golden-section search; repeat until the
  extrema are level);
* :func:`stepwise`: the table as stored -- the lowest coefficient of the minimax fit is
  rounded to the format, the rest refitted with it fixed, and so on upwards (rounding
  them all at once loses up to 2 bits on the double sine); the exp tables are instead
  the minimax fit rounded at once (stepwise is worse there: 2^-58.2 vs 2^-59.9);
* ``log1p_unit``: log1p(t) for t in [0, 1] as t - (t^2/2 - s (t^2/2 + z P(z))),
  s = t / (2 + t), z = s^2 in [0, 1/9]: z P(z) = 2 atanh(s)/s - 2 = 2z/3 + 2z^2/5 + ...;
  P interpolated at Chebyshev nodes (near-minimax, the rounding error dominates), kept
  bit-for-bit equal to vecmath's table by the test.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

import mpmath as mp
from .vecmath import core as vecmath_tables

__all__ = ["remez", "stepwise", "max_error", "Table", "TABLES", "log1p_unit",
           "log1p_unit_error", "LOG1P_UNIT_DEGREE"]

_PREC = 160
_GOLDEN = (3 - mp.sqrt(5)) / 2


def _round(value, fmt: str) -> float:
    x = float(value)
    return struct.unpack("f", struct.pack("f", x))[0] if fmt == "f32" else x


def _poly(coeffs, u):
    return mp.polyval([mp.mpf(c) for c in reversed(coeffs)], u)


def remez(f: Callable, w: Callable, a, b, n: int, grid: int = 1501, iters: int = 30):
    """(coefficients lowest first, levelled error) of the degree n-1 polynomial p
    minimising max |w(u) (p(u) - f(u))| on [a, b] (w > 0 away from isolated zeros; the
    odd-sized Chebyshev grid never evaluates the centre of the interval)."""
    with mp.workprec(_PREC):
        a, b = mp.mpf(a), mp.mpf(b)
        m = n + 1
        ref = [a + (b - a) * (1 - mp.cos(mp.pi * (i + mp.mpf(1) / 2) / m)) / 2 for i in range(m)]
        us = [a + (b - a) * (1 - mp.cos(mp.pi * i / grid)) / 2 for i in range(grid + 1)]
        fs, ws = [f(u) for u in us], [w(u) for u in us]
        coeffs, level = [], mp.mpf(0)
        for _ in range(iters):
            rows = mp.matrix(m, m)
            rhs = mp.matrix(m, 1)
            for i, u in enumerate(ref):
                wu = w(u)
                for j in range(n):
                    rows[i, j] = wu * u ** j
                rows[i, n] = -(-1) ** i
                rhs[i] = wu * f(u)
            sol = mp.lu_solve(rows, rhs)
            coeffs, level = [sol[j] for j in range(n)], abs(sol[n])
            err = lambda u: w(u) * (mp.polyval(coeffs[::-1], u) - f(u))
            es = [wu * (mp.polyval(coeffs[::-1], u) - fu) for u, fu, wu in zip(us, fs, ws)]
            runs: list[list[int]] = []          # [sign, index of the run's extremum]
            for k, e in enumerate(es):
                s = (e > 0) - (e < 0)
                if s == 0:
                    continue
                if runs and runs[-1][0] == s:
                    if abs(e) > abs(es[runs[-1][1]]):
                        runs[-1][1] = k
                else:
                    runs.append([s, k])
            while len(runs) > m:                # keep m alternating extrema, the largest too
                runs.pop(0 if abs(es[runs[0][1]]) < abs(es[runs[-1][1]]) else -1)
            if len(runs) < m:
                raise ArithmeticError(f"remez: {len(runs)} alternations for {m} points")
            ref = [_refine(lambda u: abs(err(u)), us[max(k - 1, 0)], us[min(k + 1, grid)])
                   for _, k in runs]
            peak = max(abs(err(u)) for u in ref)
            if peak - level <= level * mp.mpf(2) ** -40:
                break
        return coeffs, level


def _refine(g: Callable, lo, hi, steps: int = 60):
    """The maximum of ``g`` on [lo, hi] by golden-section search."""
    for _ in range(steps):
        m1, m2 = lo + (hi - lo) * _GOLDEN, hi - (hi - lo) * _GOLDEN
        if g(m1) > g(m2):
            hi = m2
        else:
            lo = m1
    return (lo + hi) / 2


def stepwise(f: Callable, w: Callable, a, b, n: int, fmt: str) -> list[float]:
    """Coefficients rounded to ``fmt`` one at a time, lowest first, each time refitting
    the higher ones with the rounded ones fixed."""
    fixed: list[float] = []
    for k in range(n):
        def fk(u, k=k, done=tuple(fixed)):
            return (f(u) - _poly(done, u)) / u ** k if u != 0 else mp.mpf(0)   # weight 0 there
        coeffs, _ = remez(fk, lambda u, k=k: w(u) * abs(u) ** k, a, b, n - k)
        fixed.append(_round(coeffs[0], fmt))
    return fixed


def max_error(coeffs, f: Callable, w: Callable, a, b, points: int = 2001) -> float:
    """max |w (p - f)| of the polynomial ``coeffs`` at the midpoints of ``points``
    equal parts of [a, b]."""
    with mp.workprec(_PREC):
        a, b = mp.mpf(a), mp.mpf(b)
        return float(max(abs(w(u) * (_poly(coeffs, u) - f(u)))
                         for u in (a + (b - a) * (i + mp.mpf(1) / 2) / points
                                   for i in range(points))))


# ------------------------------------------------------------------ the fitted tables

def _r(u):
    return mp.sqrt(u)


def _exp_f(r):            # e^r - 1 = r + r^2 P(r)
    return (mp.expm1(r) - r) / r ** 2 if r != 0 else mp.mpf(1) / 2


def _exp_w(r):            # relative to e^r - 1
    return r ** 2 / abs(mp.expm1(r)) if r != 0 else mp.mpf(0)


def _sin_f(u):            # sin r = r + r^3 S(r^2)
    return (mp.sin(_r(u)) - _r(u)) / _r(u) ** 3


def _cos_f(u):            # cos r = 1 - r^2/2 + r^4 C(r^2)
    return (mp.cos(_r(u)) - 1 + u / 2) / u ** 2


def _cos1_f(u):           # cos r = 1 + r^2 C(r^2)
    return (mp.cos(_r(u)) - 1) / u


@dataclass(frozen=True)
class Table:
    """One fitted table: vecmath's name for it, the target, weight, interval, size and
    format (the interval's ends are given as functions: mpmath precision is set late)."""

    name: str
    f: Callable
    w: Callable
    interval: Callable
    n: int
    fmt: str
    method: str = "stepwise"        # or "round": the minimax fit rounded all at once

    def fit(self) -> list[float]:
        a, b = self.interval()
        if self.method == "round":
            return [_round(c, self.fmt) for c in remez(self.f, self.w, a, b, self.n)[0]]
        return stepwise(self.f, self.w, a, b, self.n, self.fmt)

    def error(self, coeffs, points: int = 2001) -> float:
        a, b = self.interval()
        return max_error(coeffs, self.f, self.w, a, b, points)


_TINY = 2.0 ** -40         # the weighted error vanishes at u = 0: start just above it
_EXP_HALF = lambda: (-(mp.log(2) / 2 + mp.mpf(2) ** -20), mp.log(2) / 2 + mp.mpf(2) ** -20)
_QUARTER = lambda e: (lambda: (mp.mpf(_TINY), (mp.pi / 4 + mp.mpf(2) ** e) ** 2))

TABLES = [
    # exp family, relative to e^r - 1 (expm1 needs it; exp alone uses EXP_ONLY in float)
    Table('EXP_COEFFS["f64"]', _exp_f, _exp_w, _EXP_HALF, 11, "f64", "round"),
    # float exp alone: relative to e^r = 1 + r + r^2 P(r)
    Table('EXP_ONLY_COEFFS["f32"]', _exp_f, lambda r: r ** 2 / mp.exp(r), _EXP_HALF, 5, "f32",
          "round"),
    Table('SIN_COEFFS["f64"]', _sin_f, lambda u: _r(u) ** 3 / mp.sin(_r(u)), _QUARTER(-30), 6, "f64"),
    Table('COS_COEFFS["f64"]', _cos_f, lambda u: u ** 2 / mp.cos(_r(u)), _QUARTER(-30), 6, "f64"),
    Table('SIN_COEFFS["f32"]', _sin_f, lambda u: _r(u) ** 3 / mp.sin(_r(u)), _QUARTER(-16), 4, "f32"),
    Table('COS_COEFFS["f32"]', _cos_f, lambda u: u ** 2 / mp.cos(_r(u)), _QUARTER(-16), 3, "f32"),
    # float sin/cos/tan computed in double
    Table("SIN_COEFFS_TAN32", _sin_f, lambda u: _r(u) ** 3 / mp.sin(_r(u)), _QUARTER(-20), 4, "f64"),
    Table("COS_COEFFS_TAN32", _cos1_f, lambda u: u / mp.cos(_r(u)), _QUARTER(-20), 5, "f64"),
]


# --------------------------------------------------------------- log1p on [0, 1]

LOG1P_UNIT_DEGREE = {"f64": 9, "f32": 4}
_Z_MAX = lambda: mp.mpf(1) / 9 * (1 + mp.mpf(2) ** -20)


def _p_exact(z):
    """P(z) = (2 atanh(s) - 2 s) / (s z), s = sqrt(z); P(0) = 2/3."""
    if z == 0:
        return mp.mpf(2) / 3
    s = mp.sqrt(z)
    return (2 * mp.atanh(s) - 2 * s) / (s * z)


def log1p_unit(fmt: str) -> list[float]:
    """P's coefficients, lowest first, rounded to ``fmt`` ("f64" or "f32")."""
    with mp.workprec(256):
        n = LOG1P_UNIT_DEGREE[fmt] + 1
        zmax = _Z_MAX()
        nodes = [zmax / 2 * (1 - mp.cos(mp.pi * (2 * i + 1) / (2 * n))) for i in range(n)]
        a = mp.matrix([[x ** j for j in range(n)] for x in nodes])
        coeffs = mp.lu_solve(a, mp.matrix([_p_exact(x) for x in nodes]))
        return [_round(c, fmt) for c in coeffs]


def log1p_unit_error(coeffs: list[float], points: int = 2001) -> float:
    """Max relative error of log1p(t) from the polynomial ``coeffs`` (exact arithmetic
    otherwise), over z in [0, 1/9]."""
    with mp.workprec(256):
        worst, zmax = mp.mpf(0), _Z_MAX()
        for i in range(1, points):
            z = zmax * i / (points - 1)
            s = mp.sqrt(z)
            worst = max(worst, abs(s * z * (_poly(coeffs, z) - _p_exact(z))) / (2 * mp.atanh(s)))
        return float(worst)


def main() -> None:

    def log2(x: float) -> str:
        return f"2^{float(mp.log(x, 2)):.2f}"

    for t in TABLES:
        coeffs = t.fit()
        used = eval(t.name, vars(vecmath_tables))            # noqa: S307 - our own names
        print(f"{t.name}: fit {log2(t.error(coeffs))}, vecmath's {log2(t.error(used))}")
        print("    fit:     ", ", ".join(f'"{c.hex()}"' for c in coeffs))
        print("    vecmath: ", ", ".join(f'"{c.hex()}"' for c in used))
    for fmt in ("f64", "f32"):
        coeffs = log1p_unit(fmt)
        print(f'LOG1P_UNIT_COEFFS["{fmt}"]: {log2(log1p_unit_error(coeffs))}')
        print("    ", ", ".join(f'"{c.hex()}"' for c in coeffs))


if __name__ == "__main__":
    main()
