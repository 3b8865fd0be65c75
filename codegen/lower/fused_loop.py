"""Lowering of a :class:`~codegen.plan.LoopStep`: one loop nest computing several items.

The loop runs over the step's shape; an item whose shape is longer has its trailing
dims *unrolled*: it becomes one instance per trailing index, with constants in its
index map (a row of 10 softmax classes, the 5 columns of a matrix-vector product).

1. *Analysis*: every address is an affine function of the loop indices
   (:mod:`codegen.layout`).  Adjacent loop dims merge when every address agrees
   (``coef[d] == coef[d+1] * n[d+1]``), so contiguous work becomes one long innermost
   loop (the vectoriser's favourite shape) and broadcasting keeps its own loop.
   pad_slice/cat reads add segment cuts (:mod:`codegen.windows`).
2. *Prologue*: zero-fill window roots (strided pad_slice), initialise accumulators.
3. *Body* (once per segment, innermost): every instance is computed from its formula
   cone; values shared by items are computed once (memo per (node, index map)); a root
   stored earlier in the same iteration is reused from its register.  Reductions:
   over unrolled dims only -> complete in the iteration (stored, and a register for
   later items); output independent of the innermost loop -> register accumulators in
   blocks (:mod:`.reduce`); otherwise -> accumulated in memory.
   Innermost loops of costly bodies (a transcendental function) run ``INTERLEAVE``
   vector iterations side by side (``llvm.loop`` metadata, :mod:`.loops`), and where
   the target has cheap masked vector operations (:attr:`~codegen.target.Target.masked_tails`)
   their last partial vector runs masked (``vectorize.predicate.enable``) instead of in
   a scalar remainder loop: that loop is a second copy of the whole body (30 inlined
   sines: 40% of a small program's machine code, a third of its LLVM time) for a few
   elements per call.
4. *Epilogue*: finalise reductions (compensation, mean's division, float32 rounding).
"""
from __future__ import annotations

import itertools

import llvmlite.ir as ir

from symgrad.graph import dtypes
from symgrad.graph.node import Node

from .. import layout as L
from .. import target
from .. import types as T
from ..classify import const_scalar, ew_cost, formula_of
from ..plan import Item, LoopStep, Plan, Storage, inline_reduction, reduced_axes
from ..windows import inside, translated_arg_maps, window_cuts, window_ranges
from . import reduce as R
from .context import StepContext
from .loops import BOOKKEEPING, Loop
from .formula_ir import FormulaEmitter, compute_dtype

__all__ = ["FusedLoop", "reduce_out_map", "reduce_out_affine", "INTERLEAVE", "INTERLEAVE_MIN_COST",
           "INTERLEAVE_MIN_EXTENT"]

INTERLEAVE = 4              # vector iterations side by side in costly innermost loops
INTERLEAVE_MIN_COST = 16    # formula cost of one iteration (a transcendental is 16)
INTERLEAVE_MIN_EXTENT = 512 # ... and iterations of the innermost loop (else: code size only)


def reduce_out_map(r: Node, m: L.IndexMap) -> L.IndexMap:
    """Index map of the output element that input element ``m`` accumulates into."""
    axes, keep = reduced_axes(r), r.attr("keepdim")
    out = []
    for d, a in enumerate(m):
        if d in axes:
            if keep:
                out.append(L.const(0))
        else:
            out.append(a)
    return tuple(out)


def reduce_out_affine(r: Node, m: L.IndexMap) -> L.Affine:
    """Element offset in the reduction's contiguous output for input element ``m``."""
    return L.address(L.StridedView.contiguous(None, r.shape), reduce_out_map(r, m))


def _coef(a: L.Affine, d: int) -> int:
    for dim, c in a[1]:
        if dim == d:
            return c
    return 0


class _Instance:
    """One unrolled copy of an item: its index map in the loop."""

    __slots__ = ("item", "map")

    def __init__(self, item: Item, m: L.IndexMap) -> None:
        self.item, self.map = item, m


