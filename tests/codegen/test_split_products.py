"""Products split between the two threads, by rows or along the shared dimension K.

Products big enough for BLAS run on an IR GEMM -- packed (:mod:`codegen.lower.gemm_packed`,
``.gemm.pk`` functions) from 64 rows on when an operand is strided widely or B is stored
by columns, else unpacked tiles (:mod:`codegen.lower.gemm_kernel`, ``.gemm.mk`` /
``.gemm.dk``) -- always in row chunks.  What stays with BLAS (narrow B of more than
``gemm_kernel.MAX_B_BYTES``) is split by a cost model
(:func:`codegen.lower.matmul.split_costs`): a K split (two halves of K, a private partial
product added after both, then the fused loop on row chunks, ``.kpart`` / ``.kmerge``
functions) when B is much larger than the output, row chunks otherwise.  References are numpy in float64 (and torch for gradients), never
numbers the LLVM backend produced; repeated and concurrent calls must give the same bits
(the merge order is fixed, whichever thread ran which chunk).
"""
from __future__ import annotations

import re
import threading

import numpy as np
import pytest
import torch

import symgrad
from codegen import runtime
from codegen.lower import matmul, parallel

from machines import ir_gemm  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("ir_gemm")    # the IR GEMMs' splits, whatever the host prefers

# products with K up to ~800 against a float64 reference: the rounding of a K-term sum
# grows like sqrt(K) ulps (float32 eps 1.2e-7 -> ~2e-4 on O(1) sums of many terms)
TOL = {np.float64: dict(rtol=1e-10, atol=1e-10), np.float32: dict(rtol=2e-4, atol=2e-4)}
SPLITS = parallel.threads() > 1 and runtime.blas_thread_control() is not None
KERNEL_SPLITS = parallel.threads() > 1


def _functions(text: str) -> list[str]:
    return re.findall(r'define internal void @"([^"]+)"', text)


def _kind(text: str) -> set[str]:
    """{'k'} / {'rows'} / both / neither: how the products of a kernel are split."""
    names = _functions(text)
    kinds = set()
    for name in names:
        if name.endswith(".kpart"):
            kinds.add("k")
        elif name.endswith(".chunks") and ".matmul" in name:
            if name[:-len(".chunks")] + ".kpart" not in names:
                kinds.add("rows")
    return kinds


