"""Compiled functions travel: pickle and cloudpickle round trips (lambdas and closures
included, before and after the first call), a fresh process, and a process pool mapping
a compiled gradient over data shards -- every result against PyTorch / numpy."""
from __future__ import annotations

import multiprocessing
import pickle
import subprocess
import sys
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import torch

import symgrad as sg

ROOT = Path(__file__).resolve().parents[2]
SCALE = 0.5


def _make():
    w0 = np.array([0.3, -0.2, 0.1])
    return sg.value_and_grad(lambda w, X, y: ((X @ w + w0.sum() * SCALE - y) ** 2).mean())


def _reference(w, X, y):
    wt = torch.tensor(w, requires_grad=True)
    loss = ((torch.tensor(X) @ wt + 0.2 * SCALE - torch.tensor(y)) ** 2).mean()
    loss.backward()
    return float(loss.detach()), wt.grad.numpy()


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=3), rng.normal(size=(n, 3)), rng.normal(size=n)


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
@pytest.mark.parametrize("called_first", [False, True])
def test_round_trip(dumps, called_first):
    f = _make()
    w, X, y = _data()
    if called_first:
        f(w, X, y)
    g = pickle.loads(dumps(f))
    value, grad = g(w, X, y)
    ref_value, ref_grad = _reference(w, X, y)
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12)


def test_a_fresh_process_runs_the_pickle(tmp_path):
    blob = tmp_path / "f.pkl"
    blob.write_bytes(pickle.dumps(_make()))
    w, X, y = _data()
    np.save(tmp_path / "w.npy", w), np.save(tmp_path / "X.npy", X), np.save(tmp_path / "y.npy", y)
    code = (f"import pickle, numpy as np; f = pickle.loads(open({str(blob)!r}, 'rb').read()); "
            f"v, g = f(*(np.load({str(tmp_path)!r} + f'/{{n}}.npy') for n in 'wXy')); "
            "print(repr(float(v))); print(repr(g.tolist()))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    value, grad = r.stdout.split("\n")[:2]
    ref_value, ref_grad = _reference(w, X, y)
    np.testing.assert_allclose(float(value), ref_value, rtol=1e-12)
    np.testing.assert_allclose(eval(grad), ref_grad, rtol=1e-12)


def _shard_grad(args):
    f, w, X, y = args
    _, g = f(w, X, y)
    return g * len(y)


def test_a_process_pool_maps_a_compiled_gradient_over_shards():
    f = _make()
    w, X, y = _data(n=60)
    shards = [(f, w, X[i:i + 20], y[i:i + 20]) for i in range(0, 60, 20)]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        parts = pool.map(_shard_grad, shards)
    _, ref_grad = _reference(w, X, y)
    np.testing.assert_allclose(sum(parts) / 60, ref_grad, rtol=1e-10)


_FRESH = """
import pickle, sys, json, numpy as np
import codegen.backend as backend
f = pickle.loads(sys.stdin.buffer.read())
w, X, y = (np.load(sys.argv[1] + f'/{n}.npy') for n in 'wXy')
v, g = f(w, X, y)
print(json.dumps([float(v), g.tolist(), f.misses, backend.stats["compiled"]]))
"""


def _fresh(tmp_path, blob, **env):
    import os
    w, X, y = _data(seed=3)
    for n, a in zip("wXy", (w, X, y)):
        np.save(tmp_path / f"{n}.npy", a)
    run_env = dict(os.environ, SYMGRAD_DISK_CACHE="0", PYTHONPATH=str(ROOT), **env)
    out = subprocess.run([sys.executable, "-c", _FRESH, str(tmp_path)], input=blob,
                         capture_output=True, check=True, timeout=300, env=run_env)
    value, grad, misses, compiled = __import__("json").loads(out.stdout.decode().splitlines()[-1])
    ref_value, ref_grad = _reference(w, X, y)
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12)
    return misses, compiled


def test_a_pickle_carries_native_code_for_its_machine(tmp_path):
    f = _make()
    f(*_data(seed=3))                       # one signature compiled
    misses, compiled = _fresh(tmp_path, cloudpickle.dumps(f))
    assert (misses, compiled) == (0, 0)     # no trace, no LLVM: the code came with it


