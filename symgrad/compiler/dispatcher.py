"""The dispatch cache behind every compiled function: :class:`Compiled` traces once per
input signature, keeps an LRU of executables, installs a native fast path for repeat
calls -- and explains every cache miss (logger ``symgrad.recompiles``).

On a miss of the in-memory cache, the function is traced and, with the LLVM backend,
the disk cache is asked first by a key known right after tracing
(:mod:`symgrad.compiler.persist`): a hit runs none of the later stages (symbolic
differentiation, rewrites, fusion, scheduling, LLVM) -- they run only if the program is
inspected.  What an entry holds is :mod:`.entries`'; how a miss on sizes alone finds a
shape-generic kernel, :mod:`.dispatch_shapes`'.
"""
from __future__ import annotations

import functools
import logging
import pickle
import time
import weakref
from collections import OrderedDict, namedtuple

import numpy as np

from .. import dispatch
from ..autograd.grad_mode import _state as _grad_state
from ..config import settings
from ..errors import TracerBoolError
from ..tracing import GraphBreak, ValueSized
from ..graph import dtypes, pytree
from ..functions import random as random_functions
from ..functions.creation import as_tensor
from ..tensor import Tensor
from . import persist, travel
from .aliasing import aliased as _aliased, non_leaf_written as _non_leaf_written
from .backends import get_backend
from .dispatch_shapes import ShapeGeneric
from .entries import (Entry, OneShot, UNSET, explain_difference, fits, separate,
                      share_bridge)
from .progress import StageClock
from .progress import log as compile_log
from .replay import replay
from .stages import (Lowered, make_target, resolve_backend, run_stages, schedule_of,
                     apply_transform)
from .trace import Leaf, Untraceable, arg_names, foreign_array, leaf_spec, trace
from .transforms import Identity, Transform

__all__ = ["Compiled", "CacheInfo", "explain_difference"]


log = logging.getLogger("symgrad.recompiles")


CacheInfo = namedtuple("CacheInfo", "hits misses entries maxsize")


def _leaf_key(v):
    t = type(v)
    if t is np.ndarray:
        return (t, v.shape, v.dtype)
    if isinstance(v, Tensor):
        return (Tensor, v._data.shape if v._data is not None else None, v._dtype,
                v._requires_grad or v.grad_fn is not None)
    if hasattr(v, "__dlpack__"):
        return (t, tuple(v.shape), str(v.dtype))
    return t


_NOT_KEPT = object()      # (no generator states kept for a call)


class _RunEagerly(Exception):
    """A program with state effects raised: the call is run as written instead."""


_break_log = logging.getLogger("symgrad.compile")
_logged_breaks: set = set()


_TRACED = frozenset((Tensor, np.ndarray, float, int, tuple, list, dict, type(None)))


def _static_object(a) -> bool:
    """Whether argument ``a`` is an object symgrad.compile takes as static, by identity
    (a module, an optimizer, a string: torch.compile guards them so): not a tensor, an
    array, a number or a container of them."""
    return not (isinstance(a, (Tensor, np.ndarray, int, float, complex, np.generic, tuple,
                               list, dict, type(None)))
                or type(a) in pytree._REGISTRY or hasattr(a, "__dlpack__"))


_FAST_KEYS_PER_ENTRY = 16    # bound of the fast-key table, per cache entry
_VARIANTS_PER_KEY = 4        # programs kept per signature whose guards no longer hold


