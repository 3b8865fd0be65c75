"""Linear-algebra primitives beyond the solvers of :mod:`symgrad.ops.linalg`: the
symmetric eigendecomposition (``eigh_factor`` and its parts ``eigh_values`` /
``eigh_vectors``), the QR decomposition (``qr_factor``, ``qr_q`` / ``qr_r``), the
triangular solve (``solve_triangular``, BLAS ``trsm``: a zero pivot gives inf / NaN as in
PyTorch) and the pseudo-inverse (``pinv``) -- each with its shape rule, numpy rule
(LAPACK through numpy / scipy, in compiled code too) and PyTorch's backward formula
written with primitives, so it differentiates again.

A factorisation runs once (``*_factor``, not differentiable, its parts packed along one
last axis); its parts read it and are differentiable in A, their first operand; each
part's VJP is PyTorch's backward given that part's cotangent (linear in the cotangents,
so separate parts add up to PyTorch's single backward).
"""
from __future__ import annotations

import numpy as np

from . import lax
from .define import primitive


def _mT(x):
    return lax.transpose_last(x)


def _row(v):
    return lax.reshape(v, tuple(v.shape[:-1]) + (1, v.shape[-1]))


def _col(v):
    return lax.reshape(v, tuple(v.shape) + (1,))


def _part(packed, shape, start, stop, out):
    """Elements [start, stop) of packed's last axis as shape ``lead + out``."""
    return packed[..., start:stop].reshape(tuple(shape[:-2]) + out)


def _register_parts(names, layout, backward, attr, grad_name):
    """The parts ``names`` of a packed factorisation: part i is the i-th block of the
    packed last axis, ``layout(shape, attr_value)`` giving each block's (size, shape);
    differentiable in A through ``backward(a, packed, attr_value, *cotangents)``."""
    def numpy_rule(i):
        def rule(a, packed, **kw):
            blocks = layout(a.shape, kw[attr])
            start = sum(size for size, _ in blocks[:i])
            return _part(packed, a.shape, start, start + blocks[i][0], blocks[i][1])
        return rule

    def shape_rule(i):
        def rule(av, **kw):
            shape, dt = av[0]
            return tuple(shape[:-2]) + layout(shape, kw[attr])[i][1], dt
        return rule

    def vjp(i):
        def rule(ctx, g):
            cots = [None] * len(names)
            cots[i] = g
            return backward(ctx.input(0), ctx.input(1), ctx.kwargs[attr], *cots), None
        return rule
    for i, name in enumerate(names):
        primitive(name, 2, shape_rule(i), numpy_rule(i), saves=(0, 1), grad_name=grad_name,
                  family="other", batching="stacked", vjp=vjp(i))


# ---- eigh -----------------------------------------------------------------------------------
def _eigh_factor_numpy(a, *, uplo):
    n = a.shape[-1]
    lead = a.shape[:-2]
    if a.size == 0:
        w, v = np.zeros(lead + (n,), a.dtype), np.zeros(a.shape, a.dtype)
    elif not np.isfinite(a).all():          # (LAPACK returns NaN where PyTorch's does)
        bad = ~np.isfinite(a).all(axis=(-2, -1))
        clean = np.where(bad[..., None, None], np.eye(n, dtype=a.dtype), a)
        w, v = np.linalg.eigh(clean, UPLO=uplo)
        w = np.where(bad[..., None], np.nan, w)
        v = np.where(bad[..., None, None], np.nan, v)
    else:
        w, v = np.linalg.eigh(a, UPLO=uplo)
    return np.concatenate([w, v.reshape(lead + (n * n,))], axis=-1).astype(a.dtype, copy=False)


def _eigh_factor_shape(av, *, uplo):
    shape, dt = av[0]
    n = shape[-1]
    return tuple(shape[:-2]) + (n + n * n,), dt


primitive("eigh_factor", 1, _eigh_factor_shape, _eigh_factor_numpy, differentiable=False,
          family="other", batching="leading")


def eigh_backward(a, packed, uplo, gl, gv):
    """PyTorch's linalg_eig_backward for a symmetric A = V diag(L) Vᵀ (one of gL, gV
    given): gV's part is V [(skew(Vᵀ gV)/2) / E] Vᵀ with E_ij = L_j - L_i (1 on the
    diagonal) and gL on the diagonal; gL alone: V diag(gL) Vᵀ."""
    lam = lax.apply("eigh_values", a, packed, uplo=uplo)
    v = lax.apply("eigh_vectors", a, packed, uplo=uplo)
    if gv is None:
        return lax.matmul(lax.mul(v, _row(gl)), _mT(v))
    n = lam.shape[-1]
    square = tuple(lam.shape[:-1]) + (n, n)
    vhgv = lax.matmul(_mT(v), gv)
    skew = lax.mul(lax.sub(vhgv, _mT(vhgv)), 0.5)
    e = lax.where(lax.eye_mask(square), 1, lax.sub(lax.expand(_row(lam), square),
                                                   lax.expand(_col(lam), square)))
    inner = lax.where(lax.eye_mask(square), 0, lax.div(skew, e))
    return lax.matmul(v, lax.matmul(inner, _mT(v)))


