"""Tracing: running a Python function on symbolic tensors to get its graph.

Arguments become ``input`` nodes; tensors the function closes over (model parameters)
that existed before tracing began become inputs too — so updating them in place changes
results without recompiling — while tensors created during tracing are constants.

What the function does to the world besides returning values -- in-place updates of
those tensors, ``.grad`` assignments, the Python values its control flow read -- is
recorded by the :class:`Tracer` and becomes the program's
:class:`~symgrad.compiler.effects.Effects`.
"""
from __future__ import annotations

import contextlib
import inspect
import threading
import weakref
from dataclasses import dataclass, field

import numpy as np

from .. import dispatch

from ..graph import dtypes
from ..graph.node import Node, const, make_node, stop_gradient_node, toposort
from ..functions.inplace import view_positions
from ..functions.random import probing
from ..ops import lax
from ..graph.primitives import PRIMITIVES as P
from ..tensor import Tensor, next_birth
from ..graph import pytree
from ..errors import TracerBoolError
from ..autograd.grad_mode import _state as _grad_state
from ..tracing import GraphBreak
from . import sources
from .breaks import OutputEffects, Snapshot
from .effects import Effects, collect
from .sources import Guards

__all__ = ["memory_root", "Tracer", "TraceResult", "trace", "Untraceable", "Leaf", "leaf_spec", "foreign_array",
           "replaying"]

_replay = threading.local()


@contextlib.contextmanager
def replaying(values):
    """Inside, a trace's runtime values (:meth:`Tracer.runtime_value`: random draws, a
    scheduler's learning rate) are ``values`` in turn -- traced tensors -- instead of
    inputs read per call: a program recomputing a forward call (the VJP of a compiled
    function's outputs) uses the numbers that call used."""
    prev = getattr(_replay, "values", None)
    _replay.values = iter(values)
    try:
        yield
    finally:
        _replay.values = prev


class Untraceable(Exception):
    """A ``breaks`` trace stopped on its ``__cause__``, after which the call must run as
    written: a traced value read in Python (``if loss > 0:``), or any error once the trace
    recorded updates of state -- the eager call makes those before it fails (BatchNorm's
    ``num_batches_tracked += 1`` before "Expected more than 1 value per channel"), as
    PyTorch's does."""


@dataclass(frozen=True)
class Leaf:
    """The abstract value of one argument leaf: what the cache key is made of."""

    kind: str                 # "tensor" | "ndarray" | "scalar" | "number"
    shape: tuple
    dtype: dtypes.DType
    requires_grad: bool

    def describe(self) -> str:
        rg = ", requires_grad" if self.requires_grad else ""
        return f"{self.kind} {self.dtype.name}{list(self.shape)}{rg}"


def leaf_spec(value, name: str) -> Leaf:
    if isinstance(value, Tensor):
        if value._data is None:
            raise TypeError(f"argument {name}: a traced tensor cannot be passed to a compiled "
                            "function from inside another trace; call the Python function "
                            "directly")
        return Leaf("tensor", tuple(value.shape), value.dtype, value.requires_grad)
    if isinstance(value, np.ndarray):
        return Leaf("ndarray", value.shape, dtypes.from_numpy_dtype(value.dtype), False)
    if hasattr(value, "__dlpack__"):             # a torch tensor, a jax array, ...
        arr = foreign_array(value)
        return Leaf("ndarray", arr.shape, dtypes.from_numpy_dtype(arr.dtype), False)
    if isinstance(value, np.generic) and isinstance(value, (np.bool_, np.integer,
                                                            np.floating)):
        # a numpy scalar: a 0-d array of its dtype (as torch.compile's and jax.jit's)
        return Leaf("scalar", (), dtypes.from_numpy_dtype(value.dtype), False)
    # a Python number: PyTorch's wrapped number (see trace: promotes as a Python scalar)
    if isinstance(value, bool):
        return Leaf("number", (), dtypes.bool_, False)
    if isinstance(value, int):
        return Leaf("number", (), dtypes.int64, False)
    if isinstance(value, float):
        return Leaf("number", (), dtypes.float64, False)
    raise TypeError(f"argument {name}: expected a Tensor, numpy array or Python number, got "
                    f"{type(value).__name__} (pass non-numeric arguments through "
                    "static_argnums)")