class Compiled(ShapeGeneric):
    """A compiled function: call it like the original (see :func:`compile`)."""

    bridged = True        # outputs join eager autograd (see _bridge)
    dynamic_shapes = True  # a size that changes may become a runtime size (see _dynamic)
    performs_writes = True  # in-place updates of state are part of the program (see trace)
    eager_when_aliased = True   # a call whose written input aliases another runs
                                # uncompiled (see _run); the split programs' inputs never do
    reruns_eagerly = True       # a failing call with state effects runs as written (see
                                # _run); a split program raises to its caller instead
    graph_breaks = False   # torch.compile's semantics (symgrad.compile, not jit): a trace
                           # that changes Python state or reads a traced value in Python
                           # runs uncompiled (symgrad.compiler.breaks) ...
    fullgraph = False      # ... unless fullgraph: then it raises

    def __init__(self, fn, static_argnums=(), backend=None, transform: Transform | None = None,
                 maxsize: int | None = None, target=None, static_argnames=()):
        if not callable(fn):
            raise TypeError(f"symgrad.compile expects a callable, got {type(fn).__name__}")
        self.fn = fn
        self._target_spec = target
        self._target = None
        self.static_argnums = tuple(sorted({static_argnums} if isinstance(static_argnums, int)
                                           else set(static_argnums)))
        self.static_argnames = ((static_argnames,) if isinstance(static_argnames, str)
                                else tuple(static_argnames))
        self.backend = resolve_backend(backend)
        if target is not None and self.backend == "llvm":
            self._target = make_target(target)      # a bad target fails here, clearly
        self.transform = transform or Identity()
        # compile / jit: Python bools static (torch.compile's rule). The transforms count
        # argnums among the traced arguments: their bools stay traced.
        self._bools_specialised = type(self.transform) is Identity
        self._cache: OrderedDict = OrderedDict()       # full signature -> entry (LRU)
        self._variants: dict = {}    # signature -> entries kept for another state of the
                                     # world (a module's train / eval mode), oldest first
        self._fast: dict = {}                          # cheap per-call key -> entry
        self._maxsize = maxsize or settings.cache_size
        self.hits = self.misses = 0
        self._py_native = 0            # native-entry calls made by the Python dispatcher
        self._evicted_native = 0       # native-entry calls of entries evicted since
        self.last_miss_reason: str | None = None
        self._dynamic_patterns: list = []   # (signature, dims, entry) of generic kernels
        self._not_generic: dict = {}        # dims -> why they compile per size
        self._size_calls: dict = {}         # fast key -> calls served by a generic kernel
        self._uncompiled: set = set()       # signatures run as written (see _call)
        # name and doc only: copying a compiled fn's __dict__ would make this object that
        # one (its transform, cache, function): jacobian(grad(f)) returned grad(f)'s value
        functools.update_wrapper(self, fn, updated=())
        _live.add(self)

    @property
    def target(self):
        """The machine the LLVM backend builds this function for (``codegen.target.Target``;
        None with the numpy backend): the ``target=`` given, else the current target when
        first needed."""
        if self._target is None and self.backend == "llvm":
            self._target = make_target(None)
        return self._target

    # ---- signature ---------------------------------------------------------------------
    def _split(self, args):
        n = len(args)
        for a in self.static_argnums:
            if a >= n:
                raise TypeError(f"static_argnums {a} is out of range: called with {n} arguments")
        static = tuple(args[i] for i in self.static_argnums)
        try:
            hash(static)
        except TypeError:
            raise TypeError("static arguments must be hashable: "
                            f"{[type(s).__name__ for s in static]}") from None
        dyn = tuple(a for i, a in enumerate(args) if i not in self.static_argnums)
        return static, dyn

    def _signature(self, args):
        """(key, leaves, names): the full signature, computed on a cache miss."""
        static, dyn = self._split(args)
        leaves, structure = pytree.flatten(dyn)
        names = self._leaf_names(args, structure)
        specs = tuple(leaf_spec(v, nm) for v, nm in zip(leaves, names))
        return (structure, specs, static), leaves, names

    def _fast_key(self, args):
        """A cheap per-call key: structure, and per leaf its kind, shape and dtype."""
        static, dyn = self._split(args) if self.static_argnums else ((), args)
        leaves, structure = pytree.flatten(dyn)
        return (structure, tuple(map(_leaf_key, leaves)), static), leaves

    def _leaf_names(self, args, structure):
        params = arg_names(self.fn, len(args))
        dyn_names = [p for i, p in enumerate(params) if i not in self.static_argnums]
        names = []
        for sub, pname in zip(structure[1], dyn_names):
            names.extend(pytree.leaf_paths(sub, pname))
        return names

    # ---- calling -----------------------------------------------------------------------
    def _call(self, *args, **kwargs):
        """The Python dispatcher: signature → cache entry (compiling on a miss) → run."""
        if kwargs:
            return self._with_keywords(args, kwargs)
        if self._bools_specialised:
            for i, a in enumerate(args):
                if (type(a) is bool or (type(a) not in _TRACED and self.graph_breaks
                                        and _static_object(a))) \
                        and i not in self.static_argnums:
                    return self._bools_static(args)(*args)
        fkey, leaves = self._fast_key(args)
        entry = self._fast.get(fkey)
        stale = None
        if entry is not None and entry.key in self._cache:
            stale = entry.stale()
            if stale is not None and (other := self._variant_for(entry)) is not None:
                entry, stale = other, None
                self._fast[fkey] = other
            if stale is None and entry.dynamic is not None:
                entry = self._maybe_specialise(entry, fkey, args)
            if stale is None:
                self.hits += 1
                self._cache.move_to_end(entry.key)
                out = self._run(entry, leaves, args)
                self._install_fast_path(entry, leaves, args)
                return out
            self._miss(stale)
            self._park(self._cache.pop(entry.key))
        if any(isinstance(v, Tensor) and v._data is None for v in leaves):
            return self._inline(args)
        key, leaves, names = self._signature(args)
        if key in self._uncompiled:
            return self._as_written(args)
        entry = self._cache.get(key)
        if entry is None and stale is None:
            entry = self._generic_for(args, key, names)
        elif entry is not None and entry.stale() is not None:
            entry = self._variant_for(entry) or entry
        if entry is not None and entry.stale() is None:   # known, new fast key
            self.hits += 1
            self._cache.move_to_end(entry.key)
            if len(self._fast) > _FAST_KEYS_PER_ENTRY * self._maxsize:
                self._fast.clear()      # (a generic kernel sees many sizes: rebuilt on use)
            self._fast[fkey] = entry
            out = self._run(entry, leaves, args)
            self._install_fast_path(entry, leaves, args)
            return out
        donor = None
        if stale is not None:
            pass                          # (counted and explained above)
        elif entry is not None:
            self._miss(entry.stale())
        elif self._cache:
            generic, why = self._dynamic(args, key, leaves, names)
            self._miss(why or self._explain(key))
            if generic is not None:
                self._fast[fkey] = generic
                return self._run(generic, leaves, args)
            donor = self._sizes_donor(key)
        elif self.__dict__.pop("_one_shot_ran", False):
            self._miss("the previous call created state (an optimizer's first step): it ran "
                       "once, uncompiled")
        else:
            self.misses += 1
        try:
            entry = self._build(args, key, leaves, names)
        except GraphBreak as e:
            why = (f"computes a value-sized result ({e})" if isinstance(e, ValueSized)
                   else f"changes Python state while traced ({e})")
            if self.fullgraph:
                raise type(e)(f"symgrad.compile(fullgraph=True): {self._name()} {why}") \
                    from None
            self._break(key, why)
            return self._as_written(args)
        except (RuntimeError, Untraceable) as e:
            if isinstance(e, Untraceable):
                e = e.__cause__
                if not (isinstance(e, RuntimeError) and _non_leaf_written(e, leaves)):
                    return self._trace_failed(key, args, e)
            if not _non_leaf_written(e, leaves):
                raise
            # a non-leaf argument requiring grad updated in place: it must gain the
            # update's autograd history, which the program cannot give it -- the calls of
            # this signature run uncompiled (the trace took it for a leaf: torch's error)
            self._uncompiled.add(key)
            self.last_miss_reason = ("a non-leaf argument requiring grad is updated in "
                                     "place: this signature runs uncompiled")
            return self.fn(*args)
        if donor is not None:             # (another size's split programs serve this one)
            share_bridge(donor, entry)
        if entry.key is not None:
            self._fast[fkey] = entry
        else:                             # a one-shot program is not kept
            self._one_shot_ran = True
        out = self._run(entry, leaves, args)
        self._install_fast_path(entry, leaves, args)
        return out

    __call__ = _call

    def _as_written(self, args):
        """The call run uncompiled, with what the program would take: numpy arrays among
        the (non-static) arguments as tensors sharing their memory, and -- when no
        argument is a tensor -- the results as numpy arrays, as a compiled call returns
        them (the function may call tensor methods numpy lacks or has otherwise)."""
        conv, tensors, arrays = list(args), False, False
        for i, a in enumerate(args):
            if i in self.static_argnums:
                continue
            leaves, structure = pytree.flatten(a)
            tensors |= any(isinstance(v, Tensor) for v in leaves)
            if any(isinstance(v, np.ndarray) for v in leaves):
                arrays = True
                conv[i] = pytree.unflatten(structure, [as_tensor(v) if isinstance(
                    v, np.ndarray) else v for v in leaves])
        if not arrays:
            return self.fn(*args)
        out = self.fn(*conv)
        if tensors:
            return out
        leaves, structure = pytree.flatten(out)
        return pytree.unflatten(structure, [v.detach().numpy() if isinstance(v, Tensor)
                                            else v for v in leaves])

    def _name(self) -> str:
        return getattr(self.fn, "__qualname__", type(self.fn).__name__)

    def _break(self, key, why: str) -> None:
        """Run the calls of signature ``key`` as written from now on (torch.compile's graph
        break, at function granularity); the reason is logged once at WARNING."""
        self._uncompiled.add(key)
        self.last_miss_reason = f"{why}: it runs uncompiled"
        message = f"symgrad.compile: {self._name()} {why}: it runs uncompiled"
        if message not in _logged_breaks:
            _logged_breaks.add(message)
            _break_log.warning(message)

    def _trace_failed(self, key, args, error: Exception):
        """Tracing raised ``error``. A traced value read in Python (``if loss > 0:``,
        ``loss.item()``): the signature runs uncompiled (with ``fullgraph``: the error).
        Any other error after the trace recorded updates of state: the call runs as
        written, so its error is the eager one with the in-place updates made before it
        (BatchNorm's ``num_batches_tracked`` before "Expected more than 1 value per
        channel"), as PyTorch's; if that call succeeds (something only tracing refuses)
        the signature runs uncompiled."""
        if isinstance(error, TracerBoolError):
            if self.fullgraph:
                raise error from None
            parts = str(error).split(". ")
            said = "; ".join([parts[0].split(", but")[0]]
                             + [p.rstrip(".") for p in parts[1:] if p.startswith("Called at")])
            self._break(key, f"reads a traced value in Python ({said})")
            return self._as_written(args)
        if self.fullgraph:
            raise error from None
        out = self._as_written(args)
        self._break(key, f"could not be traced ({type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else ''})")
        return out

    def _inline(self, args):
        """Called inside another trace (``vmap(grad(f))``, ``grad(grad(f))`` as a Python
        function, a compiled function called from a compiled one): the transformed graph
        is built for these traced arguments and inlined into the enclosing trace, so
        transforms compose as in JAX.  Nothing is compiled here."""
        static, dyn = self._split(args)
        leaves, structure = pytree.flatten(dyn)
        names = self._leaf_names(args, structure)
        leaves = [v if isinstance(v, Tensor) else as_tensor(v) for v in leaves]
        specs = tuple(Leaf("tensor", tuple(v.shape), v.dtype, v.requires_grad)
                      for v in leaves)
        key = (structure, specs, static)
        tr = self._trace(args, key, names)
        if tr.effects is not None and tr.effects.n_outputs:
            raise RuntimeError(f"{getattr(self.fn, '__qualname__', 'a function')} updates "
                               "state (tensors in place, .grad); called inside another "
                               "trace, call the Python function itself")
        built = apply_transform(self.transform, tr, structure, names)
        env = {id(n): v for n, v in zip(tr.arg_nodes, leaves)}
        env.update((id(n), t) for t, n in tr.closure)
        _draw_in_enclosing(tr, env)
        for n in built.aux or []:
            env[id(n)] = Tensor._from_array(np.zeros(n.shape, n.dtype.np), n.dtype)
        return pytree.unflatten(built.structure, replay(built.outputs, env))

    def _bools_static(self, args) -> "Compiled":
        """The variant of this function whose Python ``bool`` arguments are static (as
        torch.compile specialises on them: ``if flag:`` works, each value its own
        program): the positions of ``args``' bools added to ``static_argnums``."""
        extra = tuple(i for i, a in enumerate(args)
                      if (type(a) is bool or (self.graph_breaks and _static_object(a)))
                      and i not in self.static_argnums)
        variants = self.__dict__.setdefault("_bool_variants", {})
        variant = variants.get(extra)
        if variant is None:
            variant = variants[extra] = self._variant(self.fn, self.static_argnums + extra)
        return variant

    def _variant(self, fn, static_argnums) -> "Compiled":
        """A compiled function of ``fn`` with these static arguments and this one's
        options."""
        variant = Compiled(fn, static_argnums, self.backend, self.transform, self._maxsize,
                           self._target_spec)
        for name in ("graph_breaks", "fullgraph", "dynamic_shapes"):
            if name in self.__dict__:
                variant.__dict__[name] = self.__dict__[name]
        return variant

    def _with_keywords(self, args, kwargs):
        """Keyword arguments, as JAX passes them: never differentiated (``argnums``
        counts positions), traced like the positional ones -- but Python bools (and the
        names in ``static_argnames``) are static, each value its own program. One
        compiled variant per set of keyword names and static values, taking the traced
        keywords as a trailing dict argument."""
        fixed = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames
                             or (type(v) is bool and self._bools_specialised)))
        try:
            hash(fixed)
        except TypeError:
            raise TypeError("static arguments must be hashable: "
                            f"{[type(v).__name__ for _, v in fixed]}") from None
        names = tuple(sorted(k for k in kwargs if k not in dict(fixed)))
        variants = self.__dict__.setdefault("_keyword_variants", {})
        variant = variants.get((names, fixed))
        if variant is None:
            fn, consts = self.fn, dict(fixed)

            def with_keywords(*a):
                return fn(*a[:-1], **a[-1], **consts)
            with_keywords.__name__ = getattr(fn, "__name__", "fn")
            with_keywords.__qualname__ = getattr(fn, "__qualname__", with_keywords.__name__)
            with_keywords.__wrapped__ = fn
            variant = variants[(names, fixed)] = self._variant(with_keywords,
                                                               self.static_argnums)
        return variant(*args, {k: kwargs[k] for k in names})

    def _install_fast_path(self, entry: Entry, leaves, args) -> None:
        """Make calls with this signature go straight to native code.

        When every argument is a plain numpy array and the outputs are an array or
        (nested) tuples of arrays, the instance's ``__call__`` becomes the backend's native
        METH_FASTCALL entry (a per-instance subclass): it checks the arguments in native
        code and runs the kernel, or hands any other call back to :meth:`_call`. The entry
        counts its own calls, which :meth:`cache_info` adds to the hits. A program with
        guards on what it read (Python constants, the functions it called) gets a small
        Python ``__call__`` checking them before the native entry (about 0.1 us, against
        several for the full dispatcher); one that fails goes through :meth:`_call`."""
        if getattr(entry, "exe", None) is None:      # (not compiled yet; a one-shot)
            return
        if entry.native_ok is None:
            entry.native_ok = bool(
                entry.native_counted and entry.numpy_out and not entry.closure
                and entry.effects is None     # guards and effects run in _call / _run
                and not entry.aux and not self.static_argnums
                and entry.native_name == getattr(entry.exe, "structured_entry_name", None))
        if (not entry.native_ok or getattr(type(self), "_native_for", None) is entry
                or len(leaves) != len(args) or not all(type(v) is np.ndarray for v in leaves)):
            return
        fast = entry.exe.native_entry(self._call, structured=True)
        guards = entry.closure_paths
        hold = guards.per_call() if guards is not None else None
        if hold is not None:
            def fast(self, *args, _native=fast):
                return _native(*args) if hold() else self._call(*args)
        elif guards is not None:
            replaced = guards.replaced

            def fast(self, *args, _native=fast):
                return _native(*args) if replaced() is None else self._call(*args)
        self.__class__ = type(f"Compiled_{getattr(self.fn, '__name__', 'fn')}", (Compiled,),
                              {"__call__": fast, "_native_for": entry})

    def _miss(self, reason: str) -> None:
        self.misses += 1
        self.last_miss_reason = reason
        if "recompiles" in settings.log:
            log.warning("symgrad: recompiling %s: %s", getattr(self.fn, "__qualname__", self.fn),
                        reason)

    def _explain(self, key) -> str:
        last = self._last_exact_key()
        return explain_difference(last, key, self._last_names) if last is not None \
            else "signature changed"

    def _last_exact_key(self):
        """The most recently used signature compiled for its exact shapes, or None."""
        return next((k for k, e in reversed(self._cache.items()) if e.dynamic is None), None)

    def _run(self, entry: Entry, leaves, args):
        effects = entry.effects
        if effects is not None and self.eager_when_aliased and (
                effects.arg_writes or effects.writes) and _aliased(entry, effects, leaves):
            # an input the call writes in place shares memory with another input: the
            # program reads each input as its own buffer, so the call runs uncompiled,
            # where every read sees the write (torch.compile recompiles for aliased inputs)
            return self.fn(*args)
        try:
            return self._run_compiled(entry, leaves)
        except _RunEagerly as e:
            if not self.reruns_eagerly:     # (a split program: its caller reruns the
                raise e.__cause__ from None  # user's function)
        except get_backend("llvm").NotGeneric as e:
            # a shape-generic entry whose kernel, compiled when first run, has an operation
            # without a runtime-size lowering (nothing ran yet): its sizes compile per size
            self._not_generic[entry.dynamic] = str(e)
            self._cache.pop(entry.key, None)
            self._evict(entry)
            return self._call(*args)
        # the program raised before storing its state effects (they are stored after it
        # succeeds; nothing it donates is written before a step that may fail): the call
        # runs as written, so the in-place updates made before the failing operation stay
        # and its error is the eager one -- PyTorch's behaviour (review2 #9)
        return self.fn(*args)

    def _run_compiled(self, entry: Entry, leaves):
        bridge = entry.bridge
        if bridge is not None and _grad_state.grad and not entry.numpy_out:
            if bridge is UNSET:
                bridge = entry.bridge = self._bridge(entry)
            if bridge is not None:      # outputs that join autograd (grad mode, inputs need it)
                res, structure = bridge.run(lambda: self._run_program(entry, leaves, False),
                                            leaves)
                return pytree.unflatten(structure, res)
        res, structure = self._run_program(entry, leaves)
        return pytree.unflatten(structure, res)

    def _run_program(self, entry: Entry, leaves, alias: bool = True) -> tuple[list, object]:
        """Run the entry's program: (its outputs, flat, and their structure). ``alias``:
        an output that is a tensor the call reads is returned as that tensor (not when
        the outputs join autograd: a node's outputs are new tensors)."""
        if entry.deferred is not None:
            entry.attach(entry.deferred())
        arrays = []
        for v, spec in zip(leaves, entry.specs):
            if isinstance(v, Tensor):
                arrays.append(v._data)
            elif isinstance(v, np.ndarray):
                arrays.append(v)
            elif hasattr(v, "__dlpack__"):
                arrays.append(foreign_array(v))
            else:
                arrays.append(np.asarray(v, dtype=spec.dtype.np))
        effects = entry.effects
        mutates = effects is not None and effects.mutates
        # values drawn per call are drawn again if the call runs eagerly: every generator
        # they use (the global one, private ones) is put back first
        kept = random_functions.keep_states() if mutates and effects.draws else _NOT_KEPT
        try:
            drawn = None
            if effects is not None:
                if getattr(entry, "dynamic", None) is not None and effects.scalars:
                    drawn = effects.before_sized_call(_shape_at_call(entry, arrays))
                else:
                    effects.before_call()
            if drawn:           # (a shape-generic program's draws, of this call's size)
                arrays.extend(drawn.get(id(t), t._data) for t in entry.closure)
            else:
                arrays.extend(t._data for t in entry.closure)
            arrays.extend(entry.aux)
            if entry.donated:
                separate(arrays, entry.donated)
            refused = entry.refused[0]
            outs = entry.call(*arrays)
        except Exception as e:
            if kept is not _NOT_KEPT:
                random_functions.end_keep_states(kept, restore=True)
                kept = _NOT_KEPT
            if not mutates:
                raise
            raise _RunEagerly() from e
        finally:
            if kept is not _NOT_KEPT:
                random_functions.end_keep_states(kept, restore=False)
        self._py_native += entry.native_counted - (entry.refused[0] - refused)
        if entry.native_counted:      # the native entry returns the outputs' own nesting
            outs = pytree.flatten(outs)[0]
        structure = entry.structure
        if effects is not None:       # trailing outputs (if any): the new state
            n = effects.n_outputs
            effects.apply(outs[len(outs) - n:], fresh=entry.fresh_outputs, args=leaves)
            if n:
                outs = outs[:len(outs) - n]
                structure = pytree.children(structure)[0]
        if entry.numpy_out:
            return list(outs), structure
        outs = [Tensor._from_array(np.asarray(o)) for o in outs]
        for k, same in entry.out_alias if alias else ():   # (the tensor itself, as eager
            t = leaves[same] if type(same) is int else same       # code returns it)
            if isinstance(t, Tensor) and t._data is not None:
                outs[k] = t
        return outs, structure

    def _joins_autograd(self, tr, leaves, numpy_out) -> bool:
        """Whether a call building this entry joins autograd (see :meth:`_bridge`): its
        own program is then compiled only if some call runs it (under no_grad, or a
        function that cannot be split)."""
        effects = tr.effects
        return (_grad_state.grad and not numpy_out and self.bridged
                and isinstance(self.transform, Identity)
                and not (effects is not None and (effects.trains or effects.one_shot))
                and (any(t._requires_grad for t, _ in tr.closure)
                     or any(isinstance(v, Tensor) and v._requires_grad for v in leaves)))

    def _bridge(self, entry):
        """The entry's link to eager autograd (see :mod:`symgrad.autograd.compiled_function`),
        or None: a transform's outputs (JAX's ``grad`` ...) and a function updating state
        return plain tensors."""
        effects = entry.effects
        if not self.bridged or not isinstance(self.transform, Identity) \
                or (effects is not None and effects.trains):     # (a training step)
            return None
        if not any(t._requires_grad for t in entry.closure) \
                and not any(s.requires_grad for s in entry.specs if s.kind == "tensor"):
            return None
        # late: autograd's libraries layer sits above the compiler
        from ..autograd.compiled_function import Bridge
        structure = entry.structure
        if effects is not None and effects.n_outputs:
            structure = pytree.children(structure)[0]
        key = entry.key       # (a shape-generic entry's: ("dynamic", structure, dims, static))
        arg_structure, static = (key[1], key[3]) if key[0] == "dynamic" else (key[0], key[2])
        return Bridge(self, entry.closure, arg_structure, static, effects, structure,
                      generic=entry.dynamic is not None)

    def _build(self, args, key, leaves, names) -> Entry:
        with StageClock(getattr(self.fn, "__qualname__", "function")) as clock:
            return self._build_timed(args, key, leaves, names, clock)

    def _build_timed(self, args, key, leaves, names, clock: StageClock) -> Entry:
        with clock.stage("trace"):
            tr = self._trace(args, key, names)
        if self.backend == "llvm":      # shared native code builds while this one compiles
            get_backend("llvm").prepare(tr.out_nodes, self.target)
        numpy_out = not any(isinstance(v, Tensor) for v in leaves)
        if tr.effects is not None and tr.effects.one_shot:
            return OneShot(tr, key, numpy_out)
        disk_key = self._disk_key(tr, key)
        entry = None
        if disk_key:
            with clock.stage("disk-cache"):
                entry = self._from_disk(disk_key, tr, key, names, numpy_out)
        if entry is None:
            if self.target is not None:
                self.target.check_runnable()     # before compiling what cannot run here
            lowered = self._lowered(tr, key, names, clock)

            def compile_program(lowered=lowered, disk_key=disk_key, deferred=False):
                if deferred:             # (its stage times join the trace's on the clock)
                    t0 = time.perf_counter()
                    exe = lowered.compile()
                    compile_log.info("compiled %s's own program on first use in %.3f s",
                                     clock.what, time.perf_counter() - t0)
                else:
                    exe = lowered.compile()
                if disk_key and getattr(exe, "cache_key", None):
                    persist.store(disk_key, exe, lowered.signature[2], lowered.aux)
                return exe
            aux = [(n.shape, n.dtype) for n in lowered.aux]
            if self._joins_autograd(tr, leaves, numpy_out):
                entry = Entry(lowered, None, tr.closure, numpy_out, aux, tr.closure_paths,
                               deferred=functools.partial(compile_program, deferred=True))
            else:
                entry = Entry(lowered, compile_program(), tr.closure, numpy_out, aux,
                               tr.closure_paths)
        entry.effects = tr.effects
        entry.out_alias = tr.out_alias
        entry.key = key
        if key in self._cache:            # a program for another state of the world
            self._park(self._cache.pop(key))
        self._cache[key] = entry
        self._last_names = names
        while len(self._cache) > self._maxsize:
            self._evict(self._cache.popitem(last=False)[1])
        if len(self._fast) > 4 * self._maxsize:
            self._fast = {k: e for k, e in self._fast.items() if e.key in self._cache}
        return entry

    def _variant_for(self, entry: Entry) -> "Entry | None":
        """A kept program of ``entry``'s signature that fits the world now (the guards it
        was traced under hold again: ``model.train()`` after an ``eval()`` call), swapped
        into the cache in place of ``entry`` (kept in turn); None if there is none."""
        kept = self._variants.get(entry.key, ())
        other = next((v for v in kept if v.stale() is None), None)
        if other is None:
            return None
        kept.remove(other)
        self._park(self._cache.pop(entry.key))
        self._cache[other.key] = other
        return other

    def _park(self, entry: Entry) -> None:
        """Keep an entry that left the cache because the world changed (its guards, a
        closed-over tensor's shape): a later call may fit it again.  At most
        :data:`_VARIANTS_PER_KEY` per signature; the oldest is forgotten."""
        self._fast = {k: e for k, e in self._fast.items() if e is not entry}
        kept = self._variants.setdefault(entry.key, [])
        kept.append(entry)
        if len(kept) > _VARIANTS_PER_KEY:
            self._forget(kept.pop(0))

    def _evict(self, entry: Entry) -> None:
        """Forget an entry that left the cache, and the programs kept for other states of
        its signature (see :meth:`_park`)."""
        self._forget(entry)
        for other in self._variants.pop(entry.key, ()):
            self._forget(other)

    def _forget(self, entry: Entry) -> None:
        """Forget an entry so its machine code can be freed: its calls stay counted, no
        fast key or native fast path refers to it any more."""
        self._evicted_native += self._entry_native_calls(entry)
        self._fast = {k: e for k, e in self._fast.items() if e is not entry}
        if getattr(type(self), "_native_for", None) is entry:
            self.__class__ = Compiled

    def _from_disk(self, disk_key, tr, key, names, numpy_out) -> Entry | None:
        """The entry for a traced program whose native code the disk cache holds, with
        no stage after tracing run (its Lowered runs them if inspected); else None."""
        lowered = self._lowered(tr, key, names)
        hit = persist.load(disk_key, lambda: schedule_of(lowered), self.target)
        if hit is None or not fits(hit, key[1], tr.closure):
            return None
        lowered._signature = (key[0], key[1], hit.out_structure)
        lowered._exe = hit.exe
        try:
            return Entry(lowered, hit.exe, tr.closure, numpy_out,
                          [(shape, dt) for _, shape, dt in hit.aux], tr.closure_paths)
        except (ValueError, KeyError):       # an entry that does not match its code
            return None

    def _breaks(self) -> bool:
        """Whether a trace of this function stops at a Python effect (see
        :mod:`.breaks`): symgrad.compile's (not jit's, nor a transform's), not inside a
        trace that does not (``symgrad.grad`` of a compiled function)."""
        if not (self.graph_breaks and self.performs_writes
                and isinstance(self.transform, Identity)):
            return False
        outer = dispatch._lifter[0]
        return outer is None or getattr(outer, "breaks", False)

    def _trace(self, args, key, names):
        structure, specs, static = key
        return trace(self.fn, args, self.static_argnums, list(specs), structure, names,
                     stateful=isinstance(self.transform, Identity), writes=self.performs_writes,
                     breaks=self._breaks())

    def _disk_key(self, tr, key) -> str | None:
        """The disk cache key of the traced program, if the disk cache can answer it."""
        if self.backend != "llvm" or not settings.disk_cache or not settings.cache_dir \
                or not self.target.runnable:
            return None
        return persist.trace_key(tr, key, self.transform, self.target)

    def _lowered(self, tr, key, names, clock: StageClock | None = None) -> Lowered:
        clock = clock or StageClock(getattr(self.fn, "__qualname__", "function"))
        return Lowered(functools.partial(run_stages, self.transform, tr, key, names, clock),
                       self.backend, target=self.target, clock=clock)

    # ---- stages & introspection ------------------------------------------------------------
    def lower(self, *args) -> Lowered:
        """Trace and optimise for these arguments without running (see :class:`Lowered`)."""
        key, leaves, names = self._signature(args)
        lowered = self._lowered(self._trace(args, key, names), key, names)
        lowered._get()
        return lowered

    def cache_info(self) -> CacheInfo:
        """Hits (Python dispatcher and native fast path), misses, entries, bound."""
        fast_path_hits = self._native_hits() - self._py_native
        return CacheInfo(self.hits + fast_path_hits, self.misses, len(self._cache),
                         self._maxsize)

    def _native_hits(self) -> int:
        kept = [e for es in self._variants.values() for e in es]
        return self._evicted_native + sum(self._entry_native_calls(e)
                                          for e in [*self._cache.values(), *kept])

    @staticmethod
    def _entry_native_calls(entry: Entry) -> int:
        """Calls of the entry's native code (its own counter), 0 without one."""
        if not entry.native_name or entry.exe is None:
            return 0
        try:
            return get_backend("llvm").native_calls(entry.exe, entry.native_name)
        except KeyError:
            return 0

    def cache_clear(self) -> None:
        for name in ("_keyword_variants", "_bool_variants"):
            for variant in self.__dict__.get(name, {}).values():
                variant.cache_clear()
        for entry in list(self._cache.values()):
            self._evict(entry)
        for kept in list(self._variants.values()):
            for entry in kept:
                self._forget(entry)
        self._variants.clear()
        self._cache.clear()
        self._fast.clear()
        self._dynamic_patterns.clear()
        self._not_generic.clear()
        self._size_calls.clear()
        self._uncompiled.clear()
        self.hits = self.misses = self._py_native = self._evicted_native = 0

    def __repr__(self) -> str:
        where = f", target={self._target.name!r}" if self._target_spec is not None else ""
        return (f"<symgrad.compile({getattr(self.fn, '__qualname__', self.fn)}, "
                f"backend={self.backend!r}{where})>")

    def __reduce__(self):
        """Pickle the function (by cloudpickle, so lambdas and closures travel too), the
        options and, per compiled signature, its optimised program and native code: a copy
        on a machine with the same target and versions runs those signatures with no
        tracing and no compile; on another machine it compiles them from the program, with
        no tracing; any other signature traces and compiles (or takes the code from the
        disk cache)."""
        import cloudpickle          # late: only pickling needs it
        entries = travel.items_of(self._cache) if self.backend == "llvm" else []
        # the entries' closed-over tensors are pickled with the function, in one pickle:
        # the copy's entries then hold the very tensors the copied function closes over
        closures = [entry.closure for entry, _ in entries]
        return (_unpickle_compiled, (cloudpickle.dumps((self.fn, closures)),
                                     self.static_argnums, self.backend, self.transform,
                                     self._maxsize, self._target_spec,
                                     [item for _, item in entries], self.static_argnames))

    def _adopt(self, items, closures) -> None:
        """Entries from a pickle (see :meth:`__reduce__` and :mod:`.travel`)."""
        for item, closure in zip(items, closures):
            made = travel.adopt(item, self.backend, self.target)
            if made is None:
                continue           # traced and compiled again when first called
            lowered, exe = made
            key = item[0]
            entry = Entry(lowered, exe, [(t, None) for t in closure], item[1], item[2])
            entry.key = key
            self._cache[key] = entry
            n_args = len(pytree.children(key[0])) + len(self.static_argnums)
            self._last_names = self._leaf_names([None] * n_args, key[0])

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)


