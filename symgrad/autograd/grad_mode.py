"""Whether operations are recorded for autograd: no_grad, enable_grad,
set_grad_enabled, inference_mode, is_grad_enabled, is_inference_mode_enabled
(thread-local, like PyTorch).

Grad mode (what ``is_grad_enabled()`` says) and recording differ in inference mode:
there nothing is recorded, even under ``enable_grad``, as in PyTorch.
"""
from __future__ import annotations

import functools
import inspect
import threading

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "inference_mode", "is_inference_mode_enabled"]


class _State(threading.local):
    enabled = True         # operations are recorded: grad mode on, not in inference mode
    grad = True            # grad mode, as is_grad_enabled() reports it
    inference = False      # inside inference_mode(): new tensors are inference tensors
    deriving = 0      # > 0 while grad_graph builds a gradient graph (its no_grad is internal)


_state = _State()


def is_grad_enabled() -> bool:
    """True when grad mode is on (new operations are recorded unless in inference mode)."""
    return _state.grad


def is_inference_mode_enabled() -> bool:
    """True inside ``inference_mode()`` (and not inside an ``inference_mode(False)``)."""
    return _state.inference


def set_grad_mode(mode: bool) -> None:
    """Grad mode `mode` (recording follows it outside inference mode)."""
    _state.grad = mode
    _state.enabled = mode and not _state.inference


class _GradModeContext:
    """Base of the grad-mode switches: a context manager and a decorator."""

    _target = True

    def __enter__(self):
        self._prev = _state.grad
        set_grad_mode(self._target)
        return self

    def __exit__(self, *exc):
        set_grad_mode(self._prev)
        return False

    def clone(self):
        """A fresh context of the same mode (what a decorated function enters)."""
        return self.__class__()

    def __call__(self, fn):
        """Decorate `fn`: it runs in this mode; a generator function runs in it each time
        it is resumed (the caller's mode in between), as PyTorch's decorators do."""
        fresh = self.clone
        if inspect.isgeneratorfunction(fn):
            return _generator_in(fresh, fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with fresh():
                return fn(*args, **kwargs)
        return wrapper


def _generator_in(fresh, fn):
    """Generator function `fn` whose every step (start, send, throw, close) runs inside a
    context from `fresh()`."""
    @functools.wraps(fn)
    def generator(*args, **kwargs):
        gen = fn(*args, **kwargs)
        step, value = gen.send, None
        while True:
            try:
                with fresh():
                    out = step(value)
            except StopIteration as stop:
                return stop.value
            try:
                step, value = gen.send, (yield out)
            except GeneratorExit:
                with fresh():
                    gen.close()
                raise
            except BaseException as exc:         # thrown in by the caller: passed on
                step, value = gen.throw, exc
    return generator


class _NoArgumentMode(_GradModeContext):
    """A mode that also decorates without parentheses (``@no_grad``)."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoArgumentMode):
    """Disable recording: ``with symgrad.no_grad(): ...``, ``@symgrad.no_grad()`` or
    ``@symgrad.no_grad``."""

    _target = False


class enable_grad(_NoArgumentMode):
    """Enable recording inside a no_grad block (also a decorator, with or without
    parentheses)."""

    _target = True


class inference_mode(_GradModeContext):
    """no_grad whose new tensors are *inference tensors* (``t.is_inference()``): outside
    inference mode they cannot be updated in place, require grad or be saved for
    backward (PyTorch's errors); their views are inference tensors too. A view of a
    normal tensor made inside is a normal tensor that cannot be updated in place in
    normal mode. Nothing is recorded inside, even under ``enable_grad``.
    ``inference_mode(False)`` leaves inference mode (grad mode on). A context manager
    and a decorator (``@inference_mode`` or ``@inference_mode()``).

    >>> import symgrad as torch
    >>> with torch.inference_mode():
    ...     y = torch.ones(2) * 2
    >>> y.is_inference(), y.requires_grad
    (True, False)
    """

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)                  # @inference_mode on a function

    def __init__(self, mode: bool = True):
        self.mode = mode
        self._target = not mode

    def __enter__(self):
        self._prev_inference = _state.inference
        self._prev = _state.grad
        _state.inference = bool(self.mode)
        set_grad_mode(self._target)
        return None

    def __exit__(self, *exc):
        _state.inference = self._prev_inference
        set_grad_mode(self._prev)
        return False

    def clone(self) -> "inference_mode":
        return self.__class__(self.mode)


class set_grad_enabled(_GradModeContext):
    """Set grad mode: as a function call it takes effect at once; as a context manager
    it is restored on exit."""

    def __init__(self, mode: bool):
        self._prev = _state.grad
        self._target = bool(mode)
        set_grad_mode(self._target)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        set_grad_mode(self._prev)
        return False

    def clone(self) -> "set_grad_enabled":
        return self.__class__(self._target)

    def __call__(self, fn):
        set_grad_mode(self._prev)           # as a decorator it does not switch at once
        return super().__call__(fn)
