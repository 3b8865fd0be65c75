"""matmul (numpy.matmul semantics: 1-D operands, broadcast batch dimensions).

Each batch element is one ``C[m, n] = A[m, k] @ B[k, n]`` on strided views:

* products large enough for BLAS go to the IR GEMMs below only when they are not slower
  there on the target (:mod:`codegen.gemm_choice`: measured per target, or forced by
  ``SYMGRAD_GEMM``); else to BLAS;
* the packed IR GEMM (:mod:`.gemm_packed`: B copied into panels, A^T into tiles,
  GotoBLAS's blocking) when the product is large enough for BLAS (below), has at least
  ``gemm_packed.MIN_ROWS`` rows and an operand streamed from many pages (B's rows or
  A^T's columns far apart, or B stored by columns); row chunks, one per thread;
* else the unpacked IR GEMM (:mod:`.gemm_kernel`: register tiles, no packing) when the
  product is large enough for BLAS, C has contiguous rows and B contiguous rows, or
  contiguous columns with A's rows contiguous (``x @ w.T``: :mod:`.gemm_dot`)
  (float32/float64, B at most ``gemm_kernel.MAX_B_BYTES``): such products (an MLP's
  X @ W1 and its weight gradient X^T @ dZ1) run faster than OpenBLAS on one thread
  (``python -m bench``), and its row chunks cost nothing, so a split product is handed out in chunks of two tiles
  (:func:`row_chunking`);
* BLAS (``dgemm_``/``sgemm_`` of scipy's OpenBLAS, called by name, see
  :mod:`codegen.runtime`) for other large products (``m*n*k >= BLAS_MIN_WORK``, every
  dimension >= ``BLAS_MIN_DIM``: on skinny products OpenBLAS's gemm is orders of
  magnitude slower than a loop) when each operand has a unit stride in one of its two
  dimensions -- a transposed view is passed as ``'T'``, never copied.  Row-major
  C = A B is column-major C^T = B^T A^T.  Every BLAS call runs on the calling thread
  only (``openblas_set_num_threads_local(1)`` around the call): on a shared, busy
  machine OpenBLAS's spinning pool makes products many times slower than one thread
  (its threads wait for each other when one gets no CPU).  Products of at least
  ``PARALLEL_GEMM_WORK`` multiply-adds are instead split between the calling thread
  and the process's helper thread (:mod:`.parallel`), each calling single-threaded
  BLAS: a helper that does not get a CPU does not delay the call.  Products below
  ``WAKE_GEMM_WORK`` are split only when the helper is already spinning (right after
  another split step), never worth waking it for.  How to split is a cost model
  (:func:`split_costs`, extra work over one call): by row blocks, each BLAS call packs
  all of B again (K*N per extra chunk); along K (:func:`k_split`), two halves of the shared
  dimension, the second into a private partial product added after both (M*N, and a
  barrier), then the loop fused after the product runs on row chunks; by
  column blocks when there are too few rows for row blocks (a convolution's
  ``weight @ columns``, 16 or 32 rows): each call packs all of A again (M*K, small
  there).
* otherwise an IR loop nest whose order comes from the strides (:func:`loop_order`):
  the innermost loop walks its operands contiguously (vectorised), a ``k`` innermost
  loop is a ``reassoc`` dot product in registers, and the skinny operand of a
  matrix-vector product is read in one pass.  Any strides (broadcast operands
  included) and integer dtypes.
"""
from __future__ import annotations

import llvmlite.ir as ir

from symgrad.graph.node import Node

from .. import gemm_choice
from ..gemm_choice import MIN_DIM as BLAS_MIN_DIM, MIN_WORK as BLAS_MIN_WORK
from .. import layout as L
from .. import types as T
from ..plan import Plan, Storage
from .. import runtime
from ..runtime import BLAS_GEMM
from . import gemm_kernel, gemm_packed
from .context import StepContext
from .loops import Loop, LoopNest, strided_offset
from .reduce import REASSOC
from .parallel import threads
from .parallel import row_chunks

__all__ = ["storages", "emit", "BLAS_MIN_WORK", "Operand", "operands"]

