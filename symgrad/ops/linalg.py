"""Linear-algebra primitives: matmul (numpy.matmul's broadcasting and PyTorch's error
texts) and the dense solvers numpy's LAPACK runs (inv, solve, det and its cofactor
matrix, slogdet's sign and log, cholesky, the SVD's factorisation and its U, S and Vᵀ)
-- for each, its shape rule, numpy rule, what the eager tape saves and its VJP, declared
once (:func:`symgrad.ops.define.primitive`)."""
from __future__ import annotations

import warnings

import numpy as np

from ..errors import LinAlgError
from ..graph import dtypes
from ..graph.shapes import broadcast_shapes, numel
from . import blas_local
from . import lax
from .define import primitive


# ---- reverse-mode rules ------------------------------------------------------------
def _matmul_vjp(ctx, g):
    """numpy.matmul's VJP: 1-D operands are promoted to matrices, batch dims summed."""
    a_shape, b_shape = ctx.in_avals[0][0], ctx.in_avals[1][0]
    if type(g) is np.ndarray and len(a_shape) == 2 and len(b_shape) == 2:
        return _matrices_vjp(ctx, g)
    a2 = (1,) + a_shape if len(a_shape) == 1 else a_shape
    b2 = b_shape + (1,) if len(b_shape) == 1 else b_shape
    out2 = broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    g2 = lax.reshape(g, out2)
    ga = gb = None
    if ctx.needs_input_grad[0]:
        b = lax.reshape(ctx.input(1), b2)
        ga = lax.reshape(lax.sum_to(lax.matmul(g2, lax.transpose_last(b)), a2), a_shape)
    if ctx.needs_input_grad[1]:
        a = lax.reshape(ctx.input(0), a2)
        if len(a2) == 2 and len(b2) == 2 and _column_major(ctx.input(1)):
            # b is a transposed matrix (linear's weight.t()): its cotangent in b's layout,
            # (gᵀ a)ᵀ, so the transpose back to the weight gives a C-ordered gradient
            gb = lax.transpose_last(lax.matmul(lax.transpose_last(g2), a))
        else:
            gb = lax.reshape(lax.sum_to(lax.matmul(lax.transpose_last(a), g2), b2), b_shape)
    return ga, gb


def _matrices_vjp(ctx, g: np.ndarray) -> tuple:
    """The rule above for two eager matrices and an array cotangent: the same products
    on the arrays (``g bᵀ``; ``aᵀ g``, or ``(gᵀ a)ᵀ`` for a column-major b), without
    a Tensor per reshape and transpose."""
    needs = ctx.needs_input_grad
    ga = gb = None
    if needs[0]:
        ga = lax.as_array(blas_local.matmul(g, _array(ctx.input(1)).T), g.dtype)
    if needs[1]:
        a, b = _array(ctx.input(0)), ctx.input(1)
        if _column_major(b):
            gb = lax.as_array(blas_local.matmul(g.T, a), g.dtype).T
        else:
            gb = lax.as_array(blas_local.matmul(a.T, g), a.dtype)
    return ga, gb


def _array(x):
    return getattr(x, "_data", x)


def _column_major(x) -> bool:
    """An eager 2-D value (array, or a Tensor's array) stored column-major: a transposed
    C-ordered matrix."""
    x = getattr(x, "_data", x)
    return (type(x) is np.ndarray and x.ndim == 2 and x.flags.f_contiguous
            and not x.flags.c_contiguous)


