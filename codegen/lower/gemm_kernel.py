"""A register-blocked GEMM in IR: ``C[lo:hi] = A[lo:hi] @ B`` for row-contiguous B and C.

Owns which products run on unpacked IR kernels (:func:`kind`), the outer-product
micro-kernel (:func:`tile_kernel`, shared with :mod:`.gemm_packed`, which takes the
large products whose operands stream from many pages) and the loop nest around it,
which also runs :mod:`.gemm_dot`'s dot-product tiles (``x @ w.T``).  It replaces BLAS for products whose right operand and output have unit column stride
(float32/float64): no packing of either operand (OpenBLAS repacks B in every call,
1.6 MB for the MLP's 784x256 weight), no separate ``beta = 0`` pass over C, and row
chunks that cost nothing extra, so a split product can be handed out in many small
chunks to whichever thread is free.

Micro-kernel: an ``MR x NV`` tile of vectors (``NV`` vectors of the target's width
along a row of C) stays in registers for the whole (block of the) shared dimension;
per ``k`` it loads ``NV`` vectors of ``B[k]`` and broadcasts ``MR`` scalars ``A[i, k]``
(any strides: a transposed A costs nothing), ``MR * NV`` FMAs.  With 32 vector
registers (AVX-512) the tile is 8 x 3 (24 accumulators), with 16 it is 4 x 3.  The last
column panel (``N`` not a multiple of the panel) has fewer vectors and a lane mask for
the last one; rows past the range (``M`` not a multiple of ``MR``) read the last valid
row again and are not stored.  Every element of C is one FMA chain over ``k = 0..K-1``
in order (a K block starts from the C the previous block stored), so the bits do not
depend on the row range or chunking: a split product equals the whole one.

Blocking: the ``B`` panel of a column panel (``kc x NV`` vectors) is kept under
``PANEL_BYTES`` (K is cut into equal blocks beyond that); rows are walked in blocks
whose ``A`` rows take at most ``A_BLOCK_BYTES``, so each panel is reused from cache by
all the row tiles of a block.
"""
from __future__ import annotations

import llvmlite.ir as ir

from symgrad.graph.dtypes import DType

from .. import target
from .. import types as T
from . import gemm_dot
from .tiles import (clamped_rows, each_valid_row, kernel_attributes, multiply_add, splat, vload,
                    vstore)
from .context import StepContext
from .loops import Loop

__all__ = ["kind", "emit", "tile", "row_granule", "chunk_rows", "PANEL_BYTES",
           "A_BLOCK_BYTES"]

PANEL_BYTES = 1 << 18        # B panel (kc rows x NV vectors) kept in L2
A_BLOCK_BYTES = 1 << 19      # A rows of one row block
MAX_B_BYTES = 1 << 22        # larger B (read again by every row block) stays with BLAS:
                             # 2048^3 f64 (32 MB of B) took 1.38x OpenBLAS's time, 1024^3 1.0x
MIN_COLS_FRACTION = 2        # N >= one vector / this: narrower products stay with BLAS / loops
CHUNK_TILES = 2              # row chunks of a split product: this many tiles of rows at least


def tile(dtype: DType) -> tuple[int, int, int]:
    """(MR rows, NV vectors, lanes per vector) of the micro-kernel for ``dtype``."""
    t = target.current()
    lanes = t.lanes(8 * dtype.itemsize)
    nv = 3
    mr = 8 if t.vector_registers >= 32 else 4
    return mr, nv, lanes


def row_granule(dtype: DType, how: str = "outer") -> int:
    """Rows of one tile of kind ``how``: row chunks of a split product are multiples of this."""
    return gemm_dot.tile(dtype)[0] if how == "dot" else tile(dtype)[0]


def chunk_rows(dtype: DType, how: str = "outer") -> int:
    """Rows of a split product's chunks at least: ``CHUNK_TILES`` tiles (each chunk streams
    all of B from L3 again, so fewer, larger chunks are faster)."""
    return CHUNK_TILES * row_granule(dtype, how)


