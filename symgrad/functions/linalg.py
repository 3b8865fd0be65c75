"""Matrix products: matmul (``@``) and its PyTorch spellings mm, mv, dot, bmm, with the
grad_fn name PyTorch gives each case (Dot / Mv / Mm / UnsafeView)."""
from __future__ import annotations

import math

from ..dispatch import bind, bind_pair
from ..graph.primitives import PRIMITIVES as P
from .common import Tensor, to_tensor
from .shape import contiguous, reshape, transpose, unsqueeze
from .elementwise import binary

__all__ = ["matmul", "mm", "mv", "dot", "bmm", "outer"]


def _name(a, b) -> str:
    na, nb = a.dim(), b.dim()
    if na == 1 and nb == 1:
        return "DotBackward0"
    if na == 2 and nb == 1:
        return "MvBackward0"
    if na == 2 and nb == 2:
        return "MmBackward0"
    if na == 1 and nb == 2:
        return "SqueezeBackward4"
    return "UnsafeViewBackward0"


def _check_dtypes(a, b):
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{a.dtype.cpp_name} != {b.dtype.cpp_name}")


# the CPU kernel PyTorch runs for a (final) product of these dimensions: its name is in
# the error a bool product raises
_KERNELS = {(1, 1): "dot", (2, 1): "addmv_impl_cpu", (2, 2): "addmm_impl_cpu_"}


def _product(a, b, grad_name, kernel=None) -> Tensor:
    """The ``matmul`` primitive on a and b; bool operands raise PyTorch's error once the
    shapes are checked (its kernels have no bool case; an empty product -- no output or
    no terms -- runs none, except ``dot``)."""
    out = bind(P["matmul"], a, b, grad_name=grad_name)
    if a._dtype.category == "bool":
        kernel = kernel or _KERNELS.get((a.dim(), b.dim()), "bmm")
        if kernel == "dot" or (out.numel() and a.shape[-1]):
            raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')
    return out


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` recorded as PyTorch records it, so ``grad_fn.next_functions`` match:
    vector @ matrix is unsqueeze(0) -> mm -> squeeze (SqueezeBackward4); a batch @ a
    matrix or vector is folded: view(-1, n) -> mm / mv -> UnsafeViewBackward0."""
    a, b = to_tensor(a), to_tensor(b)
    _check_dtypes(a, b)
    x, y = a._data, b._data
    if x is not None and y is not None and x.ndim == 2 and y.ndim == 2 and \
            x.shape[1] == y.shape[0] and a._dtype.category == "float":
        return bind_pair(P["matmul"], a, b, "MmBackward0")      # (two eager matrices)
    na, nb = a.dim(), b.dim()
    if na == 1 and nb == 2:
        out = matmul(unsqueeze(a, 0), b)
        return bind(P["reshape"], out, shape=tuple(out.shape[1:]), grad_name="SqueezeBackward4")
    if na >= 3 and nb in (1, 2) and (b.requires_grad or a.is_contiguous()):
        # the folded rows by count, not -1: with no columns (size 0) -1 is ambiguous
        out = matmul(reshape(a, (math.prod(a.shape[:-1]), a.shape[-1])), b)
        return bind(P["reshape"], out, shape=tuple(a.shape[:-1]) + tuple(b.shape[1:]),
                    grad_name="UnsafeViewBackward0")
    if na == 2 and nb >= 3 and a.requires_grad:
        # folded the other way: (bᵀ folded @ aᵀ)ᵀ, then .contiguous() (CloneBackward0)
        out = transpose(matmul(transpose(b, -1, -2), transpose(a, 0, 1)), -1, -2)
        return contiguous(out)
    return _product(a, b, _name(a, b))


def mm(a: Tensor, b: Tensor) -> Tensor:
    a, b = to_tensor(a), to_tensor(b)
    if a.dim() != 2:
        raise RuntimeError("self must be a matrix")
    if b.dim() != 2:
        raise RuntimeError("mat2 must be a matrix")
    return matmul(a, b)


def mv(a: Tensor, v: Tensor) -> Tensor:
    a, v = to_tensor(a), to_tensor(v)
    if a.dim() != 2 or v.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.dim()}, {v.dim()}")
    return matmul(a, v)


def dot(a: Tensor, b: Tensor) -> Tensor:
    a, b = to_tensor(a), to_tensor(b)
    if a.dim() != 1 or b.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{a.dtype.c_name} and {b.dtype.c_name}")
    return matmul(a, b)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    a, b = to_tensor(a), to_tensor(b)
    if a.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.dim() != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    _check_dtypes(a, b)
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    return _product(a, b, "BmmBackward0", "bmm")


def outer(a: Tensor, b: Tensor) -> Tensor:
    """a[:, None] * b[None, :] (``MulBackward0``, as PyTorch computes it)."""
    a, b = to_tensor(a), to_tensor(b)
    return binary("mul", reshape(a, (a.numel(), 1)), b)