def foreign_array(value) -> np.ndarray:
    """Another library's CPU array as a numpy array sharing its memory (DLPack): a torch
    tensor (detached: arguments are data), a jax array, a cupy array on the host..."""
    if hasattr(value, "detach"):
        value = value.detach()
    try:
        return np.from_dlpack(value)
    except (TypeError, RuntimeError, BufferError, ValueError) as exc:
        raise TypeError(f"cannot read a {type(value).__module__}.{type(value).__name__} as "
                        f"a CPU array: {exc}") from None


class Tracer:
    """The active trace: lifts outer eager tensors to input nodes (see dispatch.bind)."""

    captures_traced = False      # outer traced values keep their nodes (a loop body's do not)
    gates = False                # operands are not rewritten by bind (a traced branch's are)
    hooked = False               # a tensor hook was registered on a traced tensor
    arg_stand_ins = frozenset()  # ids of the stand-ins of arguments requiring grad
    arrays_constant = False      # numpy arrays read are constants guarded by content
    breaks = False               # a Python effect stops the trace (symgrad.tracing.GraphBreak)

    def __init__(self, fn, given: int = 0):
        self.start = next_birth()       # tensors born before this are "outer"
        self.lifted: dict[object, tuple[Tensor, Node]] = {}   # storage id (or ("leaf", id))
        # where fn finds the tensors it closes over (called with ``given`` positional
        # arguments: the defaults of those it does not read)
        self.sources = sources.find(fn, given=given)
        self._grad_backup: dict[int, tuple[Tensor, object]] = {}
        self.writes: dict[int, tuple[Tensor, Node]] = {}   # eager tensor -> its new value
        self.adopted: set[int] = set()     # tensors made here that are state (see adopt)
        self.guards: list = []             # (description, getter, value read, version)
        self.scalars: list = []            # (input tensor fed per call, getter)
        self.one_shot = False              # the trace created state: run it once, uncached
        self._keep: list = []              # keeps ids of adopted tensors unique
        self.views: dict[object, weakref.WeakSet] = {}   # storage id -> traced views of it
        self._roots: dict[int, dict] = {}  # id of a memory owner -> {storage id: tensor}
        self._bumped: list = []            # version counters the trace's writes bumped
        self._arrays: dict = {}            # id of a numpy array read -> its input tensor

    def backup_grad(self, leaf: Tensor, accumulates: bool = False) -> None:
        """Remember an eager leaf's .grad before backward() or zero_grad() inside the
        trace changes it. ``accumulates``: backward() adds to it, so the program depends
        on whether the .grad it found was None (when nothing in the trace set it first)."""
        if id(leaf) in self._grad_backup:
            return
        self._grad_backup[id(leaf)] = (leaf, leaf._grad)
        if accumulates and leaf._grad is None:
            self.guard("whether a .grad is None", lambda: leaf._grad is None, True)

    def restore_grads(self) -> None:
        """Put back the ``.grad`` and the versions of state the trace changed."""
        for leaf, grad in self._grad_backup.values():
            leaf._grad = grad
        for vc in self._bumped:
            vc[0] -= 1
        self._bumped.clear()

    def is_outer(self, t: Tensor) -> bool:
        """Whether t is an input of the program (born before tracing began -- an alias
        such as ``p.data`` is as old as its storage --, or state adopted during it), or
        was updated in place with a traced value."""
        return t._birth < self.start or _key(t) in self.writes or _key(t) in self.adopted

    def __call__(self, t: Tensor) -> Node:
        key = _key(t)
        hit = self.writes.get(key)
        if hit is not None:
            return hit[1]
        base = t._base
        if base is not None and base._data is not None and _key(base) in self.writes:
            return self._view_of_written(t, self.writes[_key(base)][1])
        hit = self.lifted.get(key)
        if hit is not None and t._requires_grad and hit[0] is not t \
                and hit[0]._requires_grad:
            # another leaf sharing the storage (``q = p.detach().requires_grad_()``): its
            # own input, so that each gets its own gradient, as PyTorch's
            own = self.lifted.get(("leaf", id(t)))
            if own is not None:
                return own[1]
            src = self.sources.get(id(t))
            return self._lift(t, src.name if src is not None else f"closure{len(self.lifted)}",
                              ("leaf", id(t)))
        if hit is not None:
            if t._requires_grad and not hit[0]._requires_grad:
                # first read through a non-differentiable alias (``p.detach()``,
                # ``p.data``: softmax's max shift): the program's input is ``p``, whose
                # gradient the tape gives (reads of the alias are not on it)
                self.lifted[key] = (t, hit[1])
            return hit[1]
        if t._birth >= self.start and key not in self.adopted:
            return const(t._data, t.dtype)
        src = self.sources.get(id(t))
        node = self._lift(t, src.name if src is not None else f"closure{len(self.lifted)}")
        if self.writes:                 # memory another written storage shares (an offset
            now = overlaid(t._data, node, self._overlapping(t._data))   # view of it)
            if now is not node:
                self.writes[key] = (t, now)
                return now
        return node

    def sharing(self, a: np.ndarray) -> list:
        """The tensors the trace read or wrote whose storage is another array than ``a``
        over memory ``a`` shares (offset / strided views of one buffer)."""
        members = self._roots.get(id(memory_root(a)))
        if members is None or len(members) < 2:
            return []
        return [t for t in members.values() if t._data is not a and t._data is not None
                and np.may_share_memory(t._data, a)]

    def _overlapping(self, a: np.ndarray) -> list:
        """(array, current node) of the written storages sharing memory with array ``a``."""
        found = []
        for t in self.sharing(a):
            hit = self.writes.get(_key(t))
            if hit is not None:
                found.append((t._data, hit[1]))
        return found

    @staticmethod
    def _view_of_written(view: Tensor, base_node: Node) -> Node:
        """An eager view read after the trace updated its base in place: its elements of
        the base's new value (as PyTorch's view sees its base's update)."""
        pos = Tensor._from_array(view_positions(view).reshape(-1), dtypes.int64)
        flat = lax.reshape(Tensor._from_node(base_node), (int(np.prod(base_node.shape)),))
        return lax.reshape(lax.take(flat, pos, 0), tuple(view.shape))._node

    def _member(self, t: Tensor) -> None:
        """Index eager tensor t's storage by the object owning its memory."""
        if t._data is not None:
            root = memory_root(t._data)
            self._roots.setdefault(id(root), {})[id(t._data)] = t
            self._keep.append(root)

    def note_view(self, base: Tensor, view: Tensor) -> None:
        """``view``, traced, was made from eager tensor ``base``: a later :meth:`write`
        of base's storage (through base or any alias of it: ``p.detach()``, ``p.data``)
        recomputes it, as the view of PyTorch sees its storage change."""
        views = self.views.get(_key(base))
        if views is None:
            views = self.views[_key(base)] = weakref.WeakSet()
        views.add(view)

    def _refresh_views(self, key, node: Node) -> None:
        views = self.views.get(key)
        if not views:
            return
        for v in list(views):
            if v._data is not None:
                continue
            b = Tensor._from_node(node)
            for prim_name, attrs in v._view_chain:
                b = lax.apply(prim_name, b, **dict(attrs))
            v._node = stop_gradient_node(b._node) if v.__dict__.get("_detached_view") \
                else b._node

    def touched(self, t: Tensor) -> bool:
        """Whether the program reads or writes t's storage."""
        return _key(t) in self.lifted or _key(t) in self.writes

    # ---- state effects (see compiler.effects) -----------------------------------------
    def write(self, t: Tensor, node: Node) -> None:
        """``t`` (an eager tensor) now holds ``node``: later reads in the trace see it,
        and every call of the program stores its value into t's storage. A tensor made
        during the trace that is not state (:meth:`adopt`) simply becomes that value."""
        key = _key(t)
        if t._birth >= self.start and key not in self.adopted:
            t._data = None
            t._node = node
            self._refresh_views(key, node)
            return
        hit = self.writes.get(key)
        self.writes[key] = (t if hit is None else hit[0], node)
        t._vc[0] += 1           # (version checks in the trace see it; undone at its end:
        self._bumped.append(t._vc)      # the compiled call bumps what it writes)
        self._member(t)
        self._refresh_views(key, node)
        self._propagate(t._data, node)

    def _propagate(self, a: np.ndarray, node: Node) -> None:
        """Storage ``a`` now holds ``node``: every other storage the trace read or wrote
        that shares memory with it (two parameters over one buffer, one an offset view
        of the other) takes the new values of the shared elements, as memory would."""
        for t in self.sharing(a):
            k = _key(t)
            hit = self.writes.get(k)
            cur = hit[1] if hit is not None else self.lifted.get(k, (None, None))[1]
            if cur is None:
                continue
            new = overlaid(t._data, cur, [(a, node)])
            if new is not cur:
                self.writes[k] = (t, new)
                self._refresh_views(k, new)

    def adopt(self, t: Tensor) -> Tensor:
        """Make ``t``, an eager tensor created during the trace and stored where it
        outlives the call (new optimizer state), state of the program. Such a trace
        changed Python objects the compiled program cannot change again: it runs once,
        uncached, and the next call traces anew."""
        self.adopted.add(_key(t))
        self._keep.append(t)
        self.one_shot = True
        return t

    def guard(self, description: str, getter, value, version=None) -> None:
        """The trace's control flow read ``value`` (``getter()`` now): a call where
        ``getter()`` differs traces again (``description`` says why). ``version``: a
        function whose result changes whenever ``getter()`` may have (a counter of
        changes): while it does not, the guard is not read again."""
        self.guards.append((description, getter, value, version))

    def runtime_value(self, getter, dtype, name: str) -> Tensor:
        """An input of the program holding ``getter()`` at each call (a learning rate a
        scheduler changes, a dropout mask drawn per call): read per call, never baked
        into the code. Tracing draws nothing for real (the value got now, for its shape,
        comes from copies of the generators: :func:`symgrad.functions.random.probing`):
        each call draws once, so the numbers stay PyTorch's whatever was traced."""
        replay = getattr(_replay, "values", None)
        if replay is not None:
            t = next(replay, None)
            if t is None or t.dtype is not dtype:     # (never getter(): it may draw)
                raise RuntimeError(f"symgrad: recomputing a compiled call, its runtime value "
                                   f"{name!r} does not match the call's")
            return t
        with probing():
            t = Tensor._from_array(np.array(getter(), dtype=dtype.np), dtype)
        self.scalars.append((t, getter))
        self.adopted.add(_key(t))
        self._keep.append(t)
        self._lift(t, name)
        return t

    def numpy_input(self, arr: np.ndarray) -> Tensor | None:
        """The tensor for a numpy array the function reaches by a path (a global, a
        closure cell, an attribute: ``torch.tensor(A)``, ``x * A``), or None: an input of
        the program holding that path's array at each call -- updated in place or rebound
        to an array of the same shape and dtype, the call reads it as torch.compile does
        (which makes such arrays graph inputs); another shape or dtype traces again. An
        integer or boolean array stays a constant (None), guarded by its contents."""
        src = getattr(self.sources, "arrays", {}).get(id(arr))
        if src is None:
            return None
        if id(arr) in self._arrays:
            return self._arrays[id(arr)]
        if arr.dtype.kind not in "fc" or self.arrays_constant:
            # integers and booleans (indices, masks: they may decide shapes) stay
            # constants of the program, guarded by their contents (any array, in a trace
            # where one read as an input was read in Python: see trace)
            self._arrays[id(arr)] = None
            self._keep.append(arr)
            self.guard(f"numpy array {src.name}", lambda: _contents_of(src.current()),
                       _contents_of(arr))
            return None
        try:
            dt = dtypes.from_numpy_dtype(arr.dtype)
        except (TypeError, KeyError, ValueError):
            return None
        layout = (arr.shape, arr.dtype)
        self.guard(f"numpy array {src.name}'s shape and dtype",
                   lambda: _layout_of(src.current()), layout)

        def read():
            return src.current()
        read.draws = False                   # (read, not drawn)
        t = self.runtime_value(read, dt, src.name)
        self._arrays[id(arr)] = t
        self._keep.append(arr)
        return t

    def _lift(self, t: Tensor, name: str, key=None) -> Node:
        k = len(self.lifted)
        node = make_node("input", (), (("name", name), ("slot", ("closure", k))),
                         tuple(t.shape), t.dtype)
        self.lifted[_key(t) if key is None else key] = (t, node)
        self._member(t)
        return node