PARALLEL_GEMM_WORK = 1 << 16   # larger products are split by rows when the helper spins
WAKE_GEMM_WORK = 1 << 21       # ... and wake (or start) a sleeping helper from this much on
ROW_BLOCK = 32                 # a split product has at least two blocks of this many rows
ROWS_PER_CHUNK = 256           # ... and chunks of at least about this many rows: each BLAS call
                               # repacks B (784x64 @ 64x256 on two threads: 2 calls of 392 rows
                               # 263 us per thread, 3 of 131 rows 276 us)
COL_BLOCK = 64                 # a product split by columns has at least two blocks of this many
COLS_PER_CHUNK = 256           # columns, in chunks of at least about this many
K_MERGE_COST = 2               # a K split: units per output element (write the partial, add it)
K_SYNC_COST = 8192             # ... and for its barrier (both halves before any merge), ~1 us
K_PARTIAL_MAX_BYTES = 1 << 22  # ... whose partial product (malloc'd per call) is at most this
_INT32_MAX = 2 ** 31 - 1


class Operand:
    """A batch of matrices: ``storage[offset + batch strides + rs * r + cs * c]``."""

    def __init__(self, storage: Storage, offset: int, batch_strides: tuple[int, ...],
                 rows: int, cols: int, rs: int, cs: int) -> None:
        self.storage, self.offset, self.batch_strides = storage, offset, batch_strides
        self.rows, self.cols, self.rs, self.cs = rows, cols, rs, cs

    def blas_layout(self) -> tuple[str, int] | None:
        """('N', ld) if rows are contiguous, ('T', ld) if columns are, else None."""
        if self.cs == 1 or self.cols == 1:
            ld = self.rs if self.rows > 1 else max(self.cols, 1)
            if ld >= max(self.cols, 1) and ld <= _INT32_MAX:
                return "N", ld
        if self.rs == 1 or self.rows == 1:
            ld = self.cs if self.cols > 1 else max(self.rows, 1)
            if ld >= max(self.rows, 1) and ld <= _INT32_MAX:
                return "T", ld
        return None


def operands(plan: Plan, node: Node) -> tuple[Operand, Operand, Operand, tuple[int, ...]]:
    """(A, B, C, batch shape) for ``node = matmul(a, b)``."""
    a, b = node.args
    va, vb = plan.view(a), plan.view(b)
    out = plan.storage[id(node)]
    sa, sb = list(va.shape), list(vb.shape)
    ta, tb = list(va.strides), list(vb.strides)
    if len(sa) == 1:
        sa, ta = [1] + sa, [0] + ta
    if len(sb) == 1:
        sb, tb = sb + [1], tb + [0]
    batch = tuple(L.broadcast_shape_of(sa[:-2], sb[:-2]))
    m, k, n = sa[-2], sa[-1], sb[-1]

    def bstrides(shape, strides):
        off = len(batch) - len(shape)
        return tuple(0 if d < off or shape[d - off] == 1 else strides[d - off] for d in range(len(batch)))

    cshape = batch + (m, n)
    cst = L.contiguous_strides(cshape)
    # Operands are read from their first element on (a pointer the segment computes):
    # products of different slices of one buffer are the same code.
    A = Operand(plan.shifted(va.buffer, va.offset), 0 if va.buffer.kind != "const" else va.offset,
                bstrides(sa[:-2], ta[:-2]), m, k, ta[-2], ta[-1])
    B = Operand(plan.shifted(vb.buffer, vb.offset), 0 if vb.buffer.kind != "const" else vb.offset,
                bstrides(sb[:-2], tb[:-2]), k, n, tb[-2], tb[-1])
    C = Operand(out, 0, tuple(cst[:-2]), m, n, cst[-2], cst[-1])
    return A, B, C, batch


def storages(plan: Plan, node: Node) -> list[Storage]:
    A, B, C, _ = operands(plan, node)
    return [A.storage, B.storage, C.storage]


def _use_blas(node: Node, A: Operand, B: Operand) -> bool:
    if node.dtype.name not in BLAS_GEMM:
        return False
    m, k, n = A.rows, A.cols, B.cols
    if m * n * k < BLAS_MIN_WORK or max(m, n, k) > _INT32_MAX or min(m, n, k) < BLAS_MIN_DIM:
        return False
    return A.blas_layout() is not None and B.blas_layout() is not None


