"""Result records of a run and their JSON form.

A :class:`Cell` is one (workload, system) outcome: ``ok`` (checked and timed),
``mismatch`` (checked, wrong, not timed), ``n/a`` (system does not support the
workload) or ``error`` (it raised).  Ratios are derived from cells, never
stored separately from them.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Cell:
    workload: str
    system: str
    threads: str
    is_symgrad: bool
    status: str = "ok"
    message: str = ""
    first_call_s: float | None = None
    max_err: float | None = None
    err_where: str = ""
    median_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    calls_per_sample: int | None = None
    samples: list[float] = field(default_factory=list)

    @property
    def timed(self) -> bool:
        return self.status == "ok" and self.median_s is not None


@dataclass
class WorkloadResult:
    name: str
    family: str
    dtype: str
    sizes: dict[str, int]
    description: str
    memory_floor_s: float
    reference_value: float
    cells: list[Cell] = field(default_factory=list)

    def peers(self) -> list[Cell]:
        return [c for c in self.cells if c.timed and not c.is_symgrad]

    def symgrad(self) -> list[Cell]:
        return [c for c in self.cells if c.timed and c.is_symgrad]

    def best_peer(self) -> Cell | None:
        peers = self.peers()
        return min(peers, key=lambda c: c.median_s) if peers else None

    def ratio_to_best_peer(self, cell: Cell) -> float | None:
        best = self.best_peer()
        if best is None or not cell.timed:
            return None
        return cell.median_s / best.median_s


@dataclass
class Run:
    meta: dict[str, Any]
    skipped: list[dict[str, str]] = field(default_factory=list)
    workloads: list[WorkloadResult] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for w, wj in zip(self.workloads, out["workloads"]):
            best = w.best_peer()
            wj["best_peer"] = best.system if best else None
            for c, cj in zip(w.cells, wj["cells"]):
                cj["ratio_to_best_peer"] = w.ratio_to_best_peer(c)
                cj["ratio_to_peers"] = ratios_to_peers(w, c) if c.is_symgrad else {}
        return out

    def write_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(_finite(self.to_json()), indent=1, default=_jsonable,
                          allow_nan=False)
        path.write_text(text + "\n")


def ratios_to_peers(w: WorkloadResult, cell: Cell) -> dict[str, float]:
    """``cell`` median / each timed peer's median."""
    if not cell.timed:
        return {}
    return {p.system: cell.median_s / p.median_s for p in w.peers()}


def _finite(x: Any) -> Any:
    """Strict JSON: non-finite floats become the strings "inf", "-inf", "nan"."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def _jsonable(x: Any) -> Any:
    if hasattr(x, "item"):
        return x.item()
    return str(x)
