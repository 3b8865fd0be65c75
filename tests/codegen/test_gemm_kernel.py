"""The IR GEMMs -- unpacked tiles (:mod:`codegen.lower.gemm_kernel`, and its dot-product
tiles for ``x @ w.T``, :mod:`codegen.lower.gemm_dot`) and the packed loop nest
(:mod:`codegen.lower.gemm_packed`) -- against numpy in float64.

Edges of the tile (rows not a multiple of its rows, columns not a multiple of its panel
or of a vector: masked lanes), the shared dimension cut into blocks, transposed and
strided left operands, batches, NaN and inf, and reads that stop exactly at the end of
an operand (a guard page after it, in a subprocess that must exit cleanly).  References
are numpy products in float64, never numbers the LLVM backend produced.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symgrad
from codegen.lower import gemm_dot, gemm_kernel, gemm_packed
from symgrad.graph.dtypes import float32, float64

from machines import IR_GEMM_ENV, foreign_machine, ir_gemm, machine, target_env  # noqa: E402,F401  (fixtures)

pytestmark = pytest.mark.usefixtures("ir_gemm")    # these kernels, whatever the host prefers

# a K-term float32 sum rounds like sqrt(K) ulps of its terms
TOL = {np.float64: dict(rtol=1e-12, atol=1e-12), np.float32: dict(rtol=3e-5, atol=3e-5)}


def _tol(dtype, k):
    t = TOL[dtype]
    scale = np.sqrt(k)
    return dict(rtol=t["rtol"] * scale, atol=t["atol"] * scale)


def _packed(m: int, n: int, dtype, b_by_columns: bool = False, a_by_columns: bool = False) -> bool:
    """Whether the product packs (the rule :func:`gemm_packed.applies` documents)."""
    size = np.dtype(dtype).itemsize
    wide = b_by_columns or n * size >= gemm_packed.MIN_ROW_BYTES or \
        a_by_columns and m * size >= gemm_packed.MIN_ROW_BYTES
    return m >= gemm_packed.MIN_ROWS and wide


def _compile(fn, *args):
    f = symgrad.compile(fn, backend="llvm")
    return f, f.lower(*args).compile().as_text("llvm")


# (m, k, n): rows past the last full tile, column tails of 1, 2 and several lanes, one
# column panel or less, K long enough to be cut into blocks (f64: 3, f32: 2)
SHAPES = [(9, 100, 40), (13, 300, 17), (8, 4096, 9), (100, 64, 200), (64, 784, 256),
          (257, 33, 95), (30, 50, 24), (8, 5000, 10)]


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("layout", ["w", "wT"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_product_edges(m, k, n, dtype, layout):
    """``x @ w`` (outer-product tiles) and ``x @ wt.T`` (dot-product tiles: K tails of
    every lane count, column tails of 1-3)."""
    rng = np.random.default_rng(m * 7 + k + n)
    x = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    if layout == "w":
        f, text = _compile(lambda x, w: x @ w, x, w)
        assert (".gemm.pk" if _packed(m, n, dtype) else ".gemm.mk") in text
        got = f(x, w)
    else:
        wt = np.ascontiguousarray(w.T)
        f, text = _compile(lambda x, wt: x @ wt.T, x, wt)
        if _packed(m, n, dtype, b_by_columns=True):
            assert ".gemm.pk" in text
        else:
            assert (".gemm.dk" in text) == (k <= gemm_dot.MAX_K)     # longer K: BLAS
        got = f(x, wt)
    assert got.dtype == dtype and got.shape == (m, n)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.astype(np.float64), **_tol(dtype, k))


@pytest.mark.usefixtures("machine")
def test_long_k_is_cut_into_blocks():
    """K longer than one B panel of the target's tile (float64): blocks of the shared
    dimension, the later ones accumulating into C (``.acc`` kernels)."""
    dt = float64
    _, nv, lanes = gemm_kernel.tile(dt)
    k = 2 * (gemm_kernel.PANEL_BYTES // (nv * lanes * dt.itemsize)) + 5
    assert len(gemm_kernel._k_blocks(dt, k)) >= 2
    x, w = np.ones((8, k)), np.ones((k, 9))
    _, text = _compile(lambda x, w: x @ w, x, w)
    assert ".acc" in text and ".st" in text


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_transposed_and_strided_left_operand(dtype):
    """A = X^T (columns contiguous: the MLP's weight gradient) and A = a column slice."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 300)).astype(dtype)
    dz = rng.standard_normal((64, 70)).astype(dtype)
    f, text = _compile(lambda x, dz: x.T @ dz, x, dz)
    assert (".gemm.pk" if _packed(300, 70, dtype, a_by_columns=True) else ".gemm.mk") in text
    np.testing.assert_allclose(f(x, dz), x.T.astype(np.float64) @ dz.astype(np.float64), **_tol(dtype, 64))
    w = rng.standard_normal((150, 33)).astype(dtype)
    g, _ = _compile(lambda x, w: x[:, ::2] @ w, x, w)
    np.testing.assert_allclose(g(x, w), x[:, ::2].astype(np.float64) @ w.astype(np.float64),
                               **_tol(dtype, 150))


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_batched_and_broadcast_products(dtype):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 40, 50)).astype(dtype)
    b = rng.standard_normal((3, 50, 36)).astype(dtype)
    w = rng.standard_normal((50, 36)).astype(dtype)
    f, text = _compile(lambda a, b: a @ b, a, b)
    assert ".gemm.mk" in text
    np.testing.assert_allclose(f(a, b), a.astype(np.float64) @ b.astype(np.float64), **_tol(dtype, 50))
    g, _ = _compile(lambda a, w: a @ w, a, w)
    np.testing.assert_allclose(g(a, w), a.astype(np.float64) @ w.astype(np.float64), **_tol(dtype, 50))


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nan_and_inf_stay_in_their_rows_and_columns(dtype):
    """A NaN in A poisons its row of C, an inf in B its column (inf * 0 = NaN as in
    numpy); masked lanes and rows past the range never leak into other elements."""
    m, k, n = 19, 90, 21
    x = np.ones((m, k), dtype)
    w = np.ones((k, n), dtype)
    x[17, 3] = np.nan
    w[5, 20] = np.inf
    x[2, 5] = 0.0
    f, text = _compile(lambda x, w: x @ w, x, w)
    assert ".gemm.mk" in text
    with np.errstate(invalid="ignore"):
        want = x.astype(np.float64) @ w.astype(np.float64)
    got = f(x, w)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=0, atol=0)


