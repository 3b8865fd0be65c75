"""Correctness check of a system's value and gradients against torch float64.

The error of one output is its largest absolute deviation divided by the largest
magnitude of the reference (a scale-relative max error, so tiny reference
entries do not blow it up).  The reported error is the worst over the value
and all gradients; it must not exceed the dtype's tolerance.  Non-finite
outputs, or outputs whose size differs from the reference, fail outright.

Example:
    >>> import numpy as np
    >>> check(np.array(1.0), [np.ones(3)], 1.0, [np.ones(3)], "float64").ok
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# float32: 10-step chains amplify rounding ~10^3-fold (torch float32 itself
# shows 3e-4 on the 1e7 chain); float64 has 2^29 more headroom.
TOLERANCE = {"float32": 2e-3, "float64": 1e-9}


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    max_err: float
    where: str       # which output had the largest error: "value" or a param name

    def describe(self) -> str:
        return f"max err {self.max_err:.1e} ({self.where})"


def scaled_error(got: np.ndarray, want: np.ndarray) -> float:
    if got.size != want.size:
        return float("inf")
    got = got.reshape(want.shape)
    if not np.all(np.isfinite(got)):
        return float("inf")
    scale = float(np.max(np.abs(want))) if want.size else 1.0
    return float(np.max(np.abs(got - want), initial=0.0)) / max(scale, 1e-30)


def check(value: np.ndarray, grads: list[np.ndarray], ref_value: float,
          ref_grads: list[np.ndarray], dtype: str,
          names: tuple[str, ...] | None = None) -> CheckResult:
    """Compare outputs with the reference within ``TOLERANCE[dtype]``."""
    names = names or tuple(f"grad{i}" for i in range(len(ref_grads)))
    if len(grads) != len(ref_grads):
        return CheckResult(False, float("inf"), f"{len(grads)} grads, want {len(ref_grads)}")
    errors = [("value", scaled_error(value, np.asarray(ref_value)))]
    errors += [(n, scaled_error(g, r)) for n, g, r in zip(names, grads, ref_grads)]
    where, worst = max(errors, key=lambda e: e[1])
    return CheckResult(worst <= TOLERANCE[dtype], worst, where)