def _kernel_kind(node: Node, A: Operand, B: Operand, C: Operand) -> str | None:
    """Products big enough for BLAS that an IR GEMM takes run there instead: ``"packed"``
    (:mod:`.gemm_packed`: large products whose operands stream from many pages), else
    the unpacked tiles' kind (:func:`.gemm_kernel.kind`: contiguous rows of C and of B,
    or of A with B's columns; no packing, cheap row chunks), else None (BLAS) -- also
    when BLAS measured faster on the target (:mod:`codegen.gemm_choice`)."""
    if not _use_blas(node, A, B):
        return None
    how = "packed" if gemm_packed.applies(node.dtype, A, B, C) else \
        gemm_kernel.kind(node.dtype, A, B, C)
    if how and gemm_choice.prefers_blas(node.dtype.name, A.rows * A.cols * B.cols):
        return None
    return how


def emit(ctx: StepContext, node: Node, step_id: int) -> None:
    A, B, C, batch = operands(ctx.plan, node)
    b = ctx.b
    nest = LoopNest(b, batch, "b")
    offs = [strided_offset(b, X.offset, X.batch_strides, nest.indices) for X in (A, B, C)]
    how = _kernel_kind(node, A, B, C)
    if how == "packed":
        gemm_packed.emit(ctx, node.dtype, A, B, C, offs, None,
                         fallback=lambda: _blas(ctx, node, A, B, C, offs))
    elif how:
        gemm_kernel.emit(ctx, node.dtype, A, B, C, offs)
    elif _use_blas(node, A, B):
        _blas(ctx, node, A, B, C, offs)
    else:
        _loops(ctx, node, A, B, C, offs)
    nest.close()


def _const_char(module: ir.Module, ch: str) -> ir.GlobalVariable:
    name = f"blas.char.{ch}"
    g = module.globals.get(name)
    if g is None:
        g = ir.GlobalVariable(module, T.I8, name)
        g.initializer, g.global_constant, g.linkage = T.I8(ord(ch)), True, "internal"
    return g


def _entry_alloca(b: ir.IRBuilder, ty: ir.Type) -> ir.Value:
    """A stack slot allocated once in the function's entry block (not per iteration)."""
    with b.goto_entry_block():
        return b.alloca(ty)


def _blas(ctx: StepContext, node: Node, A: Operand, B: Operand, C: Operand, offs,
          rows: tuple[ir.Value, ir.Value] | None = None, ks: tuple[int, int] | None = None,
          out: ir.Value | None = None, cols: tuple[ir.Value, ir.Value] | None = None) -> None:
    """One GEMM on the calling thread; ``rows`` = (lo, hi) restricts it to rows [lo, hi)
    of A and C, ``cols`` = (lo, hi) to columns [lo, hi) of B and C, ``ks`` = (lo, hi) to
    columns [lo, hi) of A and rows of B (a partial product), ``out`` writes to that
    contiguous ``m x n`` buffer instead of C."""
    b, module = ctx.b, ctx.b.module
    ety = T.storage_type(node.dtype)
    name = BLAS_GEMM[node.dtype.name]
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR] * 13), name)
    (ta, lda), (tb, ldb) = B.blas_layout(), A.blas_layout()     # C^T = B^T A^T

    def cell(ty, value):
        slot = _entry_alloca(b, ty)
        b.store(value, slot)
        return slot

    m, k, n = A.rows, A.cols, B.cols
    aoff, boff, coff, mv, nv = offs[0], offs[1], offs[2], T.I32(m), T.I32(n)
    if ks is not None:
        aoff = b.add(aoff, T.I64(ks[0] * A.cs))
        boff = b.add(boff, T.I64(ks[0] * B.rs))
        k = ks[1] - ks[0]
    if rows is not None:
        lo, hi = rows
        aoff = b.add(aoff, b.mul(lo, T.I64(A.rs)))
        coff = b.add(coff, b.mul(lo, T.I64(C.rs)))
        mv = b.trunc(b.sub(hi, lo), T.I32)
    if cols is not None:
        lo, hi = cols
        boff = b.add(boff, b.mul(lo, T.I64(B.cs)))
        coff = b.add(coff, b.mul(lo, T.I64(C.cs)))
        nv = b.trunc(b.sub(hi, lo), T.I32)
    args = [_const_char(module, ta), _const_char(module, tb),
            cell(T.I32, nv), cell(T.I32, mv), cell(T.I32, T.I32(k)),
            cell(ety, ir.Constant(ety, 1.0)),
            ctx.elem(B.storage, boff), cell(T.I32, T.I32(lda)),
            ctx.elem(A.storage, aoff), cell(T.I32, T.I32(ldb)),
            cell(ety, ir.Constant(ety, 0.0)),
            ctx.elem(C.storage, coff) if out is None else out, cell(T.I32, T.I32(max(n, 1)))]
    if k == 0:
        _zero(ctx, node, C, offs[2])
        return
    single = runtime.blas_thread_control() is not None
    if single:        # OpenBLAS's thread pool costs more than it brings (see the docstring)
        control = module.globals.get(runtime.BLAS_THREADS_LOCAL) or ir.Function(
            module, ir.FunctionType(T.I32, [T.I32]), runtime.BLAS_THREADS_LOCAL)
        previous = b.call(control, [T.I32(1)])
    b.call(fn, args)
    if single:
        b.call(control, [previous])


