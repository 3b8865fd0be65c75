"""Scheduling a program: which nodes get storage of their own (*roots*) and which step
computes each of them -- loop nests of fused items in topological order, opaque and numpy
steps -- with the bounds that keep loops compilable (formula cost per loop body,
recomputation of expensive nodes, unrolled trailing dims). The records are
:mod:`codegen.steps`; :mod:`codegen.buffers` places the storage afterwards."""
from __future__ import annotations

import math

from symgrad.graph.node import Node

from . import layout as L
from .classify import ew_cost, kind_of
from .steps import Item, LoopStep, NodeStep, inline_reduction, same_point, strided_view
from .windows import MAX_SEGMENTS, translated_arg_maps, window_cuts, window_ranges

__all__ = ["Planner", "RECOMPUTE_COST", "CONE_COST", "cone_limit", "UNROLL_MAX",
           "alias_target"]

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


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


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



class Planner:
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
        return strided_view(node, self.kinds, self.roots_now, lambda i: None, self.failed)

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
            self.leaf_deps.append((node, m))
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
                    self.leaf_deps.append((view.buffer, None))
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
        self.loop_shape, self.item_cuts, self.leaf_deps = item.shape, [], []
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
        position = len(steps[chosen].items) - 1
        for n, m in self.leaf_deps:        # (what writing a donated input must follow)
            self.leaf_reads.setdefault(id(n), set()).add(chosen)
            self.last_reader[(id(n), chosen)] = position
            if m is None or len(m) != len(item.shape) or m != L.identity(len(m)):
                self.off_point.add((id(n), chosen))
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
            copied = id(o) in self.roots_now or alias_target(o, self.kinds, self.roots_now,
                                                            self.program.outputs) is not None
            if not copied and id(o) not in seen:
                item = Item("store", o, L.StridedView.contiguous(("out", j), o.shape), None, o.shape)
                self.place(item, steps, produced)
            seen.add(id(o))
        return steps, produced

    def run(self) -> tuple[list, dict]:
        """The steps, and the index of the step producing each root (by node id);
        materialises more nodes and starts over until every loop is well formed."""
        for _ in range(100):
            self.roots_now = self.roots()
            self.failed: set[int] = set()
            self.contexts: dict[int, set] = {}
            self.reads: dict[int, set] = {}
            self.far_reads: set[int] = set()
            # leaves read by loops: the loops; (leaf, loop) read at another element than
            # the item's own index; (leaf, loop) -> the last item reading it
            self.leaf_reads: dict[int, set] = {}
            self.off_point: set[tuple[int, int]] = set()
            self.last_reader: dict[tuple[int, int], int] = {}
            steps, produced = self.assign()
            extra = set(self.failed)
            for n in self.nodes:
                if (len(self.contexts.get(id(n), ())) > 1 and id(n) not in self.roots_now
                        and ew_cost(n) > RECOMPUTE_COST):
                    extra.add(id(n))
            if not extra - self.forced:
                break
            self.forced |= extra
        return steps, produced


def alias_target(o: Node, kinds: dict, roots: set, outputs: list) -> Node | None:
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
