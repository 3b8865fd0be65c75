"""Automatic dynamic shapes: which argument dimensions vary between calls, and how every
size of a program depends on them.

Policy (as torch.compile's automatic dynamic shapes).  The first call compiles for its
exact shapes.  When a later call differs from the last compiled signature only in
some dimensions that all had one value and now all have another (a batch size, a
sequence length), those dimensions become one symbolic size ``n``: the dispatcher
asks for one kernel serving every ``n >= 2`` (:func:`candidate`).  Sizes 0 and 1 are
specialised (compiled for their exact shape, as torch does): broadcasting and empty
reductions behave differently there.  A size that keeps coming back (the full batch of
an epoch) is compiled for its exact shape after :data:`SPECIALISE_AFTER` calls on the
generic kernel: its steady calls then run the fixed-shape code (fused loops, register
tiles, the native CPython entry) -- a JIT's tiers; the generic kernel keeps serving
every other size.

How the sizes of the program follow ``n`` is found by tracing (and transforming,
optimising) the function at three sizes (:data:`SENTINELS`) and comparing the three
programs node by node (:func:`generalize`): the same operations, dtypes and arguments;
every dimension equal or affine in ``n`` (fitted on two sizes, checked on the third);
attributes equal, except those that only restate a shape, a slice's start or a
select's index (affine too), and uniform constants or numbers in fused formulas equal
to ``p*n + q``, ``1/(p*n + q)`` or ``(p*n + q)/(r*n + s)`` (a mean's count, its
gradient's ``1/count``, an unbiased variance's ``n/(n-1)``).  Anything else is a reason, in words, to compile per size instead.
"""
from __future__ import annotations

import math
from fractions import Fraction
from dataclasses import replace

import numpy as np

from ..graph import formula as F
from ..graph.dynamic_dims import DynamicDims
from ..graph.node import Constant, toposort

__all__ = ["SENTINELS", "candidate", "generalize", "with_size", "matches"]

SENTINELS = (37, 38, 43)    # sizes the generic program is traced at: mixed parity, rare dims
SPECIALISE_AFTER = 200      # calls of one size on the generic kernel before it gets its own
_SHAPE_ATTRS = ("shape",)


def candidate(old, new, names) -> tuple[tuple, int, int] | str:
    """For two signatures (structure, specs, static): ``(dims, old size, new size)``
    when they differ only in dimensions that all had one size and all have another
    (``dims``: the (leaf, axis) pairs), else why not (a sentence)."""
    (s0, sp0, st0), (s1, sp1, st1) = old, new
    if s0 != s1 or st0 != st1 or len(sp0) != len(sp1):
        return "the arguments' structure or static arguments changed"
    dims, before, after = [], set(), set()
    for k, (a, b) in enumerate(zip(sp0, sp1)):
        if (a.kind, a.dtype, a.requires_grad, len(a.shape)) != \
                (b.kind, b.dtype, b.requires_grad, len(b.shape)):
            return f"{names[k] if k < len(names) else k}: more than a size changed"
        for d, (x, y) in enumerate(zip(a.shape, b.shape)):
            if x != y:
                dims.append((k, d))
                before.add(x)
                after.add(y)
    if not dims:
        return "no size changed"
    if len(before) > 1 or len(after) > 1:
        return "several sizes changed independently"
    return tuple(dims), before.pop(), after.pop()


def with_size(specs, dims, n: int) -> tuple:
    """``specs`` with the dimensions ``dims`` set to ``n``."""
    out = list(specs)
    for k, d in dims:
        shape = list(out[k].shape)
        shape[d] = n
        out[k] = replace(out[k], shape=tuple(shape))
    return tuple(out)


def matches(specs, pattern, dims) -> int | None:
    """The size ``n`` at which ``specs`` equal ``pattern`` with ``dims`` set to ``n``
    (one ``n``, at least 2), else None."""
    if len(specs) != len(pattern) or not dims:
        return None
    k, d = dims[0]
    n = specs[k].shape[d] if len(specs[k].shape) > d else None
    if n is None or n < 2:
        return None
    return n if tuple(specs) == with_size(pattern, dims, n) else None


def _nodes(program):
    return toposort(list(program.outputs) + list(program.inputs))


