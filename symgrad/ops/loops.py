"""Structured loops as primitives: ``loop`` (a scan: carries threaded through a body,
per-step slices of scanned arrays in, per-step results stacked out) and ``while``
(carries threaded through a body while a condition holds).

A loop is one node whatever its trip count: its body is a :class:`~symgrad.graph.body.Body`
attribute.  Its operands are the initial carries, the scanned arrays, then the values the
body closes over; its result is the loop's outputs (final carries, then stacked
per-step results) of one dtype, flattened and concatenated -- :func:`loop_outputs` makes
one node per dtype of the outputs and cuts them apart again, so every consumer sees
plain tensors and every other pass sees a one-output node.

Reverse mode (:func:`_loop_vjp`) is a loop too: a forward loop that also stacks the
carry each step starts from, then a reverse loop whose body is the symbolic VJP of the
forward body (built by :func:`symgrad.compiler.autodiff.grad_graph`), carrying the
cotangent of the carry and the sum of the closed-over values' cotangents.  So grad,
jacobian and hessian of a loop are loops, and compile cost does not grow with the trip
count.  ``while`` is forward-only, as in JAX.
"""
from __future__ import annotations

import threading

import numpy as np

from .. import dispatch
from ..graph import dtypes
from ..graph.body import Body
from ..graph.node import const, make_node, toposort
from ..graph.fpstate import enter as fp_enter, leave as fp_leave
from ..graph.primitives import NUMPY_RULES, PRIMITIVES as P
from ..graph.shapes import numel
from . import lax
from .define import primitive

__all__ = ["loop_outputs", "while_outputs", "body_input", "substitute", "replace_nodes",
           "next_level",
           "output_avals", "WHILE_GRAD_ERROR"]

WHILE_GRAD_ERROR = ("Reverse-mode differentiation does not work for lax.while_loop or "
                    "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or "
                    "using fori_loop with static start/stop.")

_levels = threading.local()


def next_level(*bodies: Body) -> int:
    """A nesting level for new body inputs, distinct from the levels of ``bodies``' inputs
    and of every body being traced now (so a body's inputs never coincide with nodes of
    an enclosing body: nodes are hash-consed)."""
    lv = getattr(_levels, "depth", 0)
    for b in bodies:
        for n in b.inputs:
            lv = max(lv, n.attr("slot")[1])
    return lv + 1


class tracing_level:
    """Context: a body is being traced at this level (nested bodies go deeper)."""

    def __init__(self, level: int):
        self.level = level

    def __enter__(self):
        self.prev = getattr(_levels, "depth", 0)
        _levels.depth = max(self.prev, self.level)
        return self

    def __exit__(self, *exc):
        _levels.depth = self.prev


def body_input(level: int, k: int, name: str, shape, dtype):
    """Input node ``k`` of a body at nesting ``level``."""
    return make_node("input", (), (("name", name), ("slot", ("body", level, k))),
                     tuple(shape), dtype)


def substitute(body: Body, args: list) -> list:
    """``body``'s output nodes with its inputs replaced by the nodes ``args`` (inlining)."""
    return replace_nodes(body.outputs, {id(n): a for n, a in zip(body.inputs, args)},
                         body.nodes())


def replace_nodes(outputs, memo: dict, order=None) -> list:
    """``outputs`` with the nodes keyed by id in ``memo`` replaced by its values (the
    nodes between rebuilt; ``order``: their topological order, when known)."""
    memo = dict(memo)
    for node in order if order is not None else toposort(list(outputs)):
        if id(node) in memo:
            continue
        if not node.args:
            memo[id(node)] = node
            continue
        new = tuple(memo[id(a)] for a in node.args)
        memo[id(node)] = node if all(a is b for a, b in zip(new, node.args)) else \
            make_node(node.op, new, node.attrs, node.shape, node.dtype)
    return [memo[id(o)] for o in outputs]


# ---- the loop primitive ------------------------------------------------------------------
def output_avals(body: Body, length: int, n_carry: int) -> list[tuple[tuple, dtypes.DType]]:
    """(shape, dtype) of every output of a scan loop: carries, then stacked results."""
    outs = body.out_avals
    return list(outs[:n_carry]) + [((length,) + tuple(s), d) for s, d in outs[n_carry:]]


