"""``torch.linalg``'s factorisations and the solvers built on them: ``eigh`` / ``eigvalsh``,
``qr``, ``solve_triangular`` (and the deprecated ``torch.triangular_solve``), ``pinv``
(and ``torch.pinverse``), ``lstsq``, ``matrix_power``, ``multi_dot``, ``vecdot``,
``matrix_rank``, ``cond`` and ``diagonal`` -- PyTorch's checks, error texts, result
types and backward names over batches of matrices, on the primitives of
:mod:`symgrad.ops.decompositions`.

Eigenvectors and Q are LAPACK's (numpy's): the signs of eigenvectors may differ from
PyTorch's build, so only functions invariant to them compare.

>>> import symgrad as torch
>>> torch.linalg.eigvalsh(torch.tensor([[2.0, 1.0], [1.0, 2.0]]))
tensor([1., 3.])
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from ..autograd import grad_mode
from ..dispatch import bind
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax
from ..graph.shapes import broadcast_shapes
from .common import Tensor, to_tensor
from .composite import named
from .linalg import matmul
from .reduction import return_types
from .matrix import diagonal as _diagonal
from .solvers import _matrices, _svd_parts, inv, matrix_norm

__all__ = ["eigh", "eigvalsh", "qr", "solve_triangular", "pinv", "pinverse", "lstsq",
           "matrix_power", "triangular_solve", "multi_dot", "vecdot", "matrix_rank", "cond",
           "diagonal"]


# ---- eigh -----------------------------------------------------------------------------------
def _eigh_parts(a, uplo, parts):
    a = _matrices("linalg.eigh", a, floating=False)
    if not a.dtype.is_floating_point:
        raise NotImplementedError(f"\"linalg_eigh_cpu\" not implemented for "
                                  f"'{a.dtype.c_name.capitalize()}'")
    if uplo not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {uplo}")
    packed = bind(P["eigh_factor"], a, uplo=uplo)
    return [bind(P[("eigh_values", "eigh_vectors")[i]], a, packed, uplo=uplo) for i in parts]


def eigh(A: Tensor, UPLO: str = "L") -> return_types.linalg_eigh:
    """``(eigenvalues, eigenvectors)`` of each symmetric matrix (read from its ``UPLO``
    triangle), eigenvalues ascending (``LinalgEighBackward0``)."""
    return return_types.linalg_eigh(*_eigh_parts(A, UPLO, (0, 1)))


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues of each symmetric matrix, ascending (``LinalgEighBackward0``)."""
    return _eigh_parts(A, UPLO, (0,))[0]


