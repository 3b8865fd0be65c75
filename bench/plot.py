"""PNG bar chart (log scale) of every timed system's median relative to the best peer.

One group of bars per workload, one bar per system; 1 (the best peer) is drawn
as a line, symgrad systems are hatched.  Uses matplotlib's Agg backend (no
display).  Returns the reason when matplotlib is missing instead of raising.
"""

from __future__ import annotations

from pathlib import Path

from bench.results import Run


def plot(run: Run, path: Path) -> str | None:
    """Write the chart to ``path``; return None, or why nothing was written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        return f"matplotlib not importable ({type(exc).__name__}: {exc})"
    series = _series(run)
    if not series:
        return "no timed results to plot"
    fig, ax = plt.subplots(figsize=(max(8.0, 1.3 * len(run.workloads)), 5.5))
    _bars(ax, run, series)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def _series(run: Run) -> dict[str, list[float | None]]:
    """system -> ratio to best peer per workload (None when not timed)."""
    systems: dict[str, bool] = {}
    for w in run.workloads:
        for c in w.cells:
            if c.timed:
                systems.setdefault(c.system, c.is_symgrad)
    out = {}
    for name in systems:
        cells = [{c.system: c for c in w.cells}.get(name) for w in run.workloads]
        out[name] = [w.ratio_to_best_peer(c) if c else None
                     for w, c in zip(run.workloads, cells)]
    return out


def matplotlib_colors(n: int) -> list[object]:
    """``n`` distinct colours (tab10 when it suffices, else tab20)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _bars(ax: object, run: Run, series: dict[str, list[float | None]]) -> None:
    symgrad = {c.system for w in run.workloads for c in w.cells if c.is_symgrad}
    n = len(series)
    width = 0.8 / n
    colors = matplotlib_colors(n)
    for i, (name, ratios) in enumerate(series.items()):
        xs = [j + (i - (n - 1) / 2) * width for j, r in enumerate(ratios) if r]
        ys = [r for r in ratios if r]
        ax.bar(xs, ys, width, label=name, hatch="//" if name in symgrad else None,
               color=colors[i], edgecolor="black", linewidth=0.3)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(run.workloads)))
    ax.set_xticklabels([w.name for w in run.workloads], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("median time / best peer's (log; lower is better)")
    ax.set_title("value + gradient per call, relative to the fastest peer")
    ax.legend(fontsize=7, ncol=2)