_live: "weakref.WeakSet[Compiled]" = weakref.WeakSet()


def reset() -> None:
    """Forget every compiled function's programs (``torch.compiler.reset()``,
    ``torch._dynamo.reset()``): each traces again at its next call, its counters at 0,
    and graph breaks are logged anew. The disk cache (:mod:`~symgrad.compiler.persist`)
    stays, as PyTorch's on-disk caches do."""
    for c in list(_live):
        c.cache_clear()
    _logged_breaks.clear()


def _default_dtype_changed() -> None:
    """The default dtype changed: no native fast path runs a program that baked the old
    one in (the Python dispatcher checks it, :meth:`Entry.stale`)."""
    for c in list(_live):
        if getattr(type(c), "_native_for", None) is not None:
            c.__class__ = Compiled


dtypes._default_changed.append(_default_dtype_changed)


def _unpickle_compiled(fn_bytes: bytes, static_argnums, backend, transform, maxsize, target,
                       entries=(), static_argnames=()):
    fn, closures = pickle.loads(fn_bytes)
    c = Compiled(fn, static_argnums, backend, transform, maxsize, target, static_argnames)
    if entries:
        c._adopt(entries, closures)
    return c


def _shape_at_call(entry, args: list):
    """For a shape-generic entry's call with arguments ``args``: a function giving a
    closed-over tensor's shape at the call's size (its input's shape in the kernel)."""
    exe = entry.exe
    shapes = exe.shapes_at(exe.size_of(args))[0]
    position = {id(t): len(args) + k for k, t in enumerate(entry.closure)}
    return lambda t: shapes[position[id(t)]]


def _draw_in_enclosing(tr, env) -> None:
    """The random draws of an inlined trace (its runtime values) drawn by the enclosing
    trace -- anew at each call of an enclosing compiled function, per example in a vmap
    with randomness="different" -- or now (never the throw-away probe values of tracing)."""
    if tr.effects is None or not tr.effects.scalars:
        return
    outer = getattr(dispatch._lifter[0], "runtime_value", None)
    nodes = {id(t): n for t, n in tr.closure}
    for t, getter in tr.effects.scalars:
        node = nodes[id(t)]
        name = node.attr("name")
        env[id(node)] = (outer(getter, t.dtype, name) if outer is not None
                         else Tensor._from_array(np.asarray(getter(), t.dtype.np), t.dtype))
