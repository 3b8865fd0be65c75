"""Tracing a Python function into a :class:`~symgrad.graph.body.Body` -- the sub-program
of a loop, or the one example :func:`symgrad.vmap` batches: stand-in tensors for its
arguments, and every tensor it uses from outside (an outer eager tensor, an outer traced
value, an enclosing body's value) captured as an extra input, with the tensor kept so the
caller can pass it as an operand (autograd history included)."""
from __future__ import annotations

from .. import dispatch
from ..graph import pytree
from ..graph.body import Body
from ..graph.node import const, make_node, toposort
from ..ops import loops as L
from ..tensor import Tensor, next_birth
from .creation import as_tensor
from .shape import INPUT_STRIDES

__all__ = ["Capture", "trace_body", "node_of", "finish_body"]


class Capture:
    """The lifter active while a body is traced: tensors that existed before the body
    (outer eager tensors, outer traced values, an enclosing body's values) become inputs
    of the body -- and operands of the loop node, with their autograd history; tensors
    made inside the body from constants are constants."""

    captures_traced = True
    gates = False

    def __init__(self, level: int, first: int):
        self.start = next_birth()
        self.level = level
        self.first = first
        self.captured: dict[int, tuple[Tensor, object]] = {}

    def is_outer(self, t: Tensor) -> bool:
        return t._birth < self.start

    def __call__(self, t: Tensor):
        hit = self.captured.get(id(t))
        if hit is not None:
            return hit[1]
        if not self.is_outer(t):
            return const(t._data, t.dtype)
        k = len(self.captured)
        node = L.body_input(self.level, self.first + k, f"k{k}", t.shape, t.dtype)
        self.captured[id(t)] = (t, node)
        return node

    # the outer tracer's protocol (see compiler.trace.Tracer), for backward() in a body
    def backup_grad(self, leaf, accumulates: bool = False) -> None:
        parent = self.parent
        if parent is not None:
            parent.backup_grad(leaf, accumulates)

    parent = None

    def numpy_input(self, arr):
        """A numpy array the traced function reaches (see :func:`symgrad.tracing.numpy_read`),
        read in the body: the enclosing trace's input for it, captured like any outer
        tensor (None: a constant)."""
        hook = getattr(self.parent, "numpy_input", None)
        t = None if hook is None else hook(arr)
        if t is not None and id(t) not in self.captured:
            k = len(self.captured)
            node = L.body_input(self.level, self.first + k, f"k{k}", t.shape, t.dtype)
            self.captured[id(t)] = (t, node)
        return t

    @property
    def hooked(self) -> bool:
        return self.parent is not None and self.parent.hooked

    @hooked.setter
    def hooked(self, value: bool) -> None:
        if self.parent is not None:
            self.parent.hooked = value


def trace_body(fn, args_structs, args_avals, names, capture=Capture, strides=None):
    """Trace ``fn`` once on stand-ins: returns (input nodes, the result, capture).
    ``args_structs`` / ``args_avals``: each argument's pytree structure and leaf avals;
    ``names``: the prefix of each argument's input names; ``capture``: the lifter's class
    (called with the level and the first captured input's index); ``strides``: per leaf,
    its stand-in's layout when not C-contiguous (else None)."""
    level = L.next_level()
    cap = capture(level, 0)         # first: the stand-ins below are the body's own
    inputs, args = [], []
    for struct, avals, prefix in zip(args_structs, args_avals, names):
        stand = []
        for j, (shape, dt) in enumerate(avals):
            node = L.body_input(level, len(inputs), f"{prefix}{j}", shape, dt)
            if strides is not None and strides[len(inputs)] is not None:
                INPUT_STRIDES[node] = strides[len(inputs)]
            inputs.append(node)
            stand.append(Tensor._from_node(node))
        args.append(pytree.unflatten(struct, stand))
    cap.first = len(inputs)
    cap.parent = dispatch._lifter[0]
    prev = dispatch.set_lifter(cap)
    try:
        with L.tracing_level(level):
            result = fn(*args)
    finally:
        dispatch.set_lifter(prev)
    return inputs, result, cap


def node_of(v, cap: Capture):
    if isinstance(v, Tensor):
        if v._node is not None and not cap.is_outer(v):
            return v._node
        return cap(v)
    t = as_tensor(v)
    return const(t._data, t.dtype)


def finish_body(inputs, out_nodes, cap: Capture):
    """The Body, and the operand tensors of its closed-over values (captured tensors,
    then outer nodes that leaked into the body through a direct use of ``_node``)."""
    closures = [t for t, _ in cap.captured.values()]
    inputs = inputs + [n for _, n in cap.captured.values()]
    inputs, out_nodes, leaked = _cut_leaks(inputs, out_nodes, cap)
    closures += [Tensor._from_node(n) for n in leaked]
    return Body(inputs, out_nodes), closures


def _cut_leaks(inputs, outputs, cap):
    """Nodes of the body that do not depend on its inputs but on an input of some other
    program become inputs (the loop passes them in): a body reads only its own inputs."""
    own = {id(n) for n in inputs}
    order = toposort(outputs)
    foreign: set[int] = set()      # depends on an input that is not the body's
    mine: set[int] = set(own)      # depends on the body's inputs
    for n in order:
        if n.op == "input" and id(n) not in own:
            foreign.add(id(n))
        for a in n.args:
            if id(a) in mine:
                mine.add(id(n))
            if id(a) in foreign:
                foreign.add(id(n))
    cut = {id(n) for n in order if id(n) in foreign and id(n) not in mine}
    if not cut:
        return inputs, outputs, []
    leaked, memo = [], {}
    level = inputs[0].attr("slot")[1] if inputs else L.next_level()
    for n in order:
        if id(n) in cut:
            k = len(inputs) + len(leaked)
            memo[id(n)] = L.body_input(level, k, f"k{k - cap.first}", n.shape, n.dtype)
            leaked.append(n)
        elif n.args:
            args = tuple(memo[id(a)] for a in n.args)
            memo[id(n)] = n if all(a is b for a, b in zip(args, n.args)) else \
                make_node(n.op, args, n.attrs, n.shape, n.dtype)
        else:
            memo[id(n)] = n
    new_inputs = inputs + [memo[id(n)] for n in leaked]
    return new_inputs, [memo[id(o)] for o in outputs], leaked
