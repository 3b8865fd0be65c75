"""Applying a primitive: the single path every tensor operation takes.

:func:`bind` runs a primitive on eager values (numpy) or on traced values (building
hash-consed nodes), and records a backward :class:`~symgrad.autograd.nodes.BackwardFunction`
when grad mode is on and an input requires grad. Eager and traced mode share it, and so
share the VJP rules the recorded Functions run.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .graph import dtypes
from .autograd import grad_mode
from .autograd.nodes import SavedTensor, accumulator, new_function, save_order
from .graph.fpstate import enter as fp_enter, leave as fp_leave
from .graph import node as gnode
from .graph.node import stop_gradient_node
from .graph import formula as F
from .graph import primitives as registry
from .graph.primitives import NUMPY_RULES, SHAPE_RULES
from .tensor import Tensor
from .tracing import _lifter, set_lifter, tracing

__all__ = ["bind", "bind_binary", "bind_pair", "bind_unary", "record", "record_one", "set_lifter", "tracing", "traced", "stop_gradient_node",
           "Tensor"]

_grad_state = grad_mode._state
_SAVE_CACHE: dict = {}


def bind(prim: registry.Primitive, *operands: Tensor | int | float | bool,
         grad_name: str | None = None, **attrs: Any) -> Tensor:
    """Apply `prim` to `operands` (Tensors; Python scalars for elementwise primitives,
    which take the dtype of the tensor operands)."""
    tracer = _lifter[0]
    if tracer is None and len(operands) == 1:     # one eager tensor: the common case
        x = operands[0]
        if isinstance(x, Tensor) and x._data is not None:
            out = (_elementwise_values(prim, (x._data,), x._dtype)
                   if prim.kind == "elementwise" else _eager(prim, operands, attrs))
            if (x._requires_grad or x.grad_fn is not None) and _grad_state.enabled \
                    and prim.differentiable and out._dtype.category == "float":
                record_one(prim, x, attrs, out, grad_name)
            return out
    traced = False
    req = False
    if tracer is not None and tracer.gates:     # a traced branch (functions/branching.py)
        operands = tracer.gate(operands)
    for o in operands:
        if isinstance(o, Tensor):
            if o._data is None or (tracer is not None and tracer.is_outer(o)):
                traced = True
            if o._requires_grad or o.grad_fn is not None:
                req = True
    if traced:
        out = _trace(prim, operands, attrs)
    elif prim.kind == "elementwise":
        out = _eager_elementwise(prim, operands)
    else:
        out = _eager(prim, operands, attrs)
    if req and _grad_state.enabled and prim.differentiable and out._dtype.category == "float":
        _record(prim, operands, attrs, out, grad_name)     # integer results have no history
    return out


def _operand_dtype(prim, operands) -> dtypes.DType:
    """The dtype of an elementwise primitive's operands (where: of its value operands)."""
    dt = None
    for o in (operands if prim.name != "where" else operands[1:]):
        if isinstance(o, Tensor):
            dt = o._dtype
    return dt if dt is not None else operands[0]._dtype


def bind_binary(prim: registry.Primitive, a, b, grad_name: str | None = None):
    """``bind(prim, a, b)`` for the hot path of arithmetic: an elementwise primitive on
    Tensors of one float dtype, or a Tensor and a Python number (the caller checked)."""
    ta = type(a) is Tensor
    x = a._data if ta else a
    tb = type(b) is Tensor
    y = b._data if tb else b
    if x is None or y is None or _lifter[0] is not None:     # traced: the general path
        return bind(prim, a, b, grad_name=grad_name)
    out = _elementwise_values(prim, (x, y), b._dtype if tb else a._dtype)
    if (((ta and (a._requires_grad or a.grad_fn is not None))
         or (tb and (b._requires_grad or b.grad_fn is not None)))
            and _grad_state.enabled and prim.differentiable and out._dtype.category == "float"):
        _record_pair(prim, a, b, ta, tb, out, grad_name)
    return out