def memory_root(a: np.ndarray):
    """The object owning ``a``'s memory (arrays over different owners share none)."""
    while a.base is not None:
        if not isinstance(a.base, np.ndarray):
            return a.base
        a = a.base
    return a


def _addresses(a: np.ndarray) -> np.ndarray:
    """The address of each element of ``a`` (C order, flat)."""
    grid = np.full(a.shape, a.__array_interface__["data"][0], dtype=np.int64)
    for k, (n, stride) in enumerate(zip(a.shape, a.strides)):
        grid = grid + (np.arange(n, dtype=np.int64) * stride).reshape(
            (1,) * k + (n,) + (1,) * (a.ndim - k - 1))
    return grid.reshape(-1)


def overlaid(a: np.ndarray, node: Node, others: list) -> Node:
    """``node`` (the value of array ``a``) with the elements ``a`` shares with each of
    ``others`` -- (array, node) pairs over the same memory -- taken from those nodes."""
    for b, b_node in others:
        if b.dtype != a.dtype:
            raise RuntimeError(
                "symgrad.compile: the call updates in place a tensor that shares memory with "
                f"another of a different dtype ({b.dtype} and {a.dtype}); call the function "
                "uncompiled")
        addr_a, addr_b = _addresses(a), _addresses(b)
        order = np.argsort(addr_b, kind="stable")
        sorted_b = addr_b[order]
        at = np.minimum(np.searchsorted(sorted_b, addr_a), max(len(sorted_b) - 1, 0))
        hit = sorted_b[at] == addr_a if len(sorted_b) else np.zeros(len(addr_a), bool)
        if not hit.any():
            continue
        dst = Tensor._from_array(np.nonzero(hit)[0].astype(np.int64), dtypes.int64)
        src = Tensor._from_array(order[at[hit]].astype(np.int64), dtypes.int64)
        flat = lax.reshape(Tensor._from_node(node), (a.size,))
        vals = lax.take(lax.reshape(Tensor._from_node(b_node), (b.size,)), src, 0)
        node = lax.reshape(dispatch.bind(P["index_put"], flat, dst, vals), a.shape)._node
    return node
