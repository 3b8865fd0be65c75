"""The state of saved-tensor hooks (PyTorch's ``SavedTensorDefaultHooks``), per thread:
the stack of ``(pack_hook, unpack_hook)`` pairs that
``autograd.graph.saved_tensors_hooks`` pushes, the message of
``disable_saved_tensors_hooks``, and :func:`paused` for symgrad's own bookkeeping
graphs (a named composite's inner primitives: PyTorch saves only what the named node
saves). :class:`~symgrad.autograd.nodes.SavedTensor` asks :func:`current` at save time.
"""
from __future__ import annotations

import contextlib
import threading

__all__ = ["current", "active", "push", "pop", "disabled_message", "set_disabled", "paused"]


class _State(threading.local):
    def __init__(self):
        self.stack: list = []
        self.disabled: str | None = None     # the error message while disabled
        self.paused = 0


_state = _State()
used = False        # whether hooks were ever set (the engine looks for them only then)


def current():
    """The innermost ``(pack, unpack)`` pair, or None; PyTorch's error (the message given
    to disable_saved_tensors_hooks) when hooks are set but disabled."""
    st = _state
    if not st.stack or st.paused:
        return None
    if st.disabled is not None:
        raise RuntimeError(st.disabled)
    return st.stack[-1]


def active() -> bool:
    """Whether hooks are set (or disabled, an error to raise) in this thread now: what
    may change how a tensor is saved. (``used`` says only that they ever were.)"""
    return bool(_state.stack) or _state.disabled is not None


def push(pack_hook, unpack_hook) -> None:
    if not (callable(pack_hook) and callable(unpack_hook)):
        raise TypeError(
            "_push_saved_tensors_default_hooks(): incompatible function arguments. The "
            "following argument types are supported:\n    1. (arg0: collections.abc.Callable, "
            "arg1: collections.abc.Callable) -> None\n\nInvoked with: "
            f"{pack_hook!r}, {unpack_hook!r}")
    global used
    if _state.disabled is not None:
        raise RuntimeError(_state.disabled)
    _state.stack.append((pack_hook, unpack_hook))
    used = True


def pop() -> None:
    _state.stack.pop()


def disabled_message() -> str | None:
    return _state.disabled


def set_disabled(message: str | None) -> None:
    """Disable the hooks with `message` as the error (None: enable them again)."""
    _state.disabled = message


@contextlib.contextmanager
def paused():
    """Tensors saved inside are saved as they are, whatever hooks are set."""
    _state.paused += 1
    try:
        yield
    finally:
        _state.paused -= 1

