"""``einsum`` as PyTorch 2.13 computes it: the equation string (``...`` ellipsis,
implicit output, spaces), operands as varargs or one list, or the sublist form; the same
sequence of views, sums, products and batched matrix products PyTorch's ATen einsum
runs, so values round as PyTorch's do and the result's ``grad_fn`` is the one PyTorch
records (``ViewBackward0`` after a contraction, ``MulBackward0`` for a product without
one, ``SumBackward1`` / ``PermuteBackward0`` for one operand). Three or more operands are
contracted in opt_einsum's order when opt_einsum is installed, as PyTorch does.

Everything is built from ordinary tensor operations, so the gradient of any order and
the compiled code come from theirs.

>>> import symgrad as torch
>>> a = torch.arange(6.).reshape(2, 3)
>>> torch.einsum("ij,kj->ik", a, a)
tensor([[ 5., 14.],
        [14., 50.]])
"""
from __future__ import annotations

from typing import Any

from .common import Tensor, to_tensor
from .elementwise import binary
from .linalg import bmm
from .matrix import diagonal
from .reduction import sum as _sum
from .shape import movedim, permute, reshape, unsqueeze, view

__all__ = ["einsum"]

_LETTERS = 26
_ELLIPSIS = 2 * _LETTERS


def _subscript(label: str) -> int:
    return ord(label) - ord("A") if label.isupper() else ord(label) - ord("a") + _LETTERS


def _label(s: int) -> str:
    return chr(ord("A") + s) if s < _LETTERS else chr(ord("a") + s - _LETTERS)


def _is_label(c: str) -> bool:
    return c.isascii() and c.isalpha()


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise RuntimeError(msg)


def _sublists(args: tuple) -> tuple[str, list]:
    """The sublist form ``einsum(op0, [0, 1], op1, [1, 2], [0, 2])`` as an equation."""
    def sub(n):
        if n is Ellipsis:
            return "..."
        if 0 <= n < 2 * _LETTERS:
            return _label(n)
        raise ValueError("einsum(): subscript in subscript list is not within the valid "
                         "range [0, 52)")
    equation = ",".join("".join(sub(s) for s in lst) for lst in args[1::2])
    if len(args) % 2 == 1:
        return equation + "->" + "".join(sub(s) for s in args[-1]), list(args[:-1:2])
    return equation, list(args[::2])


def _parse_inputs(lhs: str, num_ops: int) -> list[list[int]]:
    labels: list[list[int]] = [[] for _ in range(num_ops)]
    ell_seen, cur, i = False, 0, 0
    while i < len(lhs):
        c = lhs[i]
        if c == " ":
            pass
        elif c == ".":
            _check(not ell_seen, f"einsum(): found '.' for operand {cur} for which an "
                                 f"ellipsis was already found")
            _check(i + 2 < len(lhs) and lhs[i + 1] == "." and lhs[i + 2] == ".",
                   f"einsum(): found '.' for operand {cur} that is not part of any ellipsis")
            i += 2
            labels[cur].append(_ELLIPSIS)
            ell_seen = True
        elif c == ",":
            cur += 1
            _check(cur < num_ops, "einsum(): fewer operands were provided than specified in "
                                  "the equation")
            ell_seen = False
        else:
            _check(_is_label(c), f"einsum(): invalid subscript given at index {i} in the "
                                 f"equation string, subscripts must be in [a-zA-Z]")
            labels[cur].append(_subscript(c))
        i += 1
    _check(cur == num_ops - 1, "einsum(): more operands were provided than specified in the "
                               "equation")
    return labels


