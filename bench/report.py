"""Text report: one table per workload, then a summary of symgrad vs the peers.

Per-workload columns:
  system, threads, median per call (value + gradient), min-max over samples,
  first call (build + first call: tracing/compilation), ``/best peer`` (this
  row's median / the fastest peer's median), one ``<symgrad system> /`` column
  per symgrad system that ran (its median / this row's median: < 1 means
  symgrad is faster), and the check result.

Example:
    >>> fmt_time(0.00123)
    '1.23 ms'
"""

from __future__ import annotations

from bench.results import Cell, Run, WorkloadResult


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale or unit == "ns":
            v = s / scale
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return "-"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "-"
    return f"{r:.3g}x" if r < 100 else f"{r:.0f}x"


def _status(c: Cell) -> str:
    if c.status == "ok":
        return f"ok (err {c.max_err:.0e})"
    if c.status == "mismatch":
        return f"MISMATCH max err {c.max_err:.2e} ({c.err_where})"
    return f"{c.status}: {c.message}"


def _row(w: WorkloadResult, c: Cell, sg: list[Cell]) -> list[str]:
    if not c.timed:
        blanks = [""] * (1 + len(sg))
        return [c.system, c.threads, "-", "", fmt_time(c.first_call_s), *blanks, _status(c)]
    spread = f"{fmt_time(c.min_s)} – {fmt_time(c.max_s)}"
    mine = [fmt_ratio(s.median_s / c.median_s) if s is not c else "" for s in sg]
    return [c.system, c.threads, fmt_time(c.median_s), spread, fmt_time(c.first_call_s),
            fmt_ratio(w.ratio_to_best_peer(c)), *mine, _status(c)]


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """First column left-aligned, middle ones right-aligned, last one free text."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    widths[-1] = min(widths[-1], 24)

    def line(cells: list[str]) -> str:
        middle = [c.rjust(wd) for c, wd in zip(cells[1:-1], widths[1:-1])]
        return "  ".join([cells[0].ljust(widths[0]), *middle, cells[-1]]).rstrip()

    return [line(headers), "  ".join("-" * wd for wd in widths).rstrip(), *map(line, rows)]


def workload_table(w: WorkloadResult) -> list[str]:
    sg = w.symgrad()
    headers = ["system", "threads", "median/call", "min – max", "first call", "/best peer",
               *[f"{s.system} /" for s in sg], "check"]
    best = w.best_peer()
    title = f"== {w.name}: {w.description}"
    floor = f"   memory floor {fmt_time(w.memory_floor_s)} (inputs + grads at copy bandwidth)"
    peer = f"; best peer: {best.system}" if best else "; no peer timed"
    return [title, floor + peer, *table(headers, [_row(w, c, sg) for c in w.cells]), ""]


def summary_table(run: Run) -> list[str]:
    """Per workload: best peer, and each symgrad system's ratio to it."""
    systems = sorted({c.system for w in run.workloads for c in w.cells if c.is_symgrad})
    headers = ["workload", "best peer", "time", *[f"{s} /best" for s in systems]]
    rows = []
    for w in run.workloads:
        best = w.best_peer()
        by_name = {c.system: c for c in w.cells}
        cols = [_summary_cell(w, by_name.get(s)) for s in systems]
        rows.append([w.name, best.system if best else "-",
                     fmt_time(best.median_s if best else None), *cols])
    lines = ["== summary: symgrad median / best peer median (< 1: symgrad faster)"]
    if not any(w.symgrad() for w in run.workloads):
        lines.append("   (no symgrad system was timed in this run)")
    return [*lines, *table(headers + [""], [r + [""] for r in rows]), ""]


def _summary_cell(w: WorkloadResult, c: Cell | None) -> str:
    if c is None:
        return "-"
    if not c.timed:
        return c.status
    return fmt_ratio(w.ratio_to_best_peer(c))


def render(run: Run) -> str:
    lines: list[str] = []
    for w in run.workloads:
        lines += workload_table(w)
    lines += summary_table(run)
    return "\n".join(lines)
