"""The command line and the runnable examples."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args, **kw):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, **kw)


@pytest.fixture
def fn_file(tmp_path):
    p = tmp_path / "fn.py"
    p.write_text("def loss(x, w):\n    return ((x @ w).tanh() ** 2).sum()\n")
    return str(p)


@pytest.mark.parametrize("stage", ["graph", "graph-raw", "formulas", "dot", "symbolic"])
def test_inspect_stages(fn_file, stage):
    r = _run("-m", "symgrad", "inspect", f"{fn_file}:loss", "--arg", "f64[3,4]", "--arg",
             "f64[4]", "--transform", "grad", "--stage", stage)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()


@pytest.mark.parametrize("stage", ["llvm", "llvm-opt", "asm"])
def test_inspect_native_stages(fn_file, stage):
    r = _run("-m", "symgrad", "inspect", f"{fn_file}:loss", "--arg", "f32[3,4]", "--arg",
             "f32[4]", "--transform", "value_and_grad", "--backend", "llvm", "--stage", stage)
    assert r.returncode == 0, r.stderr
    assert ("define" in r.stdout) if stage != "asm" else ("ret" in r.stdout)


def test_inspect_another_machines_assembly(fn_file):
    r = _run("-m", "symgrad", "inspect", f"{fn_file}:loss", "--arg", "f64[8,16]", "--arg",
             "f64[16]", "--transform", "value_and_grad", "--stage", "asm",
             "--target", "aarch64-unknown-linux-gnu:neoverse-n1")
    assert r.returncode == 0, r.stderr
    assert "fmul" in r.stdout or "fmla" in r.stdout or "fmadd" in r.stdout
    assert "xmm" not in r.stdout and "%rsp" not in r.stdout       # AArch64, not x86


def test_inspect_unknown_target_is_a_clear_error(fn_file):
    r = _run("-m", "symgrad", "inspect", f"{fn_file}:loss", "--arg", "f64[3]", "--arg",
             "f64[3]", "--stage", "asm", "--target", "x86_64-unknown-linux-gnu:no-such-cpu")
    assert r.returncode != 0 and "does not know CPU 'no-such-cpu'" in r.stderr


def test_inspect_bad_arg(fn_file):
    r = _run("-m", "symgrad", "inspect", f"{fn_file}:loss", "--arg", "q64[3]")
    assert r.returncode == 2 and "unknown dtype" in r.stderr


@pytest.mark.parametrize("example", ["quickstart.py", "compile_inspect.py", "scipy_optimize.py",
                                     "train_mlp.py"])
def test_examples_run(example):
    r = _run(os.path.join("examples", example))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()


def test_train_classifier_example_learns_the_digits(tmp_path):
    pytest.importorskip("sklearn")
    plot = tmp_path / "loss.png"
    r = _run(os.path.join("examples", "train_classifier.py"), "--epochs", "8", "--plot",
             str(plot))
    assert r.returncode == 0, r.stderr
    accuracy = float(r.stdout.split("test accuracy")[1].split()[0])
    assert accuracy > 0.9                           # (8 epochs; 30 reach ~0.98)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dask_example_recovers_the_weights():
    pytest.importorskip("distributed")
    r = _run(os.path.join("examples", "dask_fit.py"), "--rows", "200000", "--chunk", "20000")
    assert r.returncode == 0, r.stderr
    assert "converged: True" in r.stdout
    assert float(r.stdout.split("max |w - true w| =")[1]) < 0.15