# ---- qr -------------------------------------------------------------------------------------
def qr(A: Tensor, mode: str = "reduced") -> return_types.linalg_qr:
    """``(Q, R)`` with ``A = Q R`` (LAPACK's Householder QR); ``mode``: ``'reduced'``,
    ``'complete'`` or ``'r'`` (Q empty, not differentiable), as PyTorch
    (``LinalgQrBackward0``)."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    a = _matrices("linalg.qr", A, square=False)
    packed = bind(P["qr_factor"], a, mode=mode)
    q, r = (bind(P[p], a, packed, mode=mode) for p in ("qr_q", "qr_r"))
    if mode == "r" and not (a.requires_grad and grad_mode.is_grad_enabled()):
        q = lax.zeros((0,), a.dtype)
    elif mode == "r":   # (a backward through it is qr's: PyTorch's error for mode 'r')
        q = _empty_output("LinalgQrBackward0", a, through=lambda av: (bind(
            P["qr_r"], av, bind(P["qr_factor"], av, mode=mode), mode=mode),))
    return return_types.linalg_qr(q, r)


def _empty_output(name: str, *inputs: Tensor, through=None) -> Tensor:
    """An empty (0,) output of the function recorded as `name` (PyTorch's ``qr``'s Q in
    mode 'r', ``lstsq``'s residuals when there are none): it has `name` as grad_fn when
    an input requires grad; a backward through it meets the function's own rule
    (``through``: what it computes from the inputs, else the inputs)."""
    none = Tensor._from_array(np.zeros((0,), np.int64), dtypes.int64)

    def empty(*vs):
        vs = through(*vs) if through is not None else vs
        parts = [lax.take(lax.reshape(v, (v.numel(),)), none, 0) for v in vs]
        out = parts[0]
        for part in parts[1:]:
            out = lax.add(out, lax.cast(part, out.dtype))
        return out
    return named(name, empty, *inputs)


# ---- triangular solve -----------------------------------------------------------------------
def solve_triangular(A: Tensor, B: Tensor, *, upper: bool | None = None, left: bool = True,
                     unitriangular: bool = False) -> Tensor:
    """X with ``A X = B`` (``left=False``: ``X A = B``) for triangular A (only its
    ``upper`` or lower triangle is read; ``unitriangular``: its diagonal taken as ones);
    batch dims broadcast (``LinalgSolveTriangularBackward0``)."""
    if upper is None:
        raise TypeError('linalg_solve_triangular() missing 1 required positional arguments: '
                        '"upper"')
    a, b = to_tensor(A), to_tensor(B)
    if not a.dtype.is_floating_point:
        raise NotImplementedError(f"\"triangular_solve_cpu\" not implemented for "
                                  f"'{a.dtype.c_name.capitalize()}'")
    a = _matrices("linalg.solve_triangular", a)
    if b.dim() < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 "
                           "dimensions.")
    inner = b.shape[-2] if left else b.shape[-1]
    if inner != a.shape[-1]:
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the "
                           f"equation {'AX = B' if left else 'XA = B'} ({a.shape[-2]}x"
                           f"{a.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})")
    broadcast_shapes(tuple(b.shape[:-2]), tuple(a.shape[:-2]))     # (PyTorch's error)
    if b.dtype is not a.dtype:                        # (PyTorch's result has A's dtype)
        b = lax.cast(b, a.dtype)
    return bind(P["solve_triangular"], a, b, upper=bool(upper), left=bool(left),
                unitriangular=bool(unitriangular))


# ---- pinv / lstsq ---------------------------------------------------------------------------
def _pinv_checked(name, a):
    a = to_tensor(a)
    if a.dim() < 2 or a.dtype not in (dtypes.float32, dtypes.float64):
        c = {"float32": "Float", "float64": "Double"}.get(a.dtype.name,
                                                          a.dtype.c_name.capitalize())
        raise RuntimeError(f"{name}({c}{{{list(a.shape)}}}): expected a tensor with 2 or more "
                           "dimensions of float, double, cfloat or cdouble types")
    return a


def _tolerances(a, atol, rtol):
    """PyTorch's defaults: no tolerance given -> rtol = eps max(m, n); only atol > 0 ->
    rtol 0."""
    eps = float(np.finfo(a.dtype.np).eps)
    if atol is None and rtol is None:
        return 0.0, eps * max(a.shape[-2], a.shape[-1])
    atol = 0.0 if atol is None else float(atol)
    if rtol is None:
        rtol = 0.0 if atol > 0 else eps * max(a.shape[-2], a.shape[-1])
    return atol, float(rtol)


def pinv(A: Tensor, rcond: float | None = None, hermitian: bool = False, *,
         atol: float | None = None, rtol: float | None = None) -> Tensor:
    """The Moore-Penrose pseudo-inverse of each matrix, from its SVD (``hermitian``: its
    eigendecomposition), singular values at or below ``max(atol, rtol * largest)`` taken
    as zero (``LinalgPinvBackward0``)."""
    a = _pinv_checked("linalg.pinv", A)
    if rcond is not None:             # (PyTorch's deprecated spelling of rtol, atol 0)
        if atol is not None or rtol is not None:
            raise TypeError("linalg.pinv: pass rcond or atol/rtol, not both")
        atol, rtol = 0.0, rcond
    if hermitian and a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"linalg.eigh: A must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")
    atol_, rtol_ = _tolerances(a, atol, rtol)
    return bind(P["pinv"], a, atol=atol_, rtol=rtol_, hermitian=bool(hermitian))


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: :func:`pinv` with ``rtol=rcond``."""
    a = _pinv_checked("linalg.pinv", input)
    return bind(P["pinv"], a, atol=0.0, rtol=float(rcond), hermitian=False)


_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *,
          driver: str | None = None) -> return_types.linalg_lstsq:
    """The least-squares solution X of ``A X = B`` for each matrix (the minimum-norm one,
    ``pinv(A) @ B``, whose gradient PyTorch's backward uses), with PyTorch's extra results
    per ``driver`` (default ``'gelsy'``): ``residuals`` (squared, per column: m > n, full
    rank, drivers other than gelsy), ``rank`` (all but gels), ``singular_values`` (gelsd,
    gelss) -- empty otherwise (``LinalgLstsqBackward0``)."""
    a, b = to_tensor(A), to_tensor(B)
    if a.dtype not in (dtypes.float32, dtypes.float64) or \
            b.dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same "
                           f"dtype, but got input's dtype {a.dtype.c_name.capitalize()} and "
                           f"other's dtype {b.dtype.c_name.capitalize()}")
    if a.dim() < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, "
                           "gelsy, gelsd, gelss)")
    if b.dim() > a.dim() or a.dim() - b.dim() > 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to "
                           "other.dim() and (input.dim() - other.dim()) <= 1")
    vector = b.dim() == a.dim() - 1
    bm = lax.reshape(b, tuple(b.shape) + (1,)) if vector else b
    if bm.shape[-2] != a.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    m, n = a.shape[-2], a.shape[-1]
    eps = float(np.finfo(a.dtype.np).eps)
    rc = eps * max(m, n) if rcond is None or rcond < 0 else float(rcond)

    def solution(av, bv):
        bvm = lax.reshape(bv, tuple(bv.shape) + (1,)) if vector else bv
        x = lax.matmul(lax.apply("pinv", av, atol=0.0, rtol=rc, hermitian=False), bvm)
        return lax.reshape(x, tuple(x.shape[:-1])) if vector else x
    x = named("LinalgLstsqBackward0", solution, a, b)
    sv = lax.zeros((0,), a.dtype)
    rank = lax.zeros((0,), dtypes.int64)
    full = True
    if driver != "gels":
        if a.numel():
            s = _svd_parts(a.detach(), False, (1,))[0]
            top = lax.slice_(s, (0,) * s.dim(), tuple(s.shape[:-1]) + (1,), (1,) * s.dim())
            big = bind(P["gt"], s, lax.mul(top, rc))
            rank = lax.sum(lax.cast(big, dtypes.int64), (s.dim() - 1,))
        else:
            s = lax.zeros(tuple(a.shape[:-2]) + (min(m, n),), a.dtype)
            rank = lax.zeros(tuple(a.shape[:-2]), dtypes.int64)
        if driver in ("gelsd", "gelss"):
            sv = s
        if driver != "gelsy" and m > n:
            full = bool(np.all(_value(rank) == n))
    residuals = None
    if driver != "gelsy" and m > n and (driver == "gels" or full):
        def squared(av, bv):
            bvm = lax.reshape(bv, tuple(bv.shape) + (1,)) if vector else bv
            xv = lax.matmul(lax.apply("pinv", av, atol=0.0, rtol=rc, hermitian=False), bvm)
            d = lax.sub(lax.matmul(av, xv), bvm)
            return lax.sum(lax.mul(d, d), (len(d.shape) - 2,))   # (vector b: (..., 1))
        residuals = named("LinalgLstsqBackward0", squared, a, b)
    if residuals is None:
        residuals = _empty_output("LinalgLstsqBackward0", a, b)
    return return_types.linalg_lstsq(x, residuals, rank, sv)


