"""Evaluating a graph on sympy symbols: every output element as a formula of the input
elements (the derivative as a formula). For small inputs only; loops are unrolled;
simplification is bounded (:data:`SIMPLIFY_OPS`)."""
from __future__ import annotations

import numpy as np
import sympy

from ..graph.node import Node, toposort
from ..graph import formula as F
from ..graph.primitives import NUMPY_RULES, PRIMITIVES, fmod

__all__ = ["symbolic_values", "input_symbols", "MAX_ELEMENTS", "SIMPLIFY_OPS"]

MAX_ELEMENTS = 4096


def input_symbols(name: str, shape: tuple) -> np.ndarray:
    """An object array of real symbols name_i_j."""
    arr = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
        suffix = "_".join(map(str, idx))
        arr[idx] = sympy.Symbol(f"{name}_{suffix}" if suffix else name, real=True)
    return arr


def _elementwise(expr, syms, args):
    args = np.broadcast_arrays(*[np.asarray(a, dtype=object) for a in args])
    out = np.empty(args[0].shape, dtype=object)
    for idx in np.ndindex(*out.shape):
        out[idx] = expr.xreplace({s: a[idx] for s, a in zip(syms, args)})
    return out


def _reduce(fn, x, axes, keepdim):
    x = np.asarray(x, dtype=object)
    res = np.apply_over_axes(lambda a, ax: np.expand_dims(
        np.apply_along_axis(lambda v: fn(*v), ax, a), ax), x, axes) if axes else x
    return res if keepdim else np.squeeze(res, axis=axes) if axes else res


def _run(node: Node, args):
    op = node.op
    kw = dict(node.attrs)
    if op == "fused":
        return _elementwise(F.to_sympy(kw["expr"], {"fmod": fmod()}),
                            [sympy.Symbol(f"a{i}", real=True) for i in range(len(args))], args)
    prim = PRIMITIVES[op]
    if prim.kind == "elementwise":
        return _elementwise(prim.formula.expr, prim.formula.symbols, args)
    if op == "cast":
        return np.asarray(args[0], dtype=object)
    if op in ("amax", "amin"):
        return _reduce(sympy.Max if op == "amax" else sympy.Min, args[0], kw["axes"],
                       kw["keepdim"])
    if op == "mean":
        n = int(np.prod([np.shape(args[0])[a] for a in kw["axes"]]))
        s = np.sum(np.asarray(args[0], dtype=object), axis=kw["axes"], keepdims=kw["keepdim"])
        return np.asarray(s, dtype=object) / n
    if op in ("argmax", "argmin"):
        raise ValueError("symbolic(): argmax / argmin have no formula")
    if op == "loop":
        return _loop(kw, args)
    if op == "while":
        raise ValueError("symbolic(): a while_loop's trip count depends on values, so it has "
                         "no formula (see as_text() for its body)")
    res = NUMPY_RULES[op](*[np.asarray(a, dtype=object) if isinstance(a, np.ndarray) else a
                            for a in args], **kw)
    return np.asarray(res, dtype=object)


def _loop(kw, args):
    """A scan, unrolled: its body evaluated on the symbols step by step."""
    body, T, m, p = kw["body"], kw["length"], kw["n_carry"], kw["n_xs"]
    carry = [np.asarray(a, dtype=object) for a in args[:m]]
    xs = [np.asarray(a, dtype=object) for a in args[m:m + p]]
    ks = [np.asarray(a, dtype=object) for a in args[m + p:]]
    steps: list = [None] * T
    for t in (range(T - 1, -1, -1) if kw["reverse"] else range(T)):
        ins = carry + [x[t, ...] for x in xs] + ks
        outs = symbolic_values(list(body.outputs),
                               {id(n): v for n, v in zip(body.inputs, ins)}, simplify=False)
        carry, steps[t] = outs[:m], outs[m:]
    ys = [np.stack([s[j] for s in steps]) if T else np.empty((0,) + tuple(o.shape), object)
          for j, o in enumerate(body.outputs[m:])]
    values = carry + ys
    return np.concatenate([np.asarray(values[i], dtype=object).reshape(-1)
                           for i in kw["select"]])


SIMPLIFY_OPS = 200     # simplify() runs on formulas up to this many operations (it is
                       # unbounded in time on larger ones); larger ones are returned as built


def _simplify(e):
    return sympy.simplify(e) if sympy.count_ops(e) <= SIMPLIFY_OPS else e


def symbolic_values(outputs: list[Node], env: dict[int, np.ndarray],
                    simplify: bool = True) -> list[np.ndarray]:
    """Object arrays of sympy expressions for `outputs`; env maps id(input node) to
    object arrays of symbols."""
    vals: dict[int, np.ndarray] = {}
    for n in toposort(outputs):
        if id(n) in env:
            vals[id(n)] = env[id(n)]
        elif n.op == "const":
            v = n.attr("value").value
            vals[id(n)] = np.vectorize(sympy.nsimplify, otypes=[object])(v) if v.size else \
                np.empty(v.shape, dtype=object)
        elif n.op == "input":
            raise KeyError(f"no symbols for input {n.attr('name')}")
        else:
            vals[id(n)] = _run(n, [vals[id(a)] for a in n.args])
    out = [np.asarray(vals[id(o)], dtype=object) for o in outputs]
    if simplify:
        out = [np.vectorize(_simplify, otypes=[object])(o) if o.size else o for o in out]
    return out
