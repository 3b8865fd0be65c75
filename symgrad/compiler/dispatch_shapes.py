"""Automatic dynamic shapes in the dispatcher: when a call misses only on sizes, find or
build one shape-generic kernel for them, verify a new size against it, and compile a
size that keeps coming back for its own shapes (the policy and the size arithmetic are
:mod:`.dynamic`'s). :class:`ShapeGeneric` is a part of
:class:`~symgrad.compiler.dispatcher.Compiled`.
"""
from __future__ import annotations

from ..config import settings
from ..tensor import Tensor
from . import dynamic
from .backends import get_backend
from .effects import draw_parameters
from .entries import Entry, explain_difference, share_bridge
from .progress import StageClock

__all__ = ["ShapeGeneric"]


class ShapeGeneric:
    """The dispatcher's shape-generic entries (methods of ``Compiled``)."""

    def _generic_for(self, args, key, names) -> "Entry | None":
        """The shape-generic entry whose kernel computes this signature's program, if any
        (checked by :meth:`_verified`)."""
        self._dynamic_patterns = [p for p in self._dynamic_patterns if p[2].key in self._cache]
        for pattern, dims, entry in self._dynamic_patterns:
            if entry.key in self._cache and entry.stale() is not None:
                del self._cache[entry.key]         # (its closed-over tensors changed: the
                self._evict(entry)                 # next generic kernel is traced anew)
                continue
            if entry.key in self._cache and pattern[0] == key[0] and pattern[2] == key[2]:
                n = dynamic.matches(key[1], pattern[1], dims)
                if n is not None and self._verified(entry, args, key, names, n):
                    return entry
        return None

    def _verified(self, entry: "Entry", args, key, names, n: int) -> bool:
        """Whether the program traced at size ``n`` is the generic program at ``n``: the
        sizes fitted on the sentinels hold at ``n`` too (a slice clamped by a small ``n``,
        an index past it, a Python branch on a shape, a trace that fails at ``n`` all make
        it another program, compiled for its own shapes)."""
        try:
            tr = self._trace(args, key, names)
            if _fixed(tr.closure, tr.effects) != _fixed(entry.closure, entry.effects) \
                    or _state(tr.effects) != _state(entry.effects):
                return False      # (it reads other closed-over tensors than the kernel's)
            lowered = self._lowered(tr, key, names)
            found = dynamic.generalize(list(entry.sentinels) + [lowered.optimized],
                                       dynamic.SENTINELS + (n,))
        except Exception:     # noqa: BLE001 -- the per-size compile raises it to the user
            return False
        return not isinstance(found, str)

    def _dynamic(self, args, key, leaves, names) -> tuple["Entry | None", str | None]:
        """On a miss that only changed sizes: (a shape-generic entry or None, the reason
        to log); (None, None) when the miss is not about sizes."""
        last = self._last_exact_key()
        found = dynamic.candidate(last, key, names) if last is not None else "no previous call"
        if isinstance(found, str):
            return None, None
        dims, before, after = found
        what = " and ".join(f"{names[k]} dim {d}" for k, d in dims)
        base = explain_difference(last, key, names)
        if self.backend != "llvm":         # (its compile is tracing and graph passes)
            return None, None
        if not settings.dynamic_shapes:
            return None, f"{base}; dynamic shapes are off (SYMGRAD_DYNAMIC_SHAPES=0)"
        if not self.dynamic_shapes:
            return None, f"{base}; dynamic shapes are off for this function (dynamic=False)"
        if after < 2:
            return None, (f"{base}; sizes 0 and 1 are specialised (compiled for their exact "
                          f"shapes, as torch.compile does)")
        if dims in self._not_generic:
            return None, f"{base}; compiling per size: {self._not_generic[dims]}"
        try:
            entry = self._build_generic(args, key, leaves, names, dims)
        except get_backend("llvm").NotGeneric as e:
            self._not_generic[dims] = str(e)
            return None, f"{base}; compiling per size: {e}"
        share_bridge(self._cache.get(last), entry)
        return entry, (f"{base}; {what} is now a dynamic size: one kernel serves every "
                       f"size >= 2")

    def _sizes_donor(self, key) -> "Entry | None":
        """The entry of the last exact signature when ``key`` differs from it in argument
        shapes only (the same structure, static arguments, kinds, dtypes and
        requires_grad): a program compiled for ``key``'s sizes may join autograd through
        its bridge (:func:`~.entries.share_bridge`)."""
        last = self._last_exact_key()
        if last is None or last[0] != key[0] or last[2] != key[2] or len(last[1]) != len(key[1]) \
                or any((a.kind, a.dtype, a.requires_grad) != (b.kind, b.dtype, b.requires_grad)
                       for a, b in zip(last[1], key[1])):
            return None
        return self._cache.get(last)

    def _maybe_specialise(self, entry: "Entry", fkey, args) -> "Entry":
        """Count the calls of one size served by a shape-generic kernel; the
        :data:`~symgrad.compiler.dynamic.SPECIALISE_AFTER`-th compiles that size's own
        kernel (fused loops, its native entry), which serves it from then on."""
        if len(self._size_calls) > 4 * self._maxsize:      # (many sizes: count afresh)
            self._size_calls.clear()
        calls = self._size_calls[fkey] = self._size_calls.get(fkey, 0) + 1
        if calls < dynamic.SPECIALISE_AFTER:
            return entry
        self._size_calls.pop(fkey, None)
        key, leaves, names = self._signature(args)
        self._miss(f"{explain_difference(self._last_exact_key() or key, key, names)}; "
                   f"this size ran {calls} times on the shape-generic kernel: compiling its own")
        self.hits -= 1                    # (the caller counts a hit)
        special = self._build(args, key, leaves, names)
        share_bridge(entry, special)
        self._fast[fkey] = special
        return special

    def _build_generic(self, args, key, leaves, names, dims) -> "Entry":
        """Trace at the sentinel sizes, find how the program's sizes follow them and
        compile one kernel (raises NotGeneric, saying why not)."""
        backend = get_backend("llvm")
        what = getattr(self.fn, "__qualname__", "function")
        numpy_out = not any(isinstance(v, Tensor) for v in leaves)
        with StageClock(f"{what} (dynamic)") as clock:
            traced = []
            n = dynamic.matches(key[1], key[1], dims)
            for size in dynamic.SENTINELS + (n,):       # (the sentinels, then this size)
                skey = (key[0], dynamic.with_size(key[1], dims, size), key[2])
                try:
                    with clock.stage("trace"):
                        tr = self._trace(args, skey, names)
                    why = _state_why(tr.effects, traced[0][0].effects if traced else _FIRST)
                    if why is not None:
                        raise backend.NotGeneric(why)
                    lowered = self._lowered(tr, skey, names, clock)
                    lowered.optimized
                except backend.NotGeneric:
                    raise
                except Exception as e:    # noqa: BLE001 -- a size this function refuses
                    raise backend.NotGeneric(f"tracing at size {size} failed: "
                                             f"{type(e).__name__}: {e}") from None
                if lowered.aux:
                    raise backend.NotGeneric("the program has placeholder inputs")
                traced.append((tr, lowered))
            programs = [lw.optimized for _, lw in traced]
            dd = dynamic.generalize(programs, dynamic.SENTINELS + (n,))
            if isinstance(dd, str):
                raise backend.NotGeneric(dd)
            if self.target is not None:
                self.target.check_runnable()
            tr, lowered = traced[0]

            def compile_kernel(program=lowered.optimized, dd=dd, clock=clock):
                exe = backend.compile_dynamic(program, dd, self.target, clock.enter)
                clock.enter(None)
                return exe
            # a call joining autograd runs the split programs (generic themselves): this
            # entry's own kernel is compiled when a call runs it (no_grad, eval)
            # (a program drawing by shape joins autograd through its own kernel, which must
            # exist: compiled now, so an operation it cannot lower makes it per size)
            deferred = self._joins_autograd(tr, leaves, numpy_out) and not (
                tr.effects is not None and tr.effects.draws and tr.effects.resizable)
            exe = None if deferred else compile_kernel()
        numpy_out = not any(isinstance(v, Tensor) for v in leaves)
        entry = Entry(lowered, exe, tr.closure, numpy_out, [], tr.closure_paths,
                      deferred=compile_kernel if deferred else None)
        entry.effects = tr.effects     # (its guards and state writes: per call, as any entry's)
        entry.dynamic = dims
        entry.sentinels = tuple(programs[:len(dynamic.SENTINELS)])
        entry.key = ("dynamic", key[0], dims, key[2])
        self._cache[entry.key] = entry
        self._dynamic_patterns.append((key, dims, entry))
        self._last_names = names
        while len(self._cache) > self._maxsize:
            self._evict(self._cache.popitem(last=False)[1])
        return entry