def _layout_of(v):
    """(shape, dtype) of a numpy array, else None."""
    return (v.shape, v.dtype) if type(v) is np.ndarray else None


def _contents_of(v):
    """(shape, dtype, bytes) of a numpy array, else None."""
    return (v.shape, v.dtype.str, v.tobytes()) if type(v) is np.ndarray else None


def _key(t: Tensor) -> int:
    """The identity of an eager tensor's storage (its aliases -- ``p.data``,
    ``p.detach()`` -- share it), else of the tensor."""
    return id(t._data) if t._data is not None else id(t)


@dataclass
class TraceResult:
    """A traced program: its input nodes (arguments, then closed-over tensors), outputs."""

    arg_nodes: list[Node]
    arg_names: list[str]
    closure: list[tuple[Tensor, Node]]
    out_nodes: list[Node]
    out_structure: object
    out_names: list[str] = field(default_factory=list)
    hooked: bool = False         # tensor hooks were registered on traced tensors
    effects: Effects | None = None   # state updates: the last outputs, applied per call
    closure_paths: Guards | None = None   # where fn found its closed-over tensors (re-read
                                          # before each call: a replaced one is stale)
    out_alias: tuple = ()        # (output position, the eager tensor it is, or the
                                 # argument position) for outputs that are a tensor the
                                 # call reads: returned as that tensor, as eager code does

    @property
    def input_nodes(self) -> list[Node]:
        return self.arg_nodes + [n for _, n in self.closure]


