"""The schedule of a program: what is materialised where, and in which steps.

Input: a :class:`symgrad.graph.program.Program`.  Output: a :class:`Plan` --

* **roots**: nodes that get storage of their own: outputs, reductions, window ops
  (pad_slice, cat), opaque ops (matmul, indexing, ...), numpy-rule nodes, bases of the
  arguments of opaque/numpy nodes, and elementwise nodes that would otherwise be
  recomputed in several places although they are expensive (cost > ``RECOMPUTE_COST``);
* every other node is *virtual*: a layout op is index arithmetic, an elementwise node
  is recomputed inside each loop that reads it (cheap nodes only, see above);
* **steps**, in order: :class:`LoopStep` (one loop nest over one shape computing
  several *items* -- stores of elementwise values and reductions -- so consumers of the
  same input share one pass and one set of registers; an item's trailing dims of at
  most ``UNROLL_MAX`` elements are unrolled, so a row-wise reduction (softmax over 10
  classes, a matrix-vector product) and its elementwise consumers share one loop over
  rows), :class:`NodeStep` (an opaque
  lowering, or a numpy rule in a hybrid executable) and :class:`CopyStep`;
* **storage**: inputs and outputs are the caller's buffers (an output root is computed
  straight into its output array, also through a reshape); temporaries share one arena
  whose offsets come from live ranges; hybrid executables pass buffers crossing a numpy
  step as ``ext`` slots.

Loop placement is greedy in topological order: an item joins the latest loop of its
shape whose inputs are all complete before it -- or computed in that same loop at the
same index (then the value is a register, never reloaded).

>>> import numpy as np, symgrad
>>> f = symgrad.compile(lambda x: (x * 2).exp().sum() + x.sum(), backend="numpy")
>>> plan = build_plan(f.lower(np.ones(3)).optimized)
>>> [type(s).__name__ for s in plan.steps]      # one loop computes both sums
['LoopStep', 'LoopStep']
"""
from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from symgrad.graph import dtypes
from symgrad.graph.dtypes import DType
from symgrad.graph.node import Node

from . import layout as L
from .classify import const_scalar, ew_cost, kind_of, numpy_reason
from .rewrite import matvec_as_reduction
from .windows import MAX_SEGMENTS, translated_arg_maps, window_cuts, window_ranges

__all__ = ["Plan", "Storage", "Item", "LoopStep", "NodeStep", "CopyStep", "build_plan",
           "RECOMPUTE_COST", "CONE_COST", "cone_limit", "ARENA_ALIGN", "UNROLL_MAX", "same_point", "inline_reduction",
           "reduced_axes"]

RECOMPUTE_COST = 12   # an elementwise node costing more is materialised rather than recomputed
# A loop body computes at most CONE_COST formula cost per element (two transcendental
# functions and some arithmetic) ... Small bodies repeat: a chain of equal steps becomes
# equal loops compiled once (codegen.reuse), so LLVM's work does not grow with the chain,
# and they ran no slower than bodies of 64 or 256 (a 10-step tanh/sin/exp chain on 1,000
# and 60,000 elements, 100 to 200 sin steps on 100: 1.0-1.5x faster, a third of the LLVM time)
CONE_COST = 32
CONE_COST_LARGE = 2048    # ... or this much when the loop runs over more than
CONE_LARGE_EXTENT = 1 << 16   # this many elements (a split loop then costs memory traffic)


def cone_limit(shape: tuple[int, ...]) -> int:
    """The formula cost one loop body may compute per element, for a loop over ``shape``."""
    return CONE_COST_LARGE if _size(shape) > CONE_LARGE_EXTENT else CONE_COST
UNROLL_MAX = 16       # trailing dims of an item up to this many elements are unrolled in a loop
NEAR_EXTENT = 4       # items up to this many elements shorter per dim share a loop
ARENA_ALIGN = 64


@dataclass(eq=False)
class Storage:
    """One buffer: ``in``/``out``/``ext`` slots of the kernel's pointer array, an arena
    ``temp`` (``slot`` = byte offset), or a ``const`` global (``value``).  An *alias*
    (``base`` set, see :meth:`Plan.shifted`) is the same buffer seen from element
    ``shift``: a step reading ``xs[t]`` gets a pointer to it, so the steps of an
    unrolled loop are the same code (codegen.reuse)."""

    kind: str
    slot: int
    dtype: DType
    shape: tuple[int, ...]
    name: str
    value: Any = None
    base: "Storage | None" = None
    shift: int = 0

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