def _edge(o):
    """(node, output number) where the gradient of Tensor `o`, which requires grad,
    flows: its grad_fn, or its (live or new) AccumulateGrad."""
    fn = o.grad_fn
    if fn is not None:
        return (fn, o._output_nr)
    acc = o._acc            # (a live AccumulateGrad: no call to make one)
    acc = acc() if acc is not None else None
    return (acc if acc is not None else accumulator(o), 0)


def _operand_entry(o):
    """(whether it needs a gradient, its edge, its aval) of an eager Tensor operand."""
    need = o._requires_grad or o.grad_fn is not None
    return need, (_edge(o) if need else _NO_EDGE), (o._data.shape, o._dtype)


def _record_pair(prim, a, b, ta, tb, out, grad_name):
    """:func:`_record` for two eager operands (Tensors where `ta` / `tb`, else Python
    numbers), as bind_binary calls it: the same node, without the loops."""
    na, ea, aa = _operand_entry(a) if ta else _SCALAR_ENTRY
    nb, eb, ab = _operand_entry(b) if tb else _SCALAR_ENTRY
    needs = _PAIR_NEEDS[na, nb]
    name = grad_name or prim.grad_name
    hit = _SAVE_CACHE.get((prim, needs, name))
    save_ins, save_out = hit if hit is not None else _saves(prim, needs, name)
    if save_ins:
        saved = [None, None]
        for i in save_ins:
            o = b if i else a
            saved[i] = SavedTensor(o) if (tb if i else ta) else o
        saved = tuple(saved)
    else:
        saved = _NONES[2]
    fn = new_function(name, prim, (), (aa, ab), (out._data.shape, out._dtype), (ea, eb), needs,
                      saved, None)
    out.grad_fn = fn
    if save_out:            # after the output has its history, as PyTorch saves it
        fn._saved_out = SavedTensor(out, is_output=True)


_SCALAR_ENTRY = (False, (None, 0), ((), None))
_PAIR_NEEDS = {(x, y): (x, y) for x in (False, True) for y in (False, True)}


_NO_ATTRS: dict = {}


def bind_pair(prim: registry.Primitive, a: Tensor, b: Tensor, grad_name: str | None = None
              ) -> Tensor:
    """``bind(prim, a, b)`` of a structural primitive without attributes on two eager
    Tensors of one float dtype whose shapes the caller checked (the matmul of two
    matrices): its numpy rule and the recorded node, without the shape rule."""
    if _lifter[0] is not None:
        return bind(prim, a, b, grad_name=grad_name)
    dt = a._dtype
    token = fp_enter()
    try:
        res = NUMPY_RULES[prim.name](a._data, b._data)
    finally:
        fp_leave(token)
    if type(res) is not np.ndarray or res.dtype != dt.np:
        res = np.asarray(res, dtype=dt.np)
    out = Tensor._from_array(res, dt)
    if (a._requires_grad or a.grad_fn is not None or b._requires_grad
            or b.grad_fn is not None) and _grad_state.enabled and prim.differentiable:
        _record_pair(prim, a, b, True, True, out, grad_name)
    return out


def bind_unary(prim: registry.Primitive, x: Tensor, grad_name: str | None = None) -> Tensor:
    """``bind(prim, x)`` for the hot path of elementwise math: a float Tensor `x` (the
    caller checked), no promotion to do."""
    a = x._data
    if a is None or _lifter[0] is not None:     # traced: the general path
        return bind(prim, x, grad_name=grad_name)
    out = _elementwise_values(prim, (a,), x._dtype)
    if (x._requires_grad or x.grad_fn is not None) and _grad_state.enabled \
            and prim.differentiable and out._dtype.category == "float":
        record_one(prim, x, _NO_ATTRS, out, grad_name)
    return out


def _eager_elementwise(prim, operands):
    """An elementwise primitive on values, in the dtype of the last tensor operand
    (where: of its value operands, as _operand_dtype says)."""
    arrays = []
    dt = None
    for o in operands:
        if isinstance(o, Tensor):
            arrays.append(o._data)
            dt = o._dtype
        else:
            arrays.append(o)
    return _elementwise_values(prim, arrays, dt)


