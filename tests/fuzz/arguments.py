"""Bad-argument fuzzer for compiled functions.

Each *target* is a compiled function (``symgrad.compile`` / ``value_and_grad`` on the
LLVM and numpy backends) with a PyTorch twin.  It is first called with valid arguments
(so its native fast path is installed), then with one argument replaced by a
*mutation*: another dtype (float32, ints, bool, complex, float16, big-endian, object),
shape or ndim, a 0-size array, a non-contiguous, transposed, reversed, Fortran-order,
misaligned, read-only or broadcast (0-stride) view, a huge shape, NaN / inf / extreme
values, None, a list, a tuple, a scalar, a string, a torch tensor, a symgrad tensor,
and for index arguments out-of-range and overflowing integers.

A call must either return what PyTorch returns (NaN positions included) or raise a
clean ``TypeError`` / ``ValueError`` / ``IndexError`` / ``RuntimeError`` (or
``MemoryError`` for a huge shape); when PyTorch accepts an array argument the compiled
function must accept it too.  Any other exception, a wrong answer, or a crash (the CLI
runs each batch in a child process) is a failure::

    python -m tests.fuzz.arguments --seconds 300
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

CLEAN = (TypeError, ValueError, IndexError, RuntimeError)


def _mlp(L, x, w):
    return ((x @ w).tanh() ** 2).sum() + (x * 0.5).exp().mean()


def _elementwise(L, x):
    return x.sin() * 2 + x * x


def _gather(L, x, idx):
    return (x[idx] * 3).sum()


def _scaled(L, x, s):
    return (x * s).sum() + x.abs().sum()


# name -> (fn(L, *args), valid args, transform, argnums of array arguments that may differ)
def targets() -> dict:
    rng = np.random.default_rng(0)
    return {
        "mlp": (_mlp, [rng.normal(size=(3, 4)), rng.normal(size=(4,))], "value_and_grad"),
        "mlp_big": (_mlp, [rng.normal(size=(70, 65)), rng.normal(size=(65,))], "value_and_grad"),
        "elementwise": (_elementwise, [rng.normal(size=(5, 17))], "compile"),
        "elementwise_f32": (_elementwise, [rng.normal(size=(1031,)).astype(np.float32)], "compile"),
        "gather": (_gather, [rng.normal(size=(6, 3)), np.array([0, 5, -1, 2])], "grad0"),
        "scaled": (_scaled, [rng.normal(size=(4, 4)), 1.5], "value_and_grad0"),
    }


def _misaligned(a):
    buf = np.zeros(a.nbytes + 1, np.uint8)
    m = np.frombuffer(buf.data, dtype=a.dtype, count=a.size, offset=1).reshape(a.shape)
    m[...] = a
    return m


def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def mutations(a, rng, is_index=False) -> list[tuple[str, object]]:
    """(name, replacement) pairs for argument ``a``."""
    import torch

    import symgrad as sg
    out = []
    if isinstance(a, np.ndarray):
        for dt in (np.float32, np.float64, np.int64, np.int32, np.bool_, np.complex128,
                   np.float16, ">f8", np.uint8):
            with np.errstate(all="ignore"):
                out.append((f"dtype {np.dtype(dt)}", a.astype(dt)))
        out.append(("dtype object", a.astype(object)))
        if a.ndim:
            out.append(("drop a dim", a[0]))
            out.append(("grow a dim", np.concatenate([a, a[:1]])))
            out.append(("zero-size", a[:0]))
            out.append(("reversed", a[::-1]))
            big = np.repeat(a, 2, axis=-1)
            out.append(("non-contiguous", big[..., ::2]))
            out.append(("fortran", np.asfortranarray(a)))
            out.append(("broadcast view", np.broadcast_to(a[:1], a.shape)))
            out.append(("huge broadcast", np.broadcast_to(a.reshape(-1)[:1], (1 << 40,) + a.shape[1:])))
        out.append(("add a dim", a[None]))
        if a.ndim >= 2:
            out.append(("transposed view", np.ascontiguousarray(a.swapaxes(0, 1)).swapaxes(0, 1)))
        out.append(("misaligned", _misaligned(a)))
        out.append(("read-only", _readonly(a)))
        if a.dtype.kind == "f":
            for v in (np.nan, np.inf, -np.inf, 1e308, -0.0, 5e-324):
                b = a.copy()
                if b.size:
                    b.reshape(-1)[rng.integers(b.size)] = v
                out.append((f"value {v}", b))
        if is_index:
            for v in (1 << 62, -(1 << 63), 1 << 31, -7, 6, np.iinfo(np.int64).max):
                b = a.copy()
                b[rng.integers(b.size)] = v
                out.append((f"index {v}", b))
            out.append(("index float", a.astype(np.float64)))
            out.append(("index bool", np.ones(a.shape, bool)))
        out.append(("torch tensor", torch.tensor(a)))
        out.append(("symgrad tensor", sg.tensor(a)))
        out.append(("list", a.tolist()))
    else:
        out += [("int scalar", 2), ("bool scalar", True), ("numpy float32 scalar", np.float32(2.5)),
                ("nan scalar", float("nan")), ("0-d array", np.array(2.0)),
                ("1-d array", np.array([2.0])), ("complex scalar", 1j)]
    out += [("None", None), ("string", "x"), ("tuple", (1.0, 2.0)), ("dict", {"a": 1}),
            ("python float", 0.5)]
    return out


def _compiled(fn, transform, backend, n):
    import symgrad as sg
    f = lambda *xs: fn(sg, *xs)     # noqa: E731
    if transform == "compile":
        return sg.compile(f, backend=backend)
    if transform == "value_and_grad":
        return sg.value_and_grad(f, argnums=tuple(range(n)), backend=backend)
    if transform == "value_and_grad0":
        return sg.value_and_grad(f, argnums=0, backend=backend)
    return sg.grad(f, argnums=0, backend=backend)


def _to_torch(a):
    """The argument as PyTorch would get it from a user (arrays and numbers as tensors,
    anything else as it is)."""
    import torch

    import symgrad as sg
    if isinstance(a, sg.Tensor):
        a = a.detach().numpy()
    if isinstance(a, np.ndarray):
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("="))
        return torch.tensor(np.ascontiguousarray(a) if a.dtype != object else a.tolist())
    if isinstance(a, (bool, int, float, complex, np.generic)):
        return torch.tensor(a)
    return a                  # lists, tuples (pytrees to symgrad), None, str, dict as they are


def _torch_ref(fn, transform, args):
    """PyTorch's result for these arguments, or the exception it raises."""
    import torch
    try:
        ts = []
        for i, a in enumerate(args):
            t = _to_torch(a)
            if isinstance(t, torch.Tensor) and t.is_floating_point() and transform != "compile" \
                    and (transform == "value_and_grad" or i == 0):
                t = t.detach().clone().requires_grad_()
            ts.append(t)
        out = fn(torch, *ts)
        if transform == "compile":
            return [out.detach().numpy()]
        wrt = [t for i, t in enumerate(ts) if (transform == "value_and_grad" or i == 0)]
        gs = torch.autograd.grad(out, wrt)
        vals = [] if transform == "grad0" else [out.detach().numpy()]
        return vals + [g.numpy() for g in gs]
    except Exception as e:      # noqa: BLE001 -- any PyTorch error means: a clean error is right
        return e