def arg_names(fn, n: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                  params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
        else:
            names.append(f"arg{i}")
    return names


def _drop_writes(tracer, out_nodes, fn) -> None:
    """Forget the trace's in-place updates of state; refused (RuntimeError) when an
    output depends on a tensor the trace updated: recomputed after the update, it would
    not be what the call computed."""
    updated = {id(tracer.lifted[k][1]) for k in tracer.writes if k in tracer.lifted}
    if updated and any(id(n) in updated for n in toposort(out_nodes)):
        name = getattr(fn, "__qualname__", type(fn).__name__)
        raise RuntimeError(
            f"symgrad.compile: {name} updates state in place that its outputs read, so its "
            "compiled outputs cannot be differentiated from outside the call. Compile the "
            "whole training step instead (forward, loss.backward() and optimizer.step() in "
            "one compiled function), or call it uncompiled.")
    tracer.writes.clear()


def trace(fn, args: tuple, static_argnums: tuple[int, ...], leaves_specs: list[Leaf],
          structure, names: list[str], stateful: bool = True,
          writes: bool = True, breaks: bool = False) -> TraceResult:
    """:func:`_trace`; when the function read in Python a value computed from a numpy
    array it reaches (``int(torch.tensor(A).argmax())``), traced again with such arrays
    as constants guarded by their contents (a change traces again)."""
    try:
        return _trace(fn, args, static_argnums, leaves_specs, structure, names, stateful,
                      writes, breaks, False)
    except _ArraysReadInPython:
        return _trace(fn, args, static_argnums, leaves_specs, structure, names, stateful,
                      writes, breaks, True)


class _ArraysReadInPython(Exception):
    """A trace reading numpy arrays as inputs read a traced value in Python."""


def _trace(fn, args: tuple, static_argnums: tuple[int, ...], leaves_specs: list[Leaf],
           structure, names: list[str], stateful: bool, writes: bool, breaks: bool,
           arrays_constant: bool) -> TraceResult:
    """Run fn on symbolic stand-ins for the non-static arguments. ``stateful``: the
    program performs fn's state effects (symgrad.compile); else (gradient transforms)
    it has none (see :func:`~symgrad.compiler.effects.collect`). ``writes=False``: fn's
    in-place updates of state are left out of the program -- a recomputation of a call
    that made them (see :mod:`symgrad.autograd.compiled_function`), allowed only while
    its outputs do not read what they wrote. ``breaks``: a change of Python state the
    program would not make again raises :class:`~symgrad.tracing.GraphBreak` (the
    caller runs the function uncompiled, see :mod:`symgrad.compiler.breaks`); the state
    :class:`~symgrad.compiler.breaks.Snapshot` watches is restored after the trace."""
    nodes, stand_ins = [], []
    for i, (spec, name) in enumerate(zip(leaves_specs, names)):
        node = make_node("input", (), (("name", name), ("slot", ("arg", i))), spec.shape,
                         spec.dtype)
        t = Tensor._from_node(node)
        t._requires_grad = spec.requires_grad
        if spec.kind == "number":
            t._wrapped_number = True     # x + 2.5 with int x: float32, as eager x + 2.5
        nodes.append(node)
        stand_ins.append(t)
    dyn = pytree.unflatten(structure, stand_ins)
    call_args, it = [], iter(dyn)
    for i, a in enumerate(args):
        call_args.append(a if i in static_argnums else next(it))
    tracer = Tracer(fn, len(args))
    tracer.breaks = breaks
    tracer.arrays_constant = arrays_constant
    if stateful:      # (their .grad is the real argument's: see symgrad.tracing.grad_access)
        tracer.arg_stand_ins = {id(t) for t, s in zip(stand_ins, leaves_specs)
                                if s.requires_grad}
    snapshot = Snapshot(fn) if breaks else None
    output = OutputEffects() if breaks else None
    prev = dispatch.set_lifter(tracer)
    try:
        result = fn(*call_args)
        changed = snapshot.changed() if snapshot is not None else None
        if changed is not None:
            raise GraphBreak(changed)
        out_leaves, out_structure = pytree.flatten(result)
        out_nodes = [_output_node(o, tracer, k) for k, o in enumerate(out_leaves)]
        out_alias = _aliases(out_leaves, stand_ins, tracer)
        if not writes:
            _drop_writes(tracer, out_nodes, fn)
        # arguments updated in place (x.sub_(m), x[i] = v): the call writes them back
        arg_writes = [(i, t._node) for i, (t, n) in enumerate(zip(stand_ins, nodes))
                      if t._node is not n] if writes else []
        # arguments backward() reached: the call hands their gradients to eager autograd
        arg_grads = [(i, _output_node(t._grad, tracer, i)) for i, t in enumerate(stand_ins)
                     if id(t) in tracer.arg_stand_ins and t._grad is not None]
        if stateful:
            _reached_twice(tracer, args, static_argnums)
        if arg_grads or tracer._grad_backup:
            # backward() ran: under no_grad the call raises (nothing requires grad)
            tracer.guard("whether grad mode is enabled", _grad_enabled, _grad_enabled())
        effects, effect_nodes = collect(tracer, stateful, arg_writes, arg_grads)
    except Exception as e:
        if isinstance(e, TracerBoolError) and any(v is not None
                                                  for v in tracer._arrays.values()):
            raise _ArraysReadInPython() from e
        if breaks and not isinstance(e, GraphBreak) and (
                isinstance(e, TracerBoolError) or tracer.writes or tracer._grad_backup
                or any(t._node is not n for t, n in zip(stand_ins, nodes))):
            raise Untraceable() from e
        raise
    finally:
        dispatch.set_lifter(prev)
        if output is not None:
            output.close()
        tracer.restore_grads()
        if snapshot is not None:
            snapshot.changed()         # (restored: the call runs again as written)
    out_names = pytree.leaf_paths(out_structure, "out")
    if effect_nodes:
        out_nodes += effect_nodes
        out_names += [f"state{k}" for k in range(len(effect_nodes))]
        out_structure = pytree.tuple_of([out_structure,
                                         pytree.tuple_of([pytree.LEAF] * len(effect_nodes))])
    closure = list(tracer.lifted.values())
    closure_paths = Guards([t for t, _ in closure], tracer.sources)
    return TraceResult(nodes, names, closure, out_nodes, out_structure,
                       out_names, tracer.hooked, effects, closure_paths, out_alias)


def _grad_enabled() -> bool:
    return _grad_state.grad


def _reached_twice(tracer, args, static_argnums) -> None:
    """A GraphBreak when the trace set the ``.grad`` of, or updated, a tensor passed as
    an argument that it also reached through the function's closure (an optimizer over
    it: ``opt = SGD([x]); step(x)``): the program would see two tensors where the call
    has one, so the call runs as written."""
    dyn = tuple(a for i, a in enumerate(args) if i not in static_argnums)
    for v in pytree.flatten(dyn)[0]:
        if isinstance(v, Tensor) and v._data is not None and v.requires_grad and (
                id(v) in tracer._grad_backup or _key(v) in tracer.writes):
            raise GraphBreak("updates the .grad or the value of an argument it also "
                             "reaches through its closure (an optimizer over it)")


def _aliases(out_leaves, stand_ins, tracer) -> tuple:
    """The outputs that are a tensor the call reads itself -- a closed-over tensor
    (``return loss, self.running_mean``) or an argument -- as (position, tensor or
    argument index)."""
    found = []
    for k, o in enumerate(out_leaves):
        if not isinstance(o, Tensor):
            continue
        hit = next((i for i, t in enumerate(stand_ins) if t is o), None)
        if hit is not None:
            found.append((k, hit))
        elif o._data is not None and tracer.is_outer(o) and o._birth < tracer.start:
            found.append((k, o))
    return tuple(found)


def _output_node(o, tracer: Tracer, k: int) -> Node:
    if isinstance(o, Tensor):
        if o._node is not None:
            return o._node
        return tracer(o)
    if isinstance(o, (bool, int, float, np.number, np.ndarray)):
        arr = np.asarray(o)
        return const(arr, dtypes.from_numpy_dtype(arr.dtype) if arr.dtype != np.float64
                     or isinstance(o, np.ndarray) else dtypes.float64)
    raise TypeError(f"output {k} of the compiled function is a {type(o).__name__}; compiled "
                    "functions return tensors, numbers, or tuples / lists / dicts of them")