def test_one_thread_and_two_give_the_same_bits(tmp_path):
    """Every element is one FMA chain over k in order, whatever the row chunks: a
    process limited to one CPU (no split) computes the same bits as a split call."""
    code = textwrap.dedent("""
        import os, sys
        if sys.argv[1] == "1":
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        os.environ["SYMGRAD_DISK_CACHE"] = "0"
        import numpy as np, symgrad
        rng = np.random.default_rng(3)
        x, w = rng.standard_normal((784, 64)), rng.standard_normal((64, 250))
        f = symgrad.compile(lambda x, w: (x @ w).tanh(), backend="llvm")
        np.save(sys.argv[2], f(x, w))
    """)
    import os
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no split to compare with")
    outs = []
    for threads in ("1", "2"):
        path = tmp_path / f"out{threads}.npy"
        subprocess.run([sys.executable, "-c", code, threads, str(path)], check=True, timeout=300,
                       env={**os.environ, **IR_GEMM_ENV})
        outs.append(np.load(path))
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((784, 64)), rng.standard_normal((64, 250))
    np.testing.assert_allclose(outs[0], np.tanh(x @ w), rtol=1e-12, atol=1e-12)
    assert np.array_equal(outs[0], outs[1])


GUARD = textwrap.dedent("""
    import ctypes, mmap, os, re, sys
    import numpy as np
    os.environ["SYMGRAD_DISK_CACHE"] = "0"
    import symgrad
    PAGE = mmap.PAGESIZE
    libc = ctypes.CDLL(None)
    keep = []

    def guarded(shape, dtype, fill):
        # an array whose last byte is the last byte before a PROT_NONE page
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        pages = -(-nbytes // PAGE) + 1
        mm = mmap.mmap(-1, pages * PAGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        assert libc.mprotect(ctypes.c_void_p(base + (pages - 1) * PAGE), PAGE, 0) == 0
        start = (pages - 1) * PAGE - nbytes
        a = np.frombuffer(mm, dtype=dtype, count=int(np.prod(shape)), offset=start).reshape(shape)
        a[...] = fill
        keep.append(mm)
        return a

    for dtype in (np.float64, np.float32):
        for m, k, n in ((13, 300, 17), (9, 100, 41), (784, 64, 250), (131, 301, 261)):
            rng = np.random.default_rng(0)
            x = guarded((m, k), dtype, rng.standard_normal((m, k)))
            w = guarded((k, n), dtype, rng.standard_normal((k, n)))
            f = symgrad.compile(lambda x, w: x @ w, backend="llvm")
            assert re.search(r"\.gemm\.(mk|pk)", f.lower(x, w).compile().as_text("llvm"))
            got = f(x, w)
            want = x.astype(np.float64) @ w.astype(np.float64)
            # a K-term sum of O(1) products rounds like sqrt(K) ulps of the dtype
            tol = np.finfo(dtype).eps * 4 * np.sqrt(k) * np.abs(want).max()
            assert np.allclose(got, want, rtol=0, atol=tol), (dtype, m, k, n)
            xt = guarded((k, m), dtype, x.T)
            g = symgrad.compile(lambda xt, w: xt.T @ w, backend="llvm")
            assert np.allclose(g(xt, w), want, rtol=0, atol=tol), (dtype, m, k, n, "T")
            wt = guarded((n, k), dtype, w.T)        # dot-product tiles: K tail masked
            h = symgrad.compile(lambda x, wt: x @ wt.T, backend="llvm")
            assert re.search(r"\.gemm\.(dk|pk)", h.lower(x, wt).compile().as_text("llvm"))
            # both operands transposed (A packed by columns, B transposed while packed)
            xt2, wt2 = guarded((k, m), dtype, x.T), guarded((n, k), dtype, w.T)
            g2 = symgrad.compile(lambda xt, wt: xt.T @ wt.T, backend="llvm")
            assert np.allclose(g2(xt2, wt2), want, rtol=0, atol=tol), (dtype, m, k, n, "TT")
            assert np.allclose(h(x, wt), want, rtol=0, atol=tol), (dtype, m, k, n, "wT")
    print("ok")
""")


