"""The storage of a schedule: inputs and outputs as the caller's buffers (an output
root computed straight into its array, also through a reshape), constants, ``ext`` slots
for roots crossing a numpy step in a hybrid executable, roots that live only in
registers of their loop, reduction scratch, and the arena of temporaries (first-fit
offsets by live range). Turns a :class:`~codegen.schedule.Planner`'s steps into the
:class:`~codegen.steps.Plan`."""
from __future__ import annotations

import bisect
import heapq

from symgrad.graph import dtypes
from symgrad.graph.node import Node
from symgrad.graph.primitives import family_of

from . import layout as L
from .schedule import Planner, alias_target
from .steps import (FALLIBLE_FAMILY, CopyStep, LoopStep, NodeStep, Plan, Storage, ident,
                    inline_reduction)

__all__ = ["allocate", "ARENA_ALIGN"]

ARENA_ALIGN = 64


def allocate(p: Planner, steps: list, produced: dict) -> Plan:
    program, kinds, roots = p.program, p.kinds, p.roots_now
    storage: dict[int, Storage] = {}
    inputs = []
    for k, (n, name) in enumerate(zip(program.inputs, program.input_names)):
        st = Storage("in", k, n.dtype, n.shape, ident(name))
        inputs.append(st)
        storage.setdefault(id(n), st)
    for n in p.nodes:
        if n.op == "const" and id(n) not in storage:
            storage[id(n)] = Storage("const", -1, n.dtype, n.shape, f"const{len(storage)}",
                                     n.attr("value").value)

    outputs: list[Storage] = []
    copies: list[CopyStep] = []
    first_slot: dict[int, Storage] = {}
    donated = donations(p, steps, produced)
    for j, o in enumerate(program.outputs):
        st = Storage("out", len(inputs) + j, o.dtype, o.shape, f"out{j}")
        outputs.append(st)
        target = alias_target(o, kinds, roots, program.outputs)
        if id(o) in first_slot:                                    # the same node twice
            copies.append(CopyStep(st, first_slot[id(o)]))
            continue
        first_slot[id(o)] = st
        if j in donated:                                           # computed into its input
            storage[id(o)] = first_slot[id(o)] = inputs[donated[j]]
        elif target is not None and id(target) not in storage:    # computed straight into out j
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
                numpy_nodes, [], local, donated=donated)
    _rebind_items(plan)
    plan.segments = _segment_lists(steps)
    return plan


def donations(p: Planner, steps: list, produced: dict) -> dict[int, int]:
    """Which of the program's requested donations (``Program.donated``: output j is
    input k's new value) the kernel computes straight into input k's buffer, as
    {j: k}.  Output j is then the input array itself, written in place -- safe only
    where no read of input k can see the new value: j is an elementwise root stored by
    one loop item, every other step reading input k comes before that loop (not the
    product right before it, which may run fused with it by row chunks), the loop reads
    input k only at each item's own element and in items up to the storing one, and
    no step that can fail (an index out of range) runs after the write, so a failed
    call leaves the state as it was.  Hybrid plans (numpy steps) donate nothing."""
    program, kinds, roots = p.program, p.kinds, p.roots_now
    wanted = dict(getattr(program, "donated", ()))
    if not wanted or any(isinstance(st, NodeStep) and st.kind == "numpy" for st in steps):
        return {}
    fallible = [i for i, st in enumerate(steps)
                if isinstance(st, NodeStep) and family_of(st.node.op) == FALLIBLE_FAMILY]
    last_fallible = max(fallible, default=-1)
    counts: dict[int, int] = {}
    for o in program.outputs:
        counts[id(o)] = counts.get(id(o), 0) + 1
    accepted: dict[int, int] = {}
    for j, k in sorted(wanted.items()):
        o, leaf = program.outputs[j], program.inputs[k]
        if (counts[id(o)] != 1 or id(o) not in roots or kinds[id(o)] != "ew"
                or o.shape != leaf.shape or o.dtype != leaf.dtype
                or alias_target(o, kinds, roots, program.outputs) is not None
                or any(out is leaf for out in program.outputs)):
            continue
        w = produced.get(id(o))
        step = steps[w] if w is not None else None
        if not isinstance(step, LoopStep) or w < last_fallible:
            continue
        writers = [q for q, it in enumerate(step.items) if it.produces is o]
        if len(writers) != 1 or step.items[writers[0]].node is not o:
            continue
        before = p.reads.get(id(leaf), set()) | p.leaf_reads.get(id(leaf), set())
        if any(i > w for i in before):
            continue
        if w > 0 and (w - 1) in before and isinstance(steps[w - 1], NodeStep):
            continue
        if w in before and ((id(leaf), w) in p.off_point
                            or p.last_reader.get((id(leaf), w), -1) > writers[0]):
            continue
        accepted[j] = k
    return accepted


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


def _externals(p: Planner, steps, produced, segment_of, storage, n_in, n_out) -> list[Storage]:
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


def _assign_arena(p: Planner, steps, produced, storage) -> int:
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


def _loop_local(p: Planner, steps, produced, storage) -> set[int]:
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