def _inputs(m, k, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(dtype)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    return x, w, b


def _ref(x, w):
    return x.astype(np.float64) @ w.astype(np.float64)


def _product(layout: str):
    """(``x @ w``, how to pass x, how to pass w): w as given ("w": contiguous rows, the
    IR GEMM's outer-product tiles), from its transpose ("wT": ``x @ wt.T``, its
    dot-product tiles), or both operands from their transposes ("T": ``xt.T @ wt.T``,
    nothing contiguous along K on both sides: BLAS)."""
    same = lambda a: a                                            # noqa: E731
    t = lambda a: np.ascontiguousarray(a.T)                       # noqa: E731
    if layout == "w":
        return (lambda x, w: x @ w), same, same
    if layout == "wT":
        return (lambda x, wt: x @ wt.T), same, t
    return (lambda xt, wt: xt.T @ wt.T), t, t


def _expect(text: str, layout: str, split: str) -> None:
    """The product runs on an IR GEMM in row chunks (layouts "w", "wT", "T": every shape
    here has at least 64 rows), or on BLAS split as expected (layout "blas")."""
    if layout != "blas":
        assert re.search(r"\.gemm\.(mk|dk|pk)", text)
        if KERNEL_SPLITS:
            assert _kind(text) == {"rows"}
    else:
        assert ".gemm." not in text
        if SPLITS:
            assert _kind(text) == {split}


LAYOUTS = ["w", "wT", "T"]


# (m, k, n): K odd, K not a multiple of 8 or of the two chunks, M not a multiple of the
# row chunk count, the MLP's forward and backward shapes
SHAPES = [
    (64, 784, 256, "rows"),     # MLP forward: X @ W1
    (64, 785, 256, "rows"),     # odd K
    (70, 301, 300, "rows"),     # odd K, M not a multiple of 4
    (66, 999, 130, "rows"),
    (784, 64, 256, "rows"),     # MLP backward: X^T @ dZ1 (as a plain product)
    (96, 200, 96, "rows"),
    (130, 77, 200, "rows"),
]


def _blas_shape(dtype) -> tuple[int, int, int]:
    """A product the IR GEMMs leave to BLAS: B narrow (rows closer than packing wants)
    and larger than ``gemm_kernel.MAX_B_BYTES`` (the unpacked tiles' limit)."""
    from codegen.lower import gemm_kernel, gemm_packed
    n = gemm_packed.MIN_ROW_BYTES // np.dtype(dtype).itemsize - 28
    k = gemm_kernel.MAX_B_BYTES // (n * np.dtype(dtype).itemsize) + 37
    return 64, k, n


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m,k,n,split", SHAPES)
def test_split_product_with_fused_bias_tanh(m, k, n, split, dtype, layout):
    x, w, b = _inputs(m, k, n, dtype)
    prod, xa, wa = _product(layout)
    f = symgrad.compile(lambda x, w, b: (prod(x, w) + b).tanh() * 2, backend="llvm")
    text = f.lower(xa(x), wa(w), b).compile().as_text("llvm")
    _expect(text, layout, split)
    if SPLITS:
        assert re.search(r'define internal void @"[^"]*\.matmul\+s\d+\.loop', text)   # fused
    want = np.tanh(_ref(x, w) + b) * 2
    first = f(xa(x), wa(w), b)
    assert first.dtype == dtype
    np.testing.assert_allclose(first, want, **TOL[dtype])
    for _ in range(10):
        assert np.array_equal(f(xa(x), wa(w), b), first)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blas_product_split_along_k(dtype):
    """A product that stays with BLAS and whose right operand dwarfs its output: two
    halves of K, the partial product merged by row chunks with the fused bias + tanh."""
    m, k, n = _blas_shape(dtype)
    x, w, b = _inputs(m, k, n, dtype)
    f = symgrad.compile(lambda x, w, b: (x @ w + b).tanh() * 2, backend="llvm")
    _expect(f.lower(x, w, b).compile().as_text("llvm"), "blas", "k")
    tol = dict(rtol=TOL[dtype]["rtol"] * 4, atol=TOL[dtype]["atol"] * 4)   # K ~ 1e4 terms
    first = f(x, w, b)
    np.testing.assert_allclose(first, np.tanh(_ref(x, w) + b) * 2, **tol)
    for _ in range(5):
        assert np.array_equal(f(x, w, b), first)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m,k,n,split", SHAPES[:3])
def test_split_product_alone_and_with_column_sums(m, k, n, split, dtype, layout):
    """A product that is the result (nothing fused: the row chunks only merge), and one
    followed by a reduction across rows (per-chunk accumulators merged in chunk order)."""
    x, w, _ = _inputs(m, k, n, dtype, seed=1)
    prod, xa, wa = _product(layout)
    plain = symgrad.compile(lambda x, w: prod(x, w), backend="llvm")
    colsum = symgrad.compile(lambda x, w: prod(x, w).tanh().sum(0), backend="llvm")
    _expect(plain.lower(xa(x), wa(w)).compile().as_text("llvm"), layout, split)
    _expect(colsum.lower(xa(x), wa(w)).compile().as_text("llvm"), layout, split)
    np.testing.assert_allclose(plain(xa(x), wa(w)), _ref(x, w), **TOL[dtype])
    first = colsum(xa(x), wa(w))
    tol = dict(TOL[dtype], atol=TOL[dtype]["atol"] * m)
    np.testing.assert_allclose(first, np.tanh(_ref(x, w)).sum(0), **tol)
    for _ in range(10):
        assert np.array_equal(colsum(xa(x), wa(w)), first)


def test_mlp_products_run_on_the_ir_gemm_in_row_chunks():
    """The MLP benchmark's shapes: X @ W1 (64x784 @ 784x256, bias and tanh fused into
    its row chunks) and the weight gradient X^T @ dZ1 (784x64 @ 64x256) run on the IR
    GEMMs in row chunks, nothing along K; value and gradients equal torch's, call after
    call."""
    rng = np.random.default_rng(5)
    X, labels = rng.standard_normal((64, 784)), rng.integers(0, 10, 64)
    params = [rng.uniform(-0.05, 0.05, s) for s in ((784, 256), (256,), (256, 10), (10,))]

    from bench.workloads import mlp_loss as loss     # the benchmark's MLP loss

    vg = symgrad.value_and_grad(lambda *a: loss(symgrad, *a), argnums=(0, 1, 2, 3), backend="llvm")
    text = vg.lower(*params, X, labels).compile().as_text("llvm")
    assert ".gemm.pk" in text and ".gemm.mk" in text      # 784-wide rows: packed
    if KERNEL_SPLITS:
        names = _functions(text)
        assert not [n for n in names if n.endswith(".kpart")]
        assert [n for n in names if re.search(r"\.s\d+\.matmul\+s\d+\.loop64x256.*\.chunks$", n)]
        assert _kind(text) == {"rows"}
    tp = [torch.tensor(p, requires_grad=True) for p in params]
    want = loss(torch, *tp, torch.tensor(X), torch.tensor(labels))
    want.backward()
    first = None
    for _ in range(20):
        value, grads = vg(*params, X, labels)
        np.testing.assert_allclose(value, want.item(), rtol=1e-10, atol=1e-12)
        for g, p in zip(grads, tp):
            np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-9, atol=1e-12)
        if first is None:
            first = [value, *grads]
        assert all(np.array_equal(a, b) for a, b in zip([value, *grads], first))