def _loop_shape(avals, *, body, length, reverse, n_carry, n_xs, select):
    ins = body.in_avals
    if len(avals) != len(ins):
        raise ValueError(f"loop: {len(avals)} operands for a body of {len(ins)} inputs")
    for i, ((shape, dt), (bshape, bdt)) in enumerate(zip(avals, ins)):
        want = ((length,) + tuple(bshape)) if n_carry <= i < n_carry + n_xs else tuple(bshape)
        if tuple(shape) != want or dt is not bdt:
            raise ValueError(f"loop: operand {i} is {dt.name}{list(shape)}, the body expects "
                             f"{bdt.name}{list(want)}")
    outs = output_avals(body, length, n_carry)
    dt = outs[select[0]][1]
    return (sum(numel(outs[i][0]) for i in select),), dt


def _loop_numpy(*arrays, body, length, reverse, n_carry, n_xs, select):
    m, p = n_carry, n_xs
    carry = list(arrays[:m])
    xs = arrays[m:m + p]
    ks = list(arrays[m + p:])
    avals = output_avals(body, length, m)
    ys = [np.empty(s, d.np) for s, d in avals[m:]]
    for t in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = body.run(carry + [x[t, ...] for x in xs] + ks)
        carry = outs[:m]
        for y, v in zip(ys, outs[m:]):
            y[t] = v
    values = carry + ys
    dt = avals[select[0]][1].np
    return np.concatenate([np.asarray(values[i], dtype=dt).reshape(-1) for i in select])


def _groups(avals) -> list[tuple[int, ...]]:
    """Output indices grouped by dtype (in order of first appearance)."""
    by: dict = {}
    for i, (_, dt) in enumerate(avals):
        by.setdefault(dt, []).append(i)
    return [tuple(v) for v in by.values()]


def _unpack(packed, avals, select) -> dict[int, object]:
    out, offset = {}, 0
    for i in select:
        shape = tuple(avals[i][0])
        n = numel(shape)
        piece = lax.slice_(packed, (offset,), (offset + n,), (1,)) \
            if (offset, n) != (0, packed.shape[0]) else packed
        out[i] = lax.reshape(piece, shape)
        offset += n
    return out


def _apply(name: str, operands: list, attrs: dict):
    """Bind the loop primitive; on bare arrays (the eager engine's cotangents when no
    graph of the backward is built) run its numpy rule, in the dtype it computes."""
    if any(type(o) is np.ndarray for o in operands):
        values = [o._data if isinstance(o, dispatch.Tensor) else o for o in operands]
        token = fp_enter()
        try:
            return NUMPY_RULES[name](*values, **attrs)
        finally:
            fp_leave(token)
    return dispatch.bind(P[name], *operands, **attrs)


def loop_outputs(operands: list, *, body: Body, length: int, reverse: bool, n_carry: int,
                 n_xs: int) -> list:
    """Apply a scan loop to operand tensors (carries, scanned arrays, closed-over values):
    its outputs as tensors -- final carries, then the stacked per-step results."""
    avals = output_avals(body, length, n_carry)
    result: dict[int, object] = {}
    for select in _groups(avals):
        attrs = dict(body=body, length=length, reverse=reverse, n_carry=n_carry, n_xs=n_xs,
                     select=select)
        result.update(_unpack(_apply("loop", operands, attrs), avals, select))
    return [result[i] for i in range(len(avals))]


def _float(dt) -> bool:
    return dt.is_floating_point


def _loop_vjp(ctx, g):
    kw = ctx.kwargs
    body, T, rev = kw["body"], kw["length"], kw["reverse"]
    m, p, select = kw["n_carry"], kw["n_xs"], kw["select"]
    n_in = len(body.inputs)
    ops = [ctx.input(i) for i in range(n_in)]
    r = len(body.outputs) - m
    avals = output_avals(body, T, m)
    # 1. the forward loop again, also stacking the carry each step starts from
    #    (the same node as the primal loop's when that one saves them too: see rewrite)
    aug = Body(body.inputs, body.outputs + body.inputs[:m])
    outs = loop_outputs(ops, body=aug, length=T, reverse=rev, n_carry=m, n_xs=p)
    stacked = outs[m + r:]
    # 2. the cotangents of this node's outputs, zero for the others
    cts = _unpack(g, avals, select)
    ct_out = [cts.get(i) for i in range(m + r)]
    # 3. the reverse loop over the VJP of the body
    fc = [i for i in range(m) if _float(body.inputs[i].dtype)]
    fx = [i for i in range(m, m + p) if _float(body.inputs[i].dtype)]
    fk = [i for i in range(m + p, n_in) if _float(body.inputs[i].dtype)]
    fy = [j for j in range(m, m + r) if _float(body.outputs[j].dtype)]
    if not (fc or fx or fk):
        return (None,) * n_in
    bwd, layout = _vjp_body(body, m, p, fc, fx, fk, fy)
    init = []
    for i in fc:
        c = ct_out[i]
        init.append(c if c is not None else lax.zeros(body.inputs[i].shape, body.inputs[i].dtype))
    for i in fk:
        init.append(lax.zeros(body.inputs[i].shape, body.inputs[i].dtype))
    xs_b = [ops[i] for i in range(m, m + p)] + stacked
    for j in fy:
        c = ct_out[j]
        xs_b.append(c if c is not None else lax.zeros(avals[j][0], avals[j][1]))
    res = loop_outputs(init + xs_b + ops[m + p:], body=bwd, length=T, reverse=not rev,
                       n_carry=len(fc) + len(fk), n_xs=len(xs_b))
    grads = [None] * n_in
    for pos, i in enumerate(layout):
        if ctx.needs_input_grad[i]:
            grads[i] = res[pos]
    return tuple(grads)