def _elementwise_values(prim, arrays, dt):
    """A Tensor of `prim`'s numpy rule on `arrays`; `dt` is the operands' dtype."""
    token = fp_enter()    # log(0), sqrt(-1): no warnings, as in PyTorch
    try:
        res = NUMPY_RULES[prim.name](*arrays)
    except ValueError:
        SHAPE_RULES[prim.name]([(np.shape(a), None) for a in arrays])  # raises torch's text
        raise
    finally:
        fp_leave(token)
    kind = prim.out_dtype
    if kind == "bool":
        dt = dtypes.bool_
    elif kind == "float" and dt.category != "float":
        dt = dtypes.get_default_dtype()
    if type(res) is not np.ndarray or res.dtype != dt.np:
        res = np.asarray(res, dtype=dt.np)
    return Tensor._from_array(res, dt)


def _eager(prim, operands, attrs):
    """A structural primitive on values: shape rule (validation, result dtype), then its
    numpy rule (layout primitives compute no floats: no floating-point state to set)."""
    if len(operands) == 1 and isinstance(operands[0], Tensor):    # (the common case)
        o = operands[0]
        arrays = (o._data,)
        avals = ((o._data.shape, o._dtype),)
    else:
        arrays, avals = [], []
        for o in operands:
            if isinstance(o, Tensor):
                a = o._data
                arrays.append(a)
                avals.append((a.shape, o._dtype))
            else:
                arrays.append(o)
                avals.append((np.shape(o), None))
    name = prim.name
    shape, dt = SHAPE_RULES[name](avals, **attrs)
    if prim.family == "view":
        res = NUMPY_RULES[name](*arrays, **attrs)
    else:
        token = fp_enter()
        try:
            res = NUMPY_RULES[name](*arrays, **attrs)
        finally:
            fp_leave(token)
    if type(res) is not np.ndarray or res.dtype != dt.np:
        res = np.asarray(res, dtype=dt.np)
    if res.shape != shape:
        raise AssertionError(f"{name}: numpy rule gave shape {res.shape}, shape rule {shape}")
    return Tensor._from_array(res, dt)


def _as_node(o, dtype):
    if isinstance(o, Tensor):
        if o._node is not None:
            lift = _lifter[0]
            if lift is not None and lift.captures_traced and lift.is_outer(o):
                return lift(o)        # a loop body's use of an outer traced value
            return o._node
        lift = _lifter[0]
        return lift(o) if lift is not None else gnode.const(o._data, o.dtype)
    return gnode.const(o, dtype)


def traced(prim: registry.Primitive, *operands, **attrs) -> Tensor:
    """``prim`` applied as a node of the active trace even when no operand is traced (a
    ``full`` that must not become a constant array)."""
    return _trace(prim, operands, attrs)


def _trace(prim, operands, attrs):
    dt = _operand_dtype(prim, operands) if prim.kind == "elementwise" else None
    args = tuple(_as_node(o, dt) for o in operands)
    shape, out_dt = SHAPE_RULES[prim.name]([(a.shape, a.dtype) for a in args], **attrs)
    akey = tuple(sorted(attrs.items()))
    node = gnode.make_node(prim.name, args, akey, tuple(shape), out_dt)
    if not _grad_state.enabled and not _grad_state.deriving and prim.differentiable \
            and out_dt.is_floating_point:
        node = stop_gradient_node(node)      # no_grad in a trace: as eager, no gradient
    return Tensor._from_node(node)


