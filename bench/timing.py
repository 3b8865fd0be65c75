"""Timing: warm-up, calibration of calls per sample, interleaved samples, stats.

A *sample* is ``calls`` back-to-back calls timed together (garbage collection
off, as in ``timeit``); its per-call time is the sample time / ``calls``.
``calls`` is chosen so a sample lasts at least ``Plan.sample_s``.  Samples of the
systems of one workload are interleaved round-robin (the order rotates every
round), so drift in machine speed hits every system alike.

Example:
    >>> plan = Plan(sample_s=0.001, rounds=3, warmup_s=0.0, cell_budget_s=1.0, long_call_s=1.0)
    >>> calls_per_sample(3e-4, plan)
    4
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Plan:
    """How long and how often to time."""

    sample_s: float        # minimum duration of one sample
    rounds: int            # samples per system, at most
    warmup_s: float        # warm-up time after the first call
    cell_budget_s: float   # rounds are cut (to MIN_ROUNDS) for calls slower than this allows
    long_call_s: float     # a first call this long is warm-up enough (see warm_up)

    @staticmethod
    def for_mode(quick: bool) -> "Plan":
        if quick:
            return Plan(sample_s=0.002, rounds=3, warmup_s=0.002, cell_budget_s=0.05,
                        long_call_s=0.5)
        return Plan(sample_s=0.2, rounds=7, warmup_s=0.2, cell_budget_s=8.0, long_call_s=1.0)


MIN_ROUNDS = 3


def time_calls(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call over ``calls`` consecutive calls (gc disabled)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) / calls
    finally:
        if enabled:
            gc.enable()


def warm_up(fn: Callable[[], object], first_call_s: float, plan: Plan) -> tuple[float, bool]:
    """Warm ``fn`` up (it was called once); return (time per call, provisional).

    Usually: calls for about ``plan.warmup_s``, at least one, and the best time.
    After a first call of ``plan.long_call_s`` or more nothing is called and the
    estimate is *provisional*: the first sample then runs one call and is kept
    only if it lasts a full sample; otherwise it was the warm-up (see
    :func:`interleave`).  That spares a whole extra call on slow workloads.
    """
    if first_call_s >= plan.long_call_s:
        return first_call_s, True
    best = time_calls(fn, 1)
    spent = best
    while spent < plan.warmup_s:
        t = time_calls(fn, 1)
        best, spent = min(best, t), spent + t
    return best, False


def calls_per_sample(per_call_s: float, plan: Plan) -> int:
    return max(1, math.ceil(plan.sample_s / max(per_call_s, 1e-9)))


def rounds_for(per_call_s: float, calls: int, plan: Plan) -> int:
    """As many rounds as the cell budget allows, between MIN_ROUNDS and plan.rounds."""
    fit = int(plan.cell_budget_s / max(per_call_s * calls, 1e-9))
    return max(MIN_ROUNDS, min(plan.rounds, fit))


def interleave(cells: dict[str, "Timed"], before: dict[str, Callable[[], None]],
               plan: Plan) -> None:
    """Run every cell's samples round-robin; the start rotates each round."""
    names = list(cells)
    r = 0
    while any(cells[n].pending for n in names):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            cell = cells[name]
            if not cell.pending:
                continue
            try:
                before[name]()
                _sample(cell, plan)
            except Exception as exc:
                cell.error = f"{type(exc).__name__}: {exc}"
        r += 1


def _sample(cell: "Timed", plan: Plan) -> None:
    t = time_calls(cell.fn, cell.calls)
    if cell.provisional:
        cell.provisional = False
        if t * cell.calls < plan.sample_s:      # too short: it was the warm-up
            cell.calls = calls_per_sample(t, plan)
            cell.rounds = rounds_for(t, cell.calls, plan)
            return
    cell.samples.append(t)


@dataclass
class Timed:
    """A callable being timed and its samples (seconds per call)."""

    fn: Callable[[], object]
    calls: int
    rounds: int
    provisional: bool = False
    samples: list[float] = field(default_factory=list)
    error: str = ""

    @property
    def pending(self) -> bool:
        return len(self.samples) < self.rounds and not self.error


def summary(samples: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(samples), "min_s": min(samples),
            "max_s": max(samples)}