def _fit(values, sizes):
    """(a, b) with ``values[i] == a*sizes[i] + b`` for all i (integers), else None."""
    (v0, v1), (n0, n1) = values[:2], sizes[:2]
    a, r = divmod(v1 - v0, n1 - n0)
    if r:
        return None
    b = v0 - a * n0
    return (a, b) if all(a * n + b == v for v, n in zip(values, sizes)) else None


def _number_fit(xs, sizes, rel: float = 1e-12):
    """How the numbers ``xs`` follow the size ``n`` at ``sizes``: ("affine", p, q) for
    ``p*n + q``, ("inverse", p, q) for ``1/(p*n + q)``, ("ratio", p, q, r, s) for
    ``(p*n + q)/(r*n + s)`` with small integers (an unbiased variance's ``n/(n-1)``),
    else None. Exact for fractions; floats to ``rel`` (a ratio: as the rounding of the
    exact quotient to float32, or float64, gives them)."""
    def close(a, b):
        return a == b if isinstance(a, Fraction) else math.isclose(a, b, rel_tol=rel, abs_tol=0)
    for kind in ("affine", "inverse"):
        if kind == "inverse" and any(x == 0 for x in xs):
            return None
        ys = list(xs) if kind == "affine" else [1 / x for x in xs]
        p = (ys[1] - ys[0]) / (sizes[1] - sizes[0])
        q = ys[0] - p * sizes[0]
        if all(close(y, p * n + q) for y, n in zip(ys, sizes)):
            return kind, p, q
    return _ratio_fit(xs, sizes)


def _ratio_fit(xs, sizes, largest: int = 64):
    """("ratio", p, q, r, s): integers (|.| <= ``largest``, r > 0) with ``xs[i]`` the
    exact ``(p*n + q)/(r*n + s)`` at every size -- or its rounding to float64 or to
    float32, one of them at every size -- else None. (A small search: for each
    denominator, the numerator's integers from the two sizes furthest apart.)"""
    if len(xs) < 4 or len(set(sizes)) != len(sizes):
        return None
    exact_in = isinstance(xs[0], Fraction)
    lo, hi = sizes.index(min(sizes)), sizes.index(max(sizes))
    for r in range(1, 5):
        for s in range(-largest, largest + 1):
            if any(r * n + s == 0 for n in sizes):
                continue
            z_lo, z_hi = (xs[k] * (r * sizes[k] + s) for k in (lo, hi))
            p = round((z_hi - z_lo) / (sizes[hi] - sizes[lo]))
            q = round(z_lo - p * sizes[lo])
            if max(abs(p), abs(q)) > largest or p * s == q * r or math.gcd(p, q, r, s) != 1:
                continue
            exact = [Fraction(p * n + q, r * n + s) for n in sizes]
            if exact_in:
                if list(xs) == exact:
                    return "ratio", p, q, r, s
            elif _rounded(xs, exact):
                return "ratio", p, q, r, s
    return _offset_inverse_fit(xs, sizes, exact_in)


def _rounded(xs, exact) -> bool:
    """Whether the floats ``xs`` are the fractions ``exact`` rounded once, all to float64
    or all to float32."""
    return list(xs) == [float(e) for e in exact] or \
        list(xs) == [float(np.float32(float(e))) for e in exact]


