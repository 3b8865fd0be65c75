"""``python -m bench compile --programs dynamic``: one compiled gradient called with many
batch sizes, symgrad against jax.jit and torch.compile (automatic dynamic shapes).

The program: a 32-64-10 MLP (tanh hidden layer, cross-entropy loss averaged over the
batch), value and gradient with respect to its four parameters, float64.  In one fresh
process per system (disk caches off, as :mod:`bench.compile`), the compiled function is
called once at each of the batch sizes in turn (51 by default: 14..64, the last smaller
batch of an epoch included); every first call at a size is timed -- it traces, compiles
if the system compiles for that size, and runs.  Then the last size is called
``WARMUP_CALLS`` times (symgrad compiles a size's own kernel after
``symgrad.compiler.dynamic.SPECIALISE_AFTER`` calls on its shape-generic one) and the
*steady* call is timed there (median).  The *total compile time* is the sum of the
first calls plus what the warm-up took beyond its calls at the steady speed (the runs
themselves are microseconds).  The answer at
every size is fingerprinted (sum of the losses, sum of the gradients' absolute values)
and compared across systems.

Output: per system the total, the first size's call, the mean of the later ones, the
number of compiles where the system reports it (symgrad's cache misses, torch's frame
count), the steady call, and whether the answers agree.
"""
from __future__ import annotations

import json
import os
import statistics
import time

__all__ = ["BATCHES", "QUICK_BATCHES", "measure", "inputs"]

BATCHES = tuple(range(14, 65))          # 51 sizes
QUICK_BATCHES = (16, 17, 32)
WARMUP_CALLS = 300      # at the last size, before the steady calls are timed
STEADY_CALLS = 200


def inputs(batches):
    """(params, [(x, y) per batch size]): the same numbers for every system."""
    import numpy as np
    rng = np.random.default_rng(0)
    params = (rng.normal(size=(32, 64)) / 6, rng.normal(size=(64,)) / 10,
              rng.normal(size=(64, 10)) / 8, rng.normal(size=(10,)) / 10)
    data = [(rng.normal(size=(n, 32)), rng.integers(0, 10, size=n)) for n in batches]
    return params, data


def _build(system: str):
    """(function of (params, x, y) -> (loss, grads), array converter, compile counter)."""
    if system == "symgrad":
        import symgrad as sg
        import symgrad.nn.functional as F

        def loss(params, x, y):
            W1, b1, W2, b2 = params
            return F.cross_entropy(sg.tanh(x @ W1 + b1) @ W2 + b2, y)
        g = sg.value_and_grad(loss)
        return g, (lambda a: a), (lambda: g.cache_info().misses)
    if system == "jax":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        def loss(params, x, y):
            W1, b1, W2, b2 = params
            logits = jnp.tanh(x @ W1 + b1) @ W2 + b2
            logp = jax.nn.log_softmax(logits, axis=-1)
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))
        g = jax.jit(jax.value_and_grad(loss))
        return (lambda *a: jax.block_until_ready(g(*a))), jnp.asarray, (lambda: g._cache_size())
    if system == "torch":
        import torch
        import torch.nn.functional as TF
        torch.set_num_threads(max(1, os.cpu_count() or 1))
        from torch.func import grad_and_value

        def loss(params, x, y):
            W1, b1, W2, b2 = params
            return TF.cross_entropy(torch.tanh(x @ W1 + b1) @ W2 + b2, y)
        g = torch.compile(grad_and_value(loss))      # dynamic=None: automatic dynamic shapes

        def call(params, x, y):
            grads, value = g(params, x, y)
            return value, grads

        def frames():
            from torch._dynamo.utils import counters
            return int(counters["stats"]["unique_graphs"])
        return call, torch.tensor, frames
    raise ValueError(system)


def _fingerprint(value, grads) -> list[float]:
    import numpy as np
    flat = [np.asarray(g.detach() if hasattr(g, "detach") else g, dtype=np.float64)
            for g in grads]
    v = value.detach() if hasattr(value, "detach") else value
    return [float(np.asarray(v, dtype=np.float64)), float(sum(np.abs(g).sum() for g in flat))]


def measure(system: str, batches=BATCHES) -> dict:
    """The cell of one system (run in a fresh process by :mod:`bench.compile`)."""
    params, data = inputs(batches)
    f, conv, compiles = _build(system)
    p = tuple(conv(a) for a in params)
    data = [(conv(x), conv(y)) for x, y in data]
    firsts, checks = [], []
    for x, y in data:
        t0 = time.perf_counter()
        value, grads = f(p, x, y)
        firsts.append(time.perf_counter() - t0)
        checks.append(_fingerprint(value, grads))
    x, y = data[-1]
    t0 = time.perf_counter()
    for _ in range(WARMUP_CALLS):
        f(p, x, y)
    warmup = time.perf_counter() - t0
    steady = []
    for _ in range(STEADY_CALLS):
        t0 = time.perf_counter()
        f(p, x, y)
        steady.append(time.perf_counter() - t0)
    # a compile during the warm-up (symgrad specialises a size called that often) counts
    late = max(0.0, warmup - WARMUP_CALLS * statistics.median(steady))
    return {"seconds": sum(firsts) + late, "first": firsts[0], "warmup_compile": late,
            "later_mean": statistics.fmean(firsts[1:]) if len(firsts) > 1 else None,
            "compiles": compiles(), "steady_us": statistics.median(steady) * 1e6,
            "check": [sum(c[0] for c in checks), sum(c[1] for c in checks)],
            "per_size": checks}


def main_worker(system: str, batches) -> None:
    """Print one JSON cell (the worker side of ``bench.compile``)."""
    print(json.dumps(measure(system, batches)))