# ---- the primitives ----------------------------------------------------------------
def _matmul_shape(av):
    """numpy.matmul semantics (1-D operands included) with PyTorch's error texts."""
    (a, da), (b, db) = av
    if da is not db:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{da.cpp_name} != {db.cpp_name}")
    if len(a) == 0 or len(b) == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{len(a)}D and {len(b)}D")
    if len(a) == 1 and len(b) == 1:
        if a[0] != b[0]:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a[0]}] and src "
                               f"[{b[0]}] to have the same number of elements, but got "
                               f"{a[0]} and {b[0]} elements respectively")
        return (), da
    if len(b) == 1:
        if a[-1] != b[0]:
            raise RuntimeError(f"size mismatch, got input ({a[-2]}), mat ({a[-2]}x{a[-1]}), "
                               f"vec ({b[0]})")
        return tuple(a[:-1]), da
    if len(a) == 1:
        if a[0] != b[-2]:
            _batch_mismatch(b[:-2], a[0], b)
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied (1x{a[0]} and "
                               f"{b[-2]}x{b[-1]})")
        return tuple(b[:-2]) + (b[-1],), da
    batch = broadcast_shapes(a[:-2], b[:-2])
    if a[-1] != b[-2]:
        _batch_mismatch(batch, a[-1], b)
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({numel(a[:-1])}x{a[-1]} and {b[-2]}x{b[-1]})")
    return batch + (a[-2], b[-1]), da


def _batch_mismatch(batch, k, b):
    """PyTorch's text when a batched right operand (run as bmm over the broadcast batch)
    has the wrong inner size."""
    if len(b) >= 3:
        n = numel(batch)
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{n}, {k}] but got: [{n}, {b[-2]}].")


primitive("matmul", 2, _matmul_shape, blas_local.matmul, saves=(0, 1),
          grad_name="MmBackward0", family="linalg", vjp=_matmul_vjp)


# ---- dense solvers: numpy's LAPACK routines (run by their numpy rule in compiled code) ----
# Each gradient is written with primitives (matmul, these solvers, where), so it is
# differentiable again.  The user-facing functions (symgrad.functions.solvers) check
# shapes and dtypes first; a singular or indefinite matrix raises PyTorch's LinAlgError.
def _mT(x):
    return lax.transpose_last(x)


def _batch_text(a: np.ndarray, index: int) -> str:
    if a.ndim <= 2:
        return ""
    return f"(Batch element {index}): "


def _first_failure(a: np.ndarray, routine: str) -> tuple[int, int]:
    """(batch index, LAPACK info > 0) of the first matrix of ``a`` on which LAPACK's
    ``getrf`` (a zero pivot) or ``potrf`` (a leading minor that is not positive-definite)
    fails, as PyTorch reports it."""
    from scipy.linalg import lapack       # late: only an error message needs LAPACK's info
    mats = a.reshape((-1,) + a.shape[-2:])
    fn = lapack.get_lapack_funcs(routine, (mats,))
    for i, m in enumerate(mats):
        info = fn(m, lower=1)[-1] if routine == "potrf" else fn(m)[-1]
        if info > 0:
            return i, int(info)
    return 0, 0


def _singular(op: str, a: np.ndarray):
    i, info = _first_failure(a, "getrf")
    if op == "inv":
        return LinAlgError(f"linalg.inv: {_batch_text(a, i)}The diagonal element {info} is "
                           f"zero, the inversion could not be completed because the input "
                           f"matrix is singular.")
    return LinAlgError(f"torch.linalg.solve: {_batch_text(a, i)}The solver failed because the "
                       f"input matrix is singular.")


def _inv_numpy(a, *, nonfinite=False):
    """A⁻¹; a singular matrix raises torch's error -- or, with ``nonfinite`` (a backward
    rule's inverse: PyTorch's solves with the LU factors there and does not check), gets
    the inf / NaN the LU solve gives, the batch's other matrices their inverse."""
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        if not nonfinite:
            raise _singular("inv", a) from None
    n = a.shape[-1]
    out = np.empty(a.shape, dtype=a.dtype)
    for m, o in zip(a.reshape(-1, n, n), out.reshape(-1, n, n)):
        try:
            o[...] = np.linalg.inv(m)
        except np.linalg.LinAlgError:
            o[...] = _lu_inverse(m)
    return out


def _lu_inverse(m):
    """A singular matrix's 'inverse' by LAPACK's LU factorisation and solve (getrf,
    getrs): inf / NaN where the zero pivot divides, as PyTorch's backward gets them."""
    import scipy.linalg
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        lu = scipy.linalg.lu_factor(m, check_finite=False)
        return scipy.linalg.lu_solve(lu, np.eye(len(m), dtype=m.dtype), check_finite=False)


