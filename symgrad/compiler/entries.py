"""What the dispatch cache of a compiled function holds (:mod:`.dispatcher`): an
:class:`Entry` per compiled signature (its program, native entry, closed-over tensors and
when it goes stale), the :class:`OneShot` program run once, the checks of what a call or a
disk hit may hand to native code, and the words explaining why a signature missed.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..config import settings
from ..graph import dtypes, pytree
from ..graph.interpret import evaluate
from .stages import Lowered

__all__ = ["Entry", "OneShot", "UNSET", "separate", "fits", "share_bridge",
           "explain_difference"]

Aval = namedtuple("Aval", "shape dtype")
UNSET = object()


class Entry:
    """One compiled signature: its program (``lowered``), the executable and the call
    that runs it, what it closes over, and what decides it no longer fits (:meth:`stale`)."""

    __slots__ = ("exe", "call", "closure", "closure_avals", "aux", "aux_avals", "numpy_out",
                 "structure", "lowered", "key", "native_ok", "native_counted", "native_name",
                 "specs", "effects", "fresh_outputs", "dynamic", "sentinels", "closure_paths",
                 "donated", "bridge", "refused", "default_dtype", "deferred", "out_alias",
                 "alias_owners")

    def __init__(self, lowered: Lowered, exe, closure, numpy_out, aux, closure_paths=None,
                 deferred=None):
        self.lowered = lowered
        # a program compiled when first run (``deferred()`` gives its executable): a call
        # joining autograd runs the split forward / backward programs instead
        self.deferred = deferred
        self.refused = [0]
        self.native_ok = None
        if exe is not None:
            self.attach(exe)
        else:
            self.exe = self.native_name = self.call = None
            self.native_counted, self.donated = 0, ()
        self.closure = [t for t, _ in closure]
        # the shape, dtype and requires_grad each closed-over tensor had when traced
        self.closure_avals = [(tuple(t.shape), t.dtype, t._requires_grad)
                              for t, _ in closure]
        # where the function finds its closed-over tensors (sources.Guards: re-read per call)
        self.closure_paths = closure_paths or None
        self.aux = [np.zeros(shape, dtype.np) for shape, dtype in aux]
        self.aux_avals = [Aval(shape, dtype) for shape, dtype in aux]
        self.numpy_out = numpy_out
        self.effects = None
        self.fresh_outputs = lowered.backend == "llvm"    # native code allocates outputs
        self.dynamic = None            # a shape-generic entry: its (leaf, axis) pairs
        self.sentinels = ()            # ... and its programs at dynamic.SENTINELS
        self.bridge = UNSET            # its link to eager autograd (made on first use)
        self.default_dtype = dtypes.get_default_dtype()   # (the trace may have baked it in)
        self.out_alias = ()            # outputs returned as the tensor they are (trace)
        self.alias_owners = None       # (closure arrays, their owners' ids): _aliased
        _, self.specs, self.structure = lowered.signature

    def attach(self, exe) -> None:
        """Run ``exe`` for this entry's calls."""
        self.exe = exe
        # the native entry checks arguments in native code (else the checked Python path);
        # the structured one returns the outputs nested as the function returns them
        self.native_name = None if settings.sanitize else (
            getattr(exe, "structured_entry_name", None) or getattr(exe, "entry_name", None))
        # (sanitized kernels run through the checked Python path, which reads their fault word)
        structured = self.native_name != getattr(exe, "entry_name", None)
        # calls the native entry handed to the checked path (arguments it does not take
        # as they are: strided, broadcast): not native calls, for cache_info's count
        refused = self.refused
        if self.native_name:
            checked = exe._fallback

            def fallback(*arrays):
                refused[0] += 1
                return checked(*arrays)
            self.call = exe.native_entry(fallback, structured=structured)
        else:
            self.call = lambda *a: exe(list(a))
        self.native_counted = int(self.native_name is not None)
        # the inputs native code updates in place (state outputs donated to them)
        self.donated = tuple(k for _, k in getattr(getattr(exe, "interface", None),
                                                   "donated", ()))
        self.deferred = None

    def stale(self) -> str | None:
        """Why this entry's program does not fit the world now (a closed-over tensor
        replaced, its shape or dtype changed, a Python constant it read, the default
        dtype, a guard of its effects), or None."""
        if self.default_dtype is not dtypes._default_float[0]:
            return (f"the default dtype changed: {self.default_dtype.name} → "
                    f"{dtypes.get_default_dtype().name}")
        if self.closure_paths is not None:
            why = self.closure_paths.replaced()
            if why is not None:
                return why
        for t, (shape, dt, rg) in zip(self.closure, self.closure_avals):  # (per call: no Size)
            if (t._data.shape if t._node is None else t._node.shape) != shape \
                    or t._dtype is not dt:
                return (f"closed-over tensor of shape {list(shape)} {dt.name} changed to "
                        f"{list(t.shape)} {t.dtype.name}")
            if t._requires_grad is not rg:
                return (f"closed-over tensor of shape {list(shape)} {dt.name} now has "
                        f"requires_grad={t._requires_grad}")
        return self.effects.stale() if self.effects is not None else None


