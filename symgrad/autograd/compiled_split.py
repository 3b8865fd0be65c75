"""A compiled call's forward and backward as two programs, cut where the backward reads
forward values (the partition AOTAutograd makes for torch.compile).

One joint trace runs the function and, inside the same trace, its VJP with respect to
the tensors its outputs are differentiable in (placeholder cotangents). The VJP's nodes
that depend on a cotangent are the backward; the forward values they read are the
*residuals*. The forward program computes the outputs and the residuals (and performs the
call's state updates, and draws its random numbers, as the plain program does); the
backward program takes the call's arguments, the cotangents and the residuals, and
reads the tensors the function closes over (their versions are checked by the autograd
node). So a training step through ``compile(model)`` computes the forward once.

Used by :mod:`symgrad.autograd.compiled_function`; when a function cannot be split
(:class:`NotSplit`), the node recomputes the forward in its backward instead.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple
from dataclasses import replace

import numpy as np

from .. import dispatch
from ..compiler.dispatcher import Compiled
from ..compiler.trace import leaf_spec, replaying, trace
from ..compiler.transforms import make_aux
from ..functions.creation import zeros_like
from ..graph import pytree
from ..graph.node import Node, toposort
from ..graph.primitives import PRIMITIVES
from ..tensor import Tensor
from . import grad_mode
from .engine import grad as autograd_grad, without_leaf_hooks

__all__ = ["Split", "NotSplit", "Unsupported"]


class NotSplit(Exception):
    """The function's call cannot be split (its outputs are not all tensors, the trace
    created state, ...)."""


class Unsupported(RuntimeError):
    """The function's call cannot join autograd at all (raised to the caller)."""


def _replay_cut(outputs: list[Node], env: dict) -> list:
    """``outputs`` bound again on the tensors ``env`` gives for some nodes (by id), not
    looking past those nodes (unlike :func:`symgrad.compiler.replay.replay`: the backward
    program must not recompute what it is given)."""
    vals = dict(env)
    order = toposort(outputs, stop=vals)
    for node in order:
        if node.op == "const":
            vals[id(node)] = Tensor._from_array(node.attr("value").value, node.dtype)
        elif node.op == "input":
            raise NotSplit(f"an input of the joint trace is not given: {node}")
        else:
            vals[id(node)] = dispatch.bind(PRIMITIVES[node.op], *[vals[id(a)] for a in node.args],
                                           **dict(node.attrs))
    return [vals[id(o)] for o in outputs]