def _inv_vjp(ctx, g):
    """d(A⁻¹) = -A⁻¹ dA A⁻¹, so Ā = -A⁻ᵀ ḡ A⁻ᵀ."""
    inv_t = _mT(ctx.out)
    return (lax.neg(lax.matmul(lax.matmul(inv_t, g), inv_t)),)


def _square_shape(av):
    return av[0][0], av[0][1]


primitive("inv", 1, lambda av, **_: _square_shape(av), _inv_numpy, saves_out=True, grad_name="LinalgInvExBackward0",
          family="other", batching="leading", vjp=_inv_vjp)


def _solve_numpy(a, b):
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular("solve", np.broadcast_to(a, np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
                                                 + a.shape[-2:])) from None


def _solve_shape(av):
    (a, da), (b, _) = av
    return broadcast_shapes(a[:-2], b[:-2]) + tuple(b[-2:]), da


def _solve_vjp(ctx, g):
    """X = A⁻¹B: B̄ = A⁻ᵀ ḡ (another solve), Ā = -B̄ Xᵀ."""
    gb = lax.apply("solve", _mT(ctx.input(0)), g)
    ga = None
    if ctx.needs_input_grad[0]:
        ga = lax.sum_to(lax.neg(lax.matmul(gb, _mT(ctx.out))), ctx.in_avals[0][0])
    return ga, lax.sum_to(gb, ctx.in_avals[1][0]) if ctx.needs_input_grad[1] else None


primitive("solve", 2, _solve_shape, _solve_numpy, saves=(0,), saves_out=True,
          grad_name="LinalgSolveExBackward0", family="other", batching="leading", vjp=_solve_vjp)


def _as_matrices(g, like_shape):
    """A value per matrix, broadcast over the matrix: (..., ) -> (..., n, n)."""
    return lax.expand(lax.reshape(g, tuple(g.shape) + (1, 1)), like_shape)


def _det_vjp(ctx, g):
    """d det = tr(cof(A)ᵀ dA): Ā = ḡ cof(A), the cofactor matrix (exact for singular A)."""
    shape = ctx.in_avals[0][0]
    return (lax.mul(_as_matrices(g, shape), lax.apply("cofactor", ctx.input(0))),)


primitive("det", 1, lambda av: (av[0][0][:-2], av[0][1]), lambda a: np.asarray(np.linalg.det(a)),
          saves=(0,), grad_name="LinalgDetBackward0", family="other", batching="leading", vjp=_det_vjp)


def _cofactor_numpy(a):
    """cof(A) = det(A) A⁻ᵀ, through the SVD A = U S Vᵀ (defined for singular A too):
    det(U) det(Vᵀ) U diag(prod_{j != i} s_j) Vᵀ."""
    n = a.shape[-1]
    if a.size == 0:
        return np.zeros_like(a)
    if n == 1:
        return np.ones_like(a)
    u, s, vh = np.linalg.svd(a)
    ones = np.ones(s.shape[:-1] + (1,), dtype=s.dtype)
    left = np.cumprod(np.concatenate([ones, s[..., :-1]], -1), -1)
    right = np.flip(np.cumprod(np.concatenate([ones, np.flip(s, -1)[..., :-1]], -1), -1), -1)
    scale = (np.linalg.det(u) * np.linalg.det(vh))[..., None, None]
    return (scale * (u * (left * right)[..., None, :]) @ vh).astype(a.dtype)


def _pair_products(s):
    """π_ij = Π_{k ∉ {i, j}} s_k for i ≠ j, 0 on the diagonal: (..., n) -> (..., n, n),
    without division (s may hold zeros). O(n³) per matrix."""
    n = s.shape[-1]
    cube = tuple(s.shape[:-1]) + (n, n, n)
    i = lax.apply("iota", shape=cube, axis=len(cube) - 3, dtype=dtypes.int64)
    j = lax.apply("iota", shape=cube, axis=len(cube) - 2, dtype=dtypes.int64)
    k = lax.apply("iota", shape=cube, axis=len(cube) - 1, dtype=dtypes.int64)
    skip = lax.apply("logical_or", lax.eq(k, i), lax.eq(k, j))
    spread = lax.expand(lax.reshape(s, tuple(s.shape[:-1]) + (1, 1, n)), cube)
    pi = lax.apply("prod", lax.where(skip, 1.0, spread), axes=(len(cube) - 1,), keepdim=False)
    return lax.where(lax.eye_mask(tuple(pi.shape)), 0.0, pi)


