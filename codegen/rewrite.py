"""Graph rewrites the LLVM backend applies before scheduling.

:func:`matvec_as_reduction` turns matrix-vector products (``m == 1`` or ``n == 1``, no
batch) into a reduction of an elementwise product, e.g. ``X @ w`` ->
``sum(X * w, axis=1)`` and ``X.T @ h`` -> ``sum(X * h[:, None], axis=0)`` (the product
is oriented so the matrix is read in its own memory order).  The planner then fuses
them like any reduction: logistic regression's forward ``X @ w``, its elementwise loss
and its gradient ``X.T @ g`` become one pass over ``X``.  BLAS would need two passes
and OpenBLAS's gemm is very slow on such shapes anyway.

>>> import numpy as np, symgrad
>>> p = symgrad.compile(lambda X, w: X @ w, backend="numpy").lower(np.ones((30, 3)), np.ones(3)).optimized
>>> [n.op for n in matvec_as_reduction(p).nodes()]
['input', 'input', 'expand', 'mul', 'sum']
"""
from __future__ import annotations

from symgrad.graph.program import Program
from symgrad.graph.node import Node, make_node, toposort

__all__ = ["matvec_as_reduction", "MIN_MATVEC_WORK"]

MIN_MATVEC_WORK = 64      # smaller products stay matmul (the loop kernel is as good)


def _transposed(x: Node) -> Node | None:
    """The argument of a 2-D transpose view, else None."""
    if x.op == "permute" and x.attr("perm") == (1, 0):
        return x.args[0]
    return None


def _as_vector(x: Node) -> Node:
    """A node of shape (k,) for a (k,), (k, 1) or (1, k) operand."""
    if len(x.shape) == 1:
        return x
    k = max(x.shape)
    return make_node("reshape", (x,), (("shape", (k,)),), (k,), x.dtype)


def _reduce_product(mat: Node, vec: Node, axis: int) -> Node:
    """sum(mat * vec broadcast along ``axis``'s partner, axis) for a 2-D ``mat``."""
    if axis == 1:                     # vec runs along columns
        vb = vec
    else:                             # vec runs along rows: (k,) -> (k, 1)
        vb = make_node("reshape", (vec,), (("shape", (vec.shape[0], 1)),), (vec.shape[0], 1), vec.dtype)
    vb = make_node("expand", (vb,), (("shape", mat.shape),), mat.shape, vec.dtype)
    prod = make_node("mul", (mat, vb), (), mat.shape, mat.dtype)
    out_len = mat.shape[1 - axis]
    return make_node("sum", (prod,), (("axes", (axis,)), ("keepdim", False)), (out_len,), mat.dtype)


def _rewrite(node: Node, args: tuple[Node, ...]) -> Node | None:
    a, b = args
    if len(a.shape) > 2 or len(b.shape) > 2 or not node.dtype.is_floating_point and node.dtype.name != "int64":
        return None
    m = a.shape[-2] if len(a.shape) == 2 else 1
    k = a.shape[-1]
    n = b.shape[-1] if len(b.shape) == 2 else 1
    if min(m, n) != 1 or m * n * k < MIN_MATVEC_WORK:
        return None
    if n == 1:                         # out[i] = sum_k A[i, k] v[k]
        vec = _as_vector(b)
        base = _transposed(a) if len(a.shape) == 2 else None
        if len(a.shape) == 1:          # (k,) @ (k, 1)
            out = _reduce_product(make_node("reshape", (a,), (("shape", (1, k)),), (1, k), a.dtype), vec, 1)
        elif base is not None:         # A = A0.T, A0 (k, m): reduce over A0's rows
            out = _reduce_product(base, vec, 0)
        else:
            out = _reduce_product(a, vec, 1)
    else:                              # m == 1: out[j] = sum_k v[k] B[k, j]
        vec = _as_vector(a)
        base = _transposed(b)
        out = _reduce_product(base, vec, 1) if base is not None else _reduce_product(b, vec, 0)
    if out.shape != node.shape:
        out = make_node("reshape", (out,), (("shape", node.shape),), node.shape, node.dtype)
    return out


def matvec_as_reduction(program: Program) -> Program:
    """``program`` with matrix-vector matmuls rewritten (see the module docstring)."""
    memo: dict[int, Node] = {}
    changed = False
    for n in toposort(program.outputs):
        args = tuple(memo.get(id(a), a) for a in n.args)
        new = _rewrite(n, args) if n.op == "matmul" else None
        if new is None:
            new = n if all(x is y for x, y in zip(args, n.args)) else make_node(n.op, args, n.attrs, n.shape, n.dtype)
        changed |= new is not n
        memo[id(n)] = new
    if not changed:
        return program
    return Program(program.inputs, program.input_names, [memo[id(o)] for o in program.outputs],
                   program.output_names, program.out_structure, program.donated)