def test_reads_stop_at_the_end_of_each_operand(machine):
    """Operands that end right before an unmapped page: the column tail's masked loads
    (AVX-512 masks, AVX2 masked moves, SSE's scalarised tails) and the clamped rows past
    the range never touch it (a fault would kill the child)."""
    out = subprocess.run([sys.executable, "-c", GUARD], capture_output=True, text=True,
                         timeout=300, env={**os.environ, **target_env(machine), **IR_GEMM_ENV})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_products_the_kernels_do_not_take_stay_with_blas_or_loops():
    """Fewer rows than packing wants with nothing contiguous along K on both sides; a
    narrow B larger than MAX_B_BYTES (too big for the unpacked tiles, rows too close for
    packing to pay)."""
    xt, wt = np.ones((300, gemm_packed.MIN_ROWS - 1)), np.ones((70, 300))
    _, text = _compile(lambda xt, wt: xt.T @ wt.T, xt, wt)
    assert ".gemm." not in text
    n = gemm_packed.MIN_ROW_BYTES // 8 - 28
    k = gemm_kernel.MAX_B_BYTES // (8 * n) + 8
    x, w = np.ones((16, k)), np.ones((k, n))
    _, text = _compile(lambda x, w: x @ w, x, w)
    assert ".gemm." not in text
    assert gemm_kernel.row_granule(float32) == gemm_kernel.row_granule(float64)