def test_a_pickle_for_another_target_compiles_again(tmp_path):
    f = _make()
    f(*_data(seed=3))
    misses, compiled = _fresh(tmp_path, cloudpickle.dumps(f), SYMGRAD_TARGET_CPU=_generic_cpu())
    assert misses == 0 and compiled >= 1    # compiled from the carried program: no trace


def _generic_cpu() -> str:
    from codegen import target
    return "x86-64" if target.current().arch == "x86" else "generic"


_HYBRID_FRESH = """
import pickle, sys, json, numpy as np
import codegen.backend as backend
f = pickle.loads(sys.stdin.buffer.read())
a = np.load(sys.argv[1])
g = f(a)
h = pickle.loads(pickle.dumps(f))           # a copy of the copy carries it on
print(json.dumps([g.tolist(), h(a).tolist(), f.misses + h.misses, backend.stats["compiled"]]))
"""


@pytest.mark.parametrize("cpu", ["host", "generic"])
def test_a_pickle_carries_code_with_numpy_steps(tmp_path, cpu):
    # det's cofactors run through numpy between native segments (a hybrid executable):
    # its schedule comes from the program the pickle carries
    import os
    f = sg.grad(lambda a: sg.linalg.det(a) + (a * a).sum())
    a = np.random.default_rng(4).normal(size=(4, 4))
    f(a)
    assert next(iter(f._cache.values())).exe.interface.hybrid
    np.save(tmp_path / "a.npy", a)
    env = dict(os.environ, SYMGRAD_DISK_CACHE="0", PYTHONPATH=str(ROOT))
    if cpu == "generic":
        env["SYMGRAD_TARGET_CPU"] = _generic_cpu()
    out = subprocess.run([sys.executable, "-c", _HYBRID_FRESH, str(tmp_path / "a.npy")],
                         input=cloudpickle.dumps(f), capture_output=True, timeout=300,
                         env=env)
    assert out.returncode == 0, out.stderr.decode()
    g, g2, misses, compiled = __import__("json").loads(out.stdout.decode().splitlines()[-1])
    at = torch.tensor(a, requires_grad=True)
    (torch.linalg.det(at) + (at * at).sum()).backward()
    np.testing.assert_allclose(g, at.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(g2, at.grad.numpy(), rtol=1e-10)
    assert misses == 0                      # never traced in the new process
    assert compiled == (0 if cpu == "host" else 1)


def test_a_copy_inspects_its_carried_program():
    f = sg.compile(lambda x: (x.sin() * 2).sum())
    f(np.ones(3))
    g = pickle.loads(cloudpickle.dumps(f))
    lowered = next(iter(g._cache.values())).lowered
    text = lowered.as_text()
    assert "came in a pickle" in text and "sin" in text
    assert "define" in lowered.as_text("llvm") or lowered.as_text("llvm")


def test_closed_over_tensors_travel_with_the_code(tmp_path):
    w0 = sg.tensor(np.array([0.3, -0.2, 0.1]))

    def loss(w, X, y):
        return ((X @ w + w0.sum() * SCALE - y) ** 2).mean()
    f = sg.value_and_grad(loss)
    f(*_data(seed=3))
    misses, compiled = _fresh(tmp_path, cloudpickle.dumps(f))
    assert (misses, compiled) == (0, 0)


def test_the_copy_reads_its_own_closed_over_tensors():
    w0 = sg.tensor(np.array([1.0, 2.0]))
    f = sg.compile(lambda x: x * w0)
    f(np.ones(2))
    g = pickle.loads(cloudpickle.dumps(f))
    assert g.misses == 0 and len(g._cache) == 1
    copy_w0 = next(iter(g._cache.values())).closure[0]
    copy_w0.data.mul_(10)                              # the copy's tensor, in place
    np.testing.assert_array_equal(np.asarray(g(np.ones(2))), [10.0, 20.0])
    np.testing.assert_array_equal(np.asarray(f(np.ones(2))), [1.0, 2.0])
    assert g.misses == 0


def test_a_copy_explains_a_new_signature():
    f = sg.compile(lambda x: x * 2)
    f(np.ones(2))
    g = pickle.loads(cloudpickle.dumps(f))
    np.testing.assert_array_equal(np.asarray(g(np.ones(3))), [2.0, 2.0, 2.0])
    assert g.last_miss_reason.startswith("x: shape (2,) → (3,)")


def test_a_large_closed_over_array_travels_once_with_the_code():
    # the array is in the function and (as a constant) in the native code: the program
    # beside it would be a third copy, so it is left out (another CPU traces again)
    big = np.random.default_rng(0).normal(size=200_000)
    f = sg.grad(lambda w: (w * big).sum() ** 2)
    w = np.ones(200_000)
    f(w)
    blob = cloudpickle.dumps(f)
    assert len(blob) < 2.2 * big.nbytes
    g = pickle.loads(blob)
    wt = torch.tensor(w, requires_grad=True)
    ((wt * torch.tensor(big)).sum() ** 2).backward()
    np.testing.assert_allclose(g(w), wt.grad.numpy(), rtol=1e-10)
    # a float array the function reaches is read at each call (as torch.compile reads
    # it): the path it is read by belongs to this process, so the copy traces again
    # (one miss, not a wrong answer) -- carrying that path is open work
    assert g.misses <= 1
    big *= 2                                    # and the copy reads the array it carries
    np.testing.assert_allclose(g(w), wt.grad.numpy(), rtol=1e-10)


_TRANSFORM_FRESH = """
import pickle, sys, json, numpy as np
import codegen.backend as backend
f = pickle.loads(sys.stdin.buffer.read())
x = np.load(sys.argv[1])
print(json.dumps([np.asarray(f(x)).tolist(), f.misses, backend.stats["compiled"]]))
"""


@pytest.mark.parametrize("transform", ["jacobian", "hessian"])
def test_transforms_travel_with_their_code(tmp_path, transform):
    # their fused formulas hold keep(...) (a sympy function of symgrad's): the program
    # beside the code pickles too
    import os
    fn = {"jacobian": lambda x: sg.tanh(x) * x.sum(),
          "hessian": lambda x: (x.sin() * x * 2.0 + 1.0).sum()}[transform]
    f = getattr(sg, transform)(fn)
    x = np.array([0.3, -0.2, 0.5, 1.1])
    f(x)
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, SYMGRAD_DISK_CACHE="0", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", _TRANSFORM_FRESH, str(tmp_path / "x.npy")],
                         input=cloudpickle.dumps(f), capture_output=True, timeout=300,
                         env=env)
    assert out.returncode == 0, out.stderr.decode()
    got, misses, compiled = __import__("json").loads(out.stdout.decode().splitlines()[-1])
    tfn = {"jacobian": lambda x: torch.tanh(x) * x.sum(),
           "hessian": lambda x: (x.sin() * x * 2.0 + 1.0).sum()}[transform]
    want = getattr(torch.autograd.functional, transform)(tfn, torch.tensor(x))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)
    assert (misses, compiled) == (0, 0)


