"""The packed GEMM: ``C[lo:hi] = A[lo:hi] @ B`` for large products, any unit-stride layout.

Owns which products pack (:func:`applies`), the copy of B into panels and of a
transposed A into tiles, and the blocked loop nest around :func:`.gemm_kernel.tile_kernel`
(the micro-kernel shared with the unpacked path).  The loops are GotoBLAS's:

    for each block of NC columns of B          (Python loop: N is known)
      for each block of KC rows of B          (Python loop)
        pack B[kb, jc] into panels            contiguous, NV vectors per k, tail zero-padded
        for each block of MC rows of A in [lo, hi)
          pack A[ic, kb] into tiles           only when A's rows are not contiguous (A^T)
          for each panel, for each tile of MR rows: the micro-kernel

Packing turns every operand access in the micro-kernel into one sequential stream: B's
rows, a page apart when N is large, otherwise touch a new page (and TLB entry) per k,
and ``A^T``'s columns likewise.  B stored column by column (``x @ w.T``) is transposed
while it is packed, a vector at a time, so the same kernel takes it.  The first K block
stores C, the later ones add to it: every element of C is one multiply-add chain over
``k = 0..K-1`` in order, whatever the row range, so a split product equals the whole one.

The buffers come from ``malloc`` once per call of the range (one call per row chunk of
a split product, which packs B for itself: one chunk per thread, see :func:`chunk_rows`);
if that fails ``fallback()`` (a BLAS call) runs instead.  The packing routines, like the
micro-kernels, are shared internal functions (``symgrad.gemm.pack.*``: one per dtype,
layout and panel width), called with the block's pointers, strides and extents, so a
module with many products holds one copy of each rather than one per product.
"""
from __future__ import annotations

import llvmlite.ir as ir

from symgrad.config import settings
from symgrad.graph.dtypes import DType

from .. import types as T
from ..runtime import FREE, MALLOC
from . import gemm_kernel
from .context import StepContext, in_range
from .loops import Loop
from .tiles import vload, vstore

__all__ = ["applies", "emit", "chunk_rows", "KC", "MC", "NC_BYTES", "MIN_ROWS", "MIN_ROW_BYTES"]

KC = 256                 # rows of B per block: a panel (KC x NV vectors) and an A tile stay in L1/L2
MC = 192                 # rows of A per block (KC x MC of a packed A^T in L2)
NC_BYTES = 1 << 21       # columns of B per block: its packed KC x NC block in L2/L3
MIN_ROWS = 64            # rows of the range at least: packing is paid per range call
MIN_ROW_BYTES = 1024     # B rows (or A^T columns) at least this far apart: packing pays


def applies(dtype: DType, A, B, C) -> bool:
    """Whether ``C = A @ B`` runs packed: float32/float64 with contiguous rows of C, B with
    contiguous rows or columns, A with contiguous rows or columns, at least ``MIN_ROWS``
    rows, and an operand whose rows (B) or columns (A) are far apart in memory, or B
    stored by columns (``x @ w.T``) -- where unpacked tiles stream from many pages."""
    if dtype.name not in ("float32", "float64") or C.cs != 1:
        return False
    m, k, n = A.rows, A.cols, B.cols
    if m < MIN_ROWS or k < 1 or n < gemm_kernel.tile(dtype)[2]:
        return False
    if not (B.cs == 1 or B.rs == 1) or not (A.cs == 1 or A.rs == 1):
        return False
    size = dtype.itemsize
    return B.rs != 1 and B.rs * size >= MIN_ROW_BYTES or B.cs != 1 or \
        A.cs != 1 and A.cs * size >= MIN_ROW_BYTES


