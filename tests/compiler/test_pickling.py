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