def _plan(equation: str, ops: list[Tensor]):
    """PyTorch's parse: per operand its labels; the position of every label (output
    labels first, then the contracted ones) and where the ellipsis dims go."""
    arrow = equation.find("->")
    lhs = equation if arrow < 0 else equation[:arrow]
    op_labels = _parse_inputs(lhs, len(ops))
    count = [0] * (2 * _LETTERS)
    ell_num_dim = 0
    for i, (op, labels) in enumerate(zip(ops, op_labels)):
        n = len([s for s in labels if s != _ELLIPSIS])
        has_ell = _ELLIPSIS in labels
        for s in labels:
            if s != _ELLIPSIS:
                count[s] += 1
        if has_ell:
            ell_num_dim = max(ell_num_dim, op.dim() - n)
        ok = n <= op.dim() if has_ell else n == op.dim()
        _check(ok, f"einsum(): the number of subscripts in the equation ({n}) "
                   + ("is more than the number of dimensions (" if has_ell else
                      "does not match the number of dimensions (")
                   + f"{op.dim()}) for operand {i}"
                   + ("" if has_ell else " and no ellipsis was given"))
    perm_of = [-1] * (2 * _LETTERS)
    perm_index = ell_index = 0
    ell_in_output = False
    if arrow < 0:
        perm_index, ell_in_output = ell_num_dim, True
        for s in range(2 * _LETTERS):
            if count[s] == 1:
                perm_of[s] = perm_index
                perm_index += 1
    else:
        rhs = equation[arrow + 2:]
        i = 0
        while i < len(rhs):
            c = rhs[i]
            if c == " ":
                pass
            elif c == ".":
                _check(not ell_in_output, "einsum(): found '.' for output but an ellipsis "
                                          "(...) was already found")
                _check(i + 2 < len(rhs) and rhs[i + 1] == "." and rhs[i + 2] == ".",
                       "einsum(): found '.' for output that is not part of any ellipsis (...)")
                i += 2
                ell_index, ell_in_output = perm_index, True
                perm_index += ell_num_dim
            else:
                _check(_is_label(c), f"einsum(): invalid subscript given at index "
                                     f"{len(lhs) + 2 + i} in the equation string, subscripts "
                                     f"must be in [a-zA-Z]")
                s = _subscript(c)
                _check(count[s] > 0 and perm_of[s] == -1,
                       f"einsum(): output subscript {c}"
                       + (" appears more than once in the output" if perm_of[s] > -1 else
                          " does not appear in the equation for any input operand"))
                perm_of[s] = perm_index
                perm_index += 1
            i += 1
    out_num_dim = perm_index
    if not ell_in_output:
        ell_index = perm_index
        perm_index += ell_num_dim
    for s in range(2 * _LETTERS):
        if count[s] > 0 and perm_of[s] == -1:
            perm_of[s] = perm_index
            perm_index += 1
    return op_labels, perm_of, perm_index, out_num_dim, ell_index, ell_num_dim


def _align(ops, op_labels, perm_of, perm_index, ell_index, ell_num_dim):
    """Each operand with diagonals taken for repeated labels, size-1 dims for missing
    ones, permuted to the common label order; and per dim, how many operands are not 1
    there (PyTorch's dim_counts)."""
    label_size = [1] * (2 * _LETTERS)
    ell_sizes = [1] * ell_num_dim
    dim_counts = [0] * perm_index
    aligned = []
    for i, (op, labels) in enumerate(zip(ops, op_labels)):
        orig = op
        perm = [-1] * perm_index
        dim = 0
        for s in labels:
            if s == _ELLIPSIS:
                ndim = orig.dim() - (len(labels) - 1)
                for j in range(ell_num_dim - ndim, ell_num_dim):
                    size = op.shape[dim]
                    if size != 1:
                        _check(ell_sizes[j] in (1, size),
                               f"einsum(): dimension {dim} covered by ellipsis in operand {i}"
                               f"has size {size} which does not broadcast with previously "
                               f"seen ellipsis with size {ell_sizes[j]} for the respective "
                               f"dimension")
                        ell_sizes[j] = size
                        dim_counts[ell_index + j] += 1
                    perm[ell_index + j] = dim
                    dim += 1
            elif perm[perm_of[s]] == -1:
                size = op.shape[dim]
                if size != 1:
                    _check(label_size[s] in (1, size),
                           f"einsum(): subscript {_label(s)} has size {size} for operand {i} "
                           f"which does not broadcast with previously seen size "
                           f"{label_size[s]}")
                    label_size[s] = size
                    dim_counts[perm_of[s]] += 1
                perm[perm_of[s]] = dim
                dim += 1
            else:
                prev = perm[perm_of[s]]
                _check(op.shape[dim] == op.shape[prev],
                       f"einsum(): subscript {_label(s)} is repeated for operand {i} but the "
                       f"sizes don't match, {op.shape[dim]} != {op.shape[prev]}")
                op = movedim(diagonal(op, 0, prev, dim), -1, prev)
        for k, p in enumerate(perm):
            if p == -1:
                op = unsqueeze(op, dim)
                perm[k] = dim
                dim += 1
        aligned.append(permute(op, perm))
    return aligned, dim_counts


