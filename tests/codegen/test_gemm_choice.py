"""Which GEMM large products run on (:mod:`codegen.gemm_choice`): forced by
``SYMGRAD_GEMM`` or chosen from figures measured for the target.

No test asserts a timing or which path wins on the host: expectations come from the
figures measured for the target under test (or from synthetic figures), and every
result is checked against numpy in float64.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symgrad
from codegen import cache, gemm_choice, target
from symgrad.config import settings
from symgrad.graph.dtypes import float64
from symgrad.graph.node import make_node
from symgrad.graph.program import Program

from machines import foreign_machine, machine  # noqa: F401  (fixtures)

TOL = {np.float64: 1e-12, np.float32: 1e-5}     # worst error relative to the largest element


def _close(got, want, dtype) -> None:
    assert got.dtype == dtype and got.shape == want.shape
    assert np.abs(got - want).max() <= TOL[dtype] * np.abs(want).max()


def _text(f, *args) -> str:
    return f.lower(*args).compile().as_text("llvm")


def _product(dtype, m=96, k=200, n=160):
    rng = np.random.default_rng(m + k + n)
    return rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)


def test_choose_takes_the_nearest_size_and_needs_a_clear_win():
    figs = {"float32": {"256": [100.0, 150.0], "768": [100.0, 95.0]}}
    assert gemm_choice.choose(figs, "float32", 200 ** 3)            # nearest 256: BLAS 1.5x
    assert not gemm_choice.choose(figs, "float32", 1000 ** 3)       # nearest 768: IR faster
    tie = {"float32": {"256": [100.0, 100.0 * (1 + gemm_choice.MARGIN) - 1]}}
    assert not gemm_choice.choose(tie, "float32", 256 ** 3)         # within the margin
    assert not gemm_choice.choose(figs, "float64", 256 ** 3)        # no figures: IR


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("how", ["ir", "blas"])
def test_forced_mode_decides_the_path(how, dtype):
    x, w = _product(dtype)
    with gemm_choice.forced(how):
        f = symgrad.compile(lambda x, w: (x @ w, x.T @ (x @ w)), backend="llvm")
        text = _text(f, x, w)
        got = f(x, w)
    name = "symgrad_blas_dgemm" if dtype == np.float64 else "symgrad_blas_sgemm"
    assert (".gemm." in text) == (how == "ir")
    assert name in text or how == "ir"      # (the IR kernels call BLAS only as a fallback)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    _close(got[0], x64 @ w64, dtype)
    _close(got[1], x64.T @ (x64 @ w64), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_auto_follows_the_figures_measured_for_the_host(dtype):
    """The host's figures are measured once (positive rates for every size and dtype)
    and the compiled product takes the path they favour."""
    t = target.host()
    figs = gemm_choice.figures(t)
    assert set(figs) == {"float32", "float64"}
    for per_size in figs.values():
        assert sorted(map(int, per_size)) == sorted(gemm_choice.SIZES)
        assert all(rate > 0 for rates in per_size.values() for rate in rates)
    assert gemm_choice.figures(t) is figs
    x, w = _product(dtype)
    with target.use(t), gemm_choice.forced("auto"):
        blas = gemm_choice.prefers_blas(np.dtype(dtype).name, x.shape[0] * x.shape[1] * w.shape[1])
        f = symgrad.compile(lambda x, w: x @ w, backend="llvm")
        text = _text(f, x, w)
        got = f(x, w)
    assert (".gemm." in text) == (not blas)
    _close(got, x.astype(np.float64) @ w.astype(np.float64), dtype)


def test_a_machine_this_process_cannot_run_uses_the_ir_kernels(foreign_machine):
    assert gemm_choice.figures(foreign_machine) is None
    with gemm_choice.forced("auto"):
        assert not gemm_choice.prefers_blas("float32", 1 << 30)
        assert gemm_choice.describe() == "gemm=auto:ir"


def test_the_mode_is_part_of_the_cache_key():
    a = make_node("input", (), (("name", "a"),), (64, 64), float64)
    b = make_node("input", (), (("name", "b"),), (64, 64), float64)
    program = Program([a, b], ["a", "b"], [make_node("matmul", (a, b), (), (64, 64), float64)], ["c"])
    keys = set()
    for how in ("ir", "blas"):
        with gemm_choice.forced(how):
            keys.add(cache.cache_key(program))
    assert len(keys) == 2


def test_an_unknown_mode_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(settings, "gemm", "fastest")
    with pytest.raises(ValueError, match="SYMGRAD_GEMM='fastest': expected one of auto, ir, blas"):
        gemm_choice.mode()
    with pytest.raises(ValueError, match="expected one of"):
        with gemm_choice.forced("mkl"):
            pass


def test_a_corrupt_entry_is_measured_again(tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "cache_dir", str(tmp_path))
    monkeypatch.setattr(settings, "support_cache", True)
    monkeypatch.setattr(gemm_choice, "_MEASURED", {})
    t = target.host()
    path = gemm_choice._path(t)
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write('{"float32": {"256": "fast"}')
    fake = {dt: {str(s): [1.0, 2.0] for s in gemm_choice.SIZES} for dt in gemm_choice.DTYPES}
    monkeypatch.setattr(gemm_choice, "_measure", lambda t: fake)
    assert gemm_choice.figures(t) == fake
    with open(path) as f:
        assert json.load(f) == fake


CHILD = textwrap.dedent("""
    import sys
    from codegen import gemm_choice, target
    if sys.argv[1] == "again":
        def refuse(t):
            raise AssertionError("measured again")
        gemm_choice._measure = refuse
    print(gemm_choice.describe(target.host()))
""")


def test_the_figures_are_measured_once_per_cache(tmp_path):
    """A second process reads the first one's figures from the support cache."""
    env = {**os.environ, "SYMGRAD_CACHE_DIR": str(tmp_path), "SYMGRAD_GEMM": "auto",
           "SYMGRAD_SUPPORT_CACHE": "1"}
    outs = []
    for run in ("first", "again"):
        out = subprocess.run([sys.executable, "-c", CHILD, run], capture_output=True, text=True,
                             timeout=300, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        outs.append(out.stdout.strip())
    assert outs[0] == outs[1] and outs[0].startswith("gemm=auto:float32/")
