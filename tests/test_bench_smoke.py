"""Smoke tests of the benchmark harness (``python -m bench``), owned by ``bench/``.

They run the real command on the tiny ``seed`` workload with whatever systems are
importable here, and once more with jax and casadi made unimportable, to prove a
missing peer is skipped with one line instead of failing.  Timing numbers are not
checked, only that a table and a well-formed JSON come out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs the bench CLI with some modules blocked (``sys.modules[name] = None``
# makes ``import name`` raise ImportError), as if they were not installed.
BLOCKED_MAIN = (
    "import sys\n"
    "for m in sys.argv[1].split(','):\n"
    "    sys.modules[m] = None\n"
    "from bench.cli import main\n"
    "raise SystemExit(main(sys.argv[2:]))\n"
)


def _run(args: list[str], blocked: str = "") -> subprocess.CompletedProcess[str]:
    cmd = ([sys.executable, "-c", BLOCKED_MAIN, blocked] if blocked
           else [sys.executable, "-m", "bench"])
    return subprocess.run(cmd + args, cwd=ROOT, capture_output=True, text=True, timeout=150)


def _load(path: Path) -> dict:
    data = json.loads(path.read_text())
    assert [w["name"] for w in data["workloads"]] == ["seed-f64"]
    return data


def test_quick_seed_produces_table_and_json(tmp_path: Path) -> None:
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    proc = _run(["--quick", "--only", "seed", "--json", str(out_json), "--plot", str(out_png)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert any(line.startswith("limits: memory copy") for line in lines)
    assert "== seed-f64" in proc.stdout
    header = next(line for line in lines if line.startswith("system "))
    for column in ("threads", "median/call", "min – max", "first call", "/best peer", "check"):
        assert column in header
    row = next(line for line in lines if line.startswith("numpy-hand "))
    assert "ok (err" in row
    assert "== summary" in proc.stdout
    cells = {c["system"]: c for c in _load(out_json)["workloads"][0]["cells"]}
    assert cells["numpy-hand"]["status"] == "ok"
    assert cells["numpy-hand"]["median_s"] > 0
    assert cells["numpy-hand"]["first_call_s"] > 0
    assert cells["torch-eager-1t"]["status"] == "ok"
    assert out_png.exists() or "skip plot: matplotlib" in proc.stdout


def test_missing_peers_are_skipped_with_one_line(tmp_path: Path) -> None:
    out_json = tmp_path / "r.json"
    proc = _run(["--quick", "--only", "seed", "--systems", "jax,casadi,numpy",
                 "--json", str(out_json), "--no-plot"], blocked="jax,casadi")
    assert proc.returncode == 0, proc.stderr[-3000:]
    skips = [line for line in proc.stdout.splitlines() if line.startswith("skip ")]
    assert [s.split(":")[0] for s in skips] == [
        "skip jax-jit", "skip casadi-sx", "skip casadi-sx-jit", "skip casadi-mx",
        "skip casadi-mx-jit"]
    assert all("not importable" in s for s in skips)
    data = _load(out_json)
    assert {s["system"] for s in data["skipped"]} >= {"jax-jit", "casadi-mx"}
    cells = data["workloads"][0]["cells"]
    assert [c["system"] for c in cells] == ["numpy-hand", "numpy-hand-all"]
    assert [c["status"] for c in cells] == ["ok", "n/a"]    # seed has no matrix products


def test_report_shows_symgrad_ratios() -> None:
    """The per-workload table and summary render symgrad/peer ratios."""
    from bench import report
    from bench.results import Cell, Run, WorkloadResult

    w = WorkloadResult("seed-f64", "seed", "float64", {}, "d", 1e-9, 1.0)
    w.cells = [
        Cell("seed-f64", "symgrad-llvm", "1", True, median_s=1e-6, min_s=1e-6, max_s=2e-6,
             first_call_s=0.3, max_err=0.0),
        Cell("seed-f64", "numpy-hand", "1", False, median_s=4e-6, min_s=4e-6, max_s=5e-6,
             first_call_s=1e-4, max_err=0.0),
        Cell("seed-f64", "jax-jit", "2", False, median_s=1e-5, min_s=1e-5, max_s=1e-5,
             first_call_s=0.1, max_err=0.0),
        Cell("seed-f64", "casadi-sx", "1", False, status="mismatch", max_err=0.5,
             err_where="x"),
    ]
    text = report.render(Run(meta={}, workloads=[w]))
    assert "symgrad-llvm /" in text
    assert "0.25x" in text and "0.1x" in text
    assert "MISMATCH max err 5.00e-01 (x)" in text
    summary = text.split("== summary")[1]
    assert "numpy-hand" in summary and "0.25x" in summary


def test_compile_bench_runs_in_fresh_processes(tmp_path: Path) -> None:
    out = tmp_path / "compile.json"
    r = _run(["compile", "--programs", "chain,rnn", "--systems", "symgrad", "--sizes", "3,6",
              "--no-plot", "--json", str(out)])
    assert r.returncode == 0, r.stderr
    assert "log-log slope: symgrad" in r.stdout
    data = json.loads(out.read_text())
    rows = data["programs"]["chain"]["rows"]
    assert [row["n"] for row in rows] == [3, 6]
    assert all(row["cells"]["symgrad"]["seconds"] > 0 for row in rows)


def test_compile_bench_dynamic_program(tmp_path: Path) -> None:
    """``dynamic``: one process per system calls the gradient at every batch size; the
    answers of symgrad and jax.jit agree size by size (the table says ok)."""
    pytest.importorskip("jax")
    out = tmp_path / "compile.json"
    r = _run(["compile", "--programs", "dynamic", "--systems", "symgrad,jax", "--sizes",
              "5,6", "--no-plot", "--json", str(out)])
    assert r.returncode == 0, r.stderr
    assert "total compile ratio: symgrad / jax" in r.stdout
    data = json.loads(out.read_text())["programs"]["dynamic"]
    assert data["batches"] == [5, 6] and data["agree"] is True
    cell = data["cells"]["symgrad"]
    assert cell["seconds"] > 0 and cell["steady_us"] > 0 and len(cell["per_size"]) == 2


def test_compile_bench_slope() -> None:
    from bench.compile import slope
    assert abs(slope([(10, 2.0), (100, 200.0)]) - 2.0) < 1e-12
    assert slope([(10, 1.0)]) is None


@pytest.mark.parametrize("workload,systems", [
    ("mlp-adam", ("symgrad-eager", "symgrad-compiled", "symgrad-compile-model",
                  "torch-eager-1t")),
    ("cnn-sgd", ("symgrad-eager", "symgrad-compile-model", "torch-eager-1t"))])
def test_train_bench_runs_and_losses_agree(workload, systems) -> None:
    r = _run(["train", "--steps", "3", "--repeats", "1", "--workloads", workload, "--systems",
              ",".join(systems)])
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith(systems)]
    assert len(rows) == len(systems)
    losses = [float(row[-1]) for row in rows]
    for loss in losses[:-1]:                   # same data, same updates as torch's
        assert abs(loss - losses[-1]) < 1e-4 * abs(losses[-1])


def test_eager_bench_table_and_json(tmp_path: Path) -> None:
    out = tmp_path / "eager.json"
    r = _run(["eager", "--size", "small", "--ops", "add,softmax,cross_entropy", "--modes",
              "no_grad,backward", "--sample", "0.0005", "--rounds", "2", "--json", str(out)])
    assert r.returncode == 0, r.stderr
    assert "geomean" in r.stdout and "seed step" in r.stdout and "DIFFERS" not in r.stdout
    data = json.loads(out.read_text())
    ops = data["ops"]["small"]
    assert set(ops) == {"add", "softmax", "cross_entropy"}
    assert all(o["agree"] and o["backward"]["symgrad"] > 0 for o in ops.values())
    assert set(data["steps"]) == {"seed step", "mlp step"}


@pytest.mark.parametrize("family", ["matmul-tanh", "attention", "rnn"])
@pytest.mark.parametrize("system", ["numpy-hand", "jax-jit"])
def test_hand_written_formulas_match_torch(family: str, system: str) -> None:
    """The formulas numpy by hand and JAX write themselves (products, causal attention,
    an RNN) agree with the torch float64 reference at the quick sizes, both dtypes."""
    from dataclasses import replace

    from bench import check
    from bench.systems import all_systems
    from bench.workloads import all_workloads, reference
    s = next(s for s in all_systems() if s.name == system)
    ok, why = s.available()
    if not ok:
        pytest.skip(why)
    for w in (w for w in all_workloads(quick=True) if w.family == family):
        for dtype in ("float32", "float64"):
            wd = replace(w, dtype=dtype, _cache={})
            value, grads = s.to_numpy(s.build(wd)())
            ref_value, ref_grads = reference(wd)
            res = check.check(value, grads, ref_value, ref_grads, dtype, wd.params)
            assert res.ok, (wd.name, res.describe())