def _sumproduct_pair(left: Tensor, right: Tensor, sum_dims: list[int]) -> Tensor:
    """PyTorch's sumproduct_pair (keepdim): the product of two aligned operands summed
    over ``sum_dims``, as one batched matrix product between permutes and views."""
    if not sum_dims:
        return binary("mul", left, right)
    ndim = left.dim()
    lro, lo, ro = [], [], []
    lro_size = lo_size = ro_size = sum_size = 1
    for i in range(ndim):
        sl, sr = left.shape[i] != 1, right.shape[i] != 1
        if i in sum_dims:
            if sl and sr:
                _check(left.shape[i] == right.shape[i], "non-broadcast dimensions must match")
                sum_size *= left.shape[i]
            elif sl:
                left = _sum(left, i, True)
            elif sr:
                right = _sum(right, i, True)
        elif sl and sr:
            _check(left.shape[i] == right.shape[i], "non-broadcast dimensions must match")
            lro.append(i)
            lro_size *= left.shape[i]
        elif sl:
            lo.append(i)
            lo_size *= left.shape[i]
        else:
            ro.append(i)
            ro_size *= right.shape[i]
    out_size = ([left.shape[d] for d in lro] + [left.shape[d] for d in lo]
                + [1] * len(sum_dims) + [right.shape[d] for d in ro])
    lperm = lro + lo + sum_dims + ro
    rperm = lro + sum_dims + ro + lo
    operm = [0] * ndim
    for pos, d in enumerate(lro + lo + sum_dims + ro):
        operm[d] = pos
    a = reshape(permute(left, lperm), (lro_size, lo_size, sum_size))
    b = reshape(permute(right, rperm), (lro_size, sum_size, ro_size))
    return permute(view(bmm(a, b), out_size), operm)


def _path(equation: str, ops: list[Tensor]) -> list[int] | None:
    """opt_einsum's contraction order (its 'auto' strategy, as PyTorch's default) for
    three or more operands, flattened; None without opt_einsum."""
    if len(ops) <= 2:
        return None
    try:
        import opt_einsum        # late and optional: PyTorch uses it when it is installed
    except ImportError:
        return None
    shapes = [tuple(op.shape) for op in ops]
    pairs = opt_einsum.contract_path(equation, *shapes, optimize="auto", shapes=True)[0]
    return [int(k) for pair in pairs for k in pair]


def einsum(*args: Any) -> Tensor:
    """Einstein summation (see ``torch.einsum``): ``einsum("ij,jk->ik", a, b)``,
    ``einsum("ij,jk", [a, b])``, ``einsum("...ij->...ji", x)`` or the sublist form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``."""
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one "
                         "operand, or at least one operand and its subscripts list")
    if isinstance(args[0], Tensor):
        equation, operands = _sublists(args)
    else:
        equation, operands = args[0], list(args[1:])
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    ops = [to_tensor(o) for o in operands]
    _check(bool(ops), "einsum(): must provide at least one operand")
    op_labels, perm_of, perm_index, out_num_dim, ell_index, ell_num_dim = _plan(equation, ops)
    path = _path(equation, ops)
    aligned, dim_counts = _align(ops, op_labels, perm_of, perm_index, ell_index, ell_num_dim)
    it = iter(path or ())
    while len(aligned) > 1:
        i, j = 0, 1
        if path is not None:
            i, j = sorted((next(it), next(it)))
        a, b = aligned[i], aligned[j]
        del aligned[j], aligned[i]
        sum_dims, a_sum, b_sum = [], [], []
        for d in range(out_num_dim, perm_index):
            if a.shape[d] != 1 and b.shape[d] != 1:
                dim_counts[d] -= 1
                if dim_counts[d] == 1:
                    sum_dims.append(d)
                    dim_counts[d] = 0
            elif dim_counts[d] == 1:
                if a.shape[d] != 1:
                    a_sum.append(d)
                    dim_counts[d] = 0
                elif b.shape[d] != 1:
                    b_sum.append(d)
                    dim_counts[d] = 0
        if a_sum:
            a = _sum(a, a_sum, True)
        if b_sum:
            b = _sum(b, b_sum, True)
        pair = _sumproduct_pair(a, b, sum_dims)
        if path is not None:
            aligned.append(pair)
        else:
            aligned.insert(0, pair)
    result = aligned[0]
    if perm_index - out_num_dim > 0:
        if len(ops) > 1:
            return view(result, tuple(result.shape[:out_num_dim]))
        return _sum(result, list(range(out_num_dim, perm_index)))
    return result