_FIRST = object()


def _fixed(closure, effects) -> list:
    """The identities of the closed-over tensors a program reads, its runtime values (new
    tensors at each trace, read or drawn per call) as None."""
    fresh = {id(t) for t, _ in effects.scalars} if effects is not None else set()
    return [None if id(t) in fresh else id(t)
            for t in (c[0] if isinstance(c, tuple) else c for c in closure)]


def _state_why(effects, first) -> str | None:
    """Why a program with these effects cannot serve every size (None: it can): state
    written (BatchNorm's running statistics, a training step's parameters and optimizer
    state) is fine -- the same tensors at every size, given the program's new values
    after each call --, so are ``.grad`` updates (the parameters' shapes) and values
    drawn per call whose numbers depend on their shape alone (a dropout mask, drawn at
    the call's size: :meth:`Effects.before_sized_call`); other draws, a first optimizer
    step (it creates state) and updates of the arguments are compiled per size.
    ``first``: the effects of the first size traced, which every other size must have
    alike (:data:`_FIRST` while tracing that one)."""
    if effects is not None:
        if not effects.resizable:
            return "it draws values per call that cannot be drawn at another size"
        if effects.one_shot:
            return "it creates state (an optimizer's first step)"
        if effects.arg_writes:
            return "it updates its arguments in place"
    if first is _FIRST:
        return None
    if _state(effects) != _state(first):
        return "the state it writes depends on the size"
    return None


def _state(effects) -> tuple:
    """What a call's effects write (tensors, ``.grad`` of which leaves and how) and how
    runtime values it reads (a draw's parameters: :func:`~.effects.draw_parameters`):
    alike at every size of a shape-generic program."""
    if effects is None:
        return (), (), (), ()
    return ([id(t) for t in effects.writes],
            [(id(leaf), kind, id(payload)) for leaf, kind, payload in effects.grads],
            list(effects.arg_grads),
            [draw_parameters(getter) for _, getter in effects.scalars])