def _saves(prim, needs, name):
    """(indices of inputs to save, in the order PyTorch's node `name` saves them;
    whether to save the output) for this needs mask."""
    key = (prim, needs, name)
    hit = _SAVE_CACHE.get(key)
    if hit is not None:
        return hit
    if prim.kind == "elementwise":
        syms = prim.formula.fsymbols
        free = set()
        for i, need in enumerate(needs):
            if need:
                free |= F.free_symbols(prim.formula.fpartial(i))
        ins = tuple(i for i, s in enumerate(syms) if s in free)
        hit = (save_order(name, ins), registry.OUT in free)
    else:
        ins = tuple(range(len(needs))) if prim.saves == "all" else prim.saves
        hit = (save_order(name, ins), prim.saves_out)
    _SAVE_CACHE[key] = hit
    return hit




_NO_EDGE = (None, 0)


def _record(prim, operands, attrs, out, grad_name):
    needs, nexts, in_avals = [], [], []
    for o in operands:
        if isinstance(o, Tensor):
            fn = o.grad_fn
            if fn is not None:
                needs.append(True)
                nexts.append((fn, o._output_nr))
            elif o._requires_grad:
                needs.append(True)
                acc = o._acc            # (a live AccumulateGrad: no call to make one)
                acc = acc() if acc is not None else None
                nexts.append((acc if acc is not None else accumulator(o), 0))
            else:
                needs.append(False)
                nexts.append(_NO_EDGE)
            node = o._node
            in_avals.append(((o._data.shape if node is None else node.shape), o._dtype))
        else:
            needs.append(False)
            nexts.append(_NO_EDGE)
            in_avals.append(_SCALAR_AVAL)
    needs = tuple(needs)
    name = grad_name or prim.grad_name
    hit = _SAVE_CACHE.get((prim, needs, name))
    save_ins, save_out = hit if hit is not None else _saves(prim, needs, name)
    n = len(operands)
    if save_ins:
        saved = [None] * n
        for i in save_ins:
            o = operands[i]
            saved[i] = SavedTensor(o) if isinstance(o, Tensor) else o
        saved = tuple(saved)
    else:
        saved = _NONES[n] if n < 4 else (None,) * n
    if prim.edges is not None:      # (the engine pairs gradients with edges: a trailing
        del nexts[prim.edges:]      # index operand, whose gradient is None, has none)
    node = out._node
    fn = new_function(name, prim, tuple(attrs.items()) if attrs else (),  # (read as a dict)
                      tuple(in_avals), ((out._data.shape if node is None else node.shape),
                                        out._dtype), tuple(nexts), needs, saved, None)
    out.grad_fn = fn
    if save_out:            # after the output has its history, as PyTorch saves it
        fn._saved_out = SavedTensor(out, is_output=True)


def record(prim, operands, attrs, out, grad_name) -> None:
    """Record eager `out` = `prim(*operands, **attrs)` as bind would (the caller checked
    grad mode, the result's float dtype and that an operand requires grad): for fast
    paths computing a primitive's value themselves."""
    _record(prim, operands, attrs, out, grad_name)


def record_one(prim, x, attrs, out, grad_name) -> None:
    """:func:`_record` for a primitive of one eager tensor operand ``x`` that requires
    grad (the caller checked grad mode and dtypes): the same node, built without the
    loop over operands (the view ops' fast path)."""
    fn = x.grad_fn
    if fn is not None:
        nexts = ((fn, x._output_nr),)
    else:
        acc = x._acc
        acc = acc() if acc is not None else None
        nexts = ((acc if acc is not None else accumulator(x), 0),)
    name = grad_name or prim.grad_name
    save_ins, save_out = _SAVE_CACHE.get((prim, _NEEDS_ONE, name)) or \
        _saves(prim, _NEEDS_ONE, name)
    fn = new_function(name, prim, tuple(attrs.items()) if attrs else (),
                      ((x._data.shape, x._dtype),), (out._data.shape, out._dtype), nexts,
                      _NEEDS_ONE, (SavedTensor(x),) if save_ins else _NONES[1], None)
    out.grad_fn = fn
    if save_out:
        fn._saved_out = SavedTensor(out, is_output=True)


_NEEDS_ONE = (True,)
_NONES = ((), (None,), (None, None), (None, None, None))
_SCALAR_AVAL = ((), None)
