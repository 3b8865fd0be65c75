"""Dense linear algebra as ``torch.linalg`` names it: ``inv`` (``inverse``), ``solve``,
``det``, ``slogdet`` / ``logdet``, ``cholesky`` (and the deprecated ``torch.cholesky``),
``svd`` / ``svdvals`` (and ``torch.svd``) and the norms ``vector_norm`` / ``matrix_norm`` /
``norm``, over batches of matrices, with PyTorch's checks, error texts (a singular or
indefinite matrix raises ``LinAlgError``) and backward names.

The factorisations run as numpy's LAPACK routines (in compiled code too); every
gradient is a formula of primitives (:mod:`symgrad.ops.linalg`), so it differentiates
again.

>>> import symgrad as torch
>>> torch.linalg.solve(torch.tensor([[2.0, 0.0], [0.0, 4.0]]), torch.tensor([2.0, 2.0]))
tensor([1.0000, 0.5000])
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from ..dispatch import bind
from ..errors import LinAlgError
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax
from .common import Tensor, to_tensor, wrap_dim
from .composite import named
from .elementwise import where
from .reduction import amax, amin, norm as _vector_norm, return_types, sum as _sum

if TYPE_CHECKING:
    from ..types import DTypeLike

__all__ = ["inv", "inverse", "solve", "det", "slogdet", "logdet", "cholesky", "svd", "svdvals",
           "vector_norm", "matrix_norm", "norm", "LinAlgError"]


def _matrices(name: str, a, *, square: bool = True, floating: bool = True) -> Tensor:
    """``a`` as a batch of (square) floating-point matrices, or PyTorch's error."""
    a = to_tensor(a)
    if a.dim() < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if square and a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")
    if floating and not a.dtype.is_floating_point:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {a.dtype.c_name.capitalize()}")
    return a


def _mT(x):
    return lax.transpose_last(x)


def inv(A: Tensor) -> Tensor:
    """The inverse of each square matrix (``LinalgInvExBackward0``); a singular one raises
    ``LinAlgError`` naming its zero pivot."""
    return bind(P["inv"], _matrices("linalg.inv", A))


inverse = inv


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """X with ``A X = B`` (``left=False``: ``X A = B``); ``B`` a batch of vectors or of
    matrices, batch dims broadcast (``LinalgSolveExBackward0``)."""
    a = _matrices("linalg.solve", A)
    b = to_tensor(B)
    if a.dtype is not b.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A "
                           f"of type {a.dtype.c_name.capitalize()} and B of type "
                           f"{b.dtype.c_name.capitalize()} instead")
    vector = left and (b.dim() == 1 or (b.dim() == a.dim() - 1
                                        and tuple(b.shape) == tuple(a.shape[:-1])))
    bm_shape = tuple(b.shape) + (1,) if (vector or b.dim() == 1) else tuple(b.shape)
    inner = bm_shape[-2] if left else bm_shape[-1]
    if inner != a.shape[-1]:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({a.shape[-2]}x{a.shape[-1]} and "
                           f"{bm_shape[-2]}x{bm_shape[-1]})")

    def run(av, bv):
        if vector:
            x = lax.apply("solve", av, lax.reshape(bv, tuple(bv.shape) + (1,)))
            return lax.reshape(x, tuple(x.shape[:-1]))
        if not left:                                   # X A = B  <=>  Aᵀ Xᵀ = Bᵀ
            return _mT(lax.apply("solve", _mT(av), _mT(bv)))
        return lax.apply("solve", av, bv)
    if left and not vector:
        return bind(P["solve"], a, b)
    return named("LinalgSolveExBackward0", run, a, b)


def det(A: Tensor) -> Tensor:
    """The determinant of each square matrix (``LinalgDetBackward0``); its gradient is the
    cofactor matrix, finite for singular matrices too."""
    return bind(P["det"], _matrices("linalg.det", A))


def _slogdet(name: str, A: Tensor, kind):
    a = _matrices(name, A)
    sign = named("LinalgSlogdetBackward0", lambda v: lax.apply("slogdet_sign", v), a)
    logabs = bind(P["slogdet_logabs"], a)
    return kind(sign, logabs)


def slogdet(A: Tensor) -> return_types.linalg_slogdet:
    """``(sign, logabsdet)`` of each square matrix's determinant
    (``LinalgSlogdetBackward0``)."""
    return _slogdet("linalg.slogdet", A, return_types.linalg_slogdet)