def _offset_inverse_fit(xs, sizes, exact_in: bool, largest: int = 1 << 16):
    """``c + 1/(p*n + q)`` with integers c in +-1, +-2 and |p|, |q| <= ``largest`` (a
    count that is a multiple of the size: BatchNorm2d's ``HWn/(HWn - 1)``), as the
    ratio ``((c*p)*n + c*q + 1)/(p*n + q)`` (integers: computed exactly while the
    count stays below 2**24 in float32, one rounding) -- or None."""
    for c in (1, -1, 2, -2):
        if any(x == c for x in xs):
            continue
        zs = [1 / (float(x) - c) for x in xs]     # ~ p*n + q, as rounded as x - c is
        for q in (-1, 1, 0, -2, 2, -3, 3, -4, 4):        # (the simplest first)
            est = sorted((z - q) / n for z, n in zip(zs, sizes))[len(sizes) // 2]
            if not math.isfinite(est) or abs(est) > largest:
                continue
            # the integers nearest the estimate first (float32 inputs cannot tell a large
            # p from its neighbours: any of them rounds to the same numbers)
            for d in range(2 * max(2, int(abs(est) * 0.02)) + 1):
                p = round(est) + (d + 1) // 2 * (1 if d % 2 else -1)
                if p == 0 or any(p * n + q == 0 for n in sizes):
                    continue
                exact = [c + Fraction(1, p * n + q) for n in sizes]
                if (list(xs) == exact) if exact_in else _rounded(xs, exact):
                    return "ratio", c * p, c * q + 1, p, q
    return None


def _scalar(values, sizes):
    """A fit (:func:`_number_fit`) of constants whose elements are all equal and move with
    the size (a mean's count, the gradient of a mean folded into an array), else None."""
    if any(v.size == 0 or v.dtype.kind not in "fiu" or not (v == v.reshape(-1)[0]).all()
           for v in values):
        return None
    rel = 4 * float(np.finfo(values[0].dtype).eps) if values[0].dtype.kind == "f" else 1e-12
    fit = _number_fit([float(v.reshape(-1)[0]) for v in values], sizes, rel)
    return None if fit is None else (fit[0], *map(float, fit[1:]))


def _expr_fit(exprs, sizes):
    """The formula (:mod:`symgrad.graph.formula`) of the first of ``exprs`` with every
    number that moves with the size written as ``p*n + q`` or ``1/(p*n + q)`` of
    ``DynamicDims.size_symbol()``, or None. (Iterative: the formulas are walked together,
    node by node.)"""
    done: dict = {}
    stack = [tuple(exprs)]
    while stack:
        group = stack[-1]
        if group in done:
            stack.pop()
            continue
        e0 = group[0]
        if all(e is e0 for e in group[1:]):
            done[group] = e0
        elif all(e.op == "num" and not isinstance(e.value, bool) for e in group):
            done[group] = _number_formula([e.value for e in group], sizes)
        elif any(e.op != e0.op or len(e.args) != len(e0.args) for e in group[1:]) or \
                e0.op in ("sym", "num", "pi"):
            done[group] = None
        else:
            parts = [tuple(e.args[i] for e in group) for i in range(len(e0.args))]
            todo = [p for p in parts if p not in done]
            if todo:
                stack.extend(todo)
                continue
            args = [done[p] for p in parts]
            done[group] = None if any(a is None for a in args) else F.Expr(e0.op, tuple(args))
        stack.pop()
        if done[group] is None:
            return None
    return done[tuple(exprs)]


def _number_formula(values, sizes):
    """``p*n + q`` or ``1/(p*n + q)`` fitting the numbers ``values`` at ``sizes``, or None."""
    exact = all(isinstance(v, (int, Fraction)) for v in values)
    xs = [Fraction(v) if exact else float(v) for v in values]
    fit = _number_fit(xs, sizes)
    if fit is None:
        return None
    n = DynamicDims.size_symbol()

    def affine(p, q):
        a = F.number(p) * n
        return a if q == 0 else a + F.number(q)
    kind, *c = fit
    if kind == "ratio":       # (integers: numerator and denominator exact, one rounding)
        return affine(c[0], c[1]) / affine(c[2], c[3])
    return affine(*c) if kind == "affine" else 1 / affine(*c)


def _same(values) -> bool:
    first = values[0]
    if isinstance(first, Constant):
        return all(np.array_equal(first.value, v.value, equal_nan=True)
                   and first.value.dtype == v.value.dtype for v in values[1:])
    try:
        return all(v == first for v in values[1:])
    except Exception:          # attributes without a meaningful ==
        return False


def generalize(programs, sizes) -> DynamicDims | str:
    """How the first program's sizes depend on ``n`` (see the module docstring), given
    the same function's programs at ``sizes``; or why it cannot (a sentence)."""
    lists = [_nodes(p) for p in programs]
    if len({len(ns) for ns in lists}) != 1 or \
            len({len(p.inputs) for p in programs}) != 1 or len({len(p.outputs) for p in programs}) != 1:
        return "the program's structure depends on the size (a different number of operations)"
    pos = [{id(n): i for i, n in enumerate(ns)} for ns in lists]
    for p, ps in zip(programs, pos):
        if [ps[id(n)] for n in p.outputs] != [pos[0][id(n)] for n in programs[0].outputs]:
            return "the program's outputs depend on the size"
    out = DynamicDims()
    for i, group in enumerate(zip(*lists)):
        ref = group[0]
        if any(n.op != ref.op or n.dtype is not ref.dtype or len(n.shape) != len(ref.shape)
               or [ps[id(a)] for a in n.args] != [pos[0][id(a)] for a in ref.args]
               for n, ps in zip(group, pos)):
            return (f"the program's structure depends on the size (operation {i}, "
                    f"{ref.op}, differs)")
        dims = []
        for d in range(len(ref.shape)):
            fit = _fit([n.shape[d] for n in group], sizes)
            if fit is None:
                return f"{ref.op}: dimension {d} is not an affine function of the size"
            dims.append(fit)
        if any(a for a, _ in dims):
            out.shapes[id(ref)] = tuple(dims)
        why = _attrs(ref, group, sizes, out)
        if why:
            return why
    return out


def _attrs(ref, group, sizes, out: DynamicDims) -> str | None:
    """Check (and record in ``out``) the attributes of one aligned node."""
    if ref.op in ("loop", "while"):
        return f"{ref.op}: a loop body is compiled for fixed sizes"
    if ref.op in ("slice", "pad_slice") and _arg_dynamic(ref, group):
        starts = []
        for d in range(len(ref.shape) if ref.op == "pad_slice" else len(ref.args[0].shape)):
            # (a slice's range is in its argument, a pad_slice's in its result)
            vals = [slice(n.attr("starts")[d], n.attr("stops")[d], n.attr("steps")[d])
                    .indices((n if n.op == "pad_slice" else n.args[0]).shape[d])[0]
                    for n in group]
            fit = _fit(vals, sizes)
            if fit is None:
                return "slice: a start that is not an affine function of the size"
            starts.append(fit)
        out.attrs[id(ref)] = {"starts": tuple(starts)}
        skip = {"starts", "stops"}
    elif ref.op == "select" and _arg_dynamic(ref, group):
        axis = ref.attr("axis")
        vals = [n.attr("index") + (n.args[0].shape[axis] if n.attr("index") < 0 else 0)
                for n in group]
        fit = _fit(vals, sizes)
        if fit is None:
            return "select: an index that is not an affine function of the size"
        out.attrs[id(ref)] = {"index": fit}
        skip = {"index"}
    else:
        skip = set()
    for (name, _), *rest in zip(ref.attrs, *(n.attrs for n in group[1:])):
        if name in skip:
            continue
        values = [ref.attr(name)] + [n.attr(name) for n in group[1:]]
        if any(r[0] != name for r in rest) and rest:
            return f"{ref.op}: attributes differ between sizes"
        if _same(values):
            continue
        if ref.op == "pad_slice" and name == "stops" and "starts" in skip:
            continue                      # (the result's shape and the argument's restate it)
        if name in _SHAPE_ATTRS and all(tuple(v) == n.shape for v, n in zip(values, group)):
            continue
        if ref.op == "gather_scatter" and name == "size" and \
                all(v == n.shape[n.attr("axis")] for v, n in zip(values, group)):
            continue
        if ref.op == "fused" and name == "expr":
            expr = _expr_fit(values, sizes)
            if expr is not None:
                out.exprs[id(ref)] = expr
                continue
            return ("fused: a formula's numbers depend on the size (not as p*n+q, 1/(p*n+q) "
                    "or (p*n+q)/(r*n+s))")
        if ref.op == "const" and name == "value":
            arrays = [v.value for v in values]
            kind = _scalar(arrays, sizes)
            if kind is not None:
                out.scalars[id(ref)] = kind
                continue
            uniform = [a.reshape(-1)[:1] for a in arrays]
            if all(a.size for a in arrays) and _same([Constant(u) for u in uniform]) and \
                    all((a == a.reshape(-1)[0]).all() for a in arrays):
                continue              # the same value everywhere, shape from the dims
            return "a constant's value depends on the size"
        return f"{ref.op}: attribute {name} depends on the size"
    return None


def _arg_dynamic(ref, group) -> bool:
    return any(a.args[0].shape != ref.args[0].shape or a.shape != ref.shape for a in group)