@dataclass(eq=False)
class Item:
    """One unit of work in a loop over ``shape``: ``store`` computes ``node`` at each
    index into ``target``; ``reduce`` accumulates reduction ``node`` of its argument."""

    kind: str
    node: Node
    target: L.StridedView | None          # None: a loop-local root (registers only)
    produces: Node | None
    shape: tuple[int, ...]
    scratch: dict = field(default_factory=dict)   # reduce: "acc"/"comp" -> Storage


@dataclass(eq=False)
class LoopStep:
    """A loop nest over ``shape``; an item's dims beyond ``shape`` are unrolled."""

    shape: tuple[int, ...]
    items: list[Item] = field(default_factory=list)
    fills: list[Node] = field(default_factory=list)   # window roots zero-filled first
    cuts: set = field(default_factory=set)            # (dim, position) segment cuts
    plain: set = field(default_factory=set)           # ids of roots stored at the identity
    cost: int = 0                                     # formula cost of one iteration


@dataclass(eq=False)
class NodeStep:
    node: Node
    kind: str            # "opaque" or "numpy"


@dataclass(eq=False)
class CopyStep:
    dst: Storage
    src: Storage


@dataclass(eq=False)
class Plan:
    program: Any
    steps: list
    kinds: dict
    roots: set
    storage: dict                 # id(node) -> Storage (leaves and roots)
    inputs: list[Storage]
    outputs: list[Storage]
    externals: list[Storage]
    arena_size: int
    views: dict                   # id(node) -> StridedView over Storage (memo)
    numpy_nodes: list[Node]
    segments: list[list[int]]     # step indices of each native segment, in order
    local: set = field(default_factory=set)   # roots that live only in registers of their loop
    aliases: dict = field(default_factory=dict)   # (id(storage), shift) -> alias Storage

    def name(self, node: Node) -> str:
        """The node's name in ``program.as_text()`` (``a``, ``b``, ...), its input name, or
        its op: LLVM values are named after it so the IR reads against the program."""
        if not hasattr(self, "_names"):
            self._names = _text_names(self.program)
        return self._names.get(id(node), node.op)

    def shifted(self, st: Storage, shift: int) -> Storage:
        """``st`` seen from element ``shift`` (read-only use: the caller passes a pointer
        to that element; bounds and overlap checks still see the whole buffer)."""
        if shift == 0 or st.kind == "const":
            return st
        if st.base is not None:
            return self.shifted(st.base, st.shift + shift)
        key = (id(st), shift)
        alias = self.aliases.get(key)
        if alias is None:
            alias = Storage(st.kind, st.slot, st.dtype, st.shape, f"{st.name}.at{shift}",
                            base=st, shift=shift)
            self.aliases[key] = alias
        return alias

    def view(self, node: Node) -> L.StridedView | None:
        """``node`` as a strided view of a Storage, or None if it is virtual."""
        key = id(node)
        if key not in self.views:
            self.views[key] = _strided(node, self.kinds, self.roots, self.storage.get, set())
        return self.views[key]

    def scalar(self, node: Node):
        """Python value of a constant whose elements are all equal, else None."""
        return const_scalar(node)

    @property
    def hybrid(self) -> bool:
        return bool(self.numpy_nodes)

    def summary(self) -> str:
        """The schedule in a few lines (part of ``as_text('program')``)."""
        lines = []
        for i, st in enumerate(self.steps):
            if isinstance(st, LoopStep):
                what = ", ".join(f"{it.kind} {it.node.op}" for it in st.items)
                lines.append(f"  step {i}: loop {list(st.shape)}: {what}")
            elif isinstance(st, NodeStep):
                how = "numpy rule (hybrid)" if st.kind == "numpy" else "native"
                lines.append(f"  step {i}: {st.node.op} {list(st.node.shape)} [{how}]")
            else:
                lines.append(f"  step {i}: copy {st.src.name} -> {st.dst.name}")
        lines.append(f"  arena: {self.arena_size} bytes")
        if self.numpy_nodes:
            reasons = sorted({f"{n.op} ({numpy_reason(n)})" for n in self.numpy_nodes})
            lines.append("  runs through numpy: " + "; ".join(reasons))
        else:
            lines.append("  fully native")
        return "\n".join(lines)