def _value(rank: Tensor) -> np.ndarray:
    if rank._data is None:
        raise TypeError("linalg.lstsq returns residuals only for full-rank inputs: inside "
                        "symgrad.compile the rank is not known while tracing; use "
                        "driver='gelsy' (no residuals) or compute them from the solution")
    return rank._data


# ---- matrix_power ---------------------------------------------------------------------------
def matrix_power(A: Tensor, n: int) -> Tensor:
    """``A`` multiplied by itself ``n`` times (``n < 0``: the inverse's power; ``n = 0``:
    identities), by PyTorch's binary decomposition of ``n`` (its product order, so its
    rounding and its ``MmBackward0`` chain)."""
    a = to_tensor(A)
    if a.dim() < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 "
                           "dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {a.shape[-2]} by {a.shape[-1]} matrices")
    n = int(n)
    if n == 0:
        eye = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype.np), tuple(a.shape))
        ident = Tensor._from_array(np.ascontiguousarray(eye), a.dtype)
        keep = Tensor._from_array(np.zeros(tuple(a.shape), bool), dtypes.bool_)
        return named("CopyBackwards", lambda v: lax.where(keep, v, ident), a)
    inverted = n < 0
    if inverted:
        a, n = inv(a), -n
    if n == 1:
        return a if inverted else a.clone()
    if n == 2:
        return matmul(a, a)
    if n == 3:
        return matmul(matmul(a, a), a)
    z = result = None
    while n > 0:
        bit, n = n % 2, n // 2
        z = a if z is None else matmul(z, z)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