MALLOC_FAILS = textwrap.dedent("""
    import ctypes, os
    os.environ["SYMGRAD_DISK_CACHE"] = "0"
    import numpy as np, symgrad
    from codegen import jit, runtime
    runtime.register()
    null = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)(lambda n: None)
    jit.add_symbol(runtime.MALLOC, ctypes.cast(null, ctypes.c_void_p).value)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((200, 300)), rng.standard_normal((300, 260))
    f = symgrad.compile(lambda x, w: x @ w, backend="llvm")
    assert ".gemm.pk" in f.lower(x, w).compile().as_text("llvm")
    assert np.allclose(f(x, w), x @ w, rtol=1e-12, atol=1e-12)
    print("ok")
""")


def test_packing_without_memory_falls_back_to_blas():
    """When the packing buffers cannot be allocated the product runs on BLAS: the right
    answer, no crash (in a subprocess whose malloc for generated code always fails)."""
    out = subprocess.run([sys.executable, "-c", MALLOC_FAILS], capture_output=True, text=True,
                         timeout=300, env={**os.environ, **IR_GEMM_ENV})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_packed_products_of_every_layout(layout, dtype):
    """Large products in every layout, with tails in every dimension: rows past the last
    tile and block, K past the last block and vector, columns past the last panel."""
    rng = np.random.default_rng(len(layout) + np.dtype(dtype).itemsize)
    m, k, n = 2 * gemm_packed.MC + 13, gemm_packed.KC + 37, gemm_packed.MIN_ROW_BYTES // 4 + 5
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    args = (a if layout[0] == "N" else np.ascontiguousarray(a.T),
            b if layout[1] == "N" else np.ascontiguousarray(b.T))
    fn = {"NN": lambda a, b: a @ b, "NT": lambda a, bt: a @ bt.T,
          "TN": lambda at, b: at.T @ b, "TT": lambda at, bt: at.T @ bt.T}[layout]
    f, text = _compile(fn, *args)
    assert ".gemm.pk" in text
    np.testing.assert_allclose(f(*args), a.astype(np.float64) @ b.astype(np.float64), **_tol(dtype, k))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tiles_follow_the_target(dtype, machine):
    """Tile shapes come from the target: 8 rows of 3 vectors with 32 vector registers,
    4 rows with 16; vectors of the target's width; and the code uses exactly them."""
    dt = float64 if dtype == np.float64 else float32
    lanes = machine.lanes(8 * np.dtype(dtype).itemsize)
    rows = 8 if machine.vector_registers >= 32 else 4
    assert gemm_kernel.tile(dt) == (rows, 3, lanes)
    assert gemm_dot.tile(dt) == (4 if machine.vector_registers >= 32 else 2, 4, lanes)
    x, w = np.ones((64, 300), dtype), np.ones((300, 96), dtype)
    f, text = _compile(lambda x, w: x @ w, x, w)
    elem = "double" if dtype == np.float64 else "float"
    assert f"<{lanes} x {elem}>" in text
    if machine.arch == "x86_64":
        asm = f.lower(x, w).compile().as_text("asm")
        widest = {512: "zmm", 256: "ymm", 128: "xmm"}[machine.vector_bits]
        assert widest in asm and all(r not in asm for r, b in (("zmm", 512), ("ymm", 256))
                                     if b > machine.vector_bits)
    np.testing.assert_allclose(f(x, w), x @ w)


