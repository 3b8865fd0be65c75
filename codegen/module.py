"""Assemble one LLVM module for a :class:`~codegen.plan.Plan`.

Layout of the generated code (names follow the program: steps say what they compute,
loaded values are named after inputs and ops)::

    internal void @"<name>.s<i>.<what>"(ptr noalias %<buffer>, ...)   one per step
    i32 @"<name>.seg<k>"(ptr %bufs, ptr %err)     a native segment: arena + steps in order
    i32 @"<name>.seg<k>.part<j>"(bufs, err, arena) ... of a long segment, 64 steps each
    i32 @"<name>"(ptr %bufs)                      callconv kernel (fully native plans)
    void @"<name>.arena.release"()                frees the heap arena kept between calls

``bufs`` holds the data pointers of the inputs, the outputs, then (hybrid plans only)
the external buffers shared with numpy steps.  Temporaries live in one arena per call:
on the stack up to :data:`STACK_ARENA` bytes, else on the heap: one ``malloc``, kept
for the next call (see ``_Builder.arena``) until the code is unloaded.  Each step is a
function whose buffers are distinct ``noalias`` parameters; a step called once is
inlined by LLVM, which turns ``noalias`` into alias scopes so loops vectorise without
runtime alias checks.  Status: 0 ok, 1 index error (record in ``err``), 2 out of memory.
"""
from __future__ import annotations

import llvmlite.ir as ir

from symgrad.graph.primitives import family_of

from . import types as T
from .lower import col2im, indexing, matmul, misc, parallel
from .lower.context import ConstPool, StepContext
from .lower.fused_loop import FusedLoop
from .executable import STACK_ARENA, arena_release_name, heap_arena
from .plan import CopyStep, LoopStep, NodeStep, Plan, Storage
from .steps import FALLIBLE_FAMILY
from .reuse import Reuse
from .runtime import FREE, MALLOC

__all__ = ["build_module", "STACK_ARENA", "segment_name"]

PART_STEPS = 64          # steps called from one function of a long segment
# the lowering of each family of opaque primitives (codegen.classify.OPAQUE_OPS)
_OPAQUE = {"linalg": matmul, "index": indexing, "arg-reduction": misc, "scan": misc,
           "window-sum": col2im}


def segment_name(name: str, k: int) -> str:
    return f"{name}.seg{k}"


def _step_label(i: int, step) -> str:
    if isinstance(step, LoopStep):
        ops = "+".join(dict.fromkeys(it.node.op for it in step.items))
        shape = "x".join(map(str, step.shape)) or "scalar"
        return f"s{i}.loop{shape}.{ops}"[:80]
    return f"s{i}.{step.node.op}"