def _cofactor_vjp(ctx, g):
    """Through the SVD A = U S Vᵀ, exact for singular A too (cof is a polynomial; PyTorch's
    det backward goes through the SVD as well): cof(A) = σ U cof(S) Vᵀ with σ = det(U)
    det(V), so with E = Uᵀ dA V, dC = σ U D Vᵀ where D_ii = Σ_{k≠i} E_kk π_ik and
    D_ij = -E_ji π_ij (π: :func:`_pair_products`). With W = Uᵀ Ḡ V:
    Ā = σ U (diag(π diag(W)) - π ∘ Wᵀ) Vᵀ."""
    a = ctx.input(0)
    shape = tuple(ctx.in_avals[0][0])
    if shape[-1] <= 1 or 0 in shape:          # cof of a 1x1 matrix is the constant 1
        return (lax.zeros(shape, g.dtype),)
    packed = lax.apply("svd_factor", a, full_matrices=False)
    u, s, vh = (lax.apply(p, a, packed, full_matrices=False)
                for p in ("svd_u", "svdvals", "svd_vh"))
    sigma = lax.mul(lax.apply("slogdet_sign", u), lax.apply("slogdet_sign", vh))
    w = lax.matmul(lax.matmul(_mT(u), g), _mT(vh))
    pi = _pair_products(s)
    eye = lax.eye_mask(shape)
    w_diag = lax.sum(lax.where(eye, w, 0.0), (len(shape) - 1,), keepdim=True)  # (..., n, 1)
    diag = lax.expand(lax.matmul(pi, w_diag), shape)                            # rows: π diag W
    e_bar = lax.sub(lax.where(eye, diag, 0.0), lax.mul(pi, _mT(w)))
    return (lax.mul(_as_matrices(sigma, shape), lax.matmul(lax.matmul(u, e_bar), vh)),)


primitive("cofactor", 1, _square_shape, _cofactor_numpy, saves=(0,), saves_out=True,
          family="other", batching="leading", vjp=_cofactor_vjp)


def _slogdet_sign_vjp(ctx, g):
    return (lax.zeros(ctx.in_avals[0][0], g.dtype),)       # piecewise constant


def _slogdet_vjp(ctx, g):
    """d log|det A| = tr(A⁻¹ dA): Ā = ḡ A⁻ᵀ (a singular A: inf / NaN there, as PyTorch's,
    not an error -- the batch's other matrices keep their gradient)."""
    shape = ctx.in_avals[0][0]
    inv = lax.apply("inv", ctx.input(0), nonfinite=True)
    return (lax.mul(_as_matrices(g, shape), _mT(inv)),)


primitive("slogdet_sign", 1, lambda av: (av[0][0][:-2], av[0][1]),
          lambda a: np.asarray(np.linalg.slogdet(a)[0]), family="other", batching="leading",
          grad_name="LinalgSlogdetBackward0", vjp=_slogdet_sign_vjp)
primitive("slogdet_logabs", 1, lambda av: (av[0][0][:-2], av[0][1]),
          lambda a: np.asarray(np.linalg.slogdet(a)[1]), saves=(0,), family="other", batching="leading",
          grad_name="LinalgSlogdetBackward0", vjp=_slogdet_vjp)


def _cholesky_numpy(a, *, op="linalg.cholesky"):
    """The lower factor; ``op`` names the function in the error (``torch.cholesky``'s is
    ``cholesky``)."""
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        i, info = _first_failure(a, "potrf")
        raise LinAlgError(f"{op}: {_batch_text(a, i)}The factorization could not be "
                          f"completed because the input is not positive-definite (the leading "
                          f"minor of order {info} is not positive-definite).") from None