class _Joint:
    """The joint trace of a call and its VJP, and what the traced function recorded."""

    __slots__ = ("trace", "outs", "grads", "new_state", "drawn", "cts", "differentiable",
                 "unused", "written", "arg_writes")

    def __init__(self, fn, args_of, closure: list, scalars: list, specs: list, structure):
        recorded: dict = {}

        def joint(*flat):
            drawn = [Tensor._from_node(make_aux(f"drawn{k}", tuple(t.shape), t.dtype))
                     for k, (t, _) in enumerate(scalars)]
            # the arguments differentiated: those requiring grad as passed (an in-place
            # update inside the function may make another one require grad)
            wrt = closure + [v for v in flat if isinstance(v, Tensor) and v.requires_grad]
            before = [v._node if isinstance(v, Tensor) else None for v in flat]
            with grad_mode.enable_grad(), replaying(drawn):
                out = fn(*args_of(flat))
            for v, node in zip(flat, before):
                if isinstance(v, Tensor) and v._node is not node and v.requires_grad:
                    raise Unsupported(
                        "symgrad.compile: an argument updated in place with a value that "
                        "requires grad (x.mul_(y) with y requiring grad) is not supported "
                        "when the outputs are differentiated: return the new value instead")
            # (a number among the outputs: a tensor, as the plain program returns it)
            outs = [o if isinstance(o, Tensor) else Tensor._from_array(np.asarray(o))
                    for o in pytree.flatten(out)[0]]
            cts = [Tensor._from_node(make_aux(f"ct{k}", tuple(o.shape), o.dtype))
                   for k, o in enumerate(outs)]
            pairs = [(o, c) for o, c in zip(outs, cts) if o.requires_grad
                     and o.is_floating_point()]
            with without_leaf_hooks():    # (the eager engine runs them: once)
                got = (autograd_grad([o for o, _ in pairs], wrt, [c for _, c in pairs],
                                     allow_unused=True) if pairs else [None] * len(wrt))
            # an input no output depends on gets no gradient (None, as in torch: an
            # optimizer skips it), its program output a zero
            grads = [zeros_like(w) if g is None else g for g, w in zip(got, wrt)]
            recorded.update(drawn=[d._node for d in drawn], cts=[c._node for c in cts],
                            n_out=len(outs), n_grad=len(grads),
                            differentiable=[o.requires_grad for o in outs],
                            unused=[g is None for g in got])
            return tuple(outs) + tuple(grads)

        names = [f"arg{i}" for i in range(len(specs))]
        tr = trace(joint, tuple(specs), (), specs, structure, names)
        effects = tr.effects
        if effects is not None and (effects.trains or effects.one_shot or effects.scalars):
            raise NotSplit("the joint trace has effects other than state updates")
        n_out, n_grad = recorded["n_out"], recorded["n_grad"]
        self.trace = tr
        self.outs = tr.out_nodes[:n_out]
        self.grads = tr.out_nodes[n_out:n_out + n_grad]
        self.new_state = tr.out_nodes[n_out + n_grad:]   # (closure writes, then arguments')
        self.drawn, self.cts = recorded["drawn"], recorded["cts"]
        # which outputs carry a gradient (y.detach(), an output no input reaches: not)
        self.differentiable = recorded["differentiable"]
        # per differentiated input (closure first, then the arguments requiring grad):
        # whether no output depends on it (its gradient is None)
        self.unused = recorded["unused"]
        self.written = list(effects.writes) if effects is not None else []
        self.arg_writes = list(effects.arg_writes) if effects is not None else []


class _Cut:
    """Where the joint trace is cut: the forward values the backward program is given
    (``residuals``), the closed-over tensors it reads as they are then (``reads``: the
    autograd node saves them, so an in-place change before backward raises PyTorch's
    error), the arguments it reads (``args_read``), and the closed-over tensors it reads
    that the call does not write (``plain_closure``)."""

    __slots__ = ("residuals", "reads", "args_read", "plain_closure")

    def __init__(self, j: _Joint):
        tr = j.trace
        closure_nodes = {id(n): t for t, n in tr.closure}
        written_nodes = {id(n) for t, n in tr.closure if any(t is w for w in j.written)}
        written_nodes.update(id(tr.arg_nodes[i]) for i in j.arg_writes)
        arg_ids = {id(n) for n in tr.arg_nodes}
        # the backward: every node of the gradients that depends on a cotangent
        backward_ids = {id(c) for c in j.cts}
        order = toposort(j.grads)
        for node in order:
            if id(node) not in backward_ids and any(id(a) in backward_ids for a in node.args):
                backward_ids.add(id(node))
        residuals, seen, read, args_read = [], set(), {}, set()

        def needs(node):            # a forward value the backward program must be given
            if id(node) in backward_ids or id(node) in seen or node.op == "const":
                return False
            if id(node) in arg_ids and id(node) not in written_nodes:
                args_read.add(id(node))
                return False        # (the call's arguments: given as they are)
            if id(node) in closure_nodes and id(node) not in written_nodes:
                read[id(node)] = closure_nodes[id(node)]
                return False        # (read by the backward program: versions checked)
            leaves = _buffer_cone(node, closure_nodes, arg_ids, written_nodes)
            if leaves is not None:  # recomputed from the buffer as it is at backward
                for leaf in leaves:
                    if id(leaf) in closure_nodes:
                        read[id(leaf)] = closure_nodes[id(leaf)]
                    else:
                        args_read.add(id(leaf))
                return False
            return True
        for node in order:
            if id(node) in backward_ids:
                for a in node.args:
                    if needs(a):
                        residuals.append(a)
                        seen.add(id(a))
        for g in j.grads:           # (a gradient no cotangent reaches: zero, or constant)
            if needs(g):
                residuals.append(g)
                seen.add(id(g))
        self.residuals = residuals
        self.reads = list(read.values())
        # the arguments (flat positions) the backward program reads: saved, version
        # checked; an argument it does not read may change before backward (as in torch)
        self.args_read = frozenset(i for i, n in enumerate(tr.arg_nodes) if id(n) in args_read)
        self.plain_closure = [(t, n) for t, n in tr.closure if id(n) not in written_nodes]