@pytest.mark.parametrize("cpu", ["host", "generic"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_pickle_whose_program_applies_derived_partials(tmp_path, cpu, dtype):
    # the hessian's program applies tanh's derivative primitive (``tanh.d0``, derived on
    # first use): a fresh process that derived nothing yet runs it (numpy steps of a
    # hybrid executable, or compiling the program for another CPU), no KeyError
    import os
    w = np.random.default_rng(0).normal(size=(5, 4)).astype(dtype)
    W = sg.tensor(w)          # (a numpy array would be read per call: the copy traces again)
    f = sg.compile(sg.hessian(lambda v: (sg.tanh(v.reshape(3, 5) @ W) ** 2).sum()))
    x = np.random.default_rng(1).normal(size=15).astype(dtype)
    f(x)
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, SYMGRAD_DISK_CACHE="0", PYTHONPATH=str(ROOT))
    if cpu == "generic":
        env["SYMGRAD_TARGET_CPU"] = _generic_cpu()
    out = subprocess.run([sys.executable, "-c", _TRANSFORM_FRESH, str(tmp_path / "x.npy")],
                         input=cloudpickle.dumps(f), capture_output=True, timeout=300,
                         env=env)
    assert out.returncode == 0, out.stderr.decode()
    got, misses, _ = __import__("json").loads(out.stdout.decode().splitlines()[-1])
    wt = torch.tensor(w)
    want = torch.autograd.functional.hessian(
        lambda v: (torch.tanh(v.reshape(3, 5) @ wt) ** 2).sum(), torch.tensor(x))
    tol = 1e-4 if dtype == "float32" else 1e-10     # (float32: LLVM's vs ATen's tanh)
    np.testing.assert_allclose(got, want.numpy(), rtol=tol, atol=tol)
    assert misses == 0                      # no trace: the carried code or program ran