def _lower(x, k=0):
    """The lower triangle of the last two dims (diagonals up to ``k``), zeros above."""
    rows, cols = lax.matrix_iotas(tuple(x.shape))
    return lax.where(lax.apply("le", lax.sub(cols, rows), k), x, 0)


def _cholesky_vjp(ctx, g):
    """PyTorch's (Murray 2016): Φ = tril(Lᵀ ḡ) with its strict lower part mirrored, halved;
    Ā = L⁻ᵀ Φ L⁻¹ (two solves)."""
    low = ctx.out
    phi = _lower(lax.matmul(_mT(low), g))
    phi = lax.mul(lax.add(phi, _mT(_lower(phi, -1))), 0.5)
    y = lax.apply("solve", _mT(low), phi)
    return (_mT(lax.apply("solve", _mT(low), _mT(y))),)


primitive("cholesky", 1, lambda av, **_: _square_shape(av), _cholesky_numpy, saves_out=True,
          grad_name="LinalgCholeskyExBackward0", family="other", batching="leading", vjp=_cholesky_vjp)


# ---- the singular value decomposition: one factorisation, its parts U, S, Vᵀ ------------
# ``svd_factor`` runs LAPACK once and packs U, S and Vᵀ along one last axis (it is not
# differentiable); ``svd_u`` / ``svdvals`` / ``svd_vh`` read their part of it and are
# differentiable in A, their first operand: each VJP is PyTorch's svd_backward given that
# part's cotangent (it is linear in the cotangents, so separate parts add up to PyTorch's
# single backward), computed from the parts of the same factorisation -- nothing is
# factorised again in a backward pass, of any order.
def _row(v):
    return lax.reshape(v, tuple(v.shape[:-1]) + (1, v.shape[-1]))


def _col(v):
    return lax.reshape(v, tuple(v.shape) + (1,))


def _svd_dims(shape, full_matrices):
    """(m, n, k, columns of U, rows of Vᵀ) of the SVD of matrices of ``shape``."""
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    return m, n, k, (m if full_matrices else k), (n if full_matrices else k)


def _thin_parts(a, packed, full_matrices):
    """U, S, Vᵀ of the thin SVD (differentiable in ``a``), read from ``packed``."""
    m, n, k, mu, nv = _svd_dims(tuple(a.shape), full_matrices)
    u, s, vh = (lax.apply(p, a, packed, full_matrices=full_matrices)
                for p in ("svd_u", "svdvals", "svd_vh"))
    lead = len(a.shape) - 2
    if mu != k:
        u = lax.slice_(u, (0,) * lead + (0, 0), tuple(u.shape[:-1]) + (k,), (1,) * (lead + 2))
    if nv != k:
        vh = lax.slice_(vh, (0,) * (lead + 2), tuple(vh.shape[:-2]) + (k, n), (1,) * (lead + 2))
    return u, s, vh


def _svd_backward(a, packed, full_matrices, gu, gs, gvh):
    """PyTorch's svd_backward (real case) for A = U diag(S) Vᵀ; one cotangent of
    (gU, gS, gVᵀ) given (of the thin parts: full U / Vᵀ's extra columns / rows get none,
    as PyTorch narrows them), the others None:
    Ā = U [(skew(UᵀḠ_U) S + S skew(Vᵀ Ḡ_V)) / E + diag(Ḡ_S)] Vᵀ (+ the parts of Ḡ_U / Ḡ_V
    outside the span of U / V), E_jk = S_k² - S_j² (1 on the diagonal)."""
    u, s, vh = _thin_parts(a, packed, full_matrices)
    m, n = a.shape[-2], a.shape[-1]
    if gu is None and gvh is None:
        return lax.matmul(u, lax.mul(_col(gs), vh)) if m >= n else \
            lax.matmul(lax.mul(u, _row(gs)), vh)
    k = s.shape[-1]
    square = tuple(s.shape[:-1]) + (k, k)
    s2 = lax.mul(s, s)
    e = lax.where(lax.eye_mask(square), 1, lax.sub(lax.expand(_row(s2), square),
                                                   lax.expand(_col(s2), square)))
    if gu is not None:
        uhgu = lax.matmul(_mT(u), gu)
        inner = lax.mul(lax.sub(uhgu, _mT(uhgu)), lax.div(_row(s), e))
    else:
        vhgv = lax.matmul(vh, _mT(gvh))
        inner = lax.mul(lax.div(_col(s), e), lax.sub(vhgv, _mT(vhgv)))
    if gu is not None and m > n:
        gus = lax.div(gu, _row(s))
        out = lax.add(lax.matmul(u, inner), lax.sub(gus, lax.matmul(u, lax.matmul(_mT(u), gus))))
        return lax.matmul(out, vh)
    if gvh is not None and m < n:
        sgvh = lax.div(gvh, _col(s))
        out = lax.add(lax.matmul(inner, vh),
                      lax.sub(sgvh, lax.matmul(lax.matmul(sgvh, _mT(vh)), vh)))
        return lax.matmul(u, out)
    return lax.matmul(u, lax.matmul(inner, vh))


