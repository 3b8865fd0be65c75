"""A per-thread switch that is on for the extent of a ``with`` block (nested blocks
restore what they found): one flag, one implementation, for the several places that
need one (random draws while probing a size, leaf hooks while differentiating a
compiled call)."""
from __future__ import annotations

import contextlib
import threading

__all__ = ["ThreadFlag"]


class ThreadFlag(threading.local):
    """``flag.on`` is False until ``with flag.set():``, in this thread only."""

    on = False

    @contextlib.contextmanager
    def set(self):
        prev = self.on
        self.on = True
        try:
            yield
        finally:
            self.on = prev
