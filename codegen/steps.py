"""The records of a schedule (:class:`Plan`): buffers (:class:`Storage`), the steps
(:class:`LoopStep` with its :class:`Item` s, :class:`NodeStep`, :class:`CopyStep`), and
what the lowering asks of a plan (a node's strided view of its storage, a shifted alias
of a buffer, names as the program text gives them, a summary); with the loop-geometry
predicates the scheduler and the loop lowering share (:func:`same_point`,
:func:`inline_reduction`). :mod:`codegen.schedule` fills the steps,
:mod:`codegen.buffers` the storage; :mod:`codegen.plan` runs both."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from symgrad.graph.dtypes import DType
from symgrad.graph.node import Node

from . import layout as L
from .classify import const_scalar, numpy_reason

__all__ = ["Plan", "Storage", "Item", "LoopStep", "NodeStep", "CopyStep", "strided_view",
           "ident", "same_point", "reduced_axes", "inline_reduction"]

# the family of opaque primitives whose kernels can fail at run time (an index out of range)
FALLIBLE_FAMILY = "index"


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
    donated: dict = field(default_factory=dict)   # output j -> input k it is written into

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
            self.views[key] = strided_view(node, self.kinds, self.roots, self.storage.get, set())
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


def strided_view(node: Node, kinds: dict, roots: set, storage_of, failed: set) -> L.StridedView | None:
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
    base = strided_view(arg, kinds, roots, storage_of, failed)
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


def _text_names(program) -> dict[int, str]:
    """Names as ``Program.as_text`` assigns them (inputs by name, then a, b, ..., z, aa)."""
    names = {id(n): ident(nm) for n, nm in zip(program.inputs, program.input_names)}
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


def ident(name: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in str(name)).strip("_")
    return out or "x"



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
