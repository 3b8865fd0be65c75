"""What kind of work each node is, and whether generated code can do it.

Kinds (one per node):

* ``leaf``   -- ``input`` and ``const`` (storage provided by the caller / the module);
* ``view``   -- reshape, expand, permute, slice, select, flip, shear, windows: index
  arithmetic only;
* ``ew``     -- elementwise (``fused``, every formula primitive, cast, full, iota):
  computed inside a loop at any index, never needs storage of its own unless chosen;
* ``reduce`` -- sum, mean, amax, amin, prod: accumulated inside a loop over its input;
* ``window`` -- pad_slice, cat: storage whose parts are written by loops;
* ``opaque`` -- matmul, take, gather, gather_scatter, scatter_add, index_put, argmax,
  argmin, cumsum, col2im: a lowering of its own reading materialised arguments;
* ``numpy``  -- anything generated code does not handle (other dtypes, formulas with
  functions the emitter lacks, prod_others, ...): run by its numpy rule in a hybrid
  executable.  :func:`numpy_reason` says why.
"""
from __future__ import annotations

import numpy as np

from symgrad.graph.node import Node
from symgrad.graph.primitives import PRIMITIVES, family_ops, fused_symbols

from . import types as T
from .lower.formula_ir import divides, op_cost, unsupported

__all__ = ["VIEW_OPS", "REDUCE_OPS", "WINDOW_OPS", "OPAQUE_OPS", "kind_of", "numpy_reason",
           "formula_of", "ew_cost", "is_uniform_const", "const_scalar"]

# How each primitive family is lowered (the families are the registry's: importing this
# package imports symgrad, which has registered every built-in primitive by then).
VIEW_OPS = family_ops("view")                  # index arithmetic on the argument, no loop
REDUCE_OPS = family_ops("reduction")           # reduction loops (codegen.lower.reduce)
WINDOW_OPS = family_ops("window")              # piecewise reads (codegen.windows)
OPAQUE_OPS = family_ops("linalg", "index", "arg-reduction", "scan", "window-sum")   # own kernels
EW_STRUCTURAL = family_ops("creation") | {"cast"}   # elementwise loops without a formula


def formula_of(node: Node):
    """(formula, its symbols in argument order) of an elementwise node, in symgrad's own
    formula type (:mod:`symgrad.graph.formula`)."""
    if node.op == "fused":
        return node.attr("expr"), fused_symbols(len(node.args))
    f = PRIMITIVES[node.op].formula
    return f.node, f.fsymbols


def _is_formula(node: Node) -> bool:
    if node.op == "fused":
        return True
    prim = PRIMITIVES.get(node.op)
    return prim is not None and prim.kind == "elementwise" and prim.formula is not None


def numpy_reason(node: Node) -> str | None:
    """None if generated code computes ``node``, else why it runs through numpy."""
    for n in (node, *node.args):
        if not T.is_native(n.dtype):
            return f"dtype {n.dtype.name}"
    op = node.op
    if op in ("input", "const") or op in VIEW_OPS or op in WINDOW_OPS:
        return None
    if _is_formula(node):
        expr = formula_of(node)[0]
        bad = unsupported(expr)
        if bad:
            return f"formula uses {bad}"
        if node.dtype.np.kind in "iu" and divides(expr):
            # (an integer floor_divide: a division in float64 is inexact past 2**53)
            return "integer result of a division"
        return None
    if op in EW_STRUCTURAL:
        return None
    if op in REDUCE_OPS:
        x = node.args[0]
        if op == "mean" and not node.dtype.is_floating_point:
            return "integer mean"
        if op in ("amax", "amin") and x.size == 0:
            return "empty max/min (numpy raises)"
        return None
    if op == "matmul":
        return None if node.dtype.name != "bool" else "bool matmul"
    if op == "gather":
        x, idx = node.args
        axis = node.attr("axis")
        if len(x.shape) != len(idx.shape):
            return "gather rank mismatch"
        for d, (a, b) in enumerate(zip(x.shape, idx.shape)):
            if d != axis and a != b and a != 1:
                return "gather with broadcasting"
        return None
    if op == "index_put":
        return None if len(node.args[0].shape) == 1 else "index_put on more than 1-D"
    if op in ("argmax", "argmin") and node.args[0].shape[node.attr("axis")] == 0:
        return "arg-extremum of an empty axis (numpy raises)"
    if op in OPAQUE_OPS:
        return None
    return f"no native lowering for {op}"


def kind_of(node: Node) -> str:
    """The node's kind (see the module docstring)."""
    op = node.op
    if op in ("input", "const"):
        return "leaf"
    if numpy_reason(node) is not None:
        return "numpy"
    if op in VIEW_OPS:
        return "view"
    if op in REDUCE_OPS:
        return "reduce"
    if op in WINDOW_OPS:
        return "window"
    if op in OPAQUE_OPS:
        return "opaque"
    return "ew"


def ew_cost(node: Node) -> int:
    """Cost of recomputing an elementwise node once (see ``formula_ir.op_cost``)."""
    if _is_formula(node):
        return op_cost(formula_of(node)[0])
    return 1


def const_scalar(node: Node):
    """The single value of a constant whose elements are all equal, else None."""
    if node.op != "const":
        return None
    v = node.attr("value").value
    if v.size == 0:
        return None
    first = v.flat[0]
    if v.size == 1 or np.array_equal(v, np.full(v.shape, first, v.dtype), equal_nan=True):
        return first
    return None


def is_uniform_const(node: Node) -> bool:
    return const_scalar(node) is not None