def _torch_slogdet(input: Tensor) -> return_types.slogdet:
    """``torch.slogdet``: :func:`slogdet` under PyTorch's older result name."""
    return _slogdet("linalg.slogdet", input, return_types.slogdet)


def logdet(input: Tensor) -> Tensor:
    """log(det) of each square matrix: nan for a negative determinant, -inf for a
    singular matrix (``WhereBackward0``)."""
    sign, logabs = _slogdet("logdet", input, lambda s, v: (s, v))
    return where(lax.eq(sign, -1.0), float("nan"), logabs)


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The lower Cholesky factor L of each symmetric positive-definite matrix (A = L Lᵀ;
    ``upper=True``: Lᵀ), ``LinalgCholeskyExBackward0``; a matrix that is not
    positive-definite raises ``LinAlgError`` naming the failing leading minor."""
    a = _matrices("linalg.cholesky", A)
    if upper:
        return named("LinalgCholeskyExBackward0", lambda v: _mT(lax.apply("cholesky", v)), a)
    return bind(P["cholesky"], a)


_CHOLESKY_DEPRECATED = (
    "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a "
    "future PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\n"
    "L = torch.linalg.cholesky(A)\nand\nU = torch.cholesky(A, upper=True)\nshould be replaced "
    "with\nU = torch.linalg.cholesky(A).mH\nThis transform will produce equivalent results for "
    "all valid (symmetric positive definite) inputs. (Triggered internally at "
    "/__w/pytorch/pytorch/aten/src/ATen/native/BatchLinearAlgebra.cpp:1765.)")


def _torch_cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky`` (deprecated in PyTorch, with its warning): the lower factor, or
    the upper one (``upper=True``), as ``CholeskyBackward0``."""
    warnings.warn(_CHOLESKY_DEPRECATED, UserWarning, stacklevel=2)
    a = to_tensor(input)
    if a.dim() >= 2 and a.shape[-1] == a.shape[-2] and a.dtype.category in ("int", "bool"):
        raise NotImplementedError(f'"cholesky_cpu" not implemented for '
                                  f"'{a.dtype.c_name.capitalize()}'")
    a = _matrices("cholesky", a)
    if upper:
        return named("CholeskyBackward0", lambda v: _mT(lax.apply("cholesky", v, op="cholesky")),
                     a)
    return named("CholeskyBackward0", lambda v: lax.apply("cholesky", v, op="cholesky"), a)


def _svd_parts(a: Tensor, full_matrices: bool, parts=(0, 1, 2)) -> list[Tensor]:
    """The asked parts of U, S, Vᵀ of one factorisation (``LinalgSvdBackward0`` each)."""
    packed = bind(P["svd_factor"], a, full_matrices=full_matrices)
    return [bind(P[("svd_u", "svdvals", "svd_vh")[i]], a, packed, full_matrices=full_matrices)
            for i in parts]


def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None
        ) -> return_types.linalg_svd:
    """``(U, S, Vh)`` with ``A = U diag(S) Vh`` for each matrix, singular values in
    descending order; ``full_matrices=False``: the thin factors (``LinalgSvdBackward0``).
    The signs of the singular vectors are LAPACK's (numpy's), which may differ from
    PyTorch's build: only functions invariant to them compare."""
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    a = _matrices("linalg.svd", A, square=False)
    return return_types.linalg_svd(*_svd_parts(a, bool(full_matrices)))


def _torch_svd(input: Tensor, some: bool = True, compute_uv: bool = True
               ) -> return_types.svd:
    """``torch.svd``: ``(U, S, V)`` (V, not Vᵀ: a transposed view); ``some=False`` the full
    factors; ``compute_uv=False`` only S, U and V zeros."""
    a = to_tensor(input)
    if a.dim() < 2:
        raise RuntimeError(f"linalg.svd: input should have at least 2 dimensions, but has "
                           f"{a.dim()} dimensions instead")
    a = _matrices("linalg.svd", a, square=False)
    full = not some
    if not compute_uv:
        (s,) = _svd_parts(a, full, (1,))
        m, n = a.shape[-2], a.shape[-1]
        lead = tuple(a.shape[:-2])
        return return_types.svd(lax.zeros(lead + (m, m), a.dtype), s,
                                lax.zeros(lead + (n, n), a.dtype))
    u, s, vh = _svd_parts(a, full)
    return return_types.svd(u, s, vh.mT)


def svdvals(A: Tensor) -> Tensor:
    """The singular values of each matrix, in descending order (``LinalgSvdBackward0``)."""
    return _svd_parts(_matrices("linalg.svdvals", A, square=False), False, (1,))[0]


