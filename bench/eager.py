"""``python -m bench eager``: the cost of eager PyTorch-style code, symgrad against torch
eager, both on one thread, in one run.

* **per op**: the most used tensor operations, each written once over a namespace
  ``T`` (``torch`` or ``symgrad``), timed three ways -- forward without grad, forward
  recording the graph, forward and backward -- on small tensors (4 x 4, where the cost
  is the per-call overhead) and medium ones (256 x 256, where it is the work);
* **steps**: the seed example written as the seed writes it (a new
  ``ones(2, 2, requires_grad=True)`` each step, ``((x+2)*(x+2)*3).mean()``, backward)
  and a small MLP training step (32-64-10, batch 16, float32, SGD written by hand).

Samples of the two systems are interleaved (A, B, B, A, ...) so drift in machine speed hits
both alike; the figure per cell is the median per-call time. The table prints the ratio
symgrad / torch (below 1: symgrad is faster) and the geometric mean per column; the JSON
(``bench/results/eager.json`` by default) keeps every time. Each op's value and gradients
are first checked against torch's (a row that differs says so).

Example::

    python -m bench eager --size small --ops add,softmax,cross_entropy
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

import numpy as np

from bench.timing import time_calls

__all__ = ["OPS", "MODES", "main"]

RESULTS = Path(__file__).resolve().parent / "results"
MODES = ("no_grad", "record", "backward")
SIZES = {"small": 4, "medium": 256}


def _x(T, n, rg, seed=0, positive=False):
    a = np.random.default_rng(seed).normal(size=(n, n)).astype(np.float32)
    if positive:
        a = np.abs(a) + 0.5
    return T.tensor(a, requires_grad=rg)


def _labels(T, n):
    return T.tensor(np.arange(n) % n, dtype=T.int64)


# name -> (inputs(T, n, requires_grad) -> tuple, op(T, *inputs) -> tensor)
def _unary(f, positive=False):
    return (lambda T, n, rg: (_x(T, n, rg, positive=positive),), f)


def _binary(f):
    return (lambda T, n, rg: (_x(T, n, rg), _x(T, n, rg, 1, positive=True)), f)


OPS = {
    "add": _binary(lambda T, a, b: a + b),
    "sub": _binary(lambda T, a, b: a - b),
    "mul": _binary(lambda T, a, b: a * b),
    "div": _binary(lambda T, a, b: a / b),
    "add_scalar": _unary(lambda T, a: a + 2),
    "mul_scalar": _unary(lambda T, a: a * 3),
    "neg": _unary(lambda T, a: -a),
    "pow2": _unary(lambda T, a: a ** 2),
    "exp": _unary(lambda T, a: a.exp()),
    "log": _unary(lambda T, a: a.log(), positive=True),
    "sqrt": _unary(lambda T, a: a.sqrt(), positive=True),
    "sin": _unary(lambda T, a: a.sin()),
    "tanh": _unary(lambda T, a: a.tanh()),
    "sigmoid": _unary(lambda T, a: a.sigmoid()),
    "relu": _unary(lambda T, a: a.relu()),
    "abs": _unary(lambda T, a: a.abs()),
    "clamp": _unary(lambda T, a: a.clamp(-0.5, 0.5)),
    "where": _binary(lambda T, a, b: T.where(a > 0, a, b)),
    "gelu": _unary(lambda T, a: T.nn.functional.gelu(a)),
    "sum": _unary(lambda T, a: a.sum()),
    "mean": _unary(lambda T, a: a.mean()),
    "sum_dim": _unary(lambda T, a: a.sum(1)),
    "max_dim": _unary(lambda T, a: a.max(1)[0]),
    "matmul": _binary(lambda T, a, b: a @ b),
    "linear": _binary(lambda T, a, b: T.nn.functional.linear(a, b)),
    "t": _unary(lambda T, a: a.t()),
    "transpose": _unary(lambda T, a: a.transpose(0, 1)),
    "permute": _unary(lambda T, a: a.permute(1, 0)),
    "reshape": _unary(lambda T, a: a.reshape(-1)),
    "view": _unary(lambda T, a: a.view(-1)),
    "unsqueeze": _unary(lambda T, a: a.unsqueeze(0)),
    "expand": _unary(lambda T, a: a[:1].expand(a.shape[0], a.shape[1])),
    "slice": _unary(lambda T, a: a[1:]),
    "index_int": _unary(lambda T, a: a[0]),
    "cat": _binary(lambda T, a, b: T.cat([a, b])),
    "stack": _binary(lambda T, a, b: T.stack([a, b])),
    "softmax": _unary(lambda T, a: a.softmax(1)),
    "log_softmax": _unary(lambda T, a: a.log_softmax(1)),
    "cross_entropy": (lambda T, n, rg: (_x(T, n, rg), _labels(T, n)),
                      lambda T, a, y: T.nn.functional.cross_entropy(a, y)),
    "mse_loss": _binary(lambda T, a, b: T.nn.functional.mse_loss(a, b)),
    "layer_norm": _unary(lambda T, a: T.nn.functional.layer_norm(a, a.shape[1:])),
}


def _op_call(T, name, n, mode):
    """A zero-argument function doing one op in ``mode`` (inputs made once)."""
    make, op = OPS[name]
    inputs = make(T, n, mode != "no_grad")
    if mode == "no_grad":
        def call():
            with T.no_grad():
                return op(T, *inputs)
    elif mode == "record":
        def call():
            return op(T, *inputs)
    else:
        out = op(T, *inputs)
        seed = T.ones(tuple(out.shape))
        diff = [t for t in inputs if t.requires_grad]

        def call():
            o = op(T, *inputs)
            o.backward(seed)
            for t in diff:
                t.grad = None
    return call


def _agree(libs, name, n) -> bool:
    """Whether symgrad's forward value and input gradients equal torch's on these inputs."""
    got = []
    for T in libs.values():
        make, op = OPS[name]
        inputs = make(T, n, True)
        out = op(T, *inputs)
        out.backward(T.ones(tuple(out.shape)))
        got.append([out.detach().numpy()] + [t.grad.numpy() for t in inputs if t.requires_grad])
    # float32: sums of n terms round differently in each library
    return all(np.allclose(a, b, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(b).max(initial=0))))
               for a, b in zip(*got))


def _seed_step(T):
    """The seed example as the seed writes it, one step."""
    def call():
        x = T.ones(2, 2, requires_grad=True)
        y = x + 2
        z = y * y * 3
        out = z.mean()
        out.backward()
        return x.grad
    return call


def _mlp_step(T):
    """A 32-64-10 MLP, batch 16, float32, cross entropy, SGD by hand."""
    rng = np.random.default_rng(0)
    ws = [T.tensor((rng.normal(size=s) / math.sqrt(s[0])).astype(np.float32), requires_grad=True)
          for s in ((32, 64), (64,), (64, 10), (10,))]
    x = T.tensor(rng.normal(size=(16, 32)).astype(np.float32))
    y = T.tensor(rng.integers(0, 10, 16), dtype=T.int64)

    def call():
        w1, b1, w2, b2 = ws
        h = (x @ w1 + b1).relu()
        loss = T.nn.functional.cross_entropy(h @ w2 + b2, y)
        loss.backward()
        with T.no_grad():
            for w in ws:
                w -= 0.01 * w.grad
                w.grad = None
        return loss
    return call


STEPS = {"seed step": _seed_step, "mlp step": _mlp_step}


def _compare(a, b, sample_s, rounds):
    """Median seconds per call of ``a`` and of ``b``, samples interleaved."""
    for f in (a, b):
        f()
        f()
    one = max(time_calls(a, 3), time_calls(b, 3), 1e-7)
    calls = max(1, int(sample_s / one))
    ta, tb = [], []
    for r in range(rounds):
        for f, out in ((a, ta), (b, tb)) if r % 2 == 0 else ((b, tb), (a, ta)):
            out.append(time_calls(f, calls))
    return statistics.median(ta), statistics.median(tb)


def _geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench eager", description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="small,medium", help="comma list of small, medium")
    p.add_argument("--ops", default=",".join(OPS), help="comma list of op names")
    p.add_argument("--modes", default=",".join(MODES), help="comma list of " + ", ".join(MODES))
    p.add_argument("--no-steps", action="store_true", help="skip the seed and MLP steps")
    p.add_argument("--sample", type=float, default=0.02, help="seconds per sample")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--json", type=Path, default=RESULTS / "eager.json")
    a = p.parse_args(argv)
    sizes = [s for s in a.size.split(",") if s]
    ops = [o for o in a.ops.split(",") if o]
    modes = [m for m in a.modes.split(",") if m]
    for bad, known, what in ((sizes, SIZES, "size"), (ops, OPS, "op"), (modes, MODES, "mode")):
        unknown = [x for x in bad if x not in known]
        if unknown:
            p.error(f"unknown {what} {unknown}; choose from {list(known)}")

    import torch
    import symgrad
    torch.set_num_threads(1)
    symgrad.set_num_threads(1)
    libs = {"symgrad": symgrad, "torch": torch}
    result = {"threads": 1, "torch": torch.__version__, "ops": {}, "steps": {}}
    for size in sizes:
        n = SIZES[size]
        print(f"\nper op, {n}x{n} float32: median us per call (symgrad / torch)")
        print(f"{'op':15}" + "".join(f"{m:>28}" for m in modes))
        ratios = {m: [] for m in modes}
        for name in ops:
            agree = _agree(libs, name, n)
            result["ops"].setdefault(size, {}).setdefault(name, {})["agree"] = agree
            row = f"{name:15}" if agree else f"{name + ' DIFFERS':15}"
            for mode in modes:
                try:
                    s, t = _compare(_op_call(libs["symgrad"], name, n, mode),
                                    _op_call(libs["torch"], name, n, mode), a.sample, a.rounds)
                except Exception as e:      # noqa: BLE001 -- a row that cannot run says why
                    row += f"{type(e).__name__:>28}"
                    continue
                result["ops"].setdefault(size, {}).setdefault(name, {})[mode] = \
                    {"symgrad": s, "torch": t}
                ratios[mode].append(s / t)
                row += f"{s * 1e6:9.1f} /{t * 1e6:8.1f} {s / t:6.2f}x"
            print(row, flush=True)
        print(f"{'geomean':15}" + "".join(f"{_geomean(ratios[m]):27.2f}x" for m in modes))
        result.setdefault("geomean", {})[size] = {m: _geomean(ratios[m]) for m in modes}
    if not a.no_steps:
        print("\nsteps (median us per step, symgrad / torch)")
        for name, make in STEPS.items():
            s, t = _compare(make(symgrad), make(torch), a.sample * 5, a.rounds)
            result["steps"][name] = {"symgrad": s, "torch": t}
            print(f"{name:15}{s * 1e6:10.1f} /{t * 1e6:9.1f} {s / t:6.2f}x", flush=True)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=1))
    print(f"\nwrote {a.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