def _eigh_layout(shape, uplo):
    n = shape[-1]
    return [(n, (n,)), (n * n, (n, n))]


# ---- qr -------------------------------------------------------------------------------------
def _qr_dims(shape, mode):
    """(m, n, k, columns of Q, rows of R)."""
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    if mode == "complete":
        return m, n, k, m, m
    if mode == "r":
        return m, n, k, 0, k
    return m, n, k, k, k


def _qr_factor_numpy(a, *, mode):
    m, n, k, qc, rr = _qr_dims(a.shape, mode)
    lead = a.shape[:-2]
    if a.size == 0:
        q = np.broadcast_to(np.eye(m, qc, dtype=a.dtype), lead + (m, qc))
        r = np.zeros(lead + (rr, n), a.dtype)
    elif mode == "r":
        q = np.zeros(lead + (m, 0), a.dtype)
        r = np.linalg.qr(a, mode="r")
    else:
        q, r = np.linalg.qr(a, mode=mode)
    return np.concatenate([np.reshape(q, lead + (m * qc,)), np.reshape(r, lead + (rr * n,))],
                          axis=-1).astype(a.dtype, copy=False)


def _qr_factor_shape(av, *, mode):
    shape, dt = av[0]
    m, n, k, qc, rr = _qr_dims(shape, mode)
    return tuple(shape[:-2]) + (m * qc + rr * n,), dt


primitive("qr_factor", 1, _qr_factor_shape, _qr_factor_numpy, differentiable=False,
          family="other", batching="leading")


def _upper_mask(shape, k=0):
    rows, cols = lax.matrix_iotas(tuple(shape))
    return lax.apply("ge", lax.sub(cols, rows), k)


def _tril(x, k=0):
    rows, cols = lax.matrix_iotas(tuple(x.shape))
    return lax.where(lax.apply("le", lax.sub(cols, rows), k), x, 0)


def _qr_square_backward(q, r, gq, gr):
    """m >= n (Q m×n, R n×n): gA = [gQ + Q copyltu(M)] R⁻ᵀ, M = R gRᵀ - gQᵀ Q (PyTorch's
    syminvadj(triu(gR Rᵀ - Qᵀ gQ)))."""
    parts = []
    if gr is not None:
        parts.append(lax.matmul(gr, _mT(r)))
    if gq is not None:
        parts.append(lax.neg(lax.matmul(_mT(q), gq)))
    x = parts[0] if len(parts) == 1 else lax.add(*parts)
    t = lax.where(_upper_mask(x.shape), x, 0)
    sym = lax.sub(lax.add(t, _mT(t)), lax.where(lax.eye_mask(tuple(x.shape)), x, 0))
    ga = lax.matmul(q, sym)
    if gq is not None:
        ga = lax.add(ga, gq)
    return lax.apply("solve_triangular", _mT(r), ga, upper=False, left=False,
                     unitriangular=False)


def qr_backward(a, packed, mode, gq, gr):
    """PyTorch's linalg_qr_backward (real case)."""
    m, n = a.shape[-2], a.shape[-1]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
                           "going to differentiate through linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    q = lax.apply("qr_q", a, packed, mode=mode)
    r = lax.apply("qr_r", a, packed, mode=mode)
    if m >= n:
        return _qr_square_backward(q, r, gq, gr)
    lead = len(a.shape) - 2
    one = (1,) * (lead + 2)

    def cols(x, start, stop):
        return lax.slice_(x, (0,) * (lead + 1) + (start,), tuple(x.shape[:-1]) + (stop,), one)
    y = cols(a, m, n)
    r1 = cols(r, 0, m)
    gr1 = None if gr is None else cols(gr, 0, m)
    if gr is not None:
        gr_y = cols(gr, m, n)
        extra = lax.matmul(y, _mT(gr_y))
        gq = extra if gq is None else lax.add(gq, extra)
        gy = lax.matmul(q, gr_y)
    else:
        gy = lax.zeros(tuple(y.shape), a.dtype)
    gx = _qr_square_backward(q, r1, gq, gr1)
    return lax.apply("cat", gx, gy, axis=lead + 1)


def _qr_layout(shape, mode):
    m, n, k, qc, rr = _qr_dims(shape, mode)
    return [(m * qc, (m, qc)), (rr * n, (rr, n))]


_register_parts(("eigh_values", "eigh_vectors"), _eigh_layout, eigh_backward, "uplo",
                "LinalgEighBackward0")
_register_parts(("qr_q", "qr_r"), _qr_layout, qr_backward, "mode", "LinalgQrBackward0")


