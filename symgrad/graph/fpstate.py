"""Quiet floating-point state for symgrad's numpy kernels: log(0), 0/0, overflow give
inf / nan silently, as in PyTorch, without touching the user's numpy settings.

``np.errstate`` is a costly context manager to enter per eager op, so when numpy
exposes its error-state context variable we set it directly, and fall back to
``np.errstate`` otherwise.
"""
from __future__ import annotations

import numpy as np

__all__ = ["quiet", "enter", "leave"]

try:
    from numpy._core._ufunc_config import _extobj_contextvar as _VAR
    from numpy._core.umath import _make_extobj
    _IGNORE = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):      # other numpy versions
    _VAR = None


class _Quiet:
    __slots__ = ("_token",)

    def __enter__(self):
        self._token = _VAR.set(_IGNORE)
        return self

    def __exit__(self, *exc):
        _VAR.reset(self._token)
        return False


def quiet():
    """A context manager silencing numpy floating-point warnings inside it."""
    return _Quiet() if _VAR is not None else np.errstate(all="ignore")


def enter():
    """Start a quiet region without a context-manager object (hot paths); pass the result
    to :func:`leave`."""
    return _VAR.set(_IGNORE) if _VAR is not None else _errstate_enter()


def leave(token) -> None:
    if _VAR is not None:
        _VAR.reset(token)
    else:
        token.__exit__(None, None, None)


def _errstate_enter():
    state = np.errstate(all="ignore")
    state.__enter__()
    return state
