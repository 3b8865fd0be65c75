"""Where a compile spends its time, and a progress line while a long one runs.

:class:`StageClock` times the stages of one compile (trace, autodiff, rewrite, fuse,
then the backend's plan, lower, llvm-opt, machine-code); the times land in
``Lowered.stats["times"]`` and in one INFO record of the ``symgrad.compile`` logger.
While a compile runs for more than :data:`PROGRESS_AFTER` seconds and stderr is a
terminal, a line on stderr shows the stage and the time so far (``SYMGRAD_PROGRESS=0``
turns it off).

>>> clock = StageClock("f")
>>> with clock.stage("trace"):
...     pass
>>> list(clock.times)
['trace']
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time

__all__ = ["StageClock", "PROGRESS_AFTER"]

log = logging.getLogger("symgrad.compile")

PROGRESS_AFTER = 2.0      # seconds before a compile shows a progress line
_TICK = 0.5


class StageClock:
    """Stage times of one compile; :meth:`enter` is also the backend's stage callback."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.times: dict[str, float] = {}
        self.current: str | None = None
        self._since = self._start = time.perf_counter()
        self._ticker: threading.Thread | None = None
        self._done = threading.Event()
        self._shown = False

    def enter(self, name: str | None) -> None:
        """End the current stage (if any) and start ``name`` (None: stop timing)."""
        now = time.perf_counter()
        if self.current is not None:
            self.times[self.current] = self.times.get(self.current, 0.0) + now - self._since
        self.current, self._since = name, now

    @contextlib.contextmanager
    def stage(self, name: str):
        outer = self.current
        self.enter(name)
        try:
            yield
        finally:
            self.enter(outer)

    @property
    def total(self) -> float:
        return time.perf_counter() - self._start

    # ---- progress ----------------------------------------------------------------------
    def __enter__(self) -> "StageClock":
        if _wants_progress():
            self._ticker = threading.Thread(target=self._tick, name="symgrad-progress",
                                            daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self.enter(None)
        self._done.set()
        if self._ticker is not None:
            self._ticker.join()
        if log.isEnabledFor(logging.INFO):
            parts = ", ".join(f"{k} {v:.3f} s" for k, v in self.times.items())
            log.info("compiled %s in %.3f s (%s)", self.what, self.total, parts)

    def _tick(self) -> None:
        if self._done.wait(PROGRESS_AFTER):
            return
        while True:
            line = f"symgrad: compiling {self.what}: {self.current or '...'} ({self.total:.1f} s)"
            sys.stderr.write("\r" + line[:100].ljust(100))
            sys.stderr.flush()
            self._shown = True
            if self._done.wait(_TICK):
                break
        sys.stderr.write(f"\rsymgrad: compiled {self.what} in {self.total:.1f} s".ljust(101) + "\n")
        sys.stderr.flush()


def _wants_progress() -> bool:
    if os.environ.get("SYMGRAD_PROGRESS", "1").lower() in ("0", "false", "no", "off"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