def split_way(plan: Plan, node: Node) -> str | None:
    """How a product is shared between two threads: ``"rows"`` (row chunks), ``"k"``
    (two halves of the shared dimension, :func:`k_split`), ``"cols"`` (column chunks,
    for products with too few rows to split: a convolution's ``weight @ columns``), or
    None (one call on the calling thread).  Among the splits a product allows, the
    cheapest by :func:`split_costs`."""
    A, B, C, batch = operands(plan, node)
    m, k, n = A.rows, A.cols, B.cols
    if threads() < 2 or not _use_blas(node, A, B) or m * n * k < PARALLEL_GEMM_WORK:
        return None
    how = _kernel_kind(node, A, B, C)
    if how:
        return "rows" if m >= 2 * gemm_kernel.row_granule(node.dtype, how) else None
    if runtime.blas_thread_control() is None:
        return None
    costs = split_costs(plan, node)
    return min(costs, key=costs.get) if costs else None


def parallel_rows(plan: Plan, node: Node) -> int | None:
    """Rows of a product split between two threads by rows or along K (each thread
    calling BLAS on its own row blocks, or on one half of the shared dimension:
    :func:`k_split`, with one OpenBLAS thread), or None."""
    return operands(plan, node)[0].rows if split_way(plan, node) in ("rows", "k") else None


def parallel_cols(plan: Plan, node: Node) -> int | None:
    """Columns of a product split between two threads by columns (each BLAS call packs
    all of A again: cheap when A has few rows), or None."""
    return operands(plan, node)[1].cols if split_way(plan, node) == "cols" else None


def row_chunking(plan: Plan, node: Node) -> tuple[int, int]:
    """(rows per chunk at least, granule) of a product split by rows: BLAS chunks of
    about ``ROWS_PER_CHUNK`` rows (each repacks B); the IR GEMM's chunks are any multiple
    of its tile's rows, as many as :func:`.parallel.row_chunks` allows (a chunk costs
    nothing extra, and many small chunks let the free thread take over a late one's)."""
    A, B, C, _ = operands(plan, node)
    how = _kernel_kind(node, A, B, C)
    if how == "packed":     # each chunk packs B for itself: one chunk per thread
        return gemm_packed.chunk_rows(A.rows), gemm_kernel.row_granule(node.dtype)
    if how:
        return gemm_kernel.chunk_rows(node.dtype, how), gemm_kernel.row_granule(node.dtype, how)
    return ROWS_PER_CHUNK, 1


