"""Anomaly detection, as ``torch.autograd.detect_anomaly`` / ``set_detect_anomaly``: while
enabled, every recorded Function keeps the traceback of the forward call that made it,
and the backward engine checks each gradient a Function returns for NaN. When a backward
rule fails, a warning shows that forward traceback.

>>> import symgrad as torch
>>> x = torch.tensor(0., requires_grad=True)
>>> with torch.autograd.detect_anomaly():           # doctest: +SKIP
...     (x.sqrt() * 0).backward()
Traceback (most recent call last):
RuntimeError: Function 'SqrtBackward0' returned nan values in its 0th output.
"""
from __future__ import annotations

import functools
import traceback
import warnings

import numpy as np

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled", "forward_stack", "checked_call"]

# process-wide, as in PyTorch (AnomalyMode is a global flag, not per thread)
_state = {"enabled": False, "check_nan": True}

_ENABLED_WARNING = ("Anomaly Detection has been enabled. This mode will increase the runtime "
                    "and should only be enabled for debugging.")
_TRIGGER = (" (Triggered internally at "
            "/__w/pytorch/pytorch/torch/csrc/autograd/python_anomaly_mode.cpp:122.)")


def is_anomaly_enabled() -> bool:
    return _state["enabled"]


def is_anomaly_check_nan_enabled() -> bool:
    return _state["check_nan"]


class detect_anomaly:
    """Context manager / decorator enabling anomaly detection inside its block."""

    def __init__(self, check_nan: bool = True) -> None:
        self.prev = _state["enabled"]
        self.check_nan = check_nan
        self.prev_check_nan = _state["check_nan"]
        warnings.warn(_ENABLED_WARNING, UserWarning, stacklevel=2)

    def __enter__(self) -> None:
        _state["enabled"], _state["check_nan"] = True, self.check_nan

    def __exit__(self, *exc) -> None:
        _state["enabled"], _state["check_nan"] = self.prev, self.prev_check_nan

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Set anomaly detection on or off: at once as a call, restored on exit as a context
    manager."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev, self.prev_check_nan = _state["enabled"], _state["check_nan"]
        _state["enabled"], _state["check_nan"] = bool(mode), bool(check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        _state["enabled"], _state["check_nan"] = self.prev, self.prev_check_nan


def forward_stack():
    """The user's part of the current Python stack (recorded with each Function while
    anomaly mode is on), or None when it is off."""
    if not _state["enabled"]:
        return None
    frames = [f for f in traceback.extract_stack()[:-1]
              if "/symgrad/" not in f.filename.replace("\\", "/")]
    return traceback.format_list(frames)


def checked_call(fn, rule, g):
    """Run `rule(fn, g)` (a Function's backward) with anomaly checks."""
    try:
        grads = rule(fn, g)
        if _state["check_nan"]:
            for i, gi in enumerate(grads):
                data = getattr(gi, "_data", None)
                if data is not None and data.dtype.kind == "f" and np.isnan(data).any():
                    raise RuntimeError(f"Function '{fn.name()}' returned nan values in its "
                                       f"{i}th output.")
        return grads
    except Exception:
        stack = getattr(fn, "_stack", None)
        if stack is not None:
            warnings.warn(f"Error detected in {fn.name()}. Traceback of forward call that "
                          f"caused the error:\n{''.join(stack)}{_TRIGGER}", UserWarning,
                          stacklevel=2)
        raise