def _strided(node: Node, kinds: dict, roots: set, storage_of, failed: set) -> L.StridedView | None:
    """``node`` as a strided view over the storage of a leaf or root (None: virtual).
    ``storage_of(id)`` gives the buffer key; reshapes that would need a copy add the id
    of their argument to ``failed``."""
    kind = kinds[id(node)]
    if kind == "leaf" or id(node) in roots:
        buf = storage_of(id(node))
        return L.StridedView.contiguous(buf if buf is not None else node, node.shape)
    if kind != "view":
        return None
    arg = node.args[0]
    base = _strided(arg, kinds, roots, storage_of, failed)
    if base is None:
        return None
    if node.op == "reshape":
        out = L.reshape_view(base, node.shape)
        if out is None:
            failed.add(id(arg))
        return out
    m = L.translate(node.op, dict(node.attrs), arg.shape, node.shape, L.identity(len(node.shape)))
    offset, strides = L.view_strides(node.shape, L.address(base, m))
    return L.StridedView(base.buffer, node.shape, strides, offset)


def _near_shape(step: "LoopStep", item: Item) -> tuple[int, ...] | None:
    """Loops whose items differ by a few elements per dim (stencils: ``x[1:]`` and
    ``x[:-1]`` terms, a padded gradient) share one loop over the largest extent; each
    item runs on its own range ``[0, n)`` (segment cuts, see FusedLoop)."""
    shapes = [it.shape for it in step.items] + [item.shape]
    rank = len(step.shape)
    if any(len(sh) != rank for sh in shapes) or rank == 0:
        return None
    out = tuple(max(sh[d] for sh in shapes) for d in range(rank))
    if all(out[d] - sh[d] <= NEAR_EXTENT and sh[d] > 0 for sh in shapes for d in range(rank)):
        return out
    return None


def _text_names(program) -> dict[int, str]:
    """Names as ``Program.as_text`` assigns them (inputs by name, then a, b, ..., z, aa)."""
    names = {id(n): _ident(nm) for n, nm in zip(program.inputs, program.input_names)}
    k = 0
    for n in program.nodes():
        if n.op in ("input", "const") or id(n) in names:
            continue
        i, s = k, ""
        while True:
            s = chr(ord("a") + i % 26) + s
            i = i // 26 - 1
            if i < 0:
                break
        names[id(n)] = s
        k += 1
    return names


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def same_point(m: L.IndexMap, loop_rank: int) -> bool:
    """True if reading at ``m`` (in a consumer item's index space) hits, in every
    iteration of a loop of rank ``loop_rank``, an element its producer computes in the
    same iteration: the loop dims map to themselves, unrolled dims to unrolled dims."""
    if m is None:
        return False
    for d, a in enumerate(m):
        if d < loop_rank:
            if a != L.var(d):
                return False
        elif any(dim < loop_rank for dim, _ in a[1]):
            return False
    return len(m) >= loop_rank


def reduced_axes(r: Node) -> tuple[int, ...]:
    nd = len(r.args[0].shape)
    return tuple(sorted(a % nd for a in r.attr("axes"))) if nd else ()


def inline_reduction(r: Node, loop_rank: int) -> bool:
    """A reduction whose reduced axes are all unrolled (complete in one iteration)."""
    return all(a >= loop_rank for a in reduced_axes(r))


def _base(node: Node, kinds: dict, roots=frozenset()) -> Node:
    """The node whose storage ``node`` views: down its chain of views to a leaf, a non-view
    or a materialised view (a root: e.g. the permuted windows a reshape cannot view)."""
    while kinds[id(node)] == "view" and id(node) not in roots:
        node = node.args[0]
    return node