def split_costs(plan: Plan, node: Node) -> dict[str, int]:
    """Extra work (in elements packed by BLAS, ~0.16 ns each here) of each way to split a
    product between the two threads: ``rows`` -- every row chunk's GEMM packs all of B
    again (K*N per extra chunk), at least two blocks of ``ROW_BLOCK`` rows; ``k`` -- the
    private partial product is written and added (``K_MERGE_COST`` per output element)
    after a barrier (``K_SYNC_COST``); only without batch dimensions and with halves of
    at least ``BLAS_MIN_DIM``; ``cols`` -- every column chunk's GEMM packs all of A
    again (M*K per extra chunk), only for products with too few rows for a row split
    (the others were tuned with rows and K).  A product on the IR GEMM
    (:mod:`.gemm_kernel`) packs nothing: rows cost 0."""
    A, B, C, batch = operands(plan, node)
    m, k, n = A.rows, A.cols, B.cols
    if _kernel_kind(node, A, B, C):
        return {"rows": 0}                    # the IR GEMM packs nothing
    costs = {}
    if m >= 2 * ROW_BLOCK:
        costs["rows"] = (row_chunks(m, ROWS_PER_CHUNK) - 1) * k * n
    elif n >= 2 * COL_BLOCK:
        costs["cols"] = (row_chunks(n, COLS_PER_CHUNK) - 1) * m * k
    if not batch and k >= 2 * BLAS_MIN_DIM and m * n * node.dtype.itemsize <= K_PARTIAL_MAX_BYTES:
        costs["k"] = K_MERGE_COST * m * n + K_SYNC_COST
    return costs