class FusedLoop:
    """Analyses a LoopStep at construction; :meth:`emit` lowers it."""

    def __init__(self, plan: Plan, step: LoopStep) -> None:
        self.plan, self.step = plan, step
        self.shape = step.shape
        self.rank = len(self.shape)
        self.addrs: set[L.Affine] = set()
        self.index_dims: set[int] = set()
        self.storages: dict[int, Storage] = {}
        self.accesses: list[tuple[Storage, L.Affine]] = []   # (buffer, element offset) of each use
        self.cuts: dict[int, set[int]] = {}
        self.cost = 0                      # formula cost of one iteration (formula_ir.op_cost)
        self._seen: set = set()
        self.written: set[int] = set()     # ids of buffers this loop stores to
        self.alias: dict[int, tuple[Storage, int]] = {}   # read-only buffer -> (alias, shift)
        self.instances = [_Instance(item, m) for item in step.items for m in self._maps(item)]
        self.inline = {id(it) for it in step.items
                       if it.kind == "reduce" and inline_reduction(it.node, self.rank)}
        for it in step.items:                       # items shorter than the loop: own range
            for d in range(self.rank):
                if it.shape[d] < self.shape[d]:
                    self.cuts.setdefault(d, set()).add(it.shape[d])
                    self.index_dims.add(d)
        self._analyse()
        self._rebase()
        self.groups = self._coalesce()

    def _maps(self, item: Item) -> list[L.IndexMap]:
        loop = L.identity(self.rank)
        tail = item.shape[self.rank:]
        return [loop + tuple(L.const(q) for q in qs) for qs in itertools.product(*map(range, tail))]

    # ---- analysis ------------------------------------------------------------------
    def _use(self, view: L.StridedView, m: L.IndexMap, write: bool = False) -> None:
        addr = L.address(view, m)
        self.addrs.add(addr)
        st = view.buffer
        self.storages[id(st)] = st
        self.accesses.append((st, addr))
        if write:
            self.written.add(id(st))

    def _rebase(self) -> None:
        """Buffers this loop only reads are passed from their first element read
        (:meth:`Plan.shifted`), so loops over different slices are the same code."""
        first: dict[int, int] = {}
        for st, (const, _) in self.accesses:
            first[id(st)] = min(first.get(id(st), const), const)
        for key, st in list(self.storages.items()):
            k = first.get(key, 0)
            if key in self.written or st.kind == "const" or k <= 0:
                continue
            alias = self.plan.shifted(st, k)
            self.alias[key] = (alias, k)
            del self.storages[key]
            self.storages[id(alias)] = alias

    def _collect(self, node: Node, m: L.IndexMap, top: bool = False) -> None:
        key = (id(node), m, top)
        if key in self._seen:
            return
        self._seen.add(key)
        plan, kind = self.plan, self.plan.kinds[id(node)]
        if const_scalar(node) is not None:
            return
        if not top and id(node) in plan.local:      # a register of this loop
            return
        if kind == "leaf" or (not top and id(node) in plan.roots):
            self._use(plan.view(node), m)
            return
        if kind == "view":
            arg = node.args[0]
            tm = L.translate(node.op, dict(node.attrs), arg.shape, node.shape, m)
            if tm is None:
                self._use(self._reshape_view(node), m)
            else:
                self._collect(arg, tm)
            return
        if kind == "window":
            for k, pos in window_cuts(node, m, self.shape):
                self.cuts.setdefault(k, set()).add(pos)
                self.index_dims.add(k)
            for a, am in zip(node.args, translated_arg_maps(node, m)):
                self._collect(a, am)
            return
        if node.op == "iota":
            self.index_dims.update(d for d, _ in m[node.attr("axis")][1])
            return
        if node.op == "full":
            return
        self.cost += ew_cost(node)
        for a in node.args:
            self._collect(a, L.broadcast_map(a.shape, node.shape, m))

    def _reshape_view(self, node: Node) -> L.StridedView:
        view = L.reshape_view(self.plan.view(node.args[0]), node.shape)
        assert view is not None, "planner guarantees reshapable arguments"
        return view

    def _analyse(self) -> None:
        for root in self.step.fills:
            s = self.plan.storage[id(root)]
            self.storages[id(s)] = s
            self.written.add(id(s))
        for item in self.step.items:    # initialised and finished even with no instance
            if item.kind != "store" and id(item.node) not in self.plan.local:   # (0-size tail)
                for s in (self.plan.storage[id(item.node)], *item.scratch.values()):
                    self.storages[id(s)] = s
                    self.written.add(id(s))
        for inst in self.instances:
            item, m = inst.item, inst.map
            if item.kind == "store":
                self._collect(item.node, m, top=item.produces is item.node)
                if item.target is not None:
                    self._use(item.target, m, write=True)
            else:
                self._collect(item.node.args[0], m)
                if id(item.node) in self.plan.local:
                    continue
                self.addrs.add(reduce_out_affine(item.node, m))
                for s in (self.plan.storage[id(item.node)], *item.scratch.values()):
                    self.storages[id(s)] = s
                    self.written.add(id(s))

    def _coalesce(self) -> list[list[int]]:
        groups: list[list[int]] = []
        for d, n in enumerate(self.shape):
            if n == 1:
                continue
            if groups and self._mergeable(groups[-1][-1], d):
                groups[-1].append(d)
            else:
                groups.append([d])
        return groups

    def _mergeable(self, d: int, e: int) -> bool:
        if d in self.index_dims or e in self.index_dims:
            return False
        n = self.shape[e]
        return all(_coef(a, d) == _coef(a, e) * n for a in self.addrs)

    # ---- emission helpers ---------------------------------------------------------------
    def offset(self, a: L.Affine) -> ir.Value:
        """Emit an affine offset in terms of the (merged) loop variables."""
        b = self.b
        out: ir.Value = T.I64(a[0])
        for gi, g in enumerate(self.groups):
            c = _coef(a, g[-1])
            if c == 0:
                continue
            v = self.vars.get(gi)
            if v is None:
                raise AssertionError("address uses a loop variable outside its loop")
            out = b.add(out, b.mul(v, T.I64(c)) if c != 1 else v)
        return out

    def load(self, view: L.StridedView, m: L.IndexMap, name: str = "") -> ir.Value:
        st = view.buffer
        const, terms = L.address(view, m)
        if id(st) in self.alias:
            st, shift = self.alias[id(st)]
            const -= shift
        ptr = self.ctx.elem(st, self.offset((const, terms)))
        return T.load(self.b, ptr, st.dtype, name=name)

    # ---- values ------------------------------------------------------------------------
    # A value is computed from a *recipe*: the (node, map) pairs it reads and a function
    # of their values.  value_at walks recipes with an explicit stack in the order a
    # recursive evaluation would (so the IR is the same), with no limit on the depth of
    # the formula cone: a chain of 10,000 elementwise ops is one loop body.
    def value_at(self, node: Node, m: L.IndexMap) -> ir.Value:
        memo = self.memo
        top = (id(node), m)
        if top in memo:
            return memo[top]
        stack: list = [(node, m, None)]
        while stack:
            n, nm, recipe = stack.pop()
            key = (id(n), nm)
            if key in memo:
                continue
            if recipe is None:
                recipe = self._recipe(n, nm, stored=True)
                missing = [(a, am) for a, am in recipe[0] if (id(a), am) not in memo]
                if missing:
                    stack.append((n, nm, recipe))
                    stack.extend((a, am, None) for a, am in reversed(missing))
                    continue
            inputs, finish = recipe
            memo[key] = finish([memo[(id(a), am)] for a, am in inputs])
        return memo[top]

    def compute(self, node: Node, m: L.IndexMap) -> ir.Value:
        """The value of ``node`` at map ``m`` from its definition (not its storage)."""
        inputs, finish = self._recipe(node, m, stored=False)
        return finish([self.value_at(a, am) for a, am in inputs])

    def _recipe(self, node: Node, m: L.IndexMap, stored: bool):
        """(inputs, finish) for ``node`` at ``m``: loaded when ``stored`` and the node has
        storage (a leaf or a root), else from its definition."""
        plan, kind, op = self.plan, self.plan.kinds[id(node)], node.op
        s = const_scalar(node) if stored or kind == "leaf" else None
        if s is not None:
            return [], lambda _: T.constant(node.dtype, s)
        if kind == "leaf" or (stored and id(node) in plan.roots):
            return [], lambda _: self.load(plan.view(node), m, name=plan.name(node))
        if kind == "view":
            tm = L.translate(op, dict(node.attrs), node.args[0].shape, node.shape, m)
            if tm is None:
                return [], lambda _: self.load(self._reshape_view(node), m, name=plan.name(node))
            return [(node.args[0], tm)], lambda v: v[0]
        if kind == "window":
            read = self._window_read(node, m)
            if read is None:
                return [], lambda _: T.constant(node.dtype, 0)
            return [read], lambda v: v[0]
        if op == "full":
            return [], lambda _: T.constant(node.dtype, node.attr("value"))
        if op == "iota":
            return [], lambda _: T.convert(self.b, self.offset(m[node.attr("axis")]), dtypes.int64,
                                           node.dtype)
        inputs = [(a, L.broadcast_map(a.shape, node.shape, m)) for a in node.args]
        return inputs, lambda args: self._apply(node, args)

    def _apply(self, node: Node, args: list[ir.Value]) -> ir.Value:
        """An elementwise node (a cast or a formula) applied to its arguments' values."""
        if node.op == "cast":
            return T.convert(self.b, args[0], node.args[0].dtype, node.dtype)
        expr, symbols = formula_of(node)
        cdt = compute_dtype(expr, [a.dtype for a in node.args])
        em = FormulaEmitter(self.b, cdt, {s: (v, a.dtype) for s, v, a in zip(symbols, args, node.args)})
        value = T.convert(self.b, em.emit(expr), cdt, node.dtype)
        if not isinstance(value, ir.Constant) and value.name.startswith("."):
            value.name = f"{self.plan.name(node)}.{node.op}"     # reads against the program text
        return value

    def _window_read(self, node: Node, m: L.IndexMap):
        """pad_slice / cat inside the current loop segment (the conditions are constant):
        the (argument, map) read, or None for pad_slice's zero padding."""
        at = {d: self.seg_lo.get(d, 0) for d in range(self.rank)}
        maps = translated_arg_maps(node, m)
        for (d, ranges) in window_ranges(node):
            for t, (lo, hi) in enumerate(ranges):
                if node.op == "pad_slice" and not inside(m[d], lo, hi, at):
                    return None
                if node.op == "cat" and inside(m[d], lo, hi, at):
                    return node.args[t], maps[t]
        return node.args[0], maps[0]

    # ---- reductions: which accumulator each output element uses ------------------------
    def _register_slots(self) -> list[tuple[Item, L.Affine]]:
        """(reduction item, output offset) pairs accumulated in registers across the
        innermost loop: not inline, and the output does not move with that loop."""
        if not self.groups:
            return []
        inner = self.groups[-1][-1]
        slots: dict = {}
        for inst in self.instances:
            it = inst.item
            if it.kind != "reduce" or id(it) in self.inline:
                continue
            a = reduce_out_affine(it.node, inst.map)
            if _coef(a, inner) == 0:
                slots.setdefault((id(it), a), (it, a))
        return list(slots.values())

    # ---- emission ------------------------------------------------------------------------
    def begin(self, ctx: StepContext) -> None:
        self.ctx, self.b = ctx, ctx.b
        self.vars: dict[int, ir.Value] = {}
        self.seg_lo: dict[int, int] = {}
        self.memo: dict = {}
        self.slots = self._register_slots()

    @property
    def outer_extent(self) -> int:
        """Iterations of the outermost (merged) loop: the range threads split."""
        if not self.groups:
            return 1
        n = 1
        for d in self.groups[0]:
            n *= self.shape[d]
        return n

    @property
    def accumulated(self) -> list[Item]:
        """Reductions accumulated across iterations (initialised before, finalised after)."""
        return [it for it in self.step.items if it.kind == "reduce" and id(it) not in self.inline]

    def work(self) -> int:
        """Estimated cost of one call: iterations x (formula cost + memory accesses)."""
        n = 1
        for d in self.shape:
            n *= d
        return n * (self.cost + len(self.addrs) + len(self.instances))

    def prologue(self, ctx: StepContext) -> None:
        self.begin(ctx)
        for root in self.step.fills:
            ctx.memset0(self.plan.storage[id(root)])
        for it in self.accumulated:
            self._init_reduction(it)

    def body_range(self, ctx: StepContext, lo, hi) -> None:
        """The loop nest with the outermost loop limited to ``[lo, hi)``."""
        self.begin(ctx)
        self.range = (lo, hi)
        self._nest(0)

    def epilogue(self, ctx: StepContext) -> None:
        self.begin(ctx)
        for it in self.accumulated:
            self._finalise(it)

    def emit(self, ctx: StepContext) -> None:
        """The whole step on the calling thread."""
        self.prologue(ctx)
        self.body_range(ctx, 0, self.outer_extent)
        self.epilogue(ctx)

    def _segments(self, gi: int, extent: int) -> list[tuple[int, int]]:
        g = self.groups[gi]
        cuts = sorted(self.cuts.get(g[0], ())) if len(g) == 1 else []
        bounds = [0] + cuts + [extent]
        return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]

    def _clamp(self, lo: int, hi: int):
        """Segment [lo, hi) intersected with the outermost range (ints stay ints)."""
        rlo, rhi = self.range
        if isinstance(rlo, int) and isinstance(rhi, int):
            return max(lo, rlo), min(hi, rhi)
        b = self.b
        start = b.select(b.icmp_signed(">", T.I64(lo), rlo), T.I64(lo), rlo)
        stop = b.select(b.icmp_signed("<", T.I64(hi), rhi), T.I64(hi), rhi)
        return start, stop

    def _nest(self, gi: int) -> None:
        b = self.b
        if gi == len(self.groups):
            self.memo = {}
            self._body({})
            return
        extent = 1
        for d in self.groups[gi]:
            extent *= self.shape[d]
        name = "i" + "_".join(map(str, self.groups[gi]))
        for lo, hi in self._segments(gi, extent):
            if len(self.groups[gi]) == 1:
                self.seg_lo[self.groups[gi][0]] = lo
            start, stop = self._clamp(lo, hi) if gi == 0 else (lo, hi)
            if isinstance(start, int) and start >= stop:
                continue
            if gi < len(self.groups) - 1:
                loop = Loop(b, start, stop, name)
                self.vars[gi] = loop.index
                self._nest(gi + 1)
                loop.close()
                del self.vars[gi]
            else:
                self._inner(gi, name, start, stop)

    @property
    def inner_extent(self) -> int:
        """Iterations of the innermost loop (over the last group of merged dims)."""
        inner = 1
        for d in self.groups[-1] if self.groups else ():
            inner *= self.shape[d]
        return inner

    @property
    def interleave(self) -> int:
        """Vector iterations the innermost loop runs side by side (see :mod:`.loops`):
        several for bodies with transcendental functions or divisions (latency-bound),
        LLVM's own choice for cheap, memory-bound ones."""
        costly = self.cost >= INTERLEAVE_MIN_COST and self.inner_extent >= INTERLEAVE_MIN_EXTENT
        return INTERLEAVE if costly else 0

    @property
    def inner_hints(self) -> dict[str, bool]:
        """``llvm.loop`` hints of the innermost loop beyond interleaving: a short loop
        with a costly body and no register accumulators folds its tail into masked
        vectors where the target makes that cheap.  (Long loops keep the remainder
        loop: folded, every iteration pays for its masks -- a million-element
        Rosenbrock or logistic-regression gradient ran 2-2.5x slower.)"""
        if (self.cost >= INTERLEAVE_MIN_COST and self.inner_extent < INTERLEAVE_MIN_EXTENT
                and not self.slots and target.current().masked_tails):
            return {"vectorize.predicate.enable": True}
        return {}

    def _inner(self, gi: int, name: str, lo, hi) -> None:
        b, slots = self.b, self.slots
        if not slots:
            loop = Loop(b, lo, hi, name, interleave=self.interleave, hints=self.inner_hints)
            self.vars[gi] = loop.index
            self.memo = {}
            self._body({})
            loop.close()
            del self.vars[gi]
            return
        if any(it.scratch.get("comp") for it, _ in slots):
            block = R.BLOCK_F64
        elif any(it.scratch.get("acc") for it, _ in slots):
            block = R.BLOCK_F32
        else:
            block = R.BLOCK_OTHER
        if isinstance(lo, int) and isinstance(hi, int) and hi - lo <= block:
            self._combine_blocks(self._register_loop(gi, name, lo, hi))
            return
        lo_v, hi_v = T.I64(lo) if isinstance(lo, int) else lo, T.I64(hi) if isinstance(hi, int) else hi
        count = b.sdiv(b.add(b.sub(hi_v, lo_v), T.I64(block - 1)), T.I64(block))
        outer = Loop(b, 0, count, name + ".blk")
        start = b.add(b.mul(outer.index, T.I64(block)), lo_v)
        stop = b.add(start, T.I64(block))
        stop = b.select(b.icmp_signed("<", stop, hi_v), stop, hi_v)
        self._combine_blocks(self._register_loop(gi, name, start, stop))
        outer.close()

    def _register_loop(self, gi: int, name: str, start, stop) -> list[ir.Value]:
        inits = [T.constant(R.block_dtype(it.node), R.identity(it.node)) for it, _ in self.slots]
        loop = Loop(self.b, start, stop, name, inits, interleave=self.interleave,
                    hints=self.inner_hints)
        self.vars[gi] = loop.index
        self.memo = {}
        regs = {(id(it), a): acc for (it, a), acc in zip(self.slots, loop.carried)}
        self._body(regs)
        out = loop.close([regs[(id(it), a)] for it, a in self.slots])
        del self.vars[gi]
        return out

    def _body(self, regs: dict) -> None:
        """Emit every instance at the current loop indices.  ``regs`` maps register
        slots to their running accumulators and is updated in place."""
        b = self.b
        partials: dict = {}
        for k, inst in enumerate(self.instances):
            item, m = inst.item, inst.map
            if not self._active(item):
                continue
            if item.kind == "store":
                if item.produces is item.node:
                    v = self.compute(item.node, m)
                    self.memo[(id(item.node), m)] = v
                else:
                    v = self.value_at(item.node, m)
                if item.target is None:            # loop-local: the register is enough
                    continue
                dst = item.target.buffer
                T.store(b, T.convert(b, v, item.node.dtype, dst.dtype),
                        self.ctx.elem(dst, self.offset(L.address(item.target, m))), dst.dtype)
                continue
            r = item.node
            x = self.value_at(r.args[0], m)
            key = (id(item), reduce_out_affine(r, m))
            if id(item) in self.inline or key in regs:
                bdt = R.block_dtype(r)
                x = T.convert(b, x, r.args[0].dtype, bdt)
                prev = partials.get(key)
                partials[key] = x if prev is None else R.combine(b, r.op, bdt, prev, x, reassoc=True)
                last = k + 1 == len(self.instances) or self.instances[k + 1].item is not item
                if last:
                    self._flush(item, partials, regs)
            else:
                adt = R.acc_dtype(r)
                x = T.convert(b, x, r.args[0].dtype, adt)
                acc = self._acc_storage(item)
                ptr = self.ctx.elem(acc, self.offset(key[1]))
                T.store(b, R.combine(b, r.op, adt, T.load(b, ptr, acc.dtype), x), ptr, acc.dtype)

    def _active(self, item: Item) -> bool:
        """Whether the current segment lies inside ``item``'s range (shorter items)."""
        return all(self.seg_lo.get(d, 0) < item.shape[d]
                   for d in range(self.rank) if item.shape[d] < self.shape[d])

    def _flush(self, item: Item, partials: dict, regs: dict) -> None:
        """An item's instances are done: finish inline reductions, feed register slots."""
        b, r = self.b, item.node
        for key in [k for k in partials if k[0] == id(item)]:
            x = partials.pop(key)
            if key in regs:
                regs[key] = R.combine(b, r.op, R.block_dtype(r), regs[key], x, reassoc=True)
                continue
            v = T.convert(b, x, R.block_dtype(r), R.acc_dtype(r))
            if r.op == "mean":
                v = b.fdiv(v, ir.Constant(v.type, float(self._count(r))))
            v = T.convert(b, v, R.acc_dtype(r), r.dtype)
            if id(r) not in self.plan.local:
                out = self.plan.storage[id(r)]
                T.store(b, v, self.ctx.elem(out, self.offset(key[1])), out.dtype)
            for m in {reduce_out_map(r, inst.map) for inst in self.instances if inst.item is item
                      and reduce_out_affine(r, inst.map) == key[1]}:
                self.memo[(id(r), m)] = v

    @staticmethod
    def _count(r: Node) -> int:
        count = 1
        for a in reduced_axes(r):
            count *= r.args[0].shape[a]
        return count

    def _acc_storage(self, item: Item) -> Storage:
        return item.scratch.get("acc") or self.plan.storage[id(item.node)]

    def _combine_blocks(self, partials: list[ir.Value]) -> None:
        b = self.b
        for (item, a), x in zip(self.slots, partials):
            if not self._active(item):     # a shorter item: its output has no row here
                continue
            r = item.node
            x = T.convert(b, x, R.block_dtype(r), R.acc_dtype(r))
            acc = self._acc_storage(item)
            off = self.offset(a)
            ptr = self.ctx.elem(acc, off)
            comp = item.scratch.get("comp")
            if comp is not None:
                cptr = self.ctx.elem(comp, off)
                s, c = R.neumaier(b, T.load(b, ptr, acc.dtype), T.load(b, cptr, comp.dtype), x)
                b.store(s, ptr)
                b.store(c, cptr)
            else:
                T.store(b, R.combine(b, r.op, R.acc_dtype(r), T.load(b, ptr, acc.dtype), x), ptr,
                        acc.dtype)

    def _init_reduction(self, item: Item) -> None:
        ctx, b = self.ctx, self.b
        acc = self._acc_storage(item)
        ident = R.identity(item.node)
        if ident == 0 or ident is False:
            ctx.memset0(acc)
        else:
            loop = Loop(b, 0, acc.size, "init", hints=BOOKKEEPING)
            T.store(b, T.constant(acc.dtype, ident), ctx.elem(acc, loop.index), acc.dtype)
            loop.close()
        if item.scratch.get("comp") is not None:
            ctx.memset0(item.scratch["comp"])

    def _finalise(self, item: Item) -> None:
        r = item.node
        if r.op not in ("sum", "mean") or not r.dtype.is_floating_point:
            return
        ctx, b = self.ctx, self.b
        out = self.plan.storage[id(r)]
        acc = self._acc_storage(item)
        comp = item.scratch.get("comp")
        if comp is None and acc is out and r.op == "sum":
            return
        loop = Loop(b, 0, out.size, "fin", hints=BOOKKEEPING)
        i = loop.index
        v = T.load(b, ctx.elem(acc, i), acc.dtype)
        if comp is not None:
            v = b.fadd(v, T.load(b, ctx.elem(comp, i), comp.dtype))
        if r.op == "mean":
            v = b.fdiv(v, ir.Constant(v.type, float(self._count(r))))
        T.store(b, T.convert(b, v, acc.dtype, out.dtype), ctx.elem(out, i), out.dtype)
        loop.close()