class _Room:
    """How full the steps of one assignment are, per block of :data:`BLOCK` steps: the
    smallest :meth:`key` in each block, so :meth:`_Planner.place` skips a block in which
    no step has room for an item."""

    BLOCK = 64

    def __init__(self) -> None:
        self.steps: list | None = None
        self.mins: list[float] = []
        self.seen = 0

    @staticmethod
    def key(st) -> float:
        """A step takes an item of cost c under limit L iff key <= L - c."""
        if not isinstance(st, LoopStep):
            return math.inf
        return st.cost if st.items else -math.inf

    def sync(self, steps: list) -> "_Room":
        """Follow ``steps`` (a new assignment starts over; appended steps are added)."""
        if self.steps is not steps:
            self.steps, self.mins, self.seen = steps, [], 0
        for i in range(self.seen, len(steps)):
            b = i // self.BLOCK
            if b == len(self.mins):
                self.mins.append(math.inf)
            self.mins[b] = min(self.mins[b], self.key(steps[i]))
        self.seen = len(steps)
        return self

    def update(self, steps: list, i: int) -> None:
        """Step ``i`` took an item: its block's minimum again."""
        b = i // self.BLOCK
        self.mins[b] = min(self.key(st) for st in steps[b * self.BLOCK:(b + 1) * self.BLOCK])