_RECOMPUTED_LAYOUT = frozenset({"reshape", "expand", "permute", "cast", "slice"})


def _buffer_cone(node: Node, closure_nodes: dict, arg_ids: set, written: set) -> list | None:
    """The leaves (closed-over tensors, arguments) of ``node`` when it is computed from
    them and constants by elementwise and layout operations only (cheap to recompute)
    and one of them is a closed-over tensor that requires no grad -- a buffer PyTorch's
    kernels read when the backward runs, as an eval BatchNorm reads its running_var
    (updated since by a training step, without a version bump): the backward program
    recomputes it from the buffer as it is then. Else None."""
    leaves, seen, stack, buffer = [], set(), [node], False
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if id(n) in closure_nodes or id(n) in arg_ids:
            if id(n) in written:
                return None
            leaves.append(n)
            t = closure_nodes.get(id(n))
            buffer = buffer or (t is not None and not t.requires_grad)
        elif n.op == "const":
            continue
        elif n.op in PRIMITIVES and (PRIMITIVES[n.op].kind == "elementwise" or
                                     n.op in _RECOMPUTED_LAYOUT) and n.args:
            stack.extend(n.args)
        else:
            return None
    return leaves if buffer else None


def _at_traced_shape(getter):
    """``getter`` without its ``at_shape``: the joint trace's draws have its shapes, so
    split programs that draw are compiled per size (never a draw of one size replayed
    into a trace at another)."""
    def get():
        return getter()
    get.draws = getattr(getter, "draws", True)
    return get


def _forward_function(split: "Split", scalars: list):
    """The forward program's function: outputs and residuals from the arguments, the
    call's state writes performed, its random numbers drawn -- the joint trace at the
    arguments' shapes, cut."""
    def forward(*flat):
        j, cut = split.at(_shapes(flat))
        arg_nodes, drawn_nodes, all_closure = j.trace.arg_nodes, j.drawn, j.trace.closure
        outs, new_state, residuals = j.outs, j.new_state, cut.residuals
        written, arg_writes, n_out = j.written, j.arg_writes, len(j.outs)
        tracer = dispatch._lifter[0]
        env = {id(n): v for n, v in zip(arg_nodes, flat)}
        for (t, getter), node in zip(scalars, drawn_nodes):
            env[id(node)] = tracer.runtime_value(_at_traced_shape(getter), t.dtype, "drawn")
        env.update((id(n), t) for t, n in all_closure)
        vals = _replay_cut(outs + new_state + residuals, env)
        state = vals[n_out:n_out + len(new_state)]
        with grad_mode.no_grad():       # (this program's state effects, as the call's)
            for t, v in zip(written + [flat[i] for i in arg_writes], state):
                t.copy_(v)
        return tuple(vals[:n_out]), tuple(vals[n_out + len(new_state):])
    return forward