def test_cost_model_prefers_k_split_only_for_a_large_right_operand():
    """split_costs on a BLAS product: rows pay K*N per extra chunk, the K split M*N (merge)
    plus a barrier; on the IR GEMMs rows cost nothing."""
    def product_costs(x, w):
        exe = symgrad.compile(lambda x, w: x @ w, backend="llvm").lower(x, w).compile()
        node = next(s.node for s in exe.plan.steps if getattr(getattr(s, "node", None), "op", "") == "matmul")
        return matmul.split_costs(exe.plan, node)

    assert product_costs(np.ones((64, 784)), np.ones((784, 256))) == {"rows": 0}
    m, k, n = _blas_shape(np.float64)
    costs = product_costs(np.ones((m, k)), np.ones((k, n)))
    assert costs["k"] < costs["rows"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_concurrent_callers_get_the_same_bits(layout):
    """Callers in several Python threads: some find the helper busy and run both halves
    (or all row chunks) themselves; the results are the same bits as a lone call."""
    x, w0, b = _inputs(64, 784, 256, np.float64, seed=3)
    prod, xa, wa = _product(layout)
    x0, x, w = x, xa(x), wa(w0)
    f = symgrad.compile(lambda x, w, b: ((prod(x, w) + b).tanh() ** 2).sum(0), backend="llvm")
    want = f(x, w, b)
    np.testing.assert_allclose(want, (np.tanh(_ref(x0, w0) + b) ** 2).sum(0), rtol=1e-10, atol=1e-10)
    results = []
    lock = threading.Lock()

    def run():
        got = [f(x, w, b) for _ in range(15)]
        with lock:
            results.extend(got)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 45 and all(np.array_equal(r, want) for r in results)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_both_operands_transposed(dtype):
    """Both operands transposed views (A packed by columns, B transposed while packed)."""
    x, w, b = _inputs(64, 601, 200, dtype, seed=4)
    xt, wt = np.ascontiguousarray(x.T), np.ascontiguousarray(w.T)
    f = symgrad.compile(lambda xt, wt, b: (xt.T @ wt.T + b).tanh(), backend="llvm")
    assert ".gemm.pk" in f.lower(xt, wt, b).compile().as_text("llvm")
    np.testing.assert_allclose(f(xt, wt, b), np.tanh(_ref(x, w) + b), **TOL[dtype])


# (batch, m, k, n) of BLAS products with too few rows for row chunks: a convolution's
# weight @ columns (32 x 144 @ 144 x 12544), odd sizes, a batch with A broadcast
COLUMN_SHAPES = [((), 32, 144, 12544), ((), 20, 77, 13631), ((), 9, 301, 4099),
                 ((2,), 17, 120, 9001)]


@pytest.mark.parametrize("layout", ["w", "T"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("batch,m,k,n", COLUMN_SHAPES)
def test_short_wide_blas_product_split_by_columns(batch, m, k, n, dtype, layout):
    """Too few rows for row chunks: column chunks, each a single-threaded BLAS call
    (none on OpenBLAS's own pool), bias and tanh after; the same bits call after call."""
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((m, k)) / np.sqrt(k)).astype(dtype)
    x = rng.standard_normal(batch + (k, n)).astype(dtype)
    b = rng.standard_normal((m, 1)).astype(dtype)
    if layout == "w":
        args, f = (w, x, b), symgrad.compile(lambda w, x, b: (w @ x + b).tanh(), backend="llvm")
    else:
        xt = np.ascontiguousarray(np.swapaxes(x, -1, -2))
        args = (np.ascontiguousarray(w.T), xt, b)
        f = symgrad.compile(lambda wt, xt, b: (wt.T @ xt.transpose(-1, -2) + b).tanh(),
                            backend="llvm")
    exe = f.lower(*args).compile()
    node = next(s.node for s in exe.plan.steps if getattr(getattr(s, "node", None), "op", "") == "matmul")
    text = exe.as_text("llvm")
    assert ".gemm." not in text
    if SPLITS:
        assert matmul.split_way(exe.plan, node) == "cols"
        assert re.search(r'define internal void @"[^"]*\.matmul\.chunks"', text)
        assert not [n for n in _functions(text) if n.endswith(".kpart")]
    ref = np.tanh(w.astype(np.float64) @ x.astype(np.float64) + b)
    first = f(*args)
    np.testing.assert_allclose(first, ref, **TOL[dtype])
    for _ in range(5):
        assert np.array_equal(f(*args), first)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_short_product_with_long_k_splits_along_k(dtype):
    """A convolution's weight gradient (32 x 12544 @ 12544 x 144): too few rows for row
    chunks, a K split beats column chunks; torch's gradient."""
    rng = np.random.default_rng(8)
    g = rng.standard_normal((32, 12544)).astype(dtype)
    cols = (rng.standard_normal((144, 12544)) / 100).astype(dtype)
    f = symgrad.compile(lambda g, c: g @ c.T, backend="llvm")
    exe = f.lower(g, cols).compile()
    if SPLITS:
        node = next(s.node for s in exe.plan.steps if getattr(getattr(s, "node", None), "op", "") == "matmul")
        assert matmul.split_way(exe.plan, node) == "k"
    want = (torch.tensor(g, dtype=torch.float64) @ torch.tensor(cols, dtype=torch.float64).T).numpy()
    tol = dict(rtol=TOL[dtype]["rtol"] * 4, atol=TOL[dtype]["atol"] * 4)
    np.testing.assert_allclose(f(g, cols), want, **tol)
