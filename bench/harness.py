"""The benchmark driver: workloads x systems -> checked, timed :class:`Run`.

For each workload: compute the torch float64 reference; for each available
system build the callable and time build + first call (first-call latency),
check the outputs (a mismatch is reported and not timed), warm up, calibrate
calls per sample; then time all systems' samples interleaved (``timing``).
Any exception from a system becomes an ``error`` cell, never a crash.

Example:
    >>> from bench.harness import Config, run
    >>> result = run(Config(quick=True, only=["seed"], systems=["numpy"]))  # doctest: +SKIP
"""

from __future__ import annotations

import gc
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bench import check as checking
from bench import machine, report, startup, timing
from bench.plot import plot
from bench.results import Cell, Run, WorkloadResult
from bench.systems import System, Unsupported, all_systems
from bench.systems import select as select_systems
from bench.workloads import Workload, all_workloads, reference
from bench.workloads import select as select_workloads

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Config:
    quick: bool = False
    only: list[str] = field(default_factory=list)
    systems: list[str] = field(default_factory=list)
    json_path: Path = RESULTS / "latest.json"
    plot_path: Path | None = RESULTS / "latest.png"


Print = Callable[[str], None]


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return text if len(text) <= 140 else text[:137] + "..."


def available_systems(wanted: list[str], out: Print) -> tuple[list[System], list[dict]]:
    """Selected systems that can run here; one ``skip`` line for each that cannot."""
    ready, skipped = [], []
    for s in select_systems(all_systems(), wanted):
        try:
            ok, why = s.available()
        except Exception as exc:
            ok, why = False, _short(exc)
        if ok:
            ready.append(s)
        else:
            out(f"skip {s.name}: {why}")
            skipped.append({"system": s.name, "reason": why})
    return ready, skipped


def prepare(system: System, w: Workload, plan: timing.Plan) -> tuple[Cell, timing.Timed | None]:
    """Build, first call, check, warm up and calibrate one cell."""
    cell = Cell(w.name, system.name, system.threads, system.is_symgrad)
    try:
        system.before_sample()
        t0 = time.perf_counter()
        fn = system.build(w)
        outputs = fn()
        cell.first_call_s = time.perf_counter() - t0
        if not _checked(cell, system, outputs, w):
            return cell, None
        system.before_sample()
        per_call, provisional = timing.warm_up(fn, cell.first_call_s, plan)
    except Unsupported as exc:
        cell.status, cell.message = "n/a", str(exc)
        return cell, None
    except Exception as exc:
        cell.status, cell.message = "error", _short(exc)
        return cell, None
    calls = timing.calls_per_sample(per_call, plan)
    rounds = timing.rounds_for(per_call, calls, plan)
    return cell, timing.Timed(fn, calls, rounds, provisional)


def _checked(cell: Cell, system: System, outputs: object, w: Workload) -> bool:
    value, grads = system.to_numpy(outputs)  # type: ignore[arg-type]
    ref_value, ref_grads = reference(w)
    res = checking.check(value, grads, ref_value, ref_grads, w.dtype, w.params)
    cell.max_err, cell.err_where = res.max_err, res.where
    if not res.ok:
        cell.status = "mismatch"
    return res.ok


def run_workload(w: Workload, systems: list[System], plan: timing.Plan,
                 limits: dict[str, float]) -> WorkloadResult:
    ref_value, _ = reference(w)
    result = WorkloadResult(w.name, w.family, w.dtype, w.size, w.describe(),
                            _memory_floor(w, limits), ref_value)
    timed: dict[str, timing.Timed] = {}
    for s in systems:
        cell, t = prepare(s, w, plan)
        _log(f"  [{w.name}] {s.name}: first call {report.fmt_time(cell.first_call_s)}, "
             f"{cell.status} {cell.message}")
        result.cells.append(cell)
        if t is not None:
            timed[s.name] = t
    timing.interleave(timed, {s.name: s.before_sample for s in systems}, plan)
    for cell in result.cells:
        _finish(cell, timed.get(cell.system))
    return result


def _finish(cell: Cell, t: timing.Timed | None) -> None:
    if t is None:
        return
    if t.error:
        cell.status, cell.message = "error", t.error.splitlines()[0][:140]
        return
    cell.samples, cell.calls_per_sample = t.samples, t.calls
    for k, v in timing.summary(t.samples).items():
        setattr(cell, k, v)


def _memory_floor(w: Workload, limits: dict[str, float]) -> float:
    """Time to stream the inputs once and write the gradients at copy bandwidth."""
    a = w.arrays()
    nbytes = sum(x.nbytes for x in a.values()) + sum(a[k].nbytes for k in w.params)
    return nbytes / (limits["copy_GBps"] * 1e9)


def run(cfg: Config, out: Print = print) -> Run:
    """Run the benchmark described by ``cfg``; print the report; write JSON/PNG."""
    start = time.perf_counter()
    env = machine.environment()
    limits = machine.measure_limits(cfg.quick)
    plan = timing.Plan.for_mode(cfg.quick)
    for line in machine.header_lines(env, limits):
        out(line)
    starting = startup.measure(runs=1 if cfg.quick else 5)
    out(startup.line(starting))
    systems, skipped = available_systems(cfg.systems, out)
    out(f"mode: {'quick' if cfg.quick else 'full'}; systems: "
        + ", ".join(f"{s.name} ({s.threads} thr)" for s in systems))
    out("")
    res = Run(meta={"env": env, "limits": limits, "startup": starting, "quick": cfg.quick,
                    "plan": plan.__dict__, "tolerance": checking.TOLERANCE},
              skipped=skipped)
    for w in select_workloads(all_workloads(cfg.quick), cfg.only):
        res.workloads.append(run_workload(w, systems, plan, limits))
        out("\n".join(report.workload_table(res.workloads[-1])))
        w.release()
        gc.collect()
    out("\n".join(report.summary_table(res)))
    res.meta["duration_s"] = time.perf_counter() - start
    _write_outputs(res, cfg, out)
    out(f"total time {res.meta['duration_s']:.1f} s")
    return res


def _write_outputs(res: Run, cfg: Config, out: Print) -> None:
    res.write_json(cfg.json_path)
    out(f"wrote {cfg.json_path}")
    if cfg.plot_path is not None:
        why = plot(res, cfg.plot_path)
        out(f"skip plot: {why}" if why else f"wrote {cfg.plot_path}")