def _backward_function(split: "Split"):
    """The backward program's function: the gradients from the arguments, the
    cotangents and the residuals (reading the closed-over tensors the call does not
    write)."""
    def backward(*a):
        flat, cts, res = a[:-2], a[-2], a[-1]
        j, cut = split.at(_shapes(flat))
        arg_nodes, ct_nodes, grads = j.trace.arg_nodes, j.cts, j.grads
        residuals, plain_closure = cut.residuals, cut.plain_closure
        env = {id(n): v for n, v in zip(arg_nodes, flat)}
        env.update((id(n), c) for n, c in zip(ct_nodes, cts))
        env.update((id(n), r) for n, r in zip(residuals, res))
        env.update((id(n), t) for t, n in plain_closure)
        return tuple(_replay_cut(grads, env))
    return backward


class Facts(NamedTuple):
    """What a call through a split needs besides its programs' results."""
    reads: list                  # the closed-over tensors the backward reads (saved)
    args_read: frozenset         # the arguments it reads (flat positions: saved)
    differentiable: list         # per output: whether it carries a gradient
    unused: list                 # per differentiated input: no output depends on it


def _shapes(flat) -> tuple:
    return tuple(tuple(np.shape(v)) for v in flat)


_CUTS_KEPT = 8       # joint traces kept per split (each holds its graph's nodes)


class Split:
    """The forward and backward programs of one cache entry (see the module docstring).

    One split serves every argument shape: its programs trace the joint function at the
    shapes they are called with (:meth:`at`), so they are compiled functions like any
    other -- a batch size that changes becomes a dynamic size of both programs (one
    kernel each for every size, :mod:`symgrad.compiler.dynamic`), where the function's
    trace allows it."""

    def __init__(self, fn, args_of, closure: list, scalars: list, leaves: list, backend):
        self._fn, self._args_of, self._closure, self._scalars = fn, args_of, closure, scalars
        # what the joint trace takes of the arguments besides their shapes (kinds, dtypes,
        # requires_grad: they key the cache entry this split belongs to)
        self._specs = [leaf_spec(v, f"arg{i}") for i, v in enumerate(leaves)]
        self._structure = pytree.flatten(tuple(leaves))[1]
        self._cuts: OrderedDict = OrderedDict()      # shapes -> (_Joint, _Cut)
        self._facts: dict = {}       # shapes -> Facts (small: kept)
        self.at(_shapes(leaves))     # (raises NotSplit / Unsupported now, not in a program)
        forward, backward = _forward_function(self, scalars), _backward_function(self)
        name = getattr(fn, "__name__", type(fn).__name__)
        forward.__name__, backward.__name__ = f"{name}_forward", f"{name}_backward"
        self.forward_program = Compiled(forward, (), backend)
        self.forward_program.bridged = False
        self.forward_program.eager_when_aliased = False   # (the call checked)
        self.forward_program.reruns_eagerly = False   # (Bridge.run reruns the function)
        self.backward_program = Compiled(backward, (), backend)
        self.backward_program.bridged = False
        self.proven: set = set()     # (shapes both programs ran at: later errors are real)

    def at(self, shapes: tuple) -> tuple[_Joint, _Cut]:
        """The joint trace at these argument shapes, and where it is cut."""
        got = self._cuts.get(shapes)
        if got is not None:
            self._cuts.move_to_end(shapes)
            return got
        specs = [replace(s, shape=shape) for s, shape in zip(self._specs, shapes)]
        j = _Joint(self._fn, self._args_of, self._closure, self._scalars, specs,
                   self._structure)
        got = self._cuts[shapes] = (j, _Cut(j))
        self._facts[shapes] = Facts(got[1].reads, got[1].args_read, j.differentiable,
                                    j.unused)
        while len(self._cuts) > _CUTS_KEPT:
            self._cuts.popitem(last=False)
        return got

    def facts(self, shapes: tuple) -> "Facts":
        """What the autograd node needs to know of the split at these shapes."""
        if shapes not in self._facts:
            self.at(shapes)
        return self._facts[shapes]

    def forward(self, leaves) -> tuple[list, tuple]:
        outs, residuals = self.forward_program(*leaves)
        return list(outs), tuple(residuals)

    def backward(self, leaves, cotangents: tuple, residuals: tuple) -> tuple:
        return self.backward_program(*leaves, cotangents, residuals)