class _Builder:
    def __init__(self, plan: Plan, name: str) -> None:
        self.plan, self.name = plan, name
        self.module = ir.Module(name=name)
        self.consts = ConstPool(self.module)
        self.reuse = Reuse(self.module)

    # ---- steps --------------------------------------------------------------------
    def step_function(self, i: int, step) -> tuple[ir.Function, list[Storage], bool]:
        if isinstance(step, LoopStep):
            lowering = FusedLoop(self.plan, step)
            storages = list(lowering.storages.values())
            fallible = False
        else:
            family = family_of(step.node.op)
            lowering = _OPAQUE[family]
            storages = lowering.storages(self.plan, step.node)
            fallible = family == FALLIBLE_FAMILY
        unique: dict[int, Storage] = {}
        for st in storages:
            if st.kind != "const":
                unique.setdefault(id(st), st)
        storages = list(unique.values())
        params = [T.PTR] * (len(storages) + (1 if fallible else 0))
        fnty = ir.FunctionType(T.I32 if fallible else ir.VoidType(), params)
        fn = ir.Function(self.module, fnty, f"{self.name}.{_step_label(i, step)}")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        ptrs = {}
        for arg, st in zip(fn.args, storages):
            arg.name = st.name
            arg.add_attribute("noalias")
            ptrs[id(st)] = arg
        if isinstance(step, LoopStep) and parallel.wants_threads(lowering):
            parallel.emit_parallel(self.module, fn, storages, lowering, self.plan, self.consts)
            return fn, storages, fallible
        product = not isinstance(step, LoopStep) and step.node.op == "matmul"
        cols = matmul.parallel_cols(self.plan, step.node) if product else None
        if cols is not None:
            node = step.node
            parallel.emit_parallel_rows(self.module, fn, storages, cols, matmul.COLS_PER_CHUNK,
                                        lambda ctx, lo, hi: matmul.emit_cols(ctx, node, lo, hi),
                                        self.plan, self.consts, wake=matmul.wakes(self.plan, node))
            return fn, storages, fallible
        rows = matmul.parallel_rows(self.plan, step.node) if product else None
        if rows is not None:
            node = step.node
            per_chunk, granule = matmul.row_chunking(self.plan, node)
            parallel.emit_parallel_rows(self.module, fn, storages, rows, per_chunk,
                                        lambda ctx, lo, hi: matmul.emit_rows(ctx, node, lo, hi),
                                        self.plan, self.consts,
                                        wake=matmul.wakes(self.plan, node),
                                        split=self.k_split(node, lambda ctx, p, lo, hi:
                                                           matmul.emit_k_merge_rows(ctx, node, p, lo, hi)),
                                        granule=granule)
            return fn, storages, fallible
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        ctx = StepContext(b, ptrs, self.plan, self.consts, fn.args[-1] if fallible else None)
        if isinstance(step, LoopStep):
            lowering.emit(ctx)
        else:
            lowering.emit(ctx, step.node, i)
        if fallible:
            b.ret(T.I32(0))
        else:
            b.ret_void()
        return fn, storages, fallible

    def row_fusion(self, step, following) -> tuple[FusedLoop, int] | None:
        """(loop, outer iterations per row) when the loop step ``following`` a product
        split by rows runs on each row chunk right after its GEMM (see
        :func:`codegen.lower.matmul.fusable_rows`), else None."""
        if not (isinstance(step, NodeStep) and step.node.op == "matmul"
                and isinstance(following, LoopStep)
                and matmul.parallel_rows(self.plan, step.node) is not None):
            return None
        loop = FusedLoop(self.plan, following)
        per_row = matmul.fusable_rows(self.plan, step.node, loop)
        return None if per_row is None else (loop, per_row)

    def fused_rows_function(self, i: int, step, loop: FusedLoop,
                            per_row: int) -> tuple[ir.Function, list[Storage]]:
        """One step function for a split product and the loop fused into its row chunks."""
        node = step.node
        unique: dict[int, Storage] = {}
        for st in [*matmul.storages(self.plan, node), *loop.storages.values()]:
            if st.kind != "const":
                unique.setdefault(id(st), st)
        storages = list(unique.values())
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [T.PTR] * len(storages)),
                         f"{self.name}.{_step_label(i, step)}+{_step_label(i + 1, loop.step)}"[:100])
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        for arg, st in zip(fn.args, storages):
            arg.name = st.name
            arg.add_attribute("noalias")
        per_chunk, granule = matmul.row_chunking(self.plan, node)
        parallel.emit_parallel_rows(
            self.module, fn, storages, matmul.parallel_rows(self.plan, node), per_chunk,
            lambda ctx, lo, hi: matmul.emit_rows_fused(ctx, node, loop, per_row, lo, hi),
            self.plan, self.consts, wake=matmul.wakes(self.plan, node),
            loop=loop, split=self.k_split(node, lambda ctx, p, lo, hi: matmul.emit_k_merge_rows_fused(
                ctx, node, loop, per_row, p, lo, hi)), granule=granule)
        return fn, storages

    def k_split(self, node, emit_rows) -> parallel.KSplit | None:
        """The two halves along K of a split product, when :func:`codegen.lower.matmul.k_split`
        prefers them to row chunks; ``emit_rows(ctx, partial, lo, hi)``: the merge (and
        the fused loop) of rows [lo, hi)."""
        k0 = matmul.k_split(self.plan, node)
        if k0 is None:
            return None
        A, B, _, _ = matmul.operands(self.plan, node)
        return parallel.KSplit(2, A.rows * B.cols * node.dtype.itemsize,
                               lambda ctx, p, part: matmul.emit_k_part(ctx, node, k0, p, part),
                               emit_rows)

    # ---- segments -------------------------------------------------------------------
    def segment(self, k: int, indices: list[int]) -> ir.Function:
        """``i32 @<name>.seg<k>(ptr bufs, ptr err)``: the arena, then the steps in order.
        A long segment calls its steps from ``.part<j>`` functions of at most
        ``PART_STEPS`` steps each, so no function LLVM compiles grows with the length
        of the program."""
        fn = ir.Function(self.module, ir.FunctionType(T.I32, [T.PTR, T.PTR]), segment_name(self.name, k))
        fn.attributes.add("nounwind")
        bufs, err = fn.args
        bufs.name, err.name = "bufs", "err"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        arena, release = self.arena(b, fn)
        units = self.units(indices)
        if len(units) <= PART_STEPS:
            self.emit_units(b, bufs, err, arena, units, release)
        else:
            for j in range(0, len(units), PART_STEPS):
                part = ir.Function(self.module, ir.FunctionType(T.I32, [T.PTR, T.PTR, T.PTR]),
                                   f"{fn.name}.part{j // PART_STEPS}")
                part.linkage = "internal"
                part.attributes.add("nounwind")
                part.attributes.add("noinline")
                for arg, name in zip(part.args, ("bufs", "err", "arena")):
                    arg.name = name
                pb = ir.IRBuilder(part.append_basic_block("entry"))
                self.emit_units(pb, *part.args, units[j:j + PART_STEPS], lambda: None)
                pb.ret(T.I32(0))
                status = b.call(part, [bufs, err, arena])
                with b.if_then(b.icmp_signed("!=", status, T.I32(0)), likely=False):
                    release()
                    b.ret(status)
        release()
        b.ret(T.I32(0))
        return fn

    def units(self, indices: list[int]) -> list[tuple[int, tuple | None]]:
        """The segment's steps as units of emission: (i, None) for one step, (i, fusion)
        for a product with the loop after it fused into its row chunks."""
        units: list[tuple[int, tuple | None]] = []
        pos = 0
        while pos < len(indices):
            i = indices[pos]
            fusion = self.row_fusion(self.plan.steps[i], self.plan.steps[indices[pos + 1]]) \
                if pos + 1 < len(indices) else None
            units.append((i, fusion))
            pos += 1 if fusion is None else 2
        return units

    def emit_units(self, b: ir.IRBuilder, bufs: ir.Value, err: ir.Value, arena: ir.Value,
                   units: list[tuple[int, tuple | None]], release) -> None:
        """Calls to the step functions of ``units``; a failing step's status is returned
        (after ``release``).  The builder is left after the last call."""
        plan = self.plan
        ptrs: dict[int, ir.Value] = {}

        def ptr(st: Storage) -> ir.Value:
            if id(st) not in ptrs:
                if st.base is not None:          # an alias: the base from element `shift`
                    ptrs[id(st)] = b.gep(ptr(st.base), [T.I64(st.shift)], inbounds=True,
                                         source_etype=T.storage_type(st.dtype), name=st.name)
                elif st.kind in ("in", "out", "ext"):
                    slot = b.gep(bufs, [T.I64(st.slot)], inbounds=True, source_etype=T.PTR)
                    ptrs[id(st)] = b.load(slot, typ=T.PTR, name=st.name)
                elif st.kind == "temp":
                    ptrs[id(st)] = b.gep(arena, [T.I64(st.slot)], inbounds=True, source_etype=T.I8,
                                         name=st.name)
                else:
                    ptrs[id(st)] = self.consts.get(st)
            return ptrs[id(st)]

        for i, fusion in units:
            step = plan.steps[i]
            mark = self.reuse.mark()
            if fusion is not None:
                sfn, storages = self.fused_rows_function(i, step, *fusion)
                b.call(self.reuse.dedup(sfn, mark), [ptr(st) for st in storages])
                continue
            if isinstance(step, CopyStep):
                ctx = StepContext(b, {id(step.dst): ptr(step.dst), id(step.src): ptr(step.src)},
                                  plan, self.consts)
                ctx.memcpy(step.dst, step.src)
                continue
            sfn, storages, fallible = self.step_function(i, step)
            sfn = self.reuse.dedup(sfn, mark)
            args = [ptr(st) for st in storages] + ([err] if fallible else [])
            status = b.call(sfn, args)
            if fallible:
                with b.if_then(b.icmp_signed("!=", status, T.I32(0)), likely=False):
                    release()
                    b.ret(status)

    def arena(self, b: ir.IRBuilder, fn: ir.Function):
        """The arena of one call (see :func:`arena_release_name`): (pointer, a function
        emitting its release).  A heap arena is the one the last call left in the
        module's cache slot, taken with an atomic exchange (a concurrent call finds the
        slot empty and allocates its own), else ``malloc``'d; released, it goes back to
        the slot if that is empty, else it is freed.  Fresh memory for every call cost
        as much as the work: ``malloc`` maps blocks this large anew each time, and the
        kernel zero-fills every page on its first touch."""
        size = self.plan.arena_size
        if size == 0:
            return ir.Constant(T.PTR, None), lambda: None
        if not heap_arena(size):
            slot = b.alloca(ir.ArrayType(T.I8, size), name="arena")
            slot.align = 64
            return slot, lambda: None
        malloc = self.declare(MALLOC, ir.FunctionType(T.PTR, [T.I64]))
        free = self.declare(FREE, ir.FunctionType(ir.VoidType(), [T.PTR]))
        null = ir.Constant(T.PTR, None)
        cache = self.arena_cache()
        cached = b.atomic_rmw("xchg", cache, null, "acquire", name="arena.cached")
        before = b.block
        with b.if_then(b.icmp_unsigned("==", cached, null), likely=False):
            fresh = b.call(malloc, [T.I64(size + 64)], name="arena.fresh")
            allocated = b.block
        raw = b.phi(T.PTR, name="arena.raw")
        raw.add_incoming(cached, before)
        raw.add_incoming(fresh, allocated)
        with b.if_then(b.icmp_unsigned("==", raw, null), likely=False):
            b.ret(T.I32(2))
        mis = b.and_(b.sub(T.I64(0), b.ptrtoint(raw, T.I64)), T.I64(63))
        arena = b.gep(raw, [mis], inbounds=True, source_etype=T.I8, name="arena")

        def release():
            kept = b.extract_value(b.cmpxchg(cache, null, raw, "release", "monotonic"), 1)
            with b.if_then(b.not_(kept), likely=False):
                b.call(free, [raw])
        return arena, release

    def arena_cache(self) -> ir.GlobalVariable:
        """The module's slot for a heap arena kept between calls (null: none kept)."""
        name = f"{self.name}.arena.cache"
        slot = self.module.globals.get(name)
        if slot is None:
            slot = ir.GlobalVariable(self.module, T.PTR, name)
            slot.initializer, slot.linkage, slot.align = ir.Constant(T.PTR, None), "internal", 8
        return slot

    def arena_release(self) -> None:
        """``void @<name>.arena.release()``: frees the arena kept in the cache slot (the
        executable calls it when its code is unloaded)."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), []),
                         arena_release_name(self.name))
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        kept = b.atomic_rmw("xchg", self.arena_cache(), ir.Constant(T.PTR, None), "acquire")
        free = self.declare(FREE, ir.FunctionType(ir.VoidType(), [T.PTR]))
        with b.if_then(b.icmp_unsigned("!=", kept, ir.Constant(T.PTR, None))):
            b.call(free, [kept])
        b.ret_void()

    def declare(self, name: str, fnty: ir.FunctionType) -> ir.Function:
        return self.module.globals.get(name) or ir.Function(self.module, fnty, name)

    def kernel(self) -> ir.Function:
        """``i32 @name(ptr bufs)`` for callconv: segment 0 with a local error record."""
        fn = ir.Function(self.module, ir.FunctionType(T.I32, [T.PTR]), self.name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        err = b.alloca(ir.ArrayType(T.I64, 4), name="err")
        b.ret(b.call(self.module.get_global(segment_name(self.name, 0)), [fn.args[0], err]))
        return fn


def build_module(plan: Plan, name: str) -> tuple[ir.Module, ir.Function | None]:
    """The module for ``plan``: one segment function per native segment, plus the
    callconv kernel when the plan is fully native (else None)."""
    builder = _Builder(plan, name)
    for k, indices in enumerate(plan.segments):
        builder.segment(k, indices)
    kernel = builder.kernel() if not plan.hybrid else None
    if heap_arena(plan.arena_size):
        builder.arena_release()
    return builder.module, kernel