def chunk_rows(m: int) -> int:
    """Rows of each chunk of a split packed product: half of them (each chunk packs B
    for itself, so one chunk per thread; measured against 4 and 8 chunks)."""
    return max(MIN_ROWS, -(-m // 2))


def _blocks(total: int, size: int) -> list[tuple[int, int]]:
    """[(start, stop)]: equal blocks of at most ``size``."""
    nb = max(1, -(-total // size))
    step = -(-total // nb)
    return [(s, min(s + step, total)) for s in range(0, total, step)]


def _shape(dtype: DType, A, B) -> tuple[int, int, int, int]:
    """(KC, NC, panel columns, A packed?) for this product."""
    mr, nv, lanes = gemm_kernel.tile(dtype)
    nr = nv * lanes
    kc = min(KC, A.cols)
    nc = max(nr, NC_BYTES // (kc * dtype.itemsize) // nr * nr)
    return kc, nc, nr, A.cs != 1


def emit(ctx: StepContext, dtype: DType, A, B, C, offs, rows: tuple[ir.Value, ir.Value] | None,
         fallback) -> None:
    """Rows [lo, hi) of ``C = A @ B`` (all rows when ``rows`` is None), packed."""
    b, module = ctx.b, ctx.b.module
    mr, nv, lanes = gemm_kernel.tile(dtype)
    kc, nc, nr, a_packed = _shape(dtype, A, B)
    kc_pad = -(-kc // lanes) * lanes
    nc = min(nc, -(-B.cols // nr) * nr)
    size = dtype.itemsize
    b_bytes = kc_pad * nc * size
    a_bytes = MC * kc_pad * size if a_packed else 0
    malloc = module.globals.get(MALLOC) or ir.Function(module, ir.FunctionType(T.PTR, [T.I64]), MALLOC)
    free = module.globals.get(FREE) or ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR]), FREE)
    raw = b.call(malloc, [T.I64(b_bytes + a_bytes + 128)], name="gemm.pack.raw")
    with b.if_else(b.icmp_unsigned("==", raw, ir.Constant(T.PTR, None)), likely=False) as (failed, ok):
        with failed:
            fallback()
        with ok:
            mis = b.and_(b.sub(T.I64(0), b.ptrtoint(raw, T.I64)), T.I64(63))
            bbuf = b.gep(raw, [mis], inbounds=True, source_etype=T.I8, name="gemm.packB")
            abuf = b.gep(bbuf, [T.I64(-(-b_bytes // 64) * 64)], inbounds=True, source_etype=T.I8,
                         name="gemm.packA") if a_packed else None
            _loops(ctx, dtype, A, B, C, offs, rows, kc, nc, bbuf, abuf)
            b.call(free, [raw])


def _loops(ctx: StepContext, dtype: DType, A, B, C, offs, rows, kc: int, nc: int,
           bbuf: ir.Value, abuf: ir.Value | None) -> None:
    b = ctx.b
    mr, nv, lanes = gemm_kernel.tile(dtype)
    nr = nv * lanes
    ety = T.storage_type(dtype)
    aoff, boff, coff = offs
    lo, hi = rows if rows is not None else (T.I64(0), T.I64(A.rows))
    kernels: dict[tuple, ir.Function] = {}

    def kernel(cols: int, accumulate: bool) -> ir.Function:
        nvc = -(-cols // lanes)
        last = cols - (nvc - 1) * lanes
        key = (nvc, last, accumulate)
        if key not in kernels:
            kernels[key] = gemm_kernel.shared_tile_kernel(
                b.module, "pk", dtype, nvc, last, accumulate,
                a_step=None if abuf is not None else (A.rs, A.cs), b_rs=nr, c_rs=C.rs, kc=None,
                b_padded=True)
        return kernels[key]

    kc_pad = -(-kc // lanes) * lanes
    for j0, j1 in _blocks(B.cols, nc):
        full, rest = divmod(j1 - j0, nr)
        for kb, (k0, k1) in enumerate(_blocks(A.cols, kc)):
            kn = k1 - k0
            _pack_b(ctx, dtype, B, boff, k0, kn, kc_pad, j0, j1, bbuf)
            nblk = b.udiv(b.add(b.sub(hi, lo), T.I64(MC - 1)), T.I64(MC))
            ic = Loop(b, 0, nblk, "gemm.ic")
            r0 = b.add(lo, b.mul(ic.index, T.I64(MC)))
            r1 = b.add(r0, T.I64(MC))
            r1 = b.select(b.icmp_signed("<", r1, hi), r1, hi)
            if abuf is not None:
                _pack_a(ctx, dtype, A, aoff, r0, r1, k0, kn, kc_pad, abuf)
            ntiles = b.udiv(b.add(b.sub(r1, r0), T.I64(mr - 1)), T.I64(mr))

            def tiles(panel: ir.Value, cols: int) -> None:
                fn = kernel(cols, kb > 0)
                bp = b.gep(bbuf, [b.mul(panel, T.I64(kc_pad * nr))], source_etype=ety)
                j = b.add(T.I64(j0), b.mul(panel, T.I64(nr)))
                tl = Loop(b, 0, ntiles, "gemm.ir")
                i = b.add(r0, b.mul(tl.index, T.I64(mr)))
                left = b.sub(r1, i)
                valid = b.select(b.icmp_signed("<", left, T.I64(mr)), left, T.I64(mr))
                if abuf is not None:
                    ap = b.gep(abuf, [b.mul(tl.index, T.I64(kc_pad * mr))], source_etype=ety)
                else:
                    ap = ctx.elem(A.storage, b.add(aoff, b.add(b.mul(i, T.I64(A.rs)),
                                                               T.I64(k0 * A.cs))))
                cp = ctx.elem(C.storage, b.add(coff, b.add(b.mul(i, T.I64(C.rs)), j)))
                b.call(fn, [ap, bp, cp, valid, T.I64(kn)])
                tl.close()

            if full:
                pl = Loop(b, 0, full, "gemm.jr")
                tiles(pl.index, nr)
                pl.close()
            if rest:
                tiles(T.I64(full), rest)
            ic.close()


def _pack_b(ctx: StepContext, dtype: DType, B, boff: ir.Value, k0: int, kn: int, kc_pad: int,
            j0: int, j1: int, buf: ir.Value) -> None:
    """B[k0:k0+kn, j0:j1] into panels of ``nr`` columns: panel p at ``buf + p*kc_pad*nr``,
    row kk of it ``nr`` contiguous elements (columns past j1 zero).  Each panel is one
    call of the shared packing function for its column count and B's layout."""
    b = ctx.b
    mr, nv, lanes = gemm_kernel.tile(dtype)
    nr = nv * lanes
    ety = T.storage_type(dtype)
    full, rest = divmod(j1 - j0, nr)
    rows = B.cs == 1                      # rows contiguous, else columns (B.rs == 1)
    stride = B.rs if rows else B.cs

    def panel(p: ir.Value, cols: int) -> None:
        dst = b.gep(buf, [b.mul(p, T.I64(kc_pad * nr))], source_etype=ety)
        col0 = b.add(T.I64(j0), b.mul(p, T.I64(nr)))
        first = b.add(boff, b.add(T.I64(k0 * B.rs), b.mul(col0, T.I64(B.cs))))
        last = b.add(first, T.I64((kn - 1) * B.rs + (cols - 1) * B.cs))
        fn = _pack_b_fn(b.module, dtype, cols, B.rs if rows else None)
        _call_checked(ctx, B.storage, first, last, fn, [T.I64(stride), T.I64(kn), dst, T.I64(cols)])

    if full:
        pl = Loop(b, 0, full, "gemm.pb.p")
        panel(pl.index, nr)
        pl.close()
    if rest:
        panel(T.I64(full), rest)


def _pack_a(ctx: StepContext, dtype: DType, A, aoff: ir.Value, r0: ir.Value, r1: ir.Value,
            k0: int, kn: int, kc_pad: int, buf: ir.Value) -> None:
    """Rows [r0, r1) of A[:, k0:k0+kn], A's columns contiguous (``A.rs == 1``), into tiles of
    ``mr`` rows: tile t at ``buf + t*kc_pad*mr``, ``mr`` elements per k (rows past r1: 0);
    one call of the shared packing function."""
    b = ctx.b
    mr = gemm_kernel.tile(dtype)[0]
    first = b.add(aoff, b.add(r0, T.I64(k0 * A.cs)))
    count = b.sub(r1, r0)
    last = b.add(first, b.add(b.sub(count, T.I64(1)), T.I64((kn - 1) * A.cs)))
    _call_checked(ctx, A.storage, first, last, _pack_a_fn(b.module, dtype, A.cs),
                  [T.I64(A.cs), count, T.I64(kn), T.I64(kc_pad * mr), buf])


def _call_checked(ctx: StepContext, st, first: ir.Value, last: ir.Value, fn: ir.Function,
                  args: list) -> None:
    """``fn(&st[first], *args)``, a packing function that reads elements ``first..last``
    of ``st`` (both inclusive, every one between them at most).  Sanitized mode checks
    both ends and skips the call when one is out of range (the fault word records it)."""
    b = ctx.b
    if not settings.sanitize:
        b.call(fn, [ctx.elem(st, first)] + args)
        return
    ok = b.and_(in_range(b, st, first), in_range(b, st, last))
    ctx.elem(st, last)                    # records the fault
    src = ctx.elem(st, first)
    with b.if_then(ok, likely=True):
        b.call(fn, [src] + args)


def _shared(module: ir.Module, name: str, params: list, names: tuple) -> tuple[ir.Function, ir.IRBuilder | None]:
    """The internal function ``name`` of the module, and a builder at its entry when it
    is new (None when another product already made it)."""
    fn = module.globals.get(name)
    if fn is not None:
        return fn, None
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")        # one copy, not one specialised per call site
    for arg, nm in zip(fn.args, names):
        arg.name = nm
        if isinstance(arg.type, ir.PointerType):
            arg.add_attribute("noalias")
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def _pack_b_fn(module: ir.Module, dtype: DType, cols: int, rs: int | None) -> ir.Function:
    """``void pack(ptr src, i64 stride, i64 kn, ptr dst, i64 cols)``: one panel of ``cols``
    columns of B (``src`` its element (k0, first column)) into ``dst``, ``nr`` elements per
    k, the columns past ``cols`` zero.  ``rs`` given: B's rows contiguous, ``rs`` apart
    (copied vector by vector; one small function per ``cols`` and ``rs``, which is built
    in as the micro-kernels' strides are, the arguments ``stride`` and ``cols`` unused);
    else its columns, ``stride`` the column stride (transposed ``lanes x lanes`` blocks at
    a time -- a loop over the vectors holding columns, the others stored as zeros --, the k
    past ``kn`` zero up to the next multiple of ``lanes``; one function for every
    ``cols``, which masks the loads at run time)."""
    mr, nv, lanes = gemm_kernel.tile(dtype)
    nr = nv * lanes
    rows = rs is not None
    name = f"symgrad.gemm.pack.br.{dtype.name}.{cols}.s{rs}" if rows else f"symgrad.gemm.pack.bc.{dtype.name}"
    fn, b = _shared(module, name, [T.PTR, T.I64, T.I64, T.PTR, T.I64],
                    ("src", "stride", "kn", "dst", "cols"))
    if b is None:
        return fn
    src0, stride, kn, dst0, ncols = fn.args
    ety = T.storage_type(dtype)
    vty = ir.VectorType(ety, lanes)
    if rows:
        loop = Loop(b, 0, kn, "gemm.pb.k")
        kk = loop.index
        src = b.gep(src0, [b.mul(kk, T.I64(rs))], inbounds=True, source_etype=ety)
        dst = b.gep(dst0, [b.mul(kk, T.I64(nr))], source_etype=ety)
        for v in range(nv):
            valid = min(lanes, max(0, cols - v * lanes))
            value = vload(b, b.gep(src, [T.I64(v * lanes)], source_etype=ety), dtype, lanes,
                          0 if valid == lanes else valid) if valid else ir.Constant(vty, [0.0] * lanes)
            vstore(b, value, b.gep(dst, [T.I64(v * lanes)], source_etype=ety), dtype, lanes)
        loop.close()
    else:
        steps = b.udiv(b.add(kn, T.I64(lanes - 1)), T.I64(lanes))
        loop = Loop(b, 0, steps, "gemm.pb.kt")
        kk = b.mul(loop.index, T.I64(lanes))
        left = b.sub(kn, kk)
        used = b.udiv(b.add(ncols, T.I64(lanes - 1)), T.I64(lanes))     # vectors with columns
        vl = Loop(b, 0, used, "gemm.pb.v")
        v0 = b.mul(vl.index, T.I64(lanes))
        columns = []
        for c in range(lanes):
            col = b.add(v0, T.I64(c))
            # a column past ``cols`` is read from column 0 with no lane: zeros
            present = b.icmp_signed("<", col, ncols)
            src = b.gep(src0, [b.add(kk, b.mul(b.select(present, col, T.I64(0)), stride))],
                        source_etype=ety)
            columns.append(_load_upto(b, src, dtype, lanes, b.select(present, left, T.I64(0))))
        for i, row in enumerate(_transpose(b, columns, lanes)):
            dst = b.gep(dst0, [b.add(b.mul(b.add(kk, T.I64(i)), T.I64(nr)), v0)], source_etype=ety)
            vstore(b, row, dst, dtype, lanes)
        vl.close()
        zl = Loop(b, used, nv, "gemm.pb.z")           # vectors past the columns: zeros
        for i in range(lanes):
            dst = b.gep(dst0, [b.add(b.mul(b.add(kk, T.I64(i)), T.I64(nr)),
                                     b.mul(zl.index, T.I64(lanes)))], source_etype=ety)
            vstore(b, ir.Constant(vty, [0.0] * lanes), dst, dtype, lanes)
        zl.close()
        loop.close()
    b.ret_void()
    return fn


def _pack_a_fn(module: ir.Module, dtype: DType, a_cs: int) -> ir.Function:
    """``void pack(ptr src, i64 cs, i64 rows, i64 kn, i64 tile_stride, ptr dst)``: ``rows``
    rows of A from ``src`` (A's columns contiguous, ``cs`` apart), ``kn`` of its columns,
    into tiles of ``mr`` rows ``tile_stride`` elements apart, ``mr`` elements per k (rows
    past ``rows`` zero).  One small function per ``cs`` (``a_cs``), built in as the
    micro-kernels' strides are (the argument unused)."""
    mr = gemm_kernel.tile(dtype)[0]
    name = f"symgrad.gemm.pack.a.{dtype.name}.s{a_cs}"
    fn, b = _shared(module, name, [T.PTR, T.I64, T.I64, T.I64, T.I64, T.PTR],
                    ("src", "cs", "rows", "kn", "tile_stride", "dst"))
    if b is None:
        return fn
    src0, _, count, kn, tile_stride, buf = fn.args
    ety = T.storage_type(dtype)
    ntiles = b.udiv(b.add(count, T.I64(mr - 1)), T.I64(mr))
    tl = Loop(b, 0, ntiles, "gemm.pa.t")
    i = b.mul(tl.index, T.I64(mr))
    valid = b.sub(count, i)
    dst0 = b.gep(buf, [b.mul(tl.index, tile_stride)], source_etype=ety)
    loop = Loop(b, 0, kn, "gemm.pa.k")
    kk = loop.index
    src = b.gep(src0, [b.add(i, b.mul(kk, T.I64(a_cs)))], inbounds=True, source_etype=ety)
    value = _load_upto(b, src, dtype, mr, valid)
    vstore(b, value, b.gep(dst0, [b.mul(kk, T.I64(mr))], source_etype=ety), dtype, mr)
    loop.close()
    tl.close()
    b.ret_void()
    return fn


def _load_upto(b: ir.IRBuilder, ptr: ir.Value, dtype: DType, lanes: int, valid: ir.Value) -> ir.Value:
    """A vector of ``lanes`` elements at ``ptr``, of which only the first ``valid`` (a
    runtime count) are read: the others are 0."""
    vty = ir.VectorType(T.storage_type(dtype), lanes)
    idx = ir.Constant(ir.VectorType(T.I64, lanes), list(range(lanes)))
    vv = b.insert_element(ir.Constant(ir.VectorType(T.I64, lanes), None), valid, T.I32(0))
    vv = b.shuffle_vector(vv, ir.Constant(ir.VectorType(T.I64, lanes), None),
                          ir.Constant(ir.VectorType(T.I32, lanes), [0] * lanes))
    mask = b.icmp_signed("<", idx, vv)
    name = f"llvm.masked.load.v{lanes}f{8 * dtype.itemsize}.p0"
    fn = b.module.globals.get(name) or ir.Function(
        b.module, ir.FunctionType(vty, [T.PTR, T.I32, ir.VectorType(T.I1, lanes), vty]), name)
    return b.call(fn, [ptr, T.I32(dtype.itemsize), mask, ir.Constant(vty, [0.0] * lanes)])


def _transpose(b: ir.IRBuilder, rows: list[ir.Value], lanes: int) -> list[ir.Value]:
    """The ``lanes x lanes`` transpose of ``rows`` (vectors), by log2(lanes) rounds of
    interleaving shuffles."""
    n = lanes
    cur = list(rows)
    half = n // 2
    while half >= 1:
        nxt = [None] * n
        for i in range(n):
            if (i // half) % 2:
                continue
            a, c = cur[i], cur[i + half]
            lo = [j if (j // half) % 2 == 0 else j - half + n for j in range(n)]
            hi = [j + half if (j // half) % 2 == 0 else j + n for j in range(n)]
            nxt[i] = b.shuffle_vector(a, c, ir.Constant(ir.VectorType(T.I32, n), lo))
            nxt[i + half] = b.shuffle_vector(a, c, ir.Constant(ir.VectorType(T.I32, n), hi))
        cur = nxt
        half //= 2
    return cur