def kind(dtype: DType, A, B, C) -> str | None:
    """How ``C = A @ B`` (:class:`codegen.lower.matmul.Operand` s) runs here, or None:
    ``"outer"`` (these tiles) when B has contiguous rows and at least half a vector of
    columns; ``"dot"`` (:mod:`.gemm_dot`) when B has contiguous columns and A contiguous
    rows (``x @ w.T``, PyTorch's ``linear``) and K at most ``gemm_dot.MAX_K``.  Both
    need float32/float64, C with contiguous rows and B of at most ``MAX_B_BYTES``."""
    if dtype.name not in ("float32", "float64"):
        return None
    m, k, n = A.rows, A.cols, B.cols
    if k < 1 or m < 1 or k * n * dtype.itemsize > MAX_B_BYTES:
        return None
    if C.cs != 1 or (m > 1 and C.rs < n):
        return None
    if B.cs == 1 and (k == 1 or B.rs >= n) and n * MIN_COLS_FRACTION >= tile(dtype)[2]:
        return "outer"
    if B.rs == 1 and A.cs == 1 and n > 1 and B.cs >= k and k <= gemm_dot.MAX_K:
        return "dot"
    return None



def _k_blocks(dtype: DType, k: int) -> list[tuple[int, int]]:
    """[(k0, k1)] equal blocks of the shared dimension, each panel under PANEL_BYTES."""
    _, nv, lanes = tile(dtype)
    per_k = nv * lanes * dtype.itemsize
    kc = max(16, PANEL_BYTES // per_k)
    nb = -(-k // kc)
    size = -(-k // nb)
    return [(k0, min(k0 + size, k)) for k0 in range(0, k, size)]


def _row_block(dtype: DType, kc: int, mr: int) -> int:
    rows = max(mr, A_BLOCK_BYTES // max(kc * dtype.itemsize, 1))
    return rows // mr * mr


class _Kernels:
    """The micro-kernel functions of one product, made on first use (shared in the
    module, see :func:`shared_tile_kernel`)."""

    def __init__(self, module: ir.Module, dtype: DType, A, B, C) -> None:
        self.module, self.dtype = module, dtype
        self.A, self.B, self.C = A, B, C
        self.mr, _, self.lanes = tile(dtype)
        self.ety = T.storage_type(dtype)
        self.vty = ir.VectorType(self.ety, self.lanes)
        self.fns: dict[tuple, ir.Function] = {}

    @property
    def rows(self) -> int:
        return self.mr

    @property
    def panel(self) -> int:
        """Columns of a full panel."""
        return tile(self.dtype)[1] * self.lanes

    def blocks(self) -> list[tuple[int, int]]:
        return _k_blocks(self.dtype, self.A.cols)

    def for_columns(self, kc: int, cols: int, accumulate: bool) -> ir.Function:
        """The kernel for ``cols`` columns (a full panel or the tail)."""
        nv = -(-cols // self.lanes)
        return self.get(kc, nv, cols - (nv - 1) * self.lanes, accumulate)

    def get(self, kc: int, nv: int, last: int, accumulate: bool) -> ir.Function:
        key = (kc, nv, last, accumulate)
        fn = self.fns.get(key)
        if fn is None:
            fn = self.fns[key] = self._build(kc, nv, last, accumulate)
        return fn

    def _build(self, kc: int, nv: int, last: int, accumulate: bool) -> ir.Function:
        """``nv`` vectors per row, the last with ``last`` lanes (``lanes``: unmasked)."""
        return shared_tile_kernel(self.module, "mk", self.dtype, nv, last, accumulate,
                                  a_step=(self.A.rs, self.A.cs), b_rs=self.B.rs,
                                  c_rs=self.C.rs, kc=kc)


def shared_tile_kernel(module: ir.Module, tag: str, dtype: DType, nv: int, last: int,
                       accumulate: bool, a_step: tuple[int, int] | None, b_rs: int, c_rs: int,
                       kc: int | None, b_padded: bool = False) -> ir.Function:
    """:func:`tile_kernel` made once per module for each set of parameters: named by all
    of them (``symgrad.gemm.<tag>...``), so every product with the same tile shape and
    strides -- the layers of a deep network, the steps of an unrolled loop -- calls one
    function, built, optimised and compiled once, and step functions that differ only in
    their buffers stay identical text (:mod:`codegen.reuse`)."""
    a = "p" if a_step is None else f"{a_step[0]}x{a_step[1]}"
    name = (f"symgrad.gemm.{tag}.{dtype.name}.{nv}v{last}.{'acc' if accumulate else 'st'}"
            f".a{a}.b{b_rs}{'p' if b_padded else ''}.c{c_rs}.k{'n' if kc is None else kc}")
    fn = module.globals.get(name)
    if fn is None:
        fn = tile_kernel(module, name, dtype, nv, last, accumulate, a_step, b_rs, c_rs, kc,
                         b_padded)
    return fn


def tile_kernel(module: ir.Module, name: str, dtype: DType, nv: int, last: int, accumulate: bool,
                a_step: tuple[int, int] | None, b_rs: int, c_rs: int, kc: int | None,
                b_padded: bool = False) -> ir.Function:
    """The micro-kernel ``void @name(ptr A, ptr B, ptr C, i64 valid_rows[, i64 kc])``:
    ``C[0:valid, 0:nv*lanes] (=|+=) A[0:mr, 0:kc] @ B[0:kc, 0:nv*lanes]``, the last vector
    ``last`` lanes wide (masked).  ``a_step``: A's (row, column) strides, or None for a
    packed A tile (``mr`` elements per k, rows past ``valid`` present); ``b_rs``: B's row
    stride; ``b_padded``: B is a packed panel whose lanes past ``last`` are zero (read
    unmasked); ``kc`` None: the length of the shared dimension is the last argument."""
    mr, _, lanes = tile(dtype)
    ety = T.storage_type(dtype)
    vty = ir.VectorType(ety, lanes)
    params = [T.PTR, T.PTR, T.PTR, T.I64] + ([T.I64] if kc is None else [])
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name)
    kernel_attributes(fn)
    a_ptr, b_ptr, c_ptr, valid = fn.args[:4]
    for arg, nm in zip(fn.args, ("A", "B", "C", "rows", "kc")):
        arg.name = nm
    for arg in fn.args[:3]:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    masked = [last if (v == nv - 1 and last < lanes) else 0 for v in range(nv)]
    rows = clamped_rows(b, valid, mr)
    c_rows = [b.gep(c_ptr, [b.mul(r, T.I64(c_rs))], source_etype=ety) for r in rows]
    a_rows = [b.gep(a_ptr, [b.mul(r, T.I64(a_step[0]))], source_etype=ety) for r in rows] \
        if a_step is not None else None
    init = []
    for r in range(mr):
        for v in range(nv):
            if accumulate:
                p = b.gep(c_rows[r], [T.I64(v * lanes)], source_etype=ety)
                init.append(vload(b, p, dtype, lanes, masked[v]))
            else:
                init.append(ir.Constant(vty, [0.0] * lanes))
    loop = Loop(b, 0, kc if kc is not None else fn.args[4], "k", init)
    k = loop.index
    brow = b.gep(b_ptr, [b.mul(k, T.I64(b_rs))], source_etype=ety)
    bv = [vload(b, b.gep(brow, [T.I64(v * lanes)], source_etype=ety), dtype, lanes,
                0 if b_padded else masked[v]) for v in range(nv)]
    fma = multiply_add(module, dtype, lanes)
    if a_step is not None:
        koff = b.mul(k, T.I64(a_step[1]))
        a_elems = [b.gep(a_rows[r], [koff], source_etype=ety) for r in range(mr)]
    else:
        acol = b.gep(a_ptr, [b.mul(k, T.I64(mr))], source_etype=ety)
        a_elems = [b.gep(acol, [T.I64(r)], source_etype=ety) for r in range(mr)]
    nxt = []
    for r in range(mr):
        a = splat(b, b.load(a_elems[r], typ=ety), lanes)
        for v in range(nv):
            nxt.append(b.call(fma, [a, bv[v], loop.carried[r * nv + v]]))
    out = loop.close(nxt)

    def store_row(r: int) -> None:
        for v in range(nv):
            p = b.gep(c_rows[r], [T.I64(v * lanes)], source_etype=ety)
            vstore(b, out[r * nv + v], p, dtype, lanes, masked[v])

    each_valid_row(b, valid, mr, store_row)
    b.ret_void()
    return fn


def emit(ctx: StepContext, dtype: DType, A, B, C, offs,
         rows: tuple[ir.Value, ir.Value] | None = None) -> None:
    """``C = A @ B`` (one batch element at element offsets ``offs``), rows [lo, hi) only
    when ``rows`` is given; the micro-kernels are internal functions shared in the module.
    Loops: row blocks (A rows of at most ``A_BLOCK_BYTES``), K blocks, column panels,
    row tiles (the last one clamped)."""
    b = ctx.b
    m, n = A.rows, B.cols
    lo, hi = rows if rows is not None else (T.I64(0), T.I64(m))
    if kind(dtype, A, B, C) == "outer":
        kernels = _Kernels(b.module, dtype, A, B, C)
    else:
        kernels = gemm_dot.Kernels(b.module, dtype, A, B, C)
    mr, nr = kernels.rows, kernels.panel
    full_panels, rest = divmod(n, nr)
    blocks = kernels.blocks()
    rb = _row_block(dtype, blocks[0][1] - blocks[0][0], mr)
    aoff, boff, coff = offs
    # row blocks of rb rows: [r0, min(r0 + rb, hi))
    nblk = b.udiv(b.add(b.sub(hi, lo), T.I64(rb - 1)), T.I64(rb))
    rbl = Loop(b, 0, nblk, "gemm.rb")
    r0 = b.add(lo, b.mul(rbl.index, T.I64(rb)))
    r1 = b.add(r0, T.I64(rb))
    r1 = b.select(b.icmp_signed("<", r1, hi), r1, hi)
    ntiles = b.udiv(b.add(b.sub(r1, r0), T.I64(mr - 1)), T.I64(mr))
    for bi, (k0, k1) in enumerate(blocks):
        accumulate = bi > 0

        def tiles(j: ir.Value, cols: int) -> None:
            """Every row tile of the block, columns [j, j + cols)."""
            fn = kernels.for_columns(k1 - k0, cols, accumulate)
            tl = Loop(b, 0, ntiles, "gemm.i")
            i = b.add(r0, b.mul(tl.index, T.I64(mr)))
            left = b.sub(r1, i)
            valid = b.select(b.icmp_signed("<", left, T.I64(mr)), left, T.I64(mr))
            ap = ctx.elem(A.storage, b.add(aoff, b.add(b.mul(i, T.I64(A.rs)), T.I64(k0 * A.cs))))
            bp = ctx.elem(B.storage, b.add(boff, b.add(b.mul(j, T.I64(B.cs)), T.I64(k0 * B.rs))))
            cp = ctx.elem(C.storage, b.add(coff, b.add(b.mul(i, T.I64(C.rs)), j)))
            b.call(fn, [ap, bp, cp, valid])
            tl.close()

        if full_panels:
            pl = Loop(b, 0, full_panels, "gemm.j")
            tiles(b.mul(pl.index, T.I64(nr)), nr)
            pl.close()
        if rest:
            tiles(T.I64(full_panels * nr), rest)
    rbl.close()