def separate(arrays: list, donated: tuple) -> None:
    """Before a call whose native code writes inputs ``donated`` in place: an input
    sharing memory with another argument (a view of the same array, the same array
    twice) or not writeable is replaced by a copy, so the call reads every other input
    as it was and writes only the copy (the state then takes the output by a copy, as
    without donation)."""
    owners = [id(a) if a.base is None else id(a.base) for a in arrays]
    shared = len(set(owners)) != len(owners)
    for k in donated:
        a = arrays[k]
        if not a.flags.writeable or (shared and owners.count(owners[k]) > 1):
            arrays[k] = np.array(a, copy=True)


def share_bridge(donor: "Entry | None", entry: Entry) -> None:
    """A program of the same function for other sizes (a shape-generic kernel, a size's
    own kernel) joins autograd through the bridge ``donor`` made, when both read the same
    closed-over tensors and the donor's guards hold: the bridge's split programs are
    shape-generic themselves, so a new batch size in a training loop compiles no new
    forward / backward programs per size."""
    if donor is None or not isinstance(donor.bridge, bridge_type()) \
            or donor.stale() is not None or len(donor.closure) != len(entry.closure) \
            or any(a is not b for a, b in zip(donor.closure, entry.closure)):
        return
    entry.bridge = donor.bridge


def bridge_type():
    from ..autograd.compiled_function import Bridge     # (autograd sits above the compiler)
    return Bridge


class OneShot:
    """A program run once by the numpy interpreter, not compiled nor cached: its trace
    created state (see :class:`~symgrad.compiler.effects.Effects`), so the next call traces
    again. An optimizer's first step is one: it runs at eager speed, and the steady state
    is compiled from the second call on."""

    native_counted = 0
    native_ok = False
    native_name = None
    key = None
    aux: list = []
    fresh_outputs = False
    donated = ()
    bridge = None
    refused = (0,)
    deferred = None
    out_alias = ()
    alias_owners = None

    def __init__(self, tr, key, numpy_out):
        self.closure = [t for t, _ in tr.closure]
        self.specs = key[1]
        self.numpy_out = numpy_out
        self.effects = tr.effects
        self.structure = tr.out_structure
        inputs = tr.input_nodes
        outputs = tr.out_nodes

        def call(*arrays):
            return evaluate(outputs, dict(zip(inputs, arrays)))
        self.call = call


def fits(hit, specs, closure) -> bool:
    """Whether a disk hit's native code takes the arguments this call passes (a check
    against a corrupt entry; equal keys mean equal programs)."""
    want = [(tuple(s.shape), s.dtype.name) for s in specs]
    want += [(tuple(n.shape), n.dtype.name) for _, n in closure]
    want += [(tuple(shape), dt.name) for _, shape, dt in hit.aux]
    return want == [(b.shape, b.dtype) for b in hit.exe.interface.inputs]


def explain_difference(old, new, names) -> str:
    """Why `new` (structure, specs, static) is not `old`: the first differences, named."""
    (s0, sp0, st0), (s1, sp1, st1) = old, new
    if st0 != st1:
        return f"static arguments changed: {st0!r} → {st1!r}"
    if s0 != s1:
        n0 = len(pytree.children(s0)) if pytree.kind(s0) == "tuple" else "?"
        n1 = len(pytree.children(s1)) if pytree.kind(s1) == "tuple" else "?"
        if n0 != n1:
            return f"number of arguments {n0} → {n1}"
        return "argument structure changed (nesting of tuples / lists / dicts)"
    diffs = []
    for a, b, name in zip(sp0, sp1, names):
        if a.shape != b.shape:
            diffs.append(f"{name}: shape {a.shape} → {b.shape}")
        if a.dtype is not b.dtype:
            diffs.append(f"{name}: dtype {a.dtype.name} → {b.dtype.name}")
        if a.kind != b.kind:
            diffs.append(f"{name}: {a.kind} → {b.kind}")
        if a.requires_grad != b.requires_grad:
            diffs.append(f"{name}: requires_grad {a.requires_grad} → {b.requires_grad}")
    return "; ".join(diffs) or "signature changed"
