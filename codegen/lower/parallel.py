"""Two threads for fused loops and split products, robust to a busy machine.

A :class:`~codegen.lower.fused_loop.FusedLoop` whose estimated work (iterations x formula
cost and memory accesses) reaches ``PARALLEL_MIN_WORK`` (a few microseconds on one core)
splits its outermost loop into ``CHUNKS`` chunks that the calling thread and the
process-wide helper thread (:mod:`codegen.worker`) take from a shared atomic counter
(a product split by rows, :func:`emit_parallel_rows`, works the same way, and may carry
the loop step after it, run on each row chunk after its GEMM: see
:func:`codegen.lower.matmul.fusable_rows`; a product split along K, :class:`KSplit`,
first hands out its two halves, then row chunks that add the partial product in a fixed
order and run that loop -- a thread takes a row chunk only once both halves are done,
which is waiting for a half the other thread is running).  Handing
work to a helper that is spinning costs well under a microsecond; a sleeping helper is
woken (a system call, and it arrives tens of microseconds later) only for steps of at
least ``WAKE_MIN_WORK`` (a fraction of a millisecond), smaller steps then run on the
calling thread alone.  Each element is stored by exactly one thread; reductions
accumulated across iterations get private accumulator (and compensation) buffers per
chunk, merged at the end in chunk order (compensated for float64 sums), so results do
not depend on which thread ran which chunk.

Protocol (the helper never delays the caller by more than the chunk it is running):
the control block is one cache-line-aligned block (``aligned_alloc``) holding the state word, the chunk counter,
a done flag, a reference count, the helper's buffer pointers, a count of finished K
halves, the row chunks' accumulators and a K split's partial product.
The helper starts by moving the state 0 -> 1; when the caller has run out of chunks it
tries 0 -> 2 (cancel).  If it cancels, it does not wait for the helper at all (the
helper, whenever it runs, sees 2 and touches nothing); otherwise it spins (with
``sched_yield``) until the helper's done flag.  Whoever drops the last reference frees
the block.  If the helper is busy (another kernel, in another Python thread, posted
first) or the block cannot be allocated, the caller runs everything.
The GIL is released around such kernels by the entry (their size is far above its
threshold), so one call uses both cores of this machine.

Generated functions (``<step>`` is the step's name)::

    internal void @"<step>.range"(ptr noalias %buf..., i64 %lo, i64 %hi)   the loop nest
    internal void @"<step>.kpart"(ptr noalias %buf..., ptr %partial, i64 %part)   K split:
    internal void @"<step>.kmerge"(ptr noalias %buf..., ptr %partial, i64 %lo, i64 %hi)
                                   a half, and the merge of rows (.range: the whole step,
                                   for a call that cannot allocate the control block)
    internal void @"<step>.chunks"(ptr %ctrl, ptr %buf...)                 take chunks
    internal void @"<step>.work"(ptr %ctrl)                                the helper's share

    internal void @"<step>"(ptr noalias %buf...)        prologue, post, chunks, finish, merge

The helper runs a posted block through ``symgrad_rt_thread`` (:func:`trampoline`),
compiled once per process with the helper and never unloaded: a cancelled helper that
only gets a CPU after its kernel's code was freed runs nothing but the trampoline.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import llvmlite.ir as ir

from .. import types as T
from ..target import threads  # noqa: F401  (re-exported: the host fact lives in target)
from ..plan import Storage
from ..runtime import ALIGNED_ALLOC, FREE, SCHED_YIELD, THREAD_POST, THREAD_TRAMPOLINE
from ..worker import PAUSES, pause
from . import reduce as R
from .context import StepContext
from .fused_loop import FusedLoop
from .loops import BOOKKEEPING, Loop

__all__ = ["threads", "wants_threads", "emit_parallel", "emit_parallel_rows", "trampoline",
           "row_chunks", "KSplit", "PARALLEL_MIN_WORK", "WAKE_MIN_WORK", "CHUNKS"]

PARALLEL_MIN_WORK = 1 << 17    # FusedLoop.work() units (~1 ns / 16): split when the helper spins
WAKE_MIN_WORK = 1 << 21         # ... and wake (or start) a sleeping helper from this much on
CHUNKS = 32
MAX_PRIVATE_BYTES = 1 << 24     # per-chunk accumulators beyond this: fewer chunks
PRIVATE_COST = 8                # work units per accumulator byte (fill + merge) of a chunk
BLOCK_ALIGN = 64                # bytes: the control block's alignment (a cache line)
# control block slots (8 bytes each); the layout is shared with runtime.thread_trampoline
_STATE, _NEXT, _DONE, _REFS, _FN, _PTRS = 0, 1, 2, 3, 4, 5
# The loop nest of a split step (``.range``, ``.kpart``, ``.kmerge``) stays one function
# that the chunks and the serial path (taken only when the control block cannot be
# allocated) call: inlined into both, LLVM compiled every nest twice (an attention
# gradient: 9% of its LLVM time); a call per chunk of microseconds costs nothing.
RANGES_OUT_OF_LINE = True
_IDLE, _STARTED, _CANCELLED = 0, 1, 2


class KSplit(NamedTuple):
    """A product split along its shared dimension (:func:`emit_parallel_rows`): ``parts``
    chunks ``emit_part(ctx, partial, part)`` first (part 0 writes the output, the others
    private partial products at ``partial + (part - 1) * partial_bytes``), then row chunks
    ``emit_rows(ctx, partial, lo, hi)`` (add the partials in part order, run the loop).
    The same chunks run whichever thread takes them (the same bits); only a call that
    cannot allocate the control block runs the unsplit step (one GEMM: its last bits
    may differ)."""
    parts: int
    partial_bytes: int
    emit_part: Callable
    emit_rows: Callable


def row_chunks(extent: int, rows_per_chunk: int) -> int:
    """Chunks of a split product's rows: 2..8 of at least about ``rows_per_chunk`` rows,
    an even number of them (two threads starting together finish together)."""
    return max(2, min(8, extent // rows_per_chunk) // 2 * 2)


def wants_threads(loop: FusedLoop) -> bool:
    return threads() > 1 and loop.outer_extent >= 2 and loop.work() >= PARALLEL_MIN_WORK


def wakes(loop: FusedLoop) -> bool:
    """Whether the loop is big enough to wake a sleeping helper (see :mod:`codegen.worker`)."""
    return loop.work() >= WAKE_MIN_WORK


def _declare(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    return module.globals.get(name) or ir.Function(module, fnty, name)


def _internal(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    fn = ir.Function(module, fnty, name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    return fn


def _slot(b: ir.IRBuilder, ctrl: ir.Value, k: int) -> ir.Value:
    return b.gep(ctrl, [T.I64(k)], source_etype=T.I64)


def _release(b: ir.IRBuilder, ctrl: ir.Value) -> None:
    """Drop one reference; free the block with the last one."""
    free = _declare(b.module, FREE, ir.FunctionType(ir.VoidType(), [T.PTR]))
    old = b.atomic_rmw("sub", _slot(b, ctrl, _REFS), T.I64(1), "acq_rel")
    with b.if_then(b.icmp_signed("==", old, T.I64(1))):
        b.call(free, [ctrl])


def _chunk_function(module, name, rng, n, extent, chunk, private, area, acc_bytes,
                    split=None) -> ir.Function:
    """void chunks(ctrl, buf...): run chunks until the counter passes the end.  Chunk
    ``c`` accumulates into its own accumulators (``area + c * acc_bytes``), so results do
    not depend on which thread ran which chunk.  ``split`` = (part function, parts,
    offset of the partials in the block, slot of the finished-parts counter): the first
    ``parts`` counter values run the parts (each counted when finished), the next ones
    are row chunks ``c - parts``, each started only once every part has finished (the
    other thread's part is running: the helper's, or the caller's own)."""
    fn = _internal(module, name, ir.FunctionType(ir.VoidType(), [T.PTR] * (n + 1)))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctrl, bufs = fn.args[0], list(fn.args[1:])
    head, body, done = (fn.append_basic_block(s) for s in ("take", "run", "done"))
    b.branch(head)
    b.position_at_end(head)
    c = b.atomic_rmw("add", _slot(b, ctrl, _NEXT), T.I64(1), "monotonic")
    extra = []
    if split is not None:
        part_fn, parts, partial_off, parts_slot = split
        partial = b.gep(ctrl, [T.I64(partial_off)], source_etype=T.I8)
        extra = [partial]
        run_part, rows = fn.append_basic_block("part"), fn.append_basic_block("rows")
        b.cbranch(b.icmp_signed("<", c, T.I64(parts)), run_part, rows)
        b.position_at_end(run_part)
        b.call(part_fn, bufs + [partial, c])
        b.atomic_rmw("add", _slot(b, ctrl, parts_slot), T.I64(1), "release")
        b.branch(head)
        b.position_at_end(rows)
        c = b.sub(c, T.I64(parts))
        ready = fn.append_basic_block("rows.ready")
        b.cbranch(b.icmp_signed("<", c, T.I64(-(-extent // chunk))), ready, done)
        b.position_at_end(ready)
        _wait_count(b, ctrl, parts_slot, parts, "parts")
        b.branch(body)
    else:
        b.cbranch(b.icmp_signed("<", c, T.I64(-(-extent // chunk))), body, done)
    b.position_at_end(body)
    lo = b.mul(c, T.I64(chunk))
    hi = b.add(lo, T.I64(chunk))
    hi = b.select(b.icmp_signed("<", hi, T.I64(extent)), hi, T.I64(extent))
    mine = b.gep(ctrl, [b.add(T.I64(area), b.mul(c, T.I64(acc_bytes)))], source_etype=T.I8)
    args = list(bufs)
    for k, off in private:
        args[k] = b.gep(mine, [T.I64(off)], source_etype=T.I8)
    b.call(rng, args + extra + [lo, hi])
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    return fn


def _work_function(module, name, chunks, n) -> ir.Function:
    """void work(ctrl): the helper's share, called by the process-wide trampoline
    (:func:`codegen.runtime.thread_trampoline`) once it has claimed the block."""
    fn = _internal(module, name, ir.FunctionType(ir.VoidType(), [T.PTR]))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctrl = fn.args[0]
    bufs = [b.load(b.gep(ctrl, [T.I64(_PTRS + k)], source_etype=T.PTR), typ=T.PTR) for k in range(n)]
    b.call(chunks, [ctrl] + bufs)
    b.ret_void()
    return fn


def trampoline(m: ir.Module) -> ir.Function:
    """Add ``ptr symgrad_rt_thread(ptr ctrl)`` to ``m``: claim the block (0 -> 1) and
    run its work function, or (cancelled) only drop the reference.  It lives in the
    helper's process-wide module (:mod:`codegen.worker`), never unloaded: a helper that
    gets to a block after its kernel's code was freed must not execute that code."""
    fn = ir.Function(m, ir.FunctionType(T.PTR, [T.PTR]), THREAD_TRAMPOLINE)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctrl = fn.args[0]
    pair = b.cmpxchg(_slot(b, ctrl, _STATE), T.I64(_IDLE), T.I64(_STARTED), "acq_rel", "acquire")
    with b.if_then(b.extract_value(pair, 1)):
        work_ty = ir.FunctionType(ir.VoidType(), [T.PTR]).as_pointer()
        work = b.load(b.gep(ctrl, [T.I64(_FN)], source_etype=T.PTR), typ=work_ty)
        b.call(work, [ctrl])
        b.atomic_rmw("xchg", _slot(b, ctrl, _DONE), T.I64(1), "release")
    _release(b, ctrl)
    b.ret(ir.Constant(T.PTR, None))
    return fn


def emit_parallel(module: ir.Module, fn: ir.Function, storages: list[Storage], loop: FusedLoop,
                  plan, consts) -> None:
    """Fill step function ``fn`` (parameters: ``storages``) with the two-thread version
    of a fused loop."""
    extent = loop.outer_extent
    private, acc_bytes = _private_buffers(loop, storages)
    nchunks = min(CHUNKS, extent)
    while nchunks > 2 and (nchunks * acc_bytes > MAX_PRIVATE_BYTES
                           or nchunks * acc_bytes * PRIVATE_COST > loop.work()):
        nchunks //= 2        # each chunk's accumulators are filled and merged: few of them
    _emit_chunked(module, fn, storages, plan, consts, extent, nchunks,
                  emit_range=lambda ctx, lo, hi: loop.body_range(ctx, lo, hi),
                  prologue=loop.prologue, epilogue=loop.epilogue, private=private,
                  acc_bytes=acc_bytes, loop=loop, wake=wakes(loop))


def emit_parallel_rows(module: ir.Module, fn: ir.Function, storages: list[Storage], extent: int,
                       rows_per_chunk: int, emit_range, plan, consts,
                       wake: bool = True, loop: FusedLoop | None = None,
                       split: KSplit | None = None, granule: int = 1) -> None:
    """Fill step function ``fn`` with ``emit_range(ctx, lo, hi)`` over ``[0, extent)`` split
    into :func:`row_chunks` chunks (a matmul split by rows); ``wake``: big enough to wake
    a sleeping helper; ``loop``: a fused loop run in the chunks too (its prologue,
    per-chunk accumulators and merge).  With ``split`` (a product split along K) the row
    chunks run ``split.emit_rows`` after all of ``split``'s parts, and ``emit_range``
    only serves the call that cannot allocate the control block (whole product, then
    the loop, on the calling thread).  Chunks are multiples of ``granule`` rows (but the last)."""
    nchunks = row_chunks(extent, rows_per_chunk)
    private, acc_bytes = _private_buffers(loop, storages) if loop is not None else ([], 0)
    _emit_chunked(module, fn, storages, plan, consts, extent, nchunks,
                  emit_range=emit_range,
                  prologue=loop.prologue if loop is not None else lambda ctx: None,
                  epilogue=loop.epilogue if loop is not None else lambda ctx: None,
                  private=private, acc_bytes=acc_bytes, loop=loop, wake=wake, split=split,
                  granule=granule)


def _emit_chunked(module, fn, storages, plan, consts, extent, nchunks, *, emit_range,
                  prologue, epilogue, private, acc_bytes, loop, wake, split=None,
                  granule=1) -> None:
    n = len(storages)

    def function(name, extra, emit, ints=2):
        f = _internal(module, name, ir.FunctionType(ir.VoidType(), [T.PTR] * (n + extra) + [T.I64] * ints))
        if RANGES_OUT_OF_LINE:
            f.attributes.add("noinline")
        for k, arg in enumerate(f.args[:n + extra]):
            arg.name = storages[k].name if k < n else "partial"
            arg.add_attribute("noalias")
        rb = ir.IRBuilder(f.append_basic_block("entry"))
        emit(StepContext(rb, {id(st): a for st, a in zip(storages, f.args)}, plan, consts), *f.args[n:])
        rb.ret_void()
        return f

    serial = function(f"{fn.name}.range", 0, emit_range)
    chunk = -(-extent // nchunks)
    chunk = -(-chunk // granule) * granule
    nchunks = -(-extent // chunk)
    area = -(-8 * (_PTRS + n + 1) // 64) * 64       # slot _PTRS + n: finished parts
    size = area + nchunks * acc_bytes
    parts = None
    if split is not None:
        part = function(f"{fn.name}.kpart", 1, split.emit_part, ints=1)
        rng = function(f"{fn.name}.kmerge", 1, split.emit_rows)
        parts = (part, split.parts, size, _PTRS + n)
        size += (split.parts - 1) * split.partial_bytes
    else:
        rng = serial
    chunks = _chunk_function(module, f"{fn.name}.chunks", rng, n, extent, chunk, private, area,
                             acc_bytes, parts)
    work = _work_function(module, f"{fn.name}.work", chunks, n)

    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx = StepContext(b, {id(st): a for st, a in zip(storages, fn.args)}, plan, consts)
    prologue(ctx)
    ctrl = _alloc_block(b, size)
    with b.if_else(b.icmp_unsigned("!=", ctrl, ir.Constant(T.PTR, None))) as (threaded, serial_path):
        with threaded:
            _run_two(b, ctx, loop, storages, private, ctrl, area, acc_bytes, nchunks, chunks, work,
                     wake)
        with serial_path:
            b.call(serial, list(fn.args) + [T.I64(0), T.I64(extent)])
    epilogue(ctx)
    b.ret_void()


def _alloc_block(b: ir.IRBuilder, size: int) -> ir.Value:
    """The control block: ``BLOCK_ALIGN``-aligned, so that every chunk's accumulators and
    a K split's partial product (at multiples of 64 bytes in it) are too -- from plain
    malloc (16-byte aligned) every full-width vector access to them straddled two cache
    lines.  NULL when it cannot be allocated."""
    alloc = _declare(b.module, ALIGNED_ALLOC, ir.FunctionType(T.PTR, [T.I64, T.I64]))
    size = -(-size // BLOCK_ALIGN) * BLOCK_ALIGN        # C11: a multiple of the alignment
    return b.call(alloc, [T.I64(BLOCK_ALIGN), T.I64(size)], name="ctrl")


def _private_buffers(loop: FusedLoop, storages: list[Storage]) -> tuple[list[tuple[int, int]], int]:
    """([(parameter index of an accumulator storage, byte offset in a chunk's block)],
    bytes per chunk) for every accumulated reduction's acc and comp buffers."""
    index = {id(st): k for k, st in enumerate(storages)}
    out, offset = [], 0
    for it in loop.accumulated:
        for st in (loop._acc_storage(it), it.scratch.get("comp")):
            if st is not None:
                out.append((index[id(st)], offset))
                offset += -(-max(st.nbytes, 1) // 64) * 64
    return out, offset


def _run_two(b, ctx, loop, storages, private, ctrl, area, acc_bytes, nchunks, chunks, work,
             wake) -> None:
    module = b.module
    for k, value in ((_STATE, _IDLE), (_NEXT, 0), (_DONE, 0), (_REFS, 2), (_PTRS + len(storages), 0)):
        b.store(T.I64(value), _slot(b, ctrl, k))
    offsets = dict(private)
    if private and loop is not None:               # every chunk's accumulators start at identity
        each = Loop(b, 0, nchunks, "pinit", hints=BOOKKEEPING)
        block = b.gep(ctrl, [b.add(T.I64(area), b.mul(each.index, T.I64(acc_bytes)))], source_etype=T.I8)
        for k, off in private:
            _fill_identity(b, loop, storages[k], b.gep(block, [T.I64(off)], source_etype=T.I8))
        each.close()
    for k, st in enumerate(storages):
        b.store(ctx.ptrs[id(st)], b.gep(ctrl, [T.I64(_PTRS + k)], source_etype=T.PTR))
    b.store(work, b.gep(ctrl, [T.I64(_FN)], source_etype=T.PTR))
    post = _declare(module, THREAD_POST, ir.FunctionType(T.I32, [T.PTR, T.I32]))
    rc = b.call(post, [ctrl, T.I32(int(wake))])
    with b.if_then(b.icmp_signed("!=", rc, T.I32(0)), likely=False):
        b.store(T.I64(_CANCELLED), _slot(b, ctrl, _STATE))    # no helper: it will never
        b.atomic_rmw("sub", _slot(b, ctrl, _REFS), T.I64(1), "monotonic")   # drop its reference
    b.call(chunks, [ctrl] + [ctx.ptrs[id(st)] for st in storages])
    pair = b.cmpxchg(_slot(b, ctrl, _STATE), T.I64(_IDLE), T.I64(_CANCELLED), "acq_rel", "acquire")
    helper_ran = b.icmp_signed("==", b.extract_value(pair, 0), T.I64(_STARTED))
    with b.if_then(helper_ran):
        _wait_done(b, ctrl)
    if private and loop is not None:               # merge chunk accumulators in chunk order
        each = Loop(b, 0, nchunks, "merge.chunk", hints=BOOKKEEPING)
        block = b.gep(ctrl, [b.add(T.I64(area), b.mul(each.index, T.I64(acc_bytes)))], source_etype=T.I8)
        for it in loop.accumulated:
            _merge(b, ctx, loop, it, storages, offsets, block)
        each.close()
    _release(b, ctrl)


def _wait_done(b: ir.IRBuilder, ctrl: ir.Value) -> None:
    """Spin until the helper has finished its chunks (:func:`_wait_count`)."""
    _wait_count(b, ctrl, _DONE, 1, "helper")


def _wait_count(b: ir.IRBuilder, ctrl: ir.Value, slot: int, count: int, name: str) -> None:
    """Spin until control slot ``slot`` reaches ``count``: ``pause`` instructions, and
    every ``PAUSES`` of them ``sched_yield`` (a system call, ~1 us here: yielding at once
    made a split step of a few microseconds wait a whole call)."""
    fn = b.function
    entry = b.block
    check, wait, go = (fn.append_basic_block(f"{name}.{s}") for s in ("check", "wait", "done"))
    b.branch(check)
    b.position_at_end(check)
    n = b.phi(T.I64, name=f"{name}.spins")
    n.add_incoming(T.I64(0), entry)
    done = b.load_atomic(_slot(b, ctrl, slot), "acquire", 8, typ=T.I64)
    b.cbranch(b.icmp_signed(">=", done, T.I64(count)), go, wait)
    b.position_at_end(wait)
    pause(b.module, b)
    nxt = b.add(n, T.I64(1))
    with b.if_then(b.icmp_unsigned("==", b.and_(nxt, T.I64(PAUSES - 1)), T.I64(0))):
        b.call(_declare(b.module, SCHED_YIELD, ir.FunctionType(T.I32, [])), [])
    n.add_incoming(nxt, b.block)
    b.branch(check)
    b.position_at_end(go)


def _fill_identity(b, loop: FusedLoop, st: Storage, ptr) -> None:
    item = next((it for it in loop.accumulated if loop._acc_storage(it) is st), None)
    value = R.identity(item.node) if item is not None else 0
    fill = Loop(b, 0, st.size, "pinit", hints=BOOKKEEPING)
    T.store(b, T.constant(st.dtype, value),
            b.gep(ptr, [fill.index], source_etype=T.storage_type(st.dtype)), st.dtype)
    fill.close()


def _merge(b, ctx, loop: FusedLoop, item, storages, offsets, block) -> None:
    """main accumulator (op)= one chunk's accumulator, element by element."""
    acc, comp, r = loop._acc_storage(item), item.scratch.get("comp"), item.node
    index = {id(st): k for k, st in enumerate(storages)}
    theirs_base = b.gep(block, [T.I64(offsets[index[id(acc)]])], source_etype=T.I8)
    merge = Loop(b, 0, acc.size, "merge", hints=BOOKKEEPING)
    i = merge.index
    mine = ctx.elem(acc, i)
    theirs = b.gep(theirs_base, [i], source_etype=T.storage_type(acc.dtype))
    a, h = T.load(b, mine, acc.dtype), T.load(b, theirs, acc.dtype)
    if comp is not None:
        cptr = ctx.elem(comp, i)
        comp_base = b.gep(block, [T.I64(offsets[index[id(comp)]])], source_etype=T.I8)
        hc = b.gep(comp_base, [i], source_etype=T.storage_type(comp.dtype))
        s, c = R.neumaier(b, a, T.load(b, cptr, comp.dtype), h)
        b.store(s, mine)
        b.store(b.fadd(c, T.load(b, hc, comp.dtype)), cptr)
    else:
        T.store(b, R.combine(b, r.op, acc.dtype, a, h), mine, acc.dtype)
    merge.close()