# ---- the deprecated triangular_solve; multi_dot, vecdot, matrix_rank, cond, diagonal ---------
_triangular_warned = [False]


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> return_types.triangular_solve:
    """The deprecated ``torch.triangular_solve``: ``(X, A.clone())`` with ``op(A) X = b``
    (``op``: transpose when asked), with PyTorch's warning (``TriangularSolveBackward0``)."""
    if not _triangular_warned[0]:
        _triangular_warned[0] = True
        warnings.warn(
            "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangular"
            "and will be removed in a future PyTorch release.\ntorch.linalg.solve_triangular "
            "has its arguments reversed and does not return a copy of one of the inputs.\n"
            "X = torch.triangular_solve(B, A).solution\nshould be replaced with\n"
            "X = torch.linalg.solve_triangular(A, B). (Triggered internally at "
            "/__w/pytorch/pytorch/aten/src/ATen/native/BatchLinearAlgebra.cpp:2273.)",
            UserWarning, stacklevel=2)
    a, rhs = to_tensor(A), to_tensor(b)
    if a.dim() < 2 or rhs.dim() < 2:
        raise RuntimeError(f"torch.triangular_solve: The input tensor {'A' if a.dim() < 2 else 'B'}"
                           f" must have at least 2 dimensions.")
    a = _matrices("torch.triangular_solve", a)
    up = bool(upper)

    def solution(av, bv):
        coeff = lax.transpose_last(av) if transpose else av
        return lax.apply("solve_triangular", coeff, bv, upper=up != bool(transpose), left=True,
                         unitriangular=bool(unitriangular))
    x = named("TriangularSolveBackward0", solution, a, rhs)
    clone = named("TriangularSolveBackward0", lambda av: bind(P["copy"], av), a)
    return return_types.triangular_solve(x, clone)


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """The product of the matrices (the first / last may be vectors) in the cheapest
    order (PyTorch's matrix-chain order)."""
    ts = [to_tensor(t) for t in tensors]
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    first_vec, last_vec = ts[0].dim() == 1, ts[-1].dim() == 1
    if first_vec:
        ts[0] = ts[0].unsqueeze(0)
    if last_vec:
        ts[-1] = ts[-1].unsqueeze(-1)
    for i, t in enumerate(ts):
        if t.dim() != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.dim()}D")
    dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    n = len(ts)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def product(i, j):
        if i == j:
            return ts[i]
        k = split[i][j]
        return matmul(product(i, k), product(k + 1, j))
    out = product(0, n - 1)
    shape = tuple(s for s, drop in ((out.shape[0], first_vec), (out.shape[1], last_vec))
                  if not drop)
    return out.view(shape)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of the vectors along ``dim``, broadcast: ``(x * y).sum(dim)``."""
    return (to_tensor(x) * to_tensor(y)).sum(dim)


def matrix_rank(A: Tensor, *, atol: float | None = None, rtol: float | None = None,
                hermitian: bool = False) -> Tensor:
    """The number of singular values above ``max(atol, rtol * largest)`` (defaults as
    ``pinv``'s), int64, per matrix."""
    a = _matrices("linalg.matrix_rank", A, square=False)
    atol_, rtol_ = _tolerances(a, atol, rtol)
    if a.numel() == 0:
        return lax.zeros(tuple(a.shape[:-2]), dtypes.int64)
    s = eigvalsh(a.detach()).abs() if hermitian else \
        _svd_parts(a.detach(), False, (1,))[0]
    top = s.amax(-1, keepdim=True)
    tol = (top * rtol_).clamp_min(atol_)
    return lax.sum(lax.cast(bind(P["gt"], s, tol), dtypes.int64), (s.dim() - 1,))


def cond(A: Tensor, p: float | str | None = None) -> Tensor:
    """The condition number: for ``p`` None / 2 / -2 the ratio of the extreme singular
    values, else ``norm(A, p) * norm(inv(A), p)``."""
    a = _matrices("linalg.cond", A, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = _svd_parts(a, False, (1,))[0]
        k = s.shape[-1]
        hi, lo = s.narrow(-1, 0, 1), s.narrow(-1, k - 1, 1)
        return (hi / lo if p != -2 else lo / hi).squeeze(-1)
    return matrix_norm(a, p) * matrix_norm(inv(a), p)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """``torch.diagonal`` with the last two dims by default (a view)."""
    return _diagonal(to_tensor(A), offset, dim1, dim2)
