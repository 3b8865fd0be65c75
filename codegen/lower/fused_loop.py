"""Lowering of a :class:`~codegen.plan.LoopStep`: one loop nest computing several items.

1. *Analysis*: every address the loop touches is an affine function of the loop
   indices (:mod:`codegen.layout`).  Adjacent loop dimensions are merged whenever every
   address agrees (``coef[d] == coef[d+1] * n[d+1]``), so contiguous work becomes one
   long innermost loop -- the vectoriser's favourite shape -- and broadcasting (stride
   0) keeps its own loop.
2. *Prologue*: zero-fill window roots (pad_slice), initialise reduction accumulators.
3. *Body* (emitted once, innermost): each item's value is computed from its formula
   cone; values shared by items are computed once (memo per (node, index map)); a root
   stored by this loop is reused from its register at the same index.  Reductions whose
   output does not move with the innermost loop accumulate in registers in blocks (see
   :mod:`.reduce`), the others accumulate in memory.
4. *Epilogue*: finalise reductions (compensation, mean's division, float32 rounding).
"""
from __future__ import annotations

import llvmlite.ir as ir

from symgrad.graph.node import Node

from .. import layout as L
from .. import types as T
from ..classify import const_scalar, formula_of
from ..plan import Item, LoopStep, Plan, Storage
from . import reduce as R
from .context import StepContext
from .loops import Loop
from ..windows import inside, translated_arg_maps, window_cuts, window_ranges
from .sympy_ir import FormulaEmitter, compute_dtype

__all__ = ["FusedLoop"]


def _axes(r: Node) -> tuple[int, ...]:
    nd = len(r.args[0].shape)
    return tuple(sorted(a % nd for a in r.attr("axes"))) if nd else ()


def reduce_out_affine(r: Node) -> L.Affine:
    """Element offset in the reduction's (contiguous) output at loop index (input) i."""
    axes, keep = _axes(r), r.attr("keepdim")
    cs = L.contiguous_strides(r.shape)
    out, k = L.const(0), 0
    for d in range(len(r.args[0].shape)):
        if d in axes:
            if keep:
                k += 1
            continue
        out = L.add(out, L.var(d, cs[k]))
        k += 1
    return out


def _coef(a: L.Affine, d: int) -> int:
    for dim, c in a[1]:
        if dim == d:
            return c
    return 0