# ---- triangular solve -----------------------------------------------------------------------
def _solve_triangular_numpy(a, b, *, upper, left, unitriangular):
    """BLAS trsm on each (broadcast) pair: X with A X = B (left) or X A = B, reading only
    A's triangle; a zero pivot gives inf / NaN, as PyTorch."""
    from scipy.linalg import get_blas_funcs    # late: scipy.linalg costs ~0.1 s to import
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    count = int(np.prod(lead))                      # (not -1: a 0x0 matrix is size 0)
    a = np.broadcast_to(a, lead + a.shape[-2:]).reshape((count,) + a.shape[-2:])
    bb = np.broadcast_to(b, lead + b.shape[-2:]).reshape((count,) + b.shape[-2:])
    out = np.empty(bb.shape, b.dtype)
    if out.size:
        trsm = get_blas_funcs("trsm", (a[0], bb[0]))
        with np.errstate(all="ignore"):
            for i in range(out.shape[0]):
                out[i] = trsm(1.0, a[i], bb[i], side=0 if left else 1, lower=0 if upper else 1,
                              diag=1 if unitriangular else 0)
    return out.reshape(lead + b.shape[-2:])


def _solve_triangular_shape(av, *, upper, left, unitriangular):
    (a, da), (b, _) = av
    return tuple(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))) + tuple(b[-2:]), da


def _solve_triangular_vjp(ctx, g):
    """PyTorch's: gB = solve_triangular(Aᵀ, g, !upper, left); gA = -gB Xᵀ (left) or
    -Xᵀ gB, kept on A's triangle (strictly, when unitriangular)."""
    k = ctx.kwargs
    a = ctx.input(0)
    gb = lax.apply("solve_triangular", _mT(a), g, upper=not k["upper"], left=k["left"],
                   unitriangular=k["unitriangular"])
    ga = None
    if ctx.needs_input_grad[0]:
        x = ctx.out
        ga = lax.neg(lax.matmul(gb, _mT(x)) if k["left"] else lax.matmul(_mT(x), gb))
        strict = 1 if k["unitriangular"] else 0
        ga = lax.where(_upper_mask(ga.shape, strict), ga, 0) if k["upper"] else \
            _tril(ga, -strict)
        ga = lax.sum_to(ga, ctx.in_avals[0][0])
    return ga, lax.sum_to(gb, ctx.in_avals[1][0]) if ctx.needs_input_grad[1] else None


primitive("solve_triangular", 2, _solve_triangular_shape, _solve_triangular_numpy, saves=(0,),
          saves_out=True, grad_name="LinalgSolveTriangularBackward0", family="other",
          batching="leading", vjp=_solve_triangular_vjp)


# ---- pseudo-inverse -------------------------------------------------------------------------
def _pinv_numpy(a, *, atol, rtol, hermitian):
    """PyTorch's linalg_pinv: V diag(1/S where S > max(atol, rtol S_max)) Uᵀ from the SVD
    (hermitian: from eigh, |L| as S)."""
    m, n = a.shape[-2], a.shape[-1]
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (n, m), a.dtype)
    with np.errstate(all="ignore"):
        if hermitian:
            s, u = np.linalg.eigh(a)
            mag = np.abs(s)
            tol = np.maximum(atol, rtol * mag.max(-1, keepdims=True))
            inv = np.where(mag > tol, 1 / s, 0).astype(a.dtype)
            return np.matmul(u * inv[..., None, :], np.swapaxes(u, -1, -2)).astype(a.dtype)
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        tol = np.maximum(atol, rtol * s[..., :1])
        inv = np.where(s > tol, 1 / s, 0).astype(a.dtype)
        return np.matmul(np.swapaxes(vh, -1, -2) * inv[..., None, :],
                         np.swapaxes(u, -1, -2)).astype(a.dtype)


def _pinv_shape(av, **_):
    shape, dt = av[0]
    return tuple(shape[:-2]) + (shape[-1], shape[-2]), dt


def pinv_backward(g, p, a):
    """PyTorch's pinv_backward for P = pinv(A), in the smaller of its two forms."""
    m, n = a.shape[-2], a.shape[-1]
    ph, gh = _mT(p), _mT(g)
    mm = lax.matmul
    if m <= n:
        k = mm(gh, p)
        kph = mm(k, ph)
        return lax.add(lax.sub(lax.add(lax.neg(_mT(mm(p, k))), kph), mm(mm(a, p), kph)),
                       mm(mm(ph, p), lax.sub(gh, mm(k, a))))
    k = mm(p, gh)
    phk = mm(ph, k)
    return lax.sub(lax.add(lax.add(lax.neg(_mT(mm(k, p))), mm(mm(lax.sub(gh, mm(a, k)), p), ph)),
                           phk), mm(mm(phk, p), a))


def _pinv_vjp(ctx, g):
    return (pinv_backward(g, ctx.out, ctx.input(0)),)


primitive("pinv", 1, _pinv_shape, _pinv_numpy, saves=(0,), saves_out=True,
          grad_name="LinalgPinvBackward0", family="other", batching="leading", vjp=_pinv_vjp)
