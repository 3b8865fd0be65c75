"""Global switches PyTorch programs set and read: deterministic algorithms (symgrad's
kernels are deterministic whatever the switch says: the flag is kept for the programs
that read it back) and the float32 matmul precision (symgrad always multiplies float32
in float32; ``'high'`` / ``'medium'`` are kept, and read back by
``backends.cuda.matmul.allow_tf32`` as in PyTorch)."""
from __future__ import annotations

import warnings

__all__ = ["use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
           "get_deterministic_debug_mode", "set_float32_matmul_precision",
           "get_float32_matmul_precision"]

_state = {"deterministic": False, "warn_only": False, "precision": "highest"}
_PRECISIONS = ("highest", "high", "medium")


def _bool_arg(value, name: str, position: str = "") -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument '{name}'{position} must be "
                        f"bool, not {type(value).__name__}")
    return value


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Ask for deterministic algorithms (every symgrad kernel already is one)."""
    _state["deterministic"] = _bool_arg(mode, "mode", " (position 1)")
    _state["warn_only"] = _bool_arg(warn_only, "warn_only")


def are_deterministic_algorithms_enabled() -> bool:
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _state["warn_only"]


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode: "str | int") -> None:
    """``'default'`` / 0, ``'warn'`` / 1, ``'error'`` / 2 (as PyTorch)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, "
                               f"`warn`, `error`, but got {debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    if not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise TypeError("debug_mode must be str or int, but got "
                        f"{type(debug_mode).__name__}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError("invalid value of debug_mode, expected 0, 1, or 2, but got "
                           f"{debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    if not _state["deterministic"]:
        return 0
    return 1 if _state["warn_only"] else 2


def set_float32_matmul_precision(precision: str) -> None:
    """``'highest'``, ``'high'`` or ``'medium'``; another value warns and changes
    nothing (PyTorch's behaviour)."""
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      "setFloat32MatmulPrecision call has no effect.", stacklevel=2)
        return
    _state["precision"] = precision


def get_float32_matmul_precision() -> str:
    return _state["precision"]