def test_tiles_for_other_machines(foreign_machine):
    """The kernels built for machines this host cannot run (never executed)."""
    x, w = np.ones((64, 300)), np.ones((300, 96))
    f = symgrad.compile(lambda x, w: x @ w, backend="llvm", target=foreign_machine)
    exe = f.lower(x, w).compile()
    assert ".gemm.mk" in exe.as_text("llvm")
    assert f"<{foreign_machine.lanes(64)} x double>" in exe.as_text("llvm")
    asm = exe.as_text("asm")
    assert ("zmm" in asm) == (foreign_machine.vector_bits == 512)
    with pytest.raises(Exception, match="cannot run in this process"):
        f(x, w)


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("sanitize", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_packing_is_one_shared_function_per_layout(dtype, sanitize, monkeypatch):
    """Several packed products of different widths (column tails of several sizes) and
    layouts in one module call one packing function per layout (B by rows: one per
    panel width; B by columns; A by columns), not a copy each; the results are right,
    checked in sanitized mode as well (bounds of each packed block)."""
    from symgrad.config import settings
    monkeypatch.setattr(settings, "sanitize", sanitize)
    rng = np.random.default_rng(7 + np.dtype(dtype).itemsize)
    m, k = gemm_packed.MC + 21, gemm_packed.KC + 5
    widths = [gemm_packed.MIN_ROW_BYTES // np.dtype(dtype).itemsize + d for d in (3, 11, 29)]
    a = rng.standard_normal((m, k)).astype(dtype)
    bs = [rng.standard_normal((k, n)).astype(dtype) for n in widths]
    args = (a, np.ascontiguousarray(a.T), *bs, *(np.ascontiguousarray(b.T) for b in bs))

    def fn(a, at, b0, b1, b2, t0, t1, t2):
        return (a @ b0, a @ b1, a @ b2, a @ t0.T, a @ t1.T, a @ t2.T, at.T @ b0, at.T @ t2.T)

    f, text = _compile(fn, *args)
    defined = [line.split('"')[1] for line in text.splitlines()
               if line.startswith("define") and '"symgrad.gemm.pack.' in line]
    assert len(defined) == len(set(defined))
    name = np.dtype(dtype).name
    assert f"symgrad.gemm.pack.bc.{name}" in defined and f"symgrad.gemm.pack.a.{name}.s{m}" in defined
    assert len([d for d in defined if d.startswith("symgrad.gemm.pack.br.")]) <= 2 * len(widths)
    assert text.count('@"symgrad.gemm.pack.bc.') > 2
    a64, b64 = a.astype(np.float64), [b.astype(np.float64) for b in bs]
    want = [a64 @ b for b in b64] * 2 + [a64 @ b64[0], a64 @ b64[2]]
    for got, ref in zip(f(*args), want):
        np.testing.assert_allclose(got, ref, **_tol(dtype, k))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tile_kernels_are_compiled_once_per_module(dtype):
    """Every product of one tile shape calls one tile kernel, which LLVM keeps as one
    function (``noinline``): inlined, each call site was optimised and compiled again
    (a fifth of a 4-layer MLP's LLVM time).  Four layers, forward and backward, against
    numpy in float64."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((16, 64)).astype(dtype)
    ws = (rng.standard_normal((4, 64, 64)) / 8).astype(dtype)

    def f(x, ws):
        for i in range(ws.shape[0]):
            x = symgrad.tanh(x @ ws[i])
        return x.sum()

    exe = symgrad.value_and_grad(f, argnums=1).lower(x, ws).compile()
    text = exe.as_text("llvm")
    kernels = [line.split('"')[1] for line in text.splitlines()
               if line.startswith("define") and '"symgrad.gemm.' in line]
    assert kernels and all("noinline" in line for line in text.splitlines()
                           if line.startswith("define") and '"symgrad.gemm.' in line)
    optimised = exe.as_text("llvm-opt")
    for name in kernels:         # still one function each (in one part of a split module)
        assert sum(line.startswith("define") and f"@{name}(" in line.replace('"', "")
                   for line in optimised.splitlines()) == 1, name
    value, grad = symgrad.value_and_grad(f, argnums=1)(x, ws)
    h, hs = x.astype(np.float64), []
    for w in ws.astype(np.float64):
        hs.append(h)
        h = np.tanh(h @ w)
    g, want = np.ones_like(h), []
    for w, hin in zip(ws.astype(np.float64)[::-1], hs[::-1]):
        out = np.tanh(hin @ w)
        g = g * (1 - out ** 2)
        want.append(hin.T @ g)
        g = g @ w.T
    np.testing.assert_allclose(value, h.sum(), **_tol(dtype, 64 * 16))
    np.testing.assert_allclose(grad, np.stack(want[::-1]), **_tol(dtype, 64 * 16))
