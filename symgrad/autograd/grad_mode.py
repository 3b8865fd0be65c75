"""Whether operations are recorded for autograd: no_grad, enable_grad,
set_grad_enabled, inference_mode, is_grad_enabled (thread-local, like PyTorch)."""
from __future__ import annotations

import functools
import threading

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "inference_mode"]


class _State(threading.local):
    enabled = True
    inference = False      # inside inference_mode(): new tensors are inference tensors
    deriving = 0      # > 0 while grad_graph builds a gradient graph (its no_grad is internal)


_state = _State()


def is_grad_enabled() -> bool:
    """True when new operations are recorded for backward."""
    return _state.enabled


class _GradModeContext:
    """Base of the grad-mode switches: a context manager and a decorator."""

    _target = True

    def __enter__(self):
        self._prev = _state.enabled
        _state.enabled = self._target
        return self

    def __exit__(self, *exc):
        _state.enabled = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeContext):
    """Disable recording: ``with symgrad.no_grad(): ...`` or ``@symgrad.no_grad()``."""

    _target = False


class enable_grad(_GradModeContext):
    """Enable recording inside a no_grad block."""

    _target = True


class inference_mode(_GradModeContext):
    """no_grad whose new tensors are *inference tensors* (``t.is_inference()``): outside
    inference mode they cannot be updated in place, require grad or be saved for
    backward (PyTorch's errors)."""

    def __init__(self, mode: bool = True):
        self._target = not mode
        self._mode = bool(mode)

    def __enter__(self):
        self._prev_inference = _state.inference
        _state.inference = self._mode
        return super().__enter__()

    def __exit__(self, *exc):
        _state.inference = self._prev_inference
        return super().__exit__(*exc)

    def __call__(self, fn):
        mode = not self._target

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper


class set_grad_enabled(_GradModeContext):
    """Set grad mode: as a function call it takes effect at once; as a context manager
    it is restored on exit."""

    def __init__(self, mode: bool):
        self._prev = _state.enabled
        self._target = bool(mode)
        _state.enabled = self._target

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _state.enabled = self._prev
        return False
