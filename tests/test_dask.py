"""symgrad.dask on a distributed LocalCluster (loopback, worker processes): the chunked
value and gradient equals the single-process result and torch's; compiled functions as
plain Dask tasks (submit, map_blocks, delayed); dataframes; a worker killed mid-run."""
from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest
import torch

import symgrad as sg
import symgrad.dask as sgd

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None,
                                       local_directory=str(tmp_path_factory.mktemp("dask")))
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def nll(params, X, y):
    """Logistic regression's negative log-likelihood: a sum over rows."""
    z = X @ params["w"] + params["b"]
    return (sg.nn.functional.softplus(z) - y * z).sum()


RNG = np.random.default_rng(0)
XN = RNG.normal(size=(1000, 5))
YN = (XN @ np.array([1.0, -2.0, 0.5, 0.0, 3.0]) + RNG.normal(size=1000) > 0).astype(np.float64)
P = {"w": RNG.normal(size=5) * 0.1, "b": np.array(0.2)}


def _torch_reference():
    w = torch.tensor(P["w"], requires_grad=True)
    b = torch.tensor(P["b"], requires_grad=True)
    z = torch.tensor(XN) @ w + b
    v = (torch.nn.functional.softplus(z) - torch.tensor(YN) * z).sum()
    v.backward()
    return float(v.detach()), {"w": w.grad.numpy(), "b": b.grad.numpy()}


def _check(value, grads):
    want_v, want_g = _torch_reference()
    np.testing.assert_allclose(value, want_v, rtol=1e-12)
    for k in P:
        np.testing.assert_allclose(grads[k], want_g[k], rtol=1e-10, atol=1e-12)


def test_chunked_value_and_grad_equals_one_process_and_torch(client):
    X = da.from_array(XN, chunks=(96, 5))
    y = da.from_array(YN, chunks=250)                   # other chunks: aligned to X's
    value, grads = sgd.value_and_grad(nll)(P, X, y)
    _check(value, grads)
    one_v, one_g = sg.value_and_grad(nll)(P, XN, YN)
    np.testing.assert_allclose(value, one_v, rtol=1e-12)


def test_dataframes(client):
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd
    frame = pd.DataFrame(XN, columns=list("abcde"))
    X = dd.from_pandas(frame, npartitions=7)
    y = dd.from_pandas(pd.Series(YN), npartitions=7)
    value, grads = sgd.value_and_grad(nll)(P, X, y)
    _check(value, grads)


def test_compiled_functions_are_plain_tasks(client):
    f = sg.compile(lambda x: sg.tanh(x) * 2)
    np.testing.assert_allclose(client.submit(f, XN).result(), np.tanh(XN) * 2, rtol=1e-15)
    X = da.from_array(XN, chunks=(100, 5))
    np.testing.assert_allclose(da.map_blocks(f, X).compute(), np.tanh(XN) * 2, rtol=1e-15)
    g = sg.grad(lambda x: (x ** 3).sum())
    np.testing.assert_allclose(dask.delayed(g)(XN).compute(), 3 * XN ** 2, rtol=1e-15)


def test_a_worker_killed_mid_run_does_not_change_the_answer(client):
    X = da.from_array(XN, chunks=(20, 5))
    y = da.from_array(YN, chunks=20)
    vg = sgd.value_and_grad(nll)
    victim = sorted(client.scheduler_info()["workers"])[0]
    pid = client.run(os.getpid, workers=[victim])[victim]
    killer = threading.Timer(0.2, os.kill, (pid, signal.SIGKILL))
    with dask.config.set({"distributed.scheduler.allowed-failures": 5}):
        killer.start()                 # while the first chunks compile and run
        value, grads = vg(P, X, y)
        killer.join()
    assert victim not in client.scheduler_info()["workers"] or \
        client.run(os.getpid, workers=[victim])[victim] != pid
    _check(value, grads)


def test_no_dask_argument_is_an_error():
    with pytest.raises(TypeError, match="no argument is a dask array"):
        sgd.value_and_grad(nll)(P, XN, YN)