def k_split(plan: Plan, node: Node) -> int | None:
    """Where a split product (:func:`parallel_rows`) cuts its shared dimension K, when
    the cost model (:func:`split_costs`) prefers that to a row split, else None: chunk 0
    computes ``C = A[:, :k0] @ B[:k0]``, chunk 1 ``P = A[:, k0:] @ B[k0:]`` into a
    private buffer, then row chunks add ``C += P`` (always in this order) and run the
    fused loop.  ``k0`` is a multiple of 8 for large K (aligned halves)."""
    if split_way(plan, node) != "k":
        return None
    k = operands(plan, node)[0].cols
    k0 = (k + 1) // 2
    if k >= 64:
        k0 = -(-k0 // 8) * 8
    return k0


def wakes(plan: Plan, node: Node) -> bool:
    """Whether a split product is big enough to wake a sleeping helper thread."""
    A, B, C, batch = operands(plan, node)
    work = A.rows * A.cols * B.cols
    for d in batch:
        work *= d
    return work >= WAKE_GEMM_WORK


def emit_rows(ctx: StepContext, node: Node, lo: ir.Value, hi: ir.Value) -> None:
    """Rows [lo, hi) of every batch element (the range function of a split product)."""
    A, B, C, batch = operands(ctx.plan, node)
    b = ctx.b
    nest = LoopNest(b, batch, "b")
    offs = [strided_offset(b, X.offset, X.batch_strides, nest.indices) for X in (A, B, C)]
    how = _kernel_kind(node, A, B, C)
    if how == "packed":
        gemm_packed.emit(ctx, node.dtype, A, B, C, offs, (lo, hi),
                         fallback=lambda: _blas(ctx, node, A, B, C, offs, rows=(lo, hi)))
    elif how:
        gemm_kernel.emit(ctx, node.dtype, A, B, C, offs, rows=(lo, hi))
    else:
        _blas(ctx, node, A, B, C, offs, rows=(lo, hi))
    nest.close()


def emit_cols(ctx: StepContext, node: Node, lo: ir.Value, hi: ir.Value) -> None:
    """Columns [lo, hi) of every batch element (the range function of a product split by
    columns: BLAS only, see :func:`split_way`)."""
    A, B, C, batch = operands(ctx.plan, node)
    b = ctx.b
    nest = LoopNest(b, batch, "b")
    offs = [strided_offset(b, X.offset, X.batch_strides, nest.indices) for X in (A, B, C)]
    _blas(ctx, node, A, B, C, offs, cols=(lo, hi))
    nest.close()


def emit_k_part(ctx: StepContext, node: Node, k0: int, partial: ir.Value, part: ir.Value) -> None:
    """Part ``part`` (0 or 1) of a product split along K at ``k0`` (:func:`k_split`):
    ``C = A[:, :k0] @ B[:k0]`` or ``partial = A[:, k0:] @ B[k0:]``."""
    A, B, C, batch = operands(ctx.plan, node)
    b = ctx.b
    offs = [T.I64(X.offset) for X in (A, B, C)]
    with b.if_else(b.icmp_signed("==", part, T.I64(0))) as (first, second):
        with first:
            _blas(ctx, node, A, B, C, offs, ks=(0, k0))
        with second:
            _blas(ctx, node, A, B, C, offs, ks=(k0, A.cols), out=partial)


def emit_k_merge_rows(ctx: StepContext, node: Node, partial: ir.Value, lo: ir.Value,
                      hi: ir.Value) -> None:
    """Rows [lo, hi) of a K split's merge: ``C += partial`` (C is contiguous)."""
    A, B, C, batch = operands(ctx.plan, node)
    b, dt, n = ctx.b, node.dtype, B.cols
    ety = T.storage_type(dt)
    loop = Loop(b, b.mul(lo, T.I64(n)), b.mul(hi, T.I64(n)), "kmerge")
    i = loop.index
    cptr = ctx.elem(C.storage, b.add(i, T.I64(C.offset)))
    pptr = b.gep(partial, [i], inbounds=True, source_etype=ety)
    T.store(b, b.fadd(T.load(b, cptr, dt), T.load(b, pptr, dt)), cptr, dt)
    loop.close()


def emit_k_merge_rows_fused(ctx: StepContext, node: Node, loop, per_row: int, partial: ir.Value,
                            lo: ir.Value, hi: ir.Value) -> None:
    """Rows [lo, hi) of a K split's merge, then of the fused loop (:func:`fusable_rows`)."""
    emit_k_merge_rows(ctx, node, partial, lo, hi)
    b = ctx.b
    loop.body_range(ctx, b.mul(lo, T.I64(per_row)), b.mul(hi, T.I64(per_row)))


def _zero(ctx: StepContext, node: Node, C: Operand, coff) -> None:
    b = ctx.b
    zero = T.constant(node.dtype, 0)
    nest = LoopNest(b, (C.rows, C.cols), "z")
    i, j = nest.indices
    T.store(b, zero, ctx.elem(C.storage, strided_offset_dyn(b, coff, (C.rs, C.cs), (i, j))), node.dtype)
    nest.close()


def strided_offset_dyn(b: ir.IRBuilder, base: ir.Value, strides, indices) -> ir.Value:
    return b.add(base, strided_offset(b, 0, strides, indices))


def loop_order(A: Operand, B: Operand, C: Operand) -> tuple[str, str, str]:
    """(outer, middle, inner) loop indices: the innermost loop gets unit (or zero) strides
    on the operands it walks, weighted by operand size; the middle loop is the longer of
    the other two (one pass over a skinny operand)."""
    m, k, n = A.rows, A.cols, B.cols
    extent = {"i": m, "j": n, "k": k}
    walks = {"i": [(A.rs, m * k), (C.rs, m * n)], "j": [(B.cs, k * n), (C.cs, m * n)],
             "k": [(A.cs, m * k), (B.rs, k * n)]}

    def cost(x: str) -> tuple[int, int]:
        strided = sum(w for s, w in walks[x] if s not in (0, 1))
        return (strided + (10 ** 18 if extent[x] == 1 else 0), "jki".index(x))

    inner = min("ijk", key=cost)
    rest = sorted((x for x in "ijk" if x != inner), key=lambda x: extent[x])
    return rest[0], rest[1], inner


def _loops(ctx: StepContext, node: Node, A: Operand, B: Operand, C: Operand, offs) -> None:
    b, dt = ctx.b, node.dtype
    is_float = dt.is_floating_point
    mul = (lambda x, y: b.fmul(x, y)) if is_float else b.mul
    m, k, n = A.rows, A.cols, B.cols
    aoff, boff, coff = offs
    zero = T.constant(dt, 0)
    extent = {"i": m, "j": n, "k": k}

    def ptr(X: Operand, off, r, c):
        return ctx.elem(X.storage, strided_offset_dyn(b, off, (X.rs, X.cs), (r, c)))

    outer, middle, inner = loop_order(A, B, C)
    if inner == "k":                                # dot products in registers
        lo = Loop(b, 0, extent[outer], outer)
        mi = Loop(b, 0, extent[middle], middle)
        idx = {outer: lo.index, middle: mi.index}
        kl = Loop(b, 0, k, "k", [zero])
        prod = mul(T.load(b, ptr(A, aoff, idx["i"], kl.index), dt),
                   T.load(b, ptr(B, boff, kl.index, idx["j"]), dt))
        acc = b.fadd(kl.carried[0], prod, flags=REASSOC) if is_float else b.add(kl.carried[0], prod)
        total, = kl.close([acc])
        T.store(b, total, ptr(C, coff, idx["i"], idx["j"]), dt)
        mi.close()
        lo.close()
        return
    init = LoopNest(b, (m, n), "c")                 # C = 0, then C += A B in place
    T.store(b, zero, ptr(C, coff, *init.indices), dt)
    init.close()
    loops, idx = [], {}
    for x in (outer, middle, inner):
        loops.append(Loop(b, 0, extent[x], x))
        idx[x] = loops[-1].index
    cptr = ptr(C, coff, idx["i"], idx["j"])
    prod = mul(T.load(b, ptr(A, aoff, idx["i"], idx["k"]), dt),
               T.load(b, ptr(B, boff, idx["k"], idx["j"]), dt))
    acc = T.load(b, cptr, dt)
    T.store(b, b.fadd(acc, prod) if is_float else b.add(acc, prod), cptr, dt)
    for loop in reversed(loops):
        loop.close()


def _overlap(s: Storage, t: Storage) -> bool:
    """Whether two buffers may share memory (arena temporaries by byte range)."""
    if s is t:
        return True
    if s.kind == "temp" and t.kind == "temp":
        return s.slot < t.slot + t.nbytes and t.slot < s.slot + s.nbytes
    return s.kind == t.kind and s.kind in ("in", "out", "ext") and s.slot == t.slot


def fusable_rows(plan: Plan, node: Node, loop) -> int | None:
    """Outer iterations per row of ``node``'s output when fused loop ``loop`` (the next
    step) can run on each row chunk of the split product right after that chunk's GEMM
    (one pass over the rows while they are in cache, no separate step and its thread
    hand-off), else None.  Safe when the loop's outermost (merged) range walks the
    product's rows, it zero-fills nothing, every access to the product's buffer stays in
    the loop's own row, and it writes (stores, reduction results and scratch, initialised
    before the product) nothing the product reads or writes, except its own rows of the
    product.  Reductions across rows get per-chunk accumulators merged in chunk order, as
    in any split loop."""
    A, B, C, batch = operands(plan, node)
    step = loop.step
    if batch or step.fills or not loop.groups:
        return None
    if loop.rank < 1 or loop.shape[0] != C.rows or loop.groups[0][0] != 0 or 0 in loop.index_dims:
        return None
    per_row = loop.outer_extent // C.rows
    if per_row * C.rows != loop.outer_extent:
        return None
    writes = [it.target.buffer for it in step.items if it.kind == "store" and it.target is not None]
    for it in step.items:
        if it.kind == "reduce":
            scratch = list(it.scratch.values())
            if id(it.node) not in plan.local:
                scratch.append(plan.storage[id(it.node)])
            if any(_overlap(st, C.storage) for st in scratch):
                return None
            writes += scratch
    for st in writes:
        if _overlap(st, A.storage) or _overlap(st, B.storage):
            return None
    for st, (const, terms) in loop.accesses:
        if not _overlap(st, C.storage):
            continue
        if st is not C.storage or const != C.offset:
            return None
        coefs = dict(terms)
        if coefs.pop(0, 0) != C.rs:
            return None
        span = 0
        for d, k in coefs.items():
            if k < 0:
                return None
            span += k * (loop.shape[d] - 1)
        if span >= C.rs:
            return None
    return per_row


def emit_rows_fused(ctx: StepContext, node: Node, loop, per_row: int, lo: ir.Value,
                    hi: ir.Value) -> None:
    """Rows [lo, hi) of the product, then of the fused loop (:func:`fusable_rows`)."""
    emit_rows(ctx, node, lo, hi)
    b = ctx.b
    loop.body_range(ctx, b.mul(lo, T.I64(per_row)), b.mul(hi, T.I64(per_row)))