def _svd_factor_numpy(a, *, full_matrices):
    if not np.isfinite(a).all():
            raise LinAlgError("linalg.svd: The algorithm failed to converge because the input "
                          "matrix contained non-finite values.")
    m, n, k, mu, nv = _svd_dims(a.shape, full_matrices)
    lead = a.shape[:-2]
    if a.size == 0:
        u = np.broadcast_to(np.eye(m, mu, dtype=a.dtype), lead + (m, mu))
        s = np.zeros(lead + (k,), a.dtype)
        vh = np.broadcast_to(np.eye(nv, n, dtype=a.dtype), lead + (nv, n))
    else:
        u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return np.concatenate([u.reshape(lead + (m * mu,)), s, vh.reshape(lead + (nv * n,))],
                          axis=-1).astype(a.dtype, copy=False)


def _svd_factor_shape(av, *, full_matrices):
    shape, dt = av[0]
    m, n, k, mu, nv = _svd_dims(shape, full_matrices)
    return shape[:-2] + (m * mu + k + nv * n,), dt


primitive("svd_factor", 1, _svd_factor_shape, _svd_factor_numpy, differentiable=False,
          family="other", batching="leading")


def _svd_part_numpy(part):
    def rule(a, packed, *, full_matrices):
        m, n, k, mu, nv = _svd_dims(a.shape, full_matrices)
        bounds = (0, m * mu, m * mu + k, m * mu + k + nv * n)
        flat = packed[..., bounds[part]:bounds[part + 1]]
        return flat.reshape(a.shape[:-2] + ((m, mu), (k,), (nv, n))[part])
    return rule


def _svd_part_shape(part):
    def rule(av, *, full_matrices):
        shape, dt = av[0]
        m, n, k, mu, nv = _svd_dims(shape, full_matrices)
        return shape[:-2] + ((m, mu), (k,), (nv, n))[part], dt
    return rule


def _svd_part_vjp(part):
    def rule(ctx, g):
        full = ctx.kwargs["full_matrices"]
        a = ctx.input_structure(0)          # (the values come from the factorisation)
        shape = tuple(ctx.in_avals[0][0])
        m, n, k, mu, nv = _svd_dims(shape, full)
        lead = len(shape) - 2
        if part == 0 and mu != k:           # PyTorch narrows full U / Vᵀ to the thin parts
            g = lax.slice_(g, (0,) * (lead + 2), tuple(g.shape[:-1]) + (k,), (1,) * (lead + 2))
        if part == 2 and nv != k:
            g = lax.slice_(g, (0,) * (lead + 2), tuple(g.shape[:-2]) + (k, n), (1,) * (lead + 2))
        cots = [None, None, None]
        cots[part] = g
        return _svd_backward(a, ctx.input(1), full, *cots), None
    return rule


for _i, _name in enumerate(("svd_u", "svdvals", "svd_vh")):
    primitive(_name, 2, _svd_part_shape(_i), _svd_part_numpy(_i), saves=(0, 1),
              grad_name="LinalgSvdBackward0", family="other", batching="stacked", vjp=_svd_part_vjp(_i))