class FusedLoop:
    """Analyses a LoopStep at construction; :meth:`emit` lowers it."""

    def __init__(self, plan: Plan, step: LoopStep) -> None:
        self.plan, self.step = plan, step
        self.shape = step.shape
        self.ident = L.identity(len(self.shape))
        self.addrs: set[L.Affine] = set()
        self.index_dims: set[int] = set()
        self.storages: dict[int, Storage] = {}
        self.cuts: dict[int, set[int]] = {}
        self._seen: set = set()
        self._analyse()
        self.groups = self._coalesce()

    # ---- analysis ------------------------------------------------------------------
    def _use(self, view: L.StridedView, m: L.IndexMap) -> None:
        self.addrs.add(L.address(view, m))
        st = view.buffer
        self.storages[id(st)] = st

    def _collect(self, node: Node, m: L.IndexMap, top: bool = False) -> None:
        key = (id(node), m, top)
        if key in self._seen:
            return
        self._seen.add(key)
        plan, kind = self.plan, self.plan.kinds[id(node)]
        if const_scalar(node) is not None:
            return
        if not top and (kind == "leaf" or id(node) in plan.roots):
            self._use(plan.view(node), m)
            return
        if kind == "leaf":
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
        for a in node.args:
            self._collect(a, L.broadcast_map(a.shape, node.shape, m))

    def _reshape_view(self, node: Node) -> L.StridedView:
        view = L.reshape_view(self.plan.view(node.args[0]), node.shape)
        assert view is not None, "planner guarantees reshapable arguments"
        return view

    def _analyse(self) -> None:
        for st in self.step.fills:
            s = self.plan.storage[id(st)]
            self.storages[id(s)] = s
        for item in self.step.items:
            if item.kind == "store":
                self._collect(item.node, self.ident, top=item.produces is item.node)
                self._use(item.target, self.ident)
            else:
                self._collect(item.node.args[0], self.ident)
                self.addrs.add(reduce_out_affine(item.node))
                for s in (self.plan.storage[id(item.node)], *item.scratch.values()):
                    self.storages[id(s)] = s

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

    def index_value(self, a: L.Affine) -> ir.Value:
        """An affine index expression of original dims (only unmerged dims appear)."""
        return self.offset(a)

    def load(self, view: L.StridedView, m: L.IndexMap, name: str = "") -> ir.Value:
        st = view.buffer
        ptr = self.ctx.elem(st, self.offset(L.address(view, m)))
        return T.load(self.b, ptr, st.dtype, name=name)

    # ---- values ------------------------------------------------------------------------
    def value_at(self, node: Node, m: L.IndexMap) -> ir.Value:
        key = (id(node), m)
        v = self.memo.get(key)
        if v is None:
            v = self._value(node, m)
            self.memo[key] = v
        return v

    def _value(self, node: Node, m: L.IndexMap) -> ir.Value:
        plan, kind = self.plan, self.plan.kinds[id(node)]
        s = const_scalar(node)
        if s is not None:
            return T.constant(node.dtype, s)
        if kind == "leaf" or id(node) in plan.roots:
            return self.load(plan.view(node), m, name=_name(node))
        return self.compute(node, m)

    def compute(self, node: Node, m: L.IndexMap) -> ir.Value:
        """The value of ``node`` at map ``m`` from its definition (not its storage)."""
        plan, kind, op = self.plan, self.plan.kinds[id(node)], node.op
        if kind == "leaf":
            s = const_scalar(node)
            if s is not None:
                return T.constant(node.dtype, s)
            return self.load(plan.view(node), m, name=_name(node))
        if kind == "view":
            arg = node.args[0]
            tm = L.translate(op, dict(node.attrs), arg.shape, node.shape, m)
            if tm is None:
                return self.load(self._reshape_view(node), m, name=_name(node))
            return self.value_at(arg, tm)
        if kind == "window":
            return self._window_value(node, m)
        if op == "full":
            return T.constant(node.dtype, node.attr("value"))
        if op == "iota":
            idx = self.index_value(m[node.attr("axis")])
            from symgrad import dtypes
            return T.convert(self.b, idx, dtypes.int64, node.dtype)
        args = [self.value_at(a, L.broadcast_map(a.shape, node.shape, m)) for a in node.args]
        if op == "cast":
            return T.convert(self.b, args[0], node.args[0].dtype, node.dtype)
        expr, symbols = formula_of(node)
        arg_dtypes = [a.dtype for a in node.args]
        cdt = compute_dtype(expr, arg_dtypes)
        em = FormulaEmitter(self.b, cdt, {s: (v, a.dtype) for s, v, a in zip(symbols, args, node.args)})
        value = em.emit(expr)
        return T.convert(self.b, value, cdt, node.dtype)

    def _window_value(self, node: Node, m: L.IndexMap) -> ir.Value:
        """pad_slice / cat inside the current loop segment: the conditions are constant."""
        at = {d: self.seg_lo.get(d, 0) for d in range(len(self.shape))}
        maps = translated_arg_maps(node, m)
        for (d, ranges) in window_ranges(node):
            for t, (lo, hi) in enumerate(ranges):
                if node.op == "pad_slice" and not inside(m[d], lo, hi, at):
                    return T.constant(node.dtype, 0)
                if node.op == "cat" and inside(m[d], lo, hi, at):
                    return self.value_at(node.args[t], maps[t])
        return self.value_at(node.args[0], maps[0])

    # ---- emission ------------------------------------------------------------------------
    def emit(self, ctx: StepContext) -> None:
        self.ctx, self.b = ctx, ctx.b
        self.vars: dict[int, ir.Value] = {}
        self.seg_lo: dict[int, int] = {}
        self.memo: dict = {}
        for root in self.step.fills:
            ctx.memset0(self.plan.storage[id(root)])
        reductions = [it for it in self.step.items if it.kind == "reduce"]
        for it in reductions:
            self._init_reduction(it)
        self._nest(0)
        for it in reductions:
            self._finalise(it)

    def _segments(self, gi: int, extent: int) -> list[tuple[int, int]]:
        g = self.groups[gi]
        cuts = sorted(self.cuts.get(g[0], ())) if len(g) == 1 else []
        bounds = [0] + cuts + [extent]
        return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]

    def _nest(self, gi: int) -> None:
        b = self.b
        if gi == len(self.groups):
            self.memo = {}
            self._body(register=())
            return
        extent = 1
        for d in self.groups[gi]:
            extent *= self.shape[d]
        name = "i" + "_".join(map(str, self.groups[gi]))
        for lo, hi in self._segments(gi, extent):
            if len(self.groups[gi]) == 1:
                self.seg_lo[self.groups[gi][0]] = lo
            if gi < len(self.groups) - 1:
                loop = Loop(b, lo, hi, name)
                self.vars[gi] = loop.index
                self._nest(gi + 1)
                loop.close()
                del self.vars[gi]
            else:
                self._inner(gi, name, lo, hi)

    def _inner(self, gi: int, name: str, lo: int, hi: int) -> None:
        b = self.b
        inner = self.groups[gi][-1]
        in_register = [it for it in self.step.items
                       if it.kind == "reduce" and _coef(reduce_out_affine(it.node), inner) == 0]
        if not in_register:
            loop = Loop(b, lo, hi, name)
            self.vars[gi] = loop.index
            self.memo = {}
            self._body(register=())
            loop.close()
            del self.vars[gi]
            return
        if any(it.scratch.get("comp") for it in in_register):
            block = R.BLOCK_F64
        elif any(it.scratch.get("acc") for it in in_register):
            block = R.BLOCK_F32
        else:
            block = R.BLOCK_OTHER
        extent = hi - lo
        if extent <= block:
            partial = self._register_loop(gi, name, lo, hi, in_register)
            self._combine_blocks(in_register, partial)
            return
        nblocks = -(-extent // block)
        outer = Loop(b, 0, nblocks, name + ".blk")
        start = b.add(b.mul(outer.index, T.I64(block)), T.I64(lo))
        stop = b.add(start, T.I64(block))
        stop = b.select(b.icmp_signed("<", stop, T.I64(hi)), stop, T.I64(hi))
        partial = self._register_loop(gi, name, start, stop, in_register)
        self._combine_blocks(in_register, partial)
        outer.close()

    def _register_loop(self, gi: int, name: str, start, stop, items: list[Item]) -> list[ir.Value]:
        inits = [T.constant(R.block_dtype(it.node), R.identity(it.node)) for it in items]
        loop = Loop(self.b, start, stop, name, inits)
        self.vars[gi] = loop.index
        self.memo = {}
        nxt = self._body(register=tuple(zip(items, loop.carried)))
        out = loop.close(nxt)
        del self.vars[gi]
        return out

    def _body(self, register) -> list[ir.Value]:
        """Emit all items at the current loop indices; return the next register accumulators."""
        b, reg = self.b, dict((id(it), acc) for it, acc in register)
        nxt = []
        for item in self.step.items:
            if item.kind == "store":
                if item.produces is item.node:
                    v = self.compute(item.node, self.ident)
                    self.memo[(id(item.node), self.ident)] = v
                else:
                    v = self.value_at(item.node, self.ident)
                dst = item.target.buffer
                T.store(b, T.convert(b, v, item.node.dtype, dst.dtype),
                        self.ctx.elem(dst, self.offset(L.address(item.target, self.ident))), dst.dtype)
                continue
            r = item.node
            x = self.value_at(r.args[0], self.ident)
            if id(item) in reg:
                bdt = R.block_dtype(r)
                x = T.convert(b, x, r.args[0].dtype, bdt)
                nxt.append(R.combine(b, r.op, bdt, reg[id(item)], x, reassoc=True))
            else:
                adt = R.acc_dtype(r)
                x = T.convert(b, x, r.args[0].dtype, adt)
                acc = self._acc_storage(item)
                ptr = self.ctx.elem(acc, self.offset(reduce_out_affine(r)))
                T.store(b, R.combine(b, r.op, adt, T.load(b, ptr, acc.dtype), x), ptr, acc.dtype)
        return [v for v in nxt]

    def _acc_storage(self, item: Item) -> Storage:
        return item.scratch.get("acc") or self.plan.storage[id(item.node)]

    def _combine_blocks(self, items: list[Item], partials: list[ir.Value]) -> None:
        b = self.b
        for item, x in zip(items, partials):
            r = item.node
            x = T.convert(b, x, R.block_dtype(r), R.acc_dtype(r))
            acc = self._acc_storage(item)
            off = self.offset(reduce_out_affine(r))
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
            loop = Loop(b, 0, acc.size, "init")
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
        count = 1
        for a in _axes(r):
            count *= r.args[0].shape[a]
        loop = Loop(b, 0, out.size, "fin")
        i = loop.index
        v = T.load(b, ctx.elem(acc, i), acc.dtype)
        if comp is not None:
            v = b.fadd(v, T.load(b, ctx.elem(comp, i), comp.dtype))
        if r.op == "mean":
            v = b.fdiv(v, ir.Constant(v.type, float(count)))
        T.store(b, T.convert(b, v, acc.dtype, out.dtype), ctx.elem(out, i), out.dtype)
        loop.close()


def _name(node: Node) -> str:
    if node.op == "input":
        return str(node.attr("name"))
    return node.op
