"""State effects of a compiled function: what one call does besides returning values.

A training step (``opt.zero_grad(); loss.backward(); opt.step()``) updates tensors that
live outside the call -- parameters, their ``.grad``, optimizer state, BatchNorm's
running statistics. While it is traced, the :class:`~symgrad.compiler.trace.Tracer`
records those updates instead of performing them; :func:`collect` turns the record into
an :class:`Effects`: the program gets one more output per updated tensor, and after each
call :meth:`Effects.apply` stores those outputs -- the state is read and written by the
call, as PyTorch's eager step reads and writes it.

An ``Effects`` also holds what makes a compiled program valid for a call:

- *guards*: Python values the trace's control flow read (a module's ``training`` flag, an
  optimizer's options and state layout); a call where one differs traces again, as
  ``torch.compile``'s guards do;
- *runtime values*: Python numbers read as values (a learning rate a scheduler changes)
  and values drawn per call (a dropout mask), fed to the program at each call rather
  than baked into its code;
- *one-shot*: the trace created state (an optimizer's first step) -- Python objects the
  program cannot create again, so that program runs once, uncached.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..tensor import Tensor

__all__ = ["Effects", "collect", "draw_parameters"]


@dataclass
class Effects:
    """The recorded state effects of one traced program (see the module docstring)."""

    writes: list = field(default_factory=list)    # tensors whose storage takes an output
    write_inputs: list = field(default_factory=list)   # per write: the input node its
                                   # storage is read through (None: not read), whose
                                   # buffer native code may update in place (donated)
    grads: list = field(default_factory=list)     # (leaf, kind, payload): see _grad_effect
    guards: list = field(default_factory=list)    # (description, getter, value, version)
    scalars: list = field(default_factory=list)   # (input tensor, getter): runtime values
    one_shot: bool = False
    arg_writes: list = field(default_factory=list)   # argument leaves updated in place
    arg_grads: list = field(default_factory=list)    # argument leaves backward() reached

    def __post_init__(self):
        # how many trailing outputs of the program are effect values; with none, the
        # program returns its results alone, else (results, effect values)
        self.n_outputs = len(self.writes) + sum(kind == "output" for _, kind, _ in self.grads) \
            + len(self.arg_writes) + len(self.arg_grads)
        # guards sharing a version function (a counter of changes, e.g. of every module's
        # attributes) are read again only when it moved since they last all held: a
        # check costs O(changes), not O(guards) (one training guard per module call)
        self._versioned: dict = {}
        self._plain: list = []
        for description, getter, value, version in self.guards:
            if version is None:
                self._plain.append((description, getter, value))
            else:
                self._versioned.setdefault(version, []).append((description, getter, value))
        self._seen: dict = {}
        self.drawn_now: dict = {}      # the last call's draws at its size (generic kernels)
        # whether a call updates state (a failing call then runs again as written)
        self.mutates = bool(self.writes or self.grads or self.arg_writes or self.arg_grads)
        # whether a call sets gradients (a training step): its outputs join no autograd
        self.trains = bool(self.grads or self.arg_grads)
        # whether a runtime value is a random draw (a getter not marked ``draws = False``,
        # as an optimizer's options are): a call that fails restores the generator
        self.draws = any(getattr(getter, "draws", True) for _, getter in self.scalars)
        # whether every draw can be drawn at another shape (``at_shape``): a program with
        # these runtime values may serve every size (the draws of the call's size)
        self.resizable = all(hasattr(getter, "at_shape") or not getattr(getter, "draws", True)
                             for _, getter in self.scalars)

    def donations(self, n_outputs: int, inputs: list) -> tuple:
        """(output index, input index) pairs of a program with ``n_outputs`` outputs (the
        effect values last) and ``inputs``: each write whose storage the program reads
        through an input -- its new value may be computed into that input's buffer
        (``Program.donated``; the code generator decides where that is safe)."""
        position = {id(n): k for k, n in enumerate(inputs)}
        first = n_outputs - self.n_outputs
        return tuple((first + w, position[id(node)])
                     for w, node in enumerate(self.write_inputs)
                     if node is not None and id(node) in position)

    def stale(self) -> str | None:
        """Why this program does not fit the state of the world now, or None."""
        for version, members in self._versioned.items():
            now = version()
            if self._seen.get(version) == now:
                continue
            why = _failed(members)
            if why is not None:
                return why
            self._seen[version] = now
        return _failed(self._plain)

    def before_call(self) -> None:
        """Feed the runtime values their values of now."""
        for t, getter in self.scalars:
            t._data[...] = getter()

    def before_sized_call(self, shape_of) -> dict:
        """As :meth:`before_call`, for a shape-generic program's call: each draw is drawn
        at ``shape_of(t)`` (its input's shape at the call's size), in the trace's order;
        returns those arrays by ``id(t)`` (the program reads them in place of ``t``; the
        call's autograd node reads them in :attr:`drawn_now`)."""
        drawn = {}
        for t, getter in self.scalars:
            at_shape = getattr(getter, "at_shape", None)
            if at_shape is None:
                t._data[...] = getter()
            else:
                drawn[id(t)] = np.asarray(at_shape(shape_of(t)), dtype=t._data.dtype)
        self.drawn_now = drawn
        return drawn

    def apply(self, values, fresh: bool, args=()) -> None:
        """Store the effect outputs ``values`` (arrays, in :func:`collect`'s order) into
        the state, and into the call's argument leaves ``args`` the function updated in
        place. ``fresh``: the arrays are new (native code allocates its outputs);
        otherwise they may be inputs or constants of the program and are copied. A value
        that is the state's own array was written in place by the call (donated)."""
        it = iter(values)
        for t in self.writes:
            v = next(it)
            if v is not t._data:
                if not t._data.flags.writeable:    # (a read-only array: as eager in-place)
                    t._data.flags.writeable = True
                np.copyto(t._data, v, casting="unsafe")
            t._vc[0] += 1
        for leaf, kind, payload in self.grads:
            if kind == "output":
                v = next(it)
                leaf._grad = Tensor._from_array(v if fresh else np.array(v, copy=True),
                                                leaf._dtype)
            else:               # None, or a tensor (an earlier .grad updated in place)
                leaf._grad = payload
        for i in self.arg_writes:
            v, a = next(it), args[i]
            if isinstance(a, Tensor):
                np.copyto(a._data, v, casting="unsafe")
                a._vc[0] += 1
            elif isinstance(a, np.ndarray):
                np.copyto(a, v, casting="unsafe")
            elif hasattr(a, "__dlpack__"):     # (a torch / jax array: its memory, shared)
                from .trace import foreign_array   # late: trace imports this module
                np.copyto(foreign_array(a), v, casting="unsafe")
        for i in self.arg_grads:
            v, a = next(it), args[i]
            if isinstance(a, Tensor) and a.requires_grad:
                # the gradient backward() gave the argument's stand-in in this call,
                # handed to eager autograd at the argument itself: accumulated into a
                # leaf's .grad (its hooks run), or on through a non-leaf's history
                a.backward(Tensor._from_array(v if fresh else np.array(v, copy=True),
                                              a._dtype))


def draw_parameters(getter) -> tuple | None:
    """What a runtime value's draw depends on besides its shape: the numbers and objects
    its ``at_shape`` function closes over (a ``randint``'s bounds, a dropout's ``p``, the
    generator) -- numbers by value, objects by identity; None for a value that is not
    drawn by shape. A shape-generic program requires them alike at every traced size (a
    bound computed from the batch size is not)."""
    fn = getattr(getter, "at_shape", None)
    if fn is None:
        return None
    return tuple(v if isinstance(v, (bool, int, float, complex, str, bytes, type(None),
                                     np.generic)) else ("id", id(v))
                 for v in (c.cell_contents for c in (fn.__closure__ or ())))


def _failed(guards) -> str | None:
    """Why the first of ``guards`` (description, getter, value) that no longer holds
    fails, or None."""
    for description, getter, value in guards:
        now = getter()
        if now != value:
            was, became = repr(value), repr(now)
            if len(was) + len(became) > 100:
                return f"{description} changed"
            return f"{description}: {was} → {became}"
    return None


def collect(tracer, stateful: bool = True, arg_writes=(), arg_grads=()):
    """(Effects or None, the nodes of the effect outputs) at the end of a trace, before
    the tracer restores the ``.grad`` it changed. ``stateful=False`` (a gradient
    transform): ``.grad`` assignments are dropped, as ``jax.grad`` has no side effects,
    and in-place updates of state are refused. ``arg_writes`` / ``arg_grads``: (argument
    position, node) of the arguments updated in place / of the gradients backward()
    gave arguments requiring grad."""
    grads, grad_nodes = [], []
    if stateful:
        for leaf, before in tracer._grad_backup.values():
            _grad_effect(tracer, leaf, before, grads, grad_nodes)
    writes = [(t, n, None if _shares(t, tracer) else tracer.lifted.get(k, (None, None))[1])
              for k, (t, n) in tracer.writes.items()
              if tracer.lifted.get(k, (None, None))[1] is not n]   # x.copy_(x): none
    if writes and not stateful:
        raise RuntimeError("a transformed function (symgrad.grad, jacobian, ...) attempted "
                           "to update a tensor it closes over in place (a parameter, a "
                           "buffer such as BatchNorm's running statistics, optimizer "
                           "state); transforms have no side effects -- use symgrad.compile, "
                           "whose calls perform such updates, or evaluate the module in "
                           "eval() mode")
    arg_writes = list(arg_writes) if stateful else []
    arg_grads = list(arg_grads) if stateful else []
    if not (writes or grads or tracer.guards or tracer.scalars or tracer.one_shot
            or arg_writes or arg_grads):
        return None, []
    eff = Effects([t for t, _, _ in writes], [i for _, _, i in writes], grads,
                  list(tracer.guards), list(tracer.scalars), tracer.one_shot,
                  [i for i, _ in arg_writes], [i for i, _ in arg_grads])
    return eff, ([n for _, n, _ in writes] + grad_nodes + [n for _, n in arg_writes]
                 + [n for _, n in arg_grads])


def _shares(t, tracer) -> bool:
    """Whether written tensor t's memory is shared with another storage the program
    reads or writes (an offset view of it): its new value is then not computed into its
    input's buffer, which the other's input still reads."""
    return bool(tracer.sharing(t._data))


def _grad_effect(tracer, leaf, before, grads, grad_nodes) -> None:
    """The effect on ``leaf.grad`` of a trace that changed it from ``before``:

    - ``None`` (``zero_grad()``) or another eager tensor: set it;
    - a traced gradient: a new tensor of the program's output at each call (PyTorch's
      ``backward`` after ``zero_grad(set_to_none=True)``) -- or, when the program read
      or zeroed the earlier ``.grad`` (accumulation, ``set_to_none=False``), that tensor
      updated in place, as PyTorch accumulates into it."""
    final = leaf._grad
    if final is before:
        return
    if final is None or final._data is not None:
        if final is not None and final._birth >= tracer.start:
            tracer.one_shot = True          # a tensor made by this trace: not repeatable
        grads.append((leaf, "tensor", final))
        return
    node = final._node
    if before is not None and before._data is not None and node.shape == tuple(before.shape) \
            and tracer.touched(before):
        tracer.write(before, node)
        tracer.guard(f"{_leaf_name(tracer, leaf)}.grad replaced", lambda: leaf._grad is before,
                     True)
        grads.append((leaf, "tensor", before))
        return
    grads.append((leaf, "output", None))
    grad_nodes.append(node)


def _leaf_name(tracer, leaf) -> str:
    hit = tracer.lifted.get(id(leaf._data))
    return hit[1].attr("name") if hit is not None else "a parameter"