def _flat(res) -> list:
    if isinstance(res, (tuple, list)):
        return [x for r in res for x in _flat(r)]
    return [np.asarray(res.numpy() if hasattr(res, "numpy") else res)]


def _close(got, want) -> str | None:
    if len(got) != len(want):
        return f"{len(got)} results, PyTorch {len(want)}"
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return f"shape {g.shape}, PyTorch {w.shape}"
        tol = 2e-4 if np.float32 in (g.dtype.type, w.dtype.type) or g.dtype != np.float64 else 1e-9
        g64 = g.astype(np.complex128 if np.iscomplexobj(g) else np.float64)
        w64 = w.astype(np.complex128 if np.iscomplexobj(w) else np.float64)
        with np.errstate(invalid="ignore"):
            if not np.array_equal(np.isnan(g64), np.isnan(w64)):
                return "NaN positions differ"
            fin = np.abs(w64[np.isfinite(w64)])
            scale = max(1.0, float(fin.max())) if fin.size else 1.0
            ok = np.isclose(g64, w64, rtol=tol, atol=tol * scale) | (g64 == w64) | np.isnan(w64)
        if not ok.all():
            return f"values differ: {g64[~ok][:3]} vs {w64[~ok][:3]}"
    return None


_COMPILED: dict = {}


def check_call(name, backend, arg_index, mutation, replacement) -> str | None:
    """None, or why calling target ``name`` with the mutated argument misbehaved."""
    fn, valid, transform = targets()[name]
    key = (name, backend)
    if key not in _COMPILED:        # one compiled function per target, as a user has
        _COMPILED[key] = _compiled(fn, transform, backend, len(valid))
    f = _COMPILED[key]
    args = list(valid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(*args)
        f(*args)                    # the native fast path is installed
        args[arg_index] = replacement
        want = _torch_ref(fn, transform, args) if "huge" not in mutation else \
            RuntimeError("not computed")
        try:
            got = f(*args)
        except MemoryError:
            return None if "huge" in mutation else f"MemoryError for {mutation}"
        except Exception as e:      # noqa: BLE001 -- the same error the user's code raises
            if isinstance(want, Exception) and type(e) is type(want):
                return None
            if not isinstance(e, CLEAN):
                return f"{type(e).__name__}: {e}"
            if not isinstance(want, Exception) and isinstance(replacement, np.ndarray) \
                    and replacement.dtype.kind == "f" and replacement.dtype.isnative \
                    and "huge" not in mutation:
                return f"raised {type(e).__name__} ({e}) for a float array PyTorch accepts"
            return None
    if isinstance(want, Exception):
        if transform != "compile" and "int" in mutation:
            return None             # PyTorch cannot differentiate ints; symgrad may cast
        return f"returned a result where PyTorch raised {type(want).__name__}: {str(want)[:120]}"
    why = _close(_flat(got), _flat(want))
    return None if why is None else f"wrong answer: {why}"


def all_calls(seed: int = 0):
    """Every (target, backend, argument, mutation name, replacement) of one seed."""
    rng = np.random.default_rng(seed)
    for name, (fn, valid, transform) in targets().items():
        for backend in ("llvm", "numpy"):
            for i, a in enumerate(valid):
                for mname, rep in mutations(a, rng, is_index=(name == "gather" and i == 1)):
                    yield name, backend, i, mname, rep


def run(seconds: float, seed: int = 0) -> dict:
    t0 = time.monotonic()
    stats = {"calls": 0, "failures": []}
    while time.monotonic() - t0 < seconds:
        for name, backend, i, mname, rep in all_calls(seed):
            why = check_call(name, backend, i, mname, rep)
            stats["calls"] += 1
            if why:
                stats["failures"].append((name, backend, i, mname, why))
                print(f"{name}/{backend} arg {i} {mname}: {why}", flush=True)
            if time.monotonic() - t0 > seconds:
                break
        seed += 1
    return stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.arguments")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    stats = run(a.seconds, a.seed)
    print(f"{stats['calls']} calls, {len(stats['failures'])} failures")
    return 1 if stats["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