def _vjp_body(body: Body, m, p, fc, fx, fk, fy):
    """The reverse loop's body: (ct carry, sum of ct closures), (x_t, carry_t, ct y_t),
    closures -> (ct carry before the step, sums + ct closures of the step), ct x_t.
    Also which forward operand each output of the reverse loop is the cotangent of."""
    from ..compiler.autodiff import grad_graph   # late: autodiff imports the ops (cycle)
    lv = next_level(body)
    ins = body.inputs
    k = 0

    def new(name, n):
        nonlocal k
        node = body_input(lv, k, name, n.shape, n.dtype)
        k += 1
        return node

    ct_c = [new(f"ct_c{i}", ins[i]) for i in fc]
    acc = [new(f"acc_k{i}", ins[i]) for i in fk]
    xs_t = [new(f"x{i - m}", ins[i]) for i in range(m, m + p)]
    cs_t = [new(f"c{i}", ins[i]) for i in range(m)]
    ct_y = [new(f"ct_y{j - m}", body.outputs[j]) for j in fy]
    ks = [new(f"k{i - m - p}", ins[i]) for i in range(m + p, len(ins))]
    fwd = substitute(body, cs_t + xs_t + ks)
    outs = [fwd[i] for i in fc] + [fwd[j] for j in fy]
    seeds = ct_c + ct_y
    wrt = [cs_t[i] for i in fc] + [xs_t[i - m] for i in fx] + [ks[i - m - p] for i in fk]
    grads = grad_graph(outs, wrt, seeds) if outs else [const(np.zeros(w.shape, w.dtype.np),
                                                               w.dtype) for w in wrt]
    gc = grads[:len(fc)]
    gx = grads[len(fc):len(fc) + len(fx)]
    gk = grads[len(fc) + len(fx):]
    new_acc = [lax.add(_t(a), _t(b))._node for a, b in zip(acc, gk)]
    bwd = Body(ct_c + acc + xs_t + cs_t + ct_y + ks, list(gc) + new_acc + list(gx))
    layout = list(fc) + list(fk) + list(fx)
    return bwd, layout


def _t(node):
    return dispatch.Tensor._from_node(node)


primitive("loop", -1, _loop_shape, _loop_numpy, family="control", vjp=_loop_vjp,
          saves="all", grad_name="ScanBackward0")


# ---- while ---------------------------------------------------------------------------------
def _while_shape(avals, *, cond, body, n_carry, n_cond, select):
    outs = body.out_avals[:n_carry]
    dt = outs[select[0]][1]
    return (sum(numel(outs[i][0]) for i in select),), dt


def _while_numpy(*arrays, cond, body, n_carry, n_cond, select):
    m = n_carry
    carry = list(arrays[:m])
    kc = list(arrays[m:m + n_cond])
    kb = list(arrays[m + n_cond:])
    while bool(cond.run(carry + kc)[0]):
        carry = body.run(carry + kb)
    dt = body.out_avals[select[0]][1].np
    return np.concatenate([np.asarray(carry[i], dtype=dt).reshape(-1) for i in select])


def _while_vjp(ctx, g):
    raise ValueError(WHILE_GRAD_ERROR)


def while_outputs(operands: list, *, cond: Body, body: Body, n_carry: int, n_cond: int) -> list:
    """Apply a while loop to operand tensors (carries, the condition's closed-over
    values, the body's): the final carries."""
    avals = body.out_avals[:n_carry]
    result: dict[int, object] = {}
    for select in _groups(avals):
        attrs = dict(cond=cond, body=body, n_carry=n_carry, n_cond=n_cond, select=select)
        result.update(_unpack(_apply("while", operands, attrs), avals, select))
    return [result[i] for i in range(len(avals))]


primitive("while", -1, _while_shape, _while_numpy, family="control", vjp=_while_vjp,
          saves=(), grad_name="WhileLoopBackward0")