# ---- norms ----------------------------------------------------------------------------------
def _dim_list(dim) -> list[int] | None:
    if dim is None:
        return None
    return [int(d) for d in dim] if isinstance(dim, (tuple, list)) else [int(dim)]


def vector_norm(x: Tensor, ord: float = 2, dim: int | tuple[int, ...] | list[int] | None = None,
                keepdim: bool = False, *, dtype: DTypeLike | None = None) -> Tensor:
    """The ``ord``-norm of ``x`` as a vector (over ``dim``, all elements by default):
    ``sum(|x|^ord)^(1/ord)``, max / min of ``|x|`` for ±inf, the count of non-zeros for 0
    (``LinalgVectorNormBackward0``)."""
    if isinstance(ord, str) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, "
                        f"not {type(ord).__name__}")
    return _vector_norm(x, float(ord) if not isinstance(ord, bool) else ord, dim,
                        keepdim, dtype)


def _order_text(ord) -> str:
    if isinstance(ord, str):
        return ord
    return str(int(ord)) if float(ord).is_integer() else repr(float(ord))


def matrix_norm(A: Tensor, ord: float | str = "fro",
                dim: tuple[int, int] | list[int] = (-2, -1), keepdim: bool = False, *,
                dtype: DTypeLike | None = None) -> Tensor:
    """The ``ord`` norm of each matrix in dims ``dim``: 'fro' (Frobenius), 'nuc' (sum of
    the singular values), 2 / -2 (largest / smallest singular value), 1 / -1 (max / min
    column sum of |A|), inf / -inf (max / min row sum)."""
    name = "linalg.matrix_norm"
    if ord not in ("fro", "nuc", 1, -1, 2, -2, float("inf"), float("-inf")):
        raise RuntimeError(f"{name}: Order {_order_text(ord)} not supported.")
    a = to_tensor(A)
    if dtype is not None:
        a = lax.cast(a, dtypes.as_dtype(dtype))
    _matrices(name, a, square=False)
    dims = _dim_list(dim)
    if len(dims) != 2:
        raise RuntimeError(f"{name}: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
    d0, d1 = wrap_dim(dims[0], a.dim()), wrap_dim(dims[1], a.dim())
    if d0 == d1:
        raise RuntimeError(f"{name}: dims must be different. Got ({d0}, {d1})")
    if ord == "fro":
        return _vector_norm(a, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        perm = [i for i in range(a.dim()) if i not in (d0, d1)] + [d0, d1]
        s = svdvals(a.permute(*perm))
        empty = s.shape[-1] == 0        # (PyTorch: the 2-norm of an empty matrix is 0)
        out = _sum(s, -1) if ord == "nuc" or (ord == 2 and empty) else \
            amax(s, -1) if ord == 2 else amin(s, -1)
        if keepdim:
            out = out.unsqueeze(-1).unsqueeze(-1).permute(*np.argsort(perm).tolist())
        return out
    if abs(ord) == float("inf"):
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    sums = _vector_norm(a, 1.0, d0, keepdim)
    if ord > 0 and sums.shape[d1] == 0:        # (PyTorch: 0 for no rows / columns)
        return _sum(sums, d1, keepdim)
    return amax(sums, d1, keepdim) if ord > 0 else amin(sums, d1, keepdim)


def norm(A: Tensor, ord: float | str | None = None,
         dim: int | tuple[int, ...] | list[int] | None = None, keepdim: bool = False, *,
         dtype: DTypeLike | None = None) -> Tensor:
    """A vector norm (``dim`` an int, a 1-D input, or no ``ord``) or a matrix norm (``dim``
    a pair, a 2-D input with ``ord``, or a string ``ord``), as ``torch.linalg.norm``."""
    a = to_tensor(A)
    dims = _dim_list(dim)
    if dims is not None and len(dims) not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                           f"Got {dims}")
    if dims is None and ord is not None and a.dim() not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must "
                           f"be 1D or 2D. Got {a.dim()}D.")
    if isinstance(ord, str):
        return matrix_norm(a, ord, dims if dims is not None else (0, 1), keepdim, dtype=dtype)
    if ord is not None and ((dims is not None and len(dims) == 2) or
                            (dims is None and a.dim() == 2)):
        return matrix_norm(a, ord, dims if dims is not None else (0, 1), keepdim, dtype=dtype)
    return vector_norm(a, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
