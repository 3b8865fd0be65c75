"""Differential tester: random programs over symgrad's op set, each run eagerly, compiled
on the numpy backend, compiled on LLVM, and with PyTorch; values and gradients compared.

A *program* is plain data (JSON): a dtype, input shapes, a list of steps (an op name,
the indices of the values it reads, its parameters, and whether it runs under
``no_grad``), and the values whose weighted sums make the scalar loss.  :func:`generate`
draws one from a seed, checking every step's shapes with PyTorch's meta tensors, so
every generated program is valid PyTorch.  The op set covers elementwise functions
(domain-restricted ones too: NaN where PyTorch gives NaN), broadcasting binaries,
``where``, reductions (with and without keepdim, all axes), softmax / logsumexp,
indexing (slices, integers, index lists), layout (permute, transpose, reshape,
expand, unsqueeze/squeeze, cat, stack), matmul (vectors, matrices, batches),
``detach`` and ``no_grad`` regions, and casts between float dtypes; sizes include 0, 1
and odd tails (7, 17, 33, 1031, ...); inputs are sometimes seeded with NaN, ±inf, ±0,
subnormals and huge values.

:func:`check` runs one program four ways.  The reference is PyTorch in float64; the
tolerance of each element comes from the program's dtype and its conditioning: the
difference between PyTorch in the program's dtype and in float64, and the change of the
float64 result when the inputs are perturbed by a few ulps of the program's dtype
(so a cancellation or a branch flip near a kink widens the tolerance only where it
happens).  NaN and ±inf must sit where PyTorch (in the program's dtype) puts them.

Run for a time budget (each batch in a child process, so a crash or a hang is a
reported failure, not a dead tester); every failure is minimised, printed as a Python
program and saved under ``tests/fuzz/cases/`` as a regression case::

    python -m tests.fuzz.programs --seconds 600 [--seed 1] [--no-save]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

CASES = Path(__file__).with_name("cases")
SIZES = (1, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33)
BIG = (65, 127, 257, 1031)

# ---------------------------------------------------------------------------- the op set
# name -> fn(L, args, params).  L is symgrad or torch; both take the same calls.


def _softplus(L, a, p):
    return L.nn.functional.softplus(a[0])


UNARY = {
    "neg": lambda L, a, p: -a[0],
    "abs": lambda L, a, p: a[0].abs(),
    "exp": lambda L, a, p: a[0].exp(),
    "log": lambda L, a, p: a[0].log(),
    "log_abs": lambda L, a, p: (a[0].abs() + 0.5).log(),
    "sqrt": lambda L, a, p: a[0].sqrt(),
    "sqrt_abs": lambda L, a, p: (a[0] * a[0] + 0.25).sqrt(),
    "rsqrt": lambda L, a, p: a[0].rsqrt(),
    "sin": lambda L, a, p: a[0].sin(),
    "cos": lambda L, a, p: a[0].cos(),
    "tan": lambda L, a, p: a[0].tan(),
    "tanh": lambda L, a, p: a[0].tanh(),
    "sigmoid": lambda L, a, p: a[0].sigmoid(),
    "relu": lambda L, a, p: a[0].relu(),
    "softplus": _softplus,
    "expm1": lambda L, a, p: a[0].expm1(),
    "log1p": lambda L, a, p: a[0].log1p(),
    "reciprocal": lambda L, a, p: a[0].reciprocal(),
    "square": lambda L, a, p: a[0] * a[0],
    "cube": lambda L, a, p: a[0] ** 3,
    "pow_frac": lambda L, a, p: a[0] ** 1.5,
    "sign": lambda L, a, p: a[0].sign(),
    "floor": lambda L, a, p: a[0].floor(),
    "round": lambda L, a, p: a[0].round(),
    "clamp": lambda L, a, p: a[0].clamp(p["lo"], p["hi"]),
    "affine": lambda L, a, p: a[0] * p["c"] + p["d"],
    "rdiv": lambda L, a, p: p["c"] / (a[0] * a[0] + 1),
    "detach": lambda L, a, p: a[0].detach(),
    "contiguous": lambda L, a, p: a[0].contiguous(),
}
BINARY = {
    "add": lambda L, a, p: a[0] + a[1],
    "sub": lambda L, a, p: a[0] - a[1],
    "mul": lambda L, a, p: a[0] * a[1],
    "div": lambda L, a, p: a[0] / a[1],
    "div_safe": lambda L, a, p: a[0] / (a[1] * a[1] + 1),
    "maximum": lambda L, a, p: L.maximum(a[0], a[1]),
    "minimum": lambda L, a, p: L.minimum(a[0], a[1]),
    "pow": lambda L, a, p: a[0].abs() ** a[1],
    "where_gt": lambda L, a, p: L.where(a[0] > a[1], a[0], a[1] * 2),
    "where_sqrt": lambda L, a, p: L.where(a[0] > 0, a[0].sqrt(), a[1]),
}
# Compiled code guards the branch a where() does not take (symgrad.compiler.rewrite's
# NaN-safe where: no NaN gradient leaks from sqrt of a negative number), which PyTorch
# eager does not: the reference for compiled backends writes the guard out.
SAFE = {"where_sqrt": lambda L, a, p: L.where(a[0] > 0, L.where(a[0] > 0, a[0], 1).sqrt(), a[1])}


def _prod_exact(L, a, p):
    """PyTorch's prod with the gradient of PyTorch's zero-safe branch (the product of the
    other elements, by exclusive cumulative products) for every input: symgrad's rule.
    PyTorch takes result / x instead when no element of the whole tensor is 0, which is
    NaN at x = inf (inf / inf) and overflows where the other elements' product does not."""
    import torch

    class Prod(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.prod(p["dim"], keepdim=p["keep"])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            xm = x.movedim(p["dim"], -1)
            ones = torch.ones_like(xm[..., :1])
            left = torch.cumprod(torch.cat([ones, xm[..., :-1]], -1), -1)
            right = torch.cumprod(torch.cat([ones, xm.flip(-1)[..., :-1]], -1), -1).flip(-1)
            others = (left * right).movedim(-1, p["dim"])
            return (g if p["keep"] else g.unsqueeze(p["dim"])) * others
    return Prod.apply(a[0])


def _logsumexp_exact(L, a, p):
    """PyTorch's logsumexp with the gradient g * exp(x - m) / sum(exp(x - m)), m the
    largest finite element (symgrad's, JAX's): PyTorch's g * exp(x - result) reads the
    rounded result, off by up to |result| * eps / 2, so its gradient is off by that factor
    -- at |result| > 1 / eps it is 1 for each of two tied maxima, where the gradient is
    1/2 (fuzz seed 2028004634). Non-finite rows give PyTorch's NaN and 0 as before."""
    import torch
    dim, keep = p["dim"], p["keep"]

    class LSE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.logsumexp(x, dim, keepdim=keep)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            fin = torch.where(x.isfinite(), x, -torch.inf).amax(dim, keepdim=True)
            m = torch.where(fin.isfinite(), fin, 0)
            e = (x - m).exp()
            return (g if keep else g.unsqueeze(dim)) * (e / e.sum(dim, keepdim=True))
    return LSE.apply(a[0])


# The reference (PyTorch) form of ops whose symgrad gradient is exact where PyTorch's
# formula is not (every backend, eager included).
EXACT = {"prod": _prod_exact, "logsumexp": _logsumexp_exact}
REDUCE = {
    "sum": lambda L, a, p: a[0].sum(p["dims"], keepdim=p["keep"]) if p["dims"] else a[0].sum(),
    "mean": lambda L, a, p: a[0].mean(p["dims"], keepdim=p["keep"]) if p["dims"] else a[0].mean(),
    "amax": lambda L, a, p: a[0].amax(p["dims"], keepdim=p["keep"]),
    "amin": lambda L, a, p: a[0].amin(p["dims"], keepdim=p["keep"]),
    "prod": lambda L, a, p: a[0].prod(p["dim"], keepdim=p["keep"]),
    "logsumexp": lambda L, a, p: L.logsumexp(a[0], p["dim"], keepdim=p["keep"]),
    "softmax": lambda L, a, p: L.softmax(a[0], p["dim"]),
    "log_softmax": lambda L, a, p: L.log_softmax(a[0], p["dim"]),
    "norm": lambda L, a, p: a[0].norm(),
}
LAYOUT = {
    "permute": lambda L, a, p: a[0].permute(*p["perm"]),
    "transpose": lambda L, a, p: a[0].transpose(p["d0"], p["d1"]),
    "reshape": lambda L, a, p: a[0].reshape(p["shape"]),
    "flatten": lambda L, a, p: a[0].flatten(),
    "expand": lambda L, a, p: a[0].expand(*p["shape"]),
    "unsqueeze": lambda L, a, p: a[0].unsqueeze(p["dim"]),
    "squeeze": lambda L, a, p: a[0].squeeze(p["dim"]),
    "slice": lambda L, a, p: a[0][tuple([slice(None)] * p["dim"] + [slice(p["lo"], p["hi"], p["step"])])],
    "index": lambda L, a, p: a[0][tuple([slice(None)] * p["dim"] + [p["i"]])],
    "take": lambda L, a, p: a[0][tuple([slice(None)] * p["dim"] + [list(p["idx"])])],
    "cat": lambda L, a, p: L.cat(list(a), p["dim"]),
    "stack": lambda L, a, p: L.stack(list(a), p["dim"]),
    "matmul": lambda L, a, p: a[0] @ a[1],
    "cast": lambda L, a, p: a[0].to(getattr(L, p["dtype"])),
}
OPS = {**UNARY, **BINARY, **REDUCE, **LAYOUT}
FRESH = {"matmul", "add", "sub", "mul", "div", "div_safe", "maximum", "minimum", "pow",
         "where_gt", "where_sqrt", "cat", "stack"}   # ops that may create a new input


# -------------------------------------------------------------------------- generation

def _meta(shape, dtype="float32"):
    import torch
    return torch.empty(shape, dtype=getattr(torch, dtype), device="meta")


def _shape_of(op, shapes, params, dtypes_):
    """The result shape (PyTorch's rules on meta tensors), or None if invalid."""
    import torch
    try:
        out = OPS[op](torch, [_meta(s, d) for s, d in zip(shapes, dtypes_)], params)
    except Exception:       # noqa: BLE001 -- any invalid combination is just rejected
        return None
    return tuple(out.shape), str(out.dtype).replace("torch.", "")


def _dims(rng, nd, big=False):
    sizes = list(SIZES) + ([0] if rng.random() < 0.04 else [])
    shape = [int(rng.choice(sizes)) for _ in range(nd)]
    if big and nd:
        shape[-1] = int(rng.choice(BIG))
    return tuple(shape)


def _params(rng, op, shape):
    nd = len(shape)
    if op == "clamp":
        lo = float(rng.normal())
        return {"lo": lo, "hi": lo + float(rng.random() * 2)}
    if op in ("affine",):
        return {"c": float(rng.normal()), "d": float(rng.normal())}
    if op == "rdiv":
        return {"c": float(rng.normal())}
    if op in ("sum", "mean", "amax", "amin"):
        if nd == 0:
            return {"dims": [], "keep": False} if op in ("sum", "mean") else None
        k = int(rng.integers(1, nd + 1))
        dims = sorted(int(d) for d in rng.choice(nd, size=k, replace=False))
        if op in ("sum", "mean") and rng.random() < 0.2:
            dims = []
        return {"dims": dims, "keep": bool(rng.random() < 0.4)}
    if op in ("prod", "logsumexp", "softmax", "log_softmax"):
        if nd == 0:
            return None
        return {"dim": int(rng.integers(-nd, nd)), "keep": bool(rng.random() < 0.4)}
    if op == "permute":
        return {"perm": [int(i) for i in rng.permutation(nd)]} if nd >= 2 else None
    if op == "transpose":
        return {"d0": int(rng.integers(nd)), "d1": int(rng.integers(nd))} if nd >= 2 else None
    if op == "reshape":
        n = int(np.prod(shape))
        if n == 0:
            return {"shape": [0, -1] if nd else [0]}
        fs = [d for d in range(1, n + 1) if n % d == 0]
        a = int(rng.choice(fs))
        return {"shape": [a, -1] if rng.random() < 0.5 else [n // a, a, 1]}
    if op == "expand":
        if 1 not in shape and rng.random() < 0.5:
            return {"shape": [int(rng.choice((2, 3)))] + list(shape)}
        return {"shape": [int(rng.choice((2, 3, 5))) if s == 1 else s for s in shape]}
    if op == "unsqueeze":
        return {"dim": int(rng.integers(-nd - 1, nd + 1))}
    if op == "squeeze":
        ones = [i for i, s in enumerate(shape) if s == 1]
        return {"dim": int(rng.choice(ones))} if ones else None
    if op in ("slice", "index", "take"):
        dims = [i for i, s in enumerate(shape) if s > 0]
        if not dims:
            return None
        d = int(rng.choice(dims))
        n = shape[d]
        if op == "index":
            return {"dim": d, "i": int(rng.integers(-n, n))}
        if op == "take":
            return {"dim": d, "idx": [int(i) for i in rng.integers(-n, n, size=int(rng.integers(1, 6)))]}
        lo = int(rng.integers(-n, n))
        return {"dim": d, "lo": lo, "hi": int(rng.integers(lo, n + 2)) if lo >= 0 else None,
                "step": int(rng.choice((1, 1, 2, 3)))}
    if op in ("cat", "stack"):
        return {"dim": int(rng.integers(0, nd + (op == "stack"))) if nd or op == "stack" else None}
    if op == "cast":
        return {"dtype": "float64"}
    return {}


def _partner(rng, op, shape, p):
    """A shape for a fresh second operand of a binary op, a cat / stack or a matmul."""
    nd = len(shape)
    if op == "matmul":
        if nd == 0:
            return None
        k = shape[-1]
        r = rng.random()
        if nd == 1:
            return (k,) if r < 0.3 else (k, int(rng.choice(SIZES)))
        if r < 0.3:
            return (k,)
        if r < 0.6 or nd == 2:
            return (k, int(rng.choice(SIZES + BIG[:1])))
        return tuple(shape[:-2]) + (k, int(rng.choice(SIZES)))
    if op == "cat":
        if p.get("dim") is None:
            return None
        s = list(shape)
        s[p["dim"]] = int(rng.choice(SIZES))
        return tuple(s)
    if op == "stack":
        return tuple(shape)
    # broadcasting partner: drop leading dims, set some dims to 1
    s = [1 if rng.random() < 0.3 else d for d in shape]
    drop = int(rng.integers(0, nd + 1)) if rng.random() < 0.3 else 0
    s = s[drop:]
    if rng.random() < 0.15:
        return tuple(s)[::-1] if len(s) == 2 and s[0] != s[1] else tuple(s)
    return tuple(s)


def generate(seed: int) -> dict:
    """A random valid program (see the module docstring) drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    dtype = "float64" if rng.random() < 0.4 else "float32"
    big = rng.random() < 0.25
    n_in = int(rng.integers(1, 4))
    inputs = [_dims(rng, int(rng.integers(0, 4)), big=big and i == 0) for i in range(n_in)]
    shapes = list(inputs)
    dts = [dtype] * n_in
    steps = []
    names = list(OPS)
    n_steps = int(rng.integers(1, 9))
    tries = 0
    while len(steps) < n_steps and tries < 200:
        tries += 1
        op = str(rng.choice(names))
        if op == "cast" and rng.random() < 0.7:
            continue
        i = int(rng.integers(len(shapes)))
        if rng.random() < 0.5:
            i = len(shapes) - 1          # mostly chains
        p = _params(rng, op, shapes[i])
        if p is None:
            continue
        args = [i]
        if op in BINARY or op in ("matmul", "cat", "stack"):
            if op in FRESH and rng.random() < 0.6:
                ps = _partner(rng, op, shapes[i], p)
                if ps is None or int(np.prod(ps)) > 300_000:
                    continue
                inputs.append(ps)
                shapes.insert(len(inputs) - 1, ps)
                dts.insert(len(inputs) - 1, dtype)
                # values are numbered inputs first: shift step references
                steps = [_shift(s, len(inputs) - 1) for s in steps]
                i = i + 1 if i >= len(inputs) - 1 else i
                args = [i, len(inputs) - 1]
            else:
                args = [i, int(rng.integers(len(shapes)))]
            if rng.random() < 0.5:
                args = args[::-1]
        res = _shape_of(op, [shapes[a] for a in args], p, [dts[a] for a in args])
        if res is None or int(np.prod(res[0])) > 300_000:
            continue
        steps.append({"op": op, "args": args, "p": p,
                      "no_grad": bool(rng.random() < 0.06)})
        shapes.append(res[0])
        dts.append(res[1])
    n_val = len(shapes)
    outs = sorted({n_val - 1} | ({int(rng.integers(n_in, n_val))} if n_val > n_in and rng.random() < 0.4 else set()))
    special = float(rng.choice((0.0, 0.0, 0.0, 0.05, 0.3))) if rng.random() < 0.25 else 0.0
    return {"seed": seed, "dtype": dtype, "inputs": [list(s) for s in inputs], "steps": steps,
            "outs": outs, "special": special}


def _shift(step, at):
    return {**step, "args": [a + 1 if a >= at else a for a in step["args"]]}


# --------------------------------------------------------------------------------- running

SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, -1e300, 5e-324, 1e-310, 3.0e38)


def make_inputs(prog) -> list[np.ndarray]:
    rng = np.random.default_rng(prog["seed"] + 7919)
    dt = np.dtype(prog["dtype"])
    arrays = []
    for shape in prog["inputs"]:
        a = rng.normal(size=shape)
        if prog["special"] and a.size:
            mask = rng.random(size=a.shape) < prog["special"]
            a = np.where(mask, rng.choice(SPECIALS, size=a.shape), a)
        with np.errstate(all="ignore"):
            arrays.append(a.astype(dt))
    return arrays


def loss_weights(prog, shapes) -> list[np.ndarray]:
    rng = np.random.default_rng(prog["seed"] + 104729)
    return [rng.uniform(0.5, 1.5, size=s) for s in shapes]


def run(prog, L, xs, weights=None, safe=False):
    """The loss of ``prog`` on tensors ``xs`` with library ``L`` (and the output values);
    ``safe``: where() with its untaken branch guarded (see SAFE)."""
    vals = list(xs)
    for st in prog["steps"]:
        args = [vals[a] for a in st["args"]]
        fn = SAFE.get(st["op"], OPS[st["op"]]) if safe else OPS[st["op"]]
        if L.__name__ == "torch" and st["op"] in EXACT:
            fn = EXACT[st["op"]]
        if st["no_grad"]:
            with L.no_grad():
                vals.append(fn(L, args, st["p"]))
        else:
            vals.append(fn(L, args, st["p"]))
    outs = [vals[i] for i in prog["outs"]]
    if weights is None:
        return outs
    total = None
    for o, w in zip(outs, weights):
        term = (o * L.tensor(w.astype(np.dtype(str(o.dtype).replace("torch.", ""))))).sum()
        total = term if total is None else total + term
    return total


def _torch(prog, arrays, dtype, safe=False):
    import torch
    xs = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    outs = run(prog, torch, xs)
    weights = loss_weights(prog, [tuple(o.shape) for o in outs])
    loss = run(prog, torch, xs, weights, safe)
    if loss.requires_grad:
        grads = torch.autograd.grad(loss, xs, allow_unused=True, materialize_grads=True)
    else:
        grads = [torch.zeros_like(x) for x in xs]
    return [loss.detach().numpy()] + [g.numpy() for g in grads], weights


def loss_terms_magnitude(prog, arrays, weights) -> float:
    """The sum of the magnitudes of the terms the loss adds up, sum |o * W| over the
    outputs' elements (float64, finite terms): a float sum's rounding is relative to it,
    not to the result -- two sums of about +-19,000 cancelling to -0.95 are each off by
    up to an ulp of 19,000 (0.002 in float32) in any summation order (fuzz seed
    2044001319: symgrad's float32 sums within 1 ulp of the exact ones, PyTorch's the
    nearest by chance)."""
    import torch
    with torch.no_grad():
        outs = run(prog, torch, [torch.tensor(a.astype(np.float64)) for a in arrays])
        total = 0.0
        for o, w in zip(outs, weights):
            t = np.abs(o.numpy().astype(np.float64) * w)
            total += float(t[np.isfinite(t)].sum())
    return total


def _eager(prog, arrays, weights):
    import symgrad as sg
    xs = [sg.tensor(a, requires_grad=True) for a in arrays]
    loss = run(prog, sg, xs, weights)
    if loss.requires_grad:
        grads = sg.autograd.grad(loss, xs, allow_unused=True, materialize_grads=True)
    else:
        grads = [sg.zeros_like(x) for x in xs]
    return [loss.detach().numpy()] + [g.numpy() for g in grads]


def _compiled(prog, arrays, weights, backend):
    import symgrad as sg
    n = len(arrays)
    f = sg.value_and_grad(lambda *xs: run(prog, sg, xs, weights), argnums=tuple(range(n)),
                          backend=backend)
    v, g = f(*arrays)
    return [np.asarray(v)] + [np.asarray(x) for x in g]


def _perturbed(prog, arrays, weights, safe=False):
    import torch
    rng = np.random.default_rng(prog["seed"] + 31)
    eps = np.finfo(np.dtype(prog["dtype"])).eps
    pert = []
    for a in arrays:
        a = a.astype(np.float64)
        with np.errstate(all="ignore"):
            pert.append(a * (1 + rng.uniform(-4, 4, size=a.shape) * eps))
    xs = [torch.tensor(a, requires_grad=True) for a in pert]
    loss = run(prog, torch, xs, weights, safe)
    if loss.requires_grad:
        grads = torch.autograd.grad(loss, xs, allow_unused=True, materialize_grads=True)
    else:
        grads = [torch.zeros_like(x) for x in xs]
    return [loss.detach().numpy()] + [g.numpy() for g in grads]


def absorbing(arrays, dtype) -> bool:
    """Whether an input holds a finite magnitude that absorbs O(1) values and overflows
    when doubled (1e300 in float64; 3e38 in float32): a sum over it is decided by the
    order of the additions -- 1e300 - 1e300 cancels to 0 in one order and keeps the small
    terms in another, 3e38 + 3e38 overflows to inf before an -inf term joins (NaN) or
    after (-inf) -- and PyTorch's order is its kernels' own (its float32 sum of [2e38] * n
    + [-2e38] * n is inf, 0, -inf or NaN depending on n)."""
    big = 1e290 if dtype == "float64" else 1e37
    with np.errstate(all="ignore"):
        return any(np.any(np.isfinite(a) & (np.abs(a) >= big)) for a in arrays)


def _compare(name, got, same, ref, pert, dtype, n_ops, probe=None, guarded=False,
             order_decides=False, magnitude=0.0):
    """None, or why ``got`` is not ``ref`` within the conditioning tolerance.

    ``probe``: PyTorch in float32 for a float64 program -- its distance from the
    float64 result, scaled by the ratio of the epsilons, measures rounding amplified
    inside the program (cancellations).  ``guarded``: the compiled where() guards its
    untaken branch, so a NaN gradient PyTorch leaks through it may be a number (finite or
    infinite: the sum of the other paths) here. ``order_decides``: the inputs hold
    absorbing magnitudes (:func:`absorbing`), so whether a sum cancels to 0 or overflows
    to inf -- hence a NaN after it (0/0, inf - inf) -- is decided by the order of its
    additions: a NaN on one side only is not a finding (fuzz seeds 2028003556: NaN for
    PyTorch's inf, 2029001368: a number for PyTorch's NaN). ``magnitude``: of the terms
    the value (the loss) sums (:func:`loss_terms_magnitude`): its rounding, a few ulps of
    that magnitude, is allowed for however much the terms cancel (input perturbations
    and PyTorch's own rounding need not show it)."""
    eps = float(np.finfo(np.dtype(dtype)).eps)
    labels = ["value"] + [f"grad[{i}]" for i in range(len(ref) - 1)]
    with np.errstate(all="ignore"):
        finite = [np.abs(np.asarray(r, np.float64)) for r in ref]
        scale_all = max((np.max(f[np.isfinite(f)], initial=0.0) for f in finite), default=0.0)
    probe = probe or [None] * len(ref)
    for lab, g, s, r, q, p32 in zip(labels, got, same, ref, pert, probe):
        g = np.asarray(g, dtype=np.float64)
        s = np.asarray(s, dtype=np.float64)
        r, q = np.asarray(r, dtype=np.float64), np.asarray(q, dtype=np.float64)
        if g.shape != r.shape:
            return f"{name} {lab}: shape {g.shape}, PyTorch {r.shape}"
        # non-finite results must sit where PyTorch (same dtype) puts them, unless the
        # float64 result there is finite (overflow near the dtype's limit: conditioning)
        nonfin = ~np.isfinite(s) & ~(np.isfinite(r) & np.isfinite(q) & (dtype != "float64"))
        with np.errstate(invalid="ignore"):
            bad = nonfin & ~((np.isnan(g) & np.isnan(s)) | (g == s))
            if guarded:         # (the other paths' sum remains: finite or +-inf, seed
                bad &= ~(np.isnan(s) & ~np.isnan(g))        # 2028007332)
            if order_decides:
                bad &= ~(np.isnan(s) ^ np.isnan(g))
        if bad.any():
            k = tuple(np.argwhere(bad)[0])
            return f"{name} {lab}{list(k)}: {g[k]!r}, PyTorch {s[k]!r}"
        fin = np.isfinite(s) & np.isfinite(r)
        if not fin.any():
            continue
        with np.errstate(all="ignore"):
            scale = np.max(np.abs(r[fin]), initial=0.0)
            spread = np.where(np.isfinite(q), np.abs(q - r), np.inf) + np.abs(s - r)
            if p32 is not None:
                p32 = np.asarray(p32, np.float64)
                spread = spread + np.where(np.isfinite(p32), np.abs(p32 - r), np.inf) * (
                    eps / float(np.finfo(np.float32).eps))
            # (inputs are O(1): a floor of 1 for the scale when the program's values
            # are all tiny, NaN or inf)
            tol = 8 * spread + 64 * eps * (np.abs(r) + (scale + max(scale_all / 16, 1.0))
                                           * (1 + n_ops)) + 1e-300
            if lab == "value":
                tol = tol + 4 * eps * magnitude
            err = np.abs(g - r)
            # an infinite tolerance: the perturbed or float32 reference is not finite
            # there, so whether the result is finite at all is decided by rounding (the
            # log of a cancelled difference): any value, NaN too (fuzz seed 2028008371)
            bad = fin & ~((err <= tol) | np.isinf(tol))
        if bad.any():
            k = tuple(np.argwhere(bad)[0])
            return (f"{name} {lab}{list(k)}: {g[k]!r}, PyTorch {r[k]!r} "
                    f"(tolerance {tol[k]:.3g})")
    return None


def check(prog, backends=("eager", "numpy", "llvm")) -> str | None:
    """Run ``prog`` every way; None when all agree with PyTorch, else the first mismatch
    or error (as text)."""
    import warnings
    arrays = make_inputs(prog)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refs = {}
        try:
            for safe in (False, True) if any(st["op"] in SAFE for st in prog["steps"]) \
                    else (False,):
                same, weights = _torch(prog, arrays, np.dtype(prog["dtype"]), safe)
                ref, _ = _torch(prog, arrays, np.float64, safe)
                probe = _torch(prog, arrays, np.float32, safe)[0] \
                    if prog["dtype"] == "float64" else None
                refs[safe] = same, ref, _perturbed(prog, arrays, weights, safe), probe
            magnitude = loss_terms_magnitude(prog, arrays, weights)
        except Exception:       # noqa: BLE001 -- not a valid PyTorch program: nothing to test
            return None
        n_ops = len(prog["steps"])
        guarded = any(st["op"].startswith("where") for st in prog["steps"])
        for how in backends:
            same, ref, pert, probe = refs[how != "eager" and True in refs]
            try:
                got = _eager(prog, arrays, weights) if how == "eager" else \
                    _compiled(prog, arrays, weights, how)
            except Exception as e:      # noqa: BLE001 -- any exception is a finding
                return f"{how}: {type(e).__name__}: {str(e)[:300]}"
            why = _compare(how, got, same, ref, pert, prog["dtype"], n_ops, probe,
                           guarded and how != "eager", absorbing(arrays, prog["dtype"]),
                           magnitude)
            if why:
                return why
    return None


# ------------------------------------------------------------------------ as Python text

def source(prog) -> str:
    """The program as a runnable Python script (symgrad compiled vs PyTorch)."""
    lines = ["import numpy as np, torch, symgrad as sg",
             "from tests.fuzz.programs import make_inputs, loss_weights, run, OPS, check",
             f"prog = {json.dumps(prog)}",
             "# the program, step by step (L is symgrad or torch):"]
    n_in = len(prog["inputs"])
    for k, st in enumerate(prog["steps"]):
        args = ", ".join(f"v{a}" for a in st["args"])
        ng = "  # under no_grad" if st["no_grad"] else ""
        lines.append(f"#   v{n_in + k} = {st['op']}({args}, {st['p']}){ng}")
    lines.append(f"#   loss = sum of (v * W).sum() over the outputs v{prog['outs']}, W fixed weights")
    lines.append("print(check(prog))")
    return "\n".join(lines)


def case_path(prog) -> Path:
    key = hashlib.blake2b(json.dumps(prog, sort_keys=True).encode(), digest_size=6).hexdigest()
    return CASES / f"case_{key}.json"


def save_case(prog, why: str) -> Path:
    CASES.mkdir(exist_ok=True)
    path = case_path(prog)
    path.write_text(json.dumps({"program": prog, "found": why}, indent=1, sort_keys=True) + "\n")
    return path


def load_cases() -> list[tuple[str, dict]]:
    if not CASES.is_dir():
        return []
    return [(p.stem, json.loads(p.read_text())["program"]) for p in sorted(CASES.glob("*.json"))]


# ---------------------------------------------------------------------------- minimising

def _drop_step(prog, k):
    """The program without step k: its uses read its first argument instead (when the
    shapes agree the result is valid; invalid candidates are rejected by check)."""
    n_in = len(prog["inputs"])
    v = n_in + k
    sub = prog["steps"][k]["args"][0]
    steps = []
    for j, st in enumerate(prog["steps"]):
        if j == k:
            continue
        steps.append({**st, "args": [sub if a == v else (a - 1 if a > v else a) for a in st["args"]]})
    outs = sorted({sub if o == v else (o - 1 if o > v else o) for o in prog["outs"]})
    return {**prog, "steps": steps, "outs": outs}


def _candidates(prog):
    for k in reversed(range(len(prog["steps"]))):
        yield _drop_step(prog, k)
    if len(prog["outs"]) > 1:
        for o in prog["outs"]:
            yield {**prog, "outs": [o]}
    if prog["special"]:
        yield {**prog, "special": 0.0}
    for k, st in enumerate(prog["steps"]):
        if st["no_grad"]:
            steps = list(prog["steps"])
            steps[k] = {**st, "no_grad": False}
            yield {**prog, "steps": steps}
    if prog["dtype"] == "float32":
        yield {**prog, "dtype": "float64"}


def minimise(prog, still_fails, budget_s: float = 120.0) -> dict:
    """Greedy shrinking: take any candidate (a step dropped, one output, no special
    values, no no_grad, float64) that still fails, until none does or time is up."""
    t0 = time.monotonic()
    changed = True
    while changed and time.monotonic() - t0 < budget_s:
        changed = False
        for cand in _candidates(prog):
            if time.monotonic() - t0 > budget_s:
                break
            if still_fails(cand):
                prog, changed = cand, True
                break
    return prog


# ------------------------------------------------------------------ budgeted runs (CLI)

_CHILD = r"""
import json, sys
from tests.fuzz.programs import check, generate
seed0, count, progress = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for s in range(seed0, seed0 + count):
    with open(progress, "w") as f:
        f.write(str(s))
    why = check(generate(s))
    if why:
        print(json.dumps({"seed": s, "why": why}), flush=True)
print("DONE", flush=True)
"""

_ONE = r"""
import json, sys
from tests.fuzz.programs import check
print(json.dumps({"why": check(json.loads(sys.argv[1]))}), flush=True)
"""


def _root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _env(sanitize: bool = False):
    env = dict(os.environ)
    env["PYTHONPATH"] = _root() + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("SYMGRAD_DISK_CACHE", "0")
    env["SYMGRAD_SANITIZE"] = "1" if sanitize else "0"
    return env


def _isolated_check(prog, timeout: float = 120.0, sanitize: bool = False) -> str | None:
    """check(prog) in a child process: a crash or a hang is a failure too."""
    import subprocess
    try:
        r = subprocess.run([sys.executable, "-c", _ONE, json.dumps(prog)], env=_env(sanitize),
                           cwd=_root(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang"
    if r.returncode != 0:
        return f"crash (exit {r.returncode}): {r.stderr.strip().splitlines()[-1:] or ''}"
    return json.loads(r.stdout.strip().splitlines()[-1])["why"]


def _category(why: str) -> str:
    """crashes, hangs, errors (an exception PyTorch did not raise) or mismatches."""
    if why.startswith("crash"):
        return "crashes"
    if why.startswith("hang"):
        return "hangs"
    parts = why.split(": ")
    return "errors" if len(parts) > 1 and parts[1].endswith(("Error", "Exception")) \
        else "mismatches"


def _kind(why: str) -> str:
    return why.split(":")[0].split(" ")[0] if why else ""


def fuzz(seconds: float, seed: int = 1, save: bool = True, batch: int = 50,
         out=sys.stdout) -> dict:
    """Run random programs for ``seconds``; minimise, print and save each failure.
    Every other batch runs sanitized (SYMGRAD_SANITIZE=1: an out-of-bounds access is a
    reported error), the others as users run them (a crash is caught by the parent)."""
    import subprocess
    import tempfile
    t0 = time.monotonic()
    stats = {"programs": 0, "crashes": 0, "hangs": 0, "mismatches": 0, "errors": 0,
             "failures": []}
    s = seed * 1_000_000
    progress = tempfile.NamedTemporaryFile(prefix="symgrad-fuzz-", delete=False).name
    n_batch = 0
    while time.monotonic() - t0 < seconds:
        found = []
        sanitize = n_batch % 2 == 1
        n_batch += 1
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(s), str(batch), progress],
                                env=_env(sanitize), cwd=_root(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            stdout, stderr = proc.communicate(timeout=max(60.0, 6.0 * batch))
            hung = False
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            hung = True
        for line in stdout.splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        if "DONE" in stdout:
            done = s + batch
        else:                   # crashed or hung at the seed in the progress file
            bad = int(Path(progress).read_text() or s)
            kind = "hang" if hung else f"crash (exit {proc.returncode})"
            found.append({"seed": bad, "why": kind + ": " + (stderr.strip().splitlines() or [""])[-1]})
            done = bad + 1
        stats["programs"] += done - s
        s = done
        for f in found:
            why = f["why"]
            stats[_category(why)] += 1
            prog = generate(f["seed"])
            isolated = why.startswith(("crash", "hang"))
            first = _kind(why)

            isolated = isolated or sanitize     # sanitized checks run in a child too

            def still(c, first=first, isolated=isolated, sanitize=sanitize):
                w = _isolated_check(c, sanitize=sanitize) if isolated else check(c)
                return bool(w) and _kind(w) == first
            small = minimise(prog, still)
            final = (_isolated_check(small, sanitize=sanitize) if isolated else check(small)) \
                or why
            print(f"\n=== seed {f['seed']}{' (sanitized)' if sanitize else ''}: {why}\n"
                  f"--- minimised: {final}\n{source(small)}",
                  file=out, flush=True)
            stats["failures"].append({"seed": f["seed"], "why": why, "minimised": small})
            if save:
                print(f"saved {save_case(small, final)}", file=out, flush=True)
    os.unlink(progress)
    return stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.programs", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--batch", type=int, default=50)
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    stats = fuzz(a.seconds, a.seed, not a.no_save, a.batch)
    print(f"\n{stats['programs']} programs in {time.monotonic() - t0:.0f} s: "
          f"{stats['crashes']} crashes, {stats['hangs']} hangs, {stats['mismatches']} mismatches, "
          f"{stats['errors']} errors")
    return 1 if stats["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