class _Planner:
    def __init__(self, program) -> None:
        self.program = program
        self.nodes: list[Node] = program.nodes()
        self.kinds = {id(n): kind_of(n) for n in self.nodes}
        for n in program.inputs:
            self.kinds.setdefault(id(n), "leaf")
        self.forced: set[int] = self.bounded_cones()
        self.room = _Room()

    def bounded_cones(self) -> set[int]:
        """Nodes materialised so that no item's formula cone costs more than
        :func:`cone_limit` per element; with the same bound on a loop's items (:meth:`place`)
        a chain of 10,000 elementwise ops becomes a sequence of equal loops (compiled
        once, see codegen.reuse), not one body that LLVM must optimise whole."""
        cone: dict[int, int] = {}
        forced: set[int] = set()
        for n in self.nodes:                       # topological order
            kind = self.kinds[id(n)]
            if kind == "view":
                cone[id(n)] = cone.get(id(n.args[0]), 0)
            elif kind == "ew":
                c = ew_cost(n) + sum(cone.get(id(a), 0) for a in n.args)
                if c > cone_limit(n.shape):
                    forced.add(id(n))
                    c = 0
                cone[id(n)] = c
        return forced

    # ---- roots ---------------------------------------------------------------------
    def roots(self) -> set[int]:
        kinds, roots = self.kinds, set(self.forced)
        for n in self.nodes:
            k = kinds[id(n)]
            if k in ("reduce", "opaque", "numpy"):
                roots.add(id(n))
                for a in n.args:
                    if k in ("opaque", "numpy"):
                        b = _base(a, kinds, roots)
                        if kinds[id(b)] != "leaf":
                            roots.add(id(b))
        for o in self.program.outputs:
            if kinds[id(o)] not in ("leaf", "view"):
                roots.add(id(o))
        return roots

    def strided(self, node: Node) -> L.StridedView | None:
        return _strided(node, self.kinds, self.roots_now, lambda i: None, self.failed)

    # ---- cones ---------------------------------------------------------------------
    def walk(self, node: Node, m: L.IndexMap, deps: list, visits: list, seen: set,
             top: bool = False) -> None:
        """Record what computing ``node`` at map ``m`` reads: ``deps`` gets (root, map)
        (map None: not the identity), ``visits`` gets the virtual (node, map) pairs."""
        key = (id(node), m)
        if key in seen:
            return
        seen.add(key)
        kind = self.kinds[id(node)]
        if kind == "leaf":
            return
        if id(node) in self.roots_now and not top:
            deps.append((node, m))
            return
        if kind == "view":
            arg = node.args[0]
            tm = L.translate(node.op, dict(node.attrs), arg.shape, node.shape, m)
            if tm is not None:
                self.walk(arg, tm, deps, visits, seen)
                return
            view = self.strided(node)
            if view is not None:
                if self.kinds[id(view.buffer)] != "leaf":
                    deps.append((view.buffer, None))
            else:
                self.failed.add(id(arg))
            return
        if kind == "window":                   # segmented loop, see codegen.windows
            visits.append((node, m))
            cuts = window_cuts(node, m, self.loop_shape)
            if cuts is None:
                self.failed.add(id(node))
                return
            self.item_cuts.extend(cuts)
            for a, am in zip(node.args, translated_arg_maps(node, m)):
                self.walk(a, am, deps, visits, seen)
            return
        if kind != "ew":                       # a root read through its storage
            deps.append((node, m))
            return
        visits.append((node, m))
        if node.op in ("full", "iota"):
            return
        for a in node.args:
            self.walk(a, L.broadcast_map(a.shape, node.shape, m), deps, visits, seen)

    # ---- items -----------------------------------------------------------------------
    def items_of(self, r: Node) -> list[Item]:
        kind = self.kinds[id(r)]
        own = L.StridedView.contiguous(r, r.shape)
        if kind == "reduce":
            return [Item("reduce", r, own, r, r.args[0].shape)]
        if kind == "window" and window_ranges(r) is not None:       # segmented store
            return [Item("store", r, own, r, r.shape)]
        if r.op == "pad_slice":
            arg = r.args[0]
            cs = L.contiguous_strides(r.shape)
            offset, strides = 0, []
            for d, n in enumerate(r.shape):
                start, _, step = slice(r.attr("starts")[d], r.attr("stops")[d],
                                       r.attr("steps")[d]).indices(n)
                offset += start * cs[d]
                strides.append(step * cs[d])
            return [Item("store", arg, L.StridedView(r, arg.shape, tuple(strides), offset), r,
                         arg.shape)]
        if r.op == "cat":
            axis = r.attr("axis") % len(r.shape)
            cs = L.contiguous_strides(r.shape)
            items, start = [], 0
            for a in r.args:
                items.append(Item("store", a, L.StridedView(r, a.shape, cs, start * cs[axis]), r,
                                  a.shape))
                start += a.shape[axis]
            return items
        return [Item("store", r, own, r, r.shape)]

    # ---- placement ---------------------------------------------------------------------
    @staticmethod
    def joined_shape(step: "LoopStep", item: Item) -> tuple[int, ...] | None:
        """The loop shape if ``item`` joins ``step``: the common prefix of the loop's and
        the item's shapes, when every item's remaining dims are small enough to unroll."""
        if step.shape == item.shape:
            return step.shape
        near = _near_shape(step, item)
        if near is not None:
            return near
        p = 0
        while p < min(len(step.shape), len(item.shape)) and step.shape[p] == item.shape[p]:
            p += 1
        if p == 0:
            return None
        shapes = [it.shape for it in step.items] + [item.shape]
        if all(_size(sh[p:]) <= UNROLL_MAX for sh in shapes):
            return step.shape[:p]
        return None

    def place(self, item: Item, steps: list, produced: dict) -> int:
        deps: list = []
        visits: list = []
        self.loop_shape, self.item_cuts = item.shape, []
        if item.kind == "reduce":
            self.walk(item.node.args[0], L.identity(len(item.shape)), deps, visits, set())
        else:
            self.walk(item.node, L.identity(len(item.shape)), deps, visits, set(),
                      top=item.produces is item.node)
        cost = 1 + sum(ew_cost(n) for n, _ in visits if self.kinds[id(n)] == "ew")
        chosen = None
        # no step before the latest producer of a dependency can take the item; between
        # it and the end, whole blocks of steps too full for the item are skipped (a long
        # chain's gradient items would otherwise look at every step: quadratic)
        latest = max((produced[id(n)] for n, _ in deps), default=-1)
        room = self.room.sync(steps)
        threshold = cone_limit(item.shape) - cost
        idx, lo = len(steps) - 1, max(latest, 0)
        while idx >= lo:
            if room.mins[idx // _Room.BLOCK] > threshold:    # no room in this block
                idx -= idx % _Room.BLOCK + 1
                continue
            st = steps[idx]
            shape = self.joined_shape(st, item) if room.key(st) <= threshold else None
            if shape is not None and (idx > latest or all(
                    produced[id(n)] < idx or (self.reusable(st, n, len(shape))
                                              and same_point(m, len(shape)))
                    for n, m in deps)):
                chosen = idx
                st.shape = shape
                break
            idx -= 1
        if chosen is None:
            steps.append(LoopStep(item.shape))
            chosen = len(steps) - 1
            room.sync(steps)
        steps[chosen].items.append(item)
        steps[chosen].cost += cost
        room.update(steps, chosen)
        cuts = steps[chosen].cuts
        cuts.update(self.item_cuts)
        segments = 1
        for k in {k for k, _ in cuts}:
            segments *= 1 + sum(1 for d, _ in cuts if d == k)
        if segments > MAX_SEGMENTS:                  # too much code: materialise windows
            self.failed.update(id(n) for n, _ in visits if self.kinds[id(n)] == "window")
        for n, m in visits:     # unrolled copies (constant components) are not recomputation
            key = tuple(a if a[1] else None for a in m)
            self.contexts.setdefault(id(n), set()).add((chosen, key))
        for n, m in deps:
            self.reads.setdefault(id(n), set()).add(chosen)
            if not same_point(m, len(steps[chosen].shape)):
                self.far_reads.add(id(n))
        return chosen

    def reusable(self, st: "LoopStep", n: Node, rank: int) -> bool:
        """Whether loop ``st`` of rank ``rank`` has root ``n`` in a register."""
        if id(n) in st.plain:
            return True
        return (self.kinds[id(n)] == "reduce" and inline_reduction(n, rank)
                and any(it.node is n for it in st.items))

    def refresh_plain(self, steps: list) -> None:
        """Reductions over unrolled dims only are complete inside one loop iteration:
        later items of the same loop may use them as registers."""
        for r, i in self.pending_reductions:
            if inline_reduction(r, len(steps[i].shape)):
                steps[i].plain.add(id(r))

    def assign(self) -> tuple[list, dict]:
        steps: list = []
        produced: dict[int, int] = {}
        self.pending_reductions: list = []
        for r in self.nodes:
            if id(r) not in self.roots_now:
                continue
            kind = self.kinds[id(r)]
            if kind in ("opaque", "numpy"):
                steps.append(NodeStep(r, kind))
                produced[id(r)] = len(steps) - 1
                for a in r.args:
                    b = _base(a, self.kinds, self.roots_now)
                    self.reads.setdefault(id(b), set()).add(len(steps) - 1)
                    if kind == "opaque":
                        self.strided(a)
                continue
            idx = [self.place(item, steps, produced) for item in self.items_of(r)]
            produced[id(r)] = max(idx)
            if r.op == "pad_slice" and window_ranges(r) is None:
                steps[idx[0]].fills.append(r)
            elif kind in ("ew", "view") or (kind == "window" and window_ranges(r) is not None):
                steps[idx[0]].plain.add(id(r))
            if kind == "reduce":
                self.pending_reductions.append((r, idx[0]))
            self.refresh_plain(steps)
        seen: set[int] = set()
        for j, o in enumerate(self.program.outputs):      # leaves and views: copy loops
            copied = id(o) in self.roots_now or _alias_target(o, self.kinds, self.roots_now,
                                                            self.program.outputs) is not None
            if not copied and id(o) not in seen:
                item = Item("store", o, L.StridedView.contiguous(("out", j), o.shape), None, o.shape)
                self.place(item, steps, produced)
            seen.add(id(o))
        return steps, produced

    def run(self) -> "Plan":
        for _ in range(100):
            self.roots_now = self.roots()
            self.failed: set[int] = set()
            self.contexts: dict[int, set] = {}
            self.reads: dict[int, set] = {}
            self.far_reads: set[int] = set()
            steps, produced = self.assign()
            extra = set(self.failed)
            for n in self.nodes:
                if (len(self.contexts.get(id(n), ())) > 1 and id(n) not in self.roots_now
                        and ew_cost(n) > RECOMPUTE_COST):
                    extra.add(id(n))
            if not extra - self.forced:
                break
            self.forced |= extra
        return _finish(self, steps, produced)


# ---- storage ----------------------------------------------------------------------------


def _finish(p: _Planner, steps: list, produced: dict) -> Plan:
    program, kinds, roots = p.program, p.kinds, p.roots_now
    storage: dict[int, Storage] = {}
    inputs = []
    for k, (n, name) in enumerate(zip(program.inputs, program.input_names)):
        st = Storage("in", k, n.dtype, n.shape, _ident(name))
        inputs.append(st)
        storage.setdefault(id(n), st)
    for n in p.nodes:
        if n.op == "const" and id(n) not in storage:
            storage[id(n)] = Storage("const", -1, n.dtype, n.shape, f"const{len(storage)}",
                                     n.attr("value").value)

    outputs: list[Storage] = []
    copies: list[CopyStep] = []
    first_slot: dict[int, Storage] = {}
    for j, o in enumerate(program.outputs):
        st = Storage("out", len(inputs) + j, o.dtype, o.shape, f"out{j}")
        outputs.append(st)
        target = _alias_target(o, kinds, roots, program.outputs)
        if id(o) in first_slot:                                    # the same node twice
            copies.append(CopyStep(st, first_slot[id(o)]))
            continue
        first_slot[id(o)] = st
        if target is not None and id(target) not in storage:      # computed straight into out j
            storage[id(target)] = Storage("out", st.slot, target.dtype, target.shape, f"out{j}")
        elif id(o) in roots:                                       # an output root
            storage[id(o)] = st
    steps.extend(copies)

    numpy_nodes = [st.node for st in steps if isinstance(st, NodeStep) and st.kind == "numpy"]
    segment_of = _segments(steps)
    externals = _externals(p, steps, produced, segment_of, storage, len(inputs), len(outputs))

    local = _loop_local(p, steps, produced, storage)
    for n in p.nodes:
        if id(n) in roots and id(n) not in storage and id(n) not in local:
            storage[id(n)] = Storage("temp", -1, n.dtype, n.shape, f"t{len(storage)}")
    _add_scratch(steps, storage)
    arena = _assign_arena(p, steps, produced, storage)
    plan = Plan(program, steps, kinds, roots, storage, inputs, outputs, externals, arena, {},
                numpy_nodes, [], local)
    _rebind_items(plan)
    plan.segments = _segment_lists(steps)
    return plan


def _ident(name: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in str(name)).strip("_")
    return out or "x"


def _alias_target(o: Node, kinds: dict, roots: set, outputs: list) -> Node | None:
    """The root an output reshape chain views contiguously (computed straight into the
    output), or None."""
    if kinds[id(o)] != "view":
        return None
    r = o
    while kinds[id(r)] == "view" and r.op == "reshape":
        r = r.args[0]
    if r is o or id(r) not in roots or kinds[id(r)] not in ("ew", "reduce", "opaque", "window"):
        return None
    if any(x is r for x in outputs):
        return None
    return r


def _segments(steps: list) -> list[int]:
    seg, out = 0, []
    for st in steps:
        if isinstance(st, NodeStep) and st.kind == "numpy":
            seg += 1
            out.append(-1)
        else:
            out.append(seg)
    return out


def _segment_lists(steps: list) -> list[list[int]]:
    lists: list[list[int]] = [[]]
    for i, st in enumerate(steps):
        if isinstance(st, NodeStep) and st.kind == "numpy":
            lists.append([])
        else:
            lists[-1].append(i)
    return lists


def _externals(p: _Planner, steps, produced, segment_of, storage, n_in, n_out) -> list[Storage]:
    """Roots crossing a numpy step live in caller-visible ``ext`` slots."""
    if not any(s == -1 for s in segment_of):
        return []
    ext: list[Storage] = []
    for n in p.nodes:
        if id(n) not in p.roots_now or id(n) in storage:
            continue
        at = produced.get(id(n))
        places = {segment_of[at]} | {segment_of[i] for i in p.reads.get(id(n), ())}
        if len(places) > 1 or -1 in places:
            st = Storage("ext", n_in + n_out + len(ext), n.dtype, n.shape, f"x{len(ext)}")
            storage[id(n)] = st
            ext.append(st)
    return ext


def _add_scratch(steps: list, storage: dict) -> None:
    count = 0
    for st in steps:
        if not isinstance(st, LoopStep):
            continue
        for item in st.items:
            r = item.node
            if item.kind != "reduce" or r.op not in ("sum", "mean") or not r.dtype.is_floating_point:
                continue
            if inline_reduction(r, len(st.shape)):
                continue
            count += 1
            if r.dtype.name == "float32":
                item.scratch["acc"] = Storage("temp", -1, dtypes.float64, r.shape, f"acc{count}")
            else:
                item.scratch["comp"] = Storage("temp", -1, dtypes.float64, r.shape, f"comp{count}")


def _assign_arena(p: _Planner, steps, produced, storage) -> int:
    """First-fit offsets for temporaries by live range [first write, last read]."""
    intervals: list[tuple[int, int, Storage]] = []
    first_write: dict[int, int] = {}            # window roots are written by several loops
    for i, step in enumerate(steps):
        if isinstance(step, LoopStep):
            for it in step.items:
                if it.produces is not None:
                    first_write.setdefault(id(it.produces), i)
    for n in p.nodes:
        st = storage.get(id(n))
        if st is None or st.kind != "temp":
            continue
        first = min(produced.get(id(n), 0), first_write.get(id(n), len(steps)))
        last = max(p.reads.get(id(n), {first}) | {first})
        intervals.append((first, last, st))
    for i, step in enumerate(steps):
        if isinstance(step, LoopStep):
            for item in step.items:
                for st in item.scratch.values():
                    intervals.append((i, i, st))
    # First fit over the holes between live blocks, in offset order.  Intervals come in
    # order of first step, so a block is free once its last step is before the current
    # first; holes stay few and coalesced, so placement is O(n log n) in temporaries.
    holes: list[list[int]] = []                # [start, end), sorted, coalesced
    ending: list[tuple[int, int, int]] = []    # heap of (last step, offset, end)
    top = 0
    for first, last, st in sorted(intervals, key=lambda t: (t[0], -t[2].nbytes)):
        while ending and ending[0][0] < first:
            _, o, e = heapq.heappop(ending)
            _free(holes, o, e)
        size = -(-max(st.nbytes, 1) // ARENA_ALIGN) * ARENA_ALIGN
        for k, hole in enumerate(holes):
            if hole[1] - hole[0] >= size or hole[1] == top:
                offset = hole[0]
                if hole[1] - hole[0] > size:
                    hole[0] += size
                else:
                    del holes[k]
                break
        else:
            offset = top
        st.slot = offset
        heapq.heappush(ending, (last, offset, offset + size))
        top = max(top, offset + size)
    return top


def _free(holes: list[list[int]], start: int, end: int) -> None:
    """Return [start, end) to the sorted, coalesced list of holes."""
    k = bisect.bisect_left(holes, [start, end])
    if k > 0 and holes[k - 1][1] == start:
        k -= 1
        holes[k][1] = end
    else:
        holes.insert(k, [start, end])
    if k + 1 < len(holes) and holes[k + 1][0] == holes[k][1]:
        holes[k][1] = holes.pop(k + 1)[1]


def _loop_local(p: _Planner, steps, produced, storage) -> set[int]:
    """Roots computed by one loop and read only by later items of that loop at the same
    point (registers): no storage, no store."""
    local: set[int] = set()
    for i, st in enumerate(steps):
        if not isinstance(st, LoopStep):
            continue
        for item in st.items:
            r = item.produces
            if (r is None or item.node is not r and item.kind == "store" or id(r) in storage
                    or id(r) in p.far_reads or p.reads.get(id(r), {i}) != {i}):
                continue
            if sum(1 for it in st.items if it.produces is r) != 1:
                continue
            if item.kind == "store" or (item.kind == "reduce" and inline_reduction(r, len(st.shape))):
                local.add(id(r))
    return local


def _rebind_items(plan: Plan) -> None:
    """Item targets were built over nodes; point them at Storage objects."""
    for st in plan.steps:
        if not isinstance(st, LoopStep):
            continue
        for item in st.items:
            buf = item.target.buffer
            if isinstance(buf, Node) and id(buf) in plan.local:
                item.target = None
                continue
            if isinstance(buf, Node):
                buf = plan.storage[id(buf)]
            elif isinstance(buf, tuple):                    # ("out", j): an output copy
                buf = plan.outputs[buf[1]]
            item.target = L.StridedView(buf, item.target.shape, item.target.strides,
                                        item.target.offset)


def build_plan(program) -> Plan:
    """Schedule ``program`` (see the module docstring)."""
    return _Planner(matvec_as_reduction(program)).run()
