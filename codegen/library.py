"""Code every program module may call that no program decides: the trig functions'
huge-argument helpers (:mod:`codegen.vecmath.trig`: the scalar helper, its vector
variants and their worker), compiled once per process, target and format (f64, f32).

Defined in each program module, they were a third to a half of the LLVM time of a small
program using sin or cos (their vector variants are long, and every module optimised
and compiled them again).  Here they form one *library* object per target and format,
loaded once, its functions published by name (:func:`codegen.jit.add_symbol`) and never
unloaded; a program module built inside :func:`shared` only declares them (:func:`finish`
keeps the vector variants alive with ``llvm.compiler.used``, so the loop vectoriser
still finds them through the helper's ``vector-function-abi-variant`` attribute).
Names carry a tag of the target (:func:`tag`): libraries for two targets in one process
do not collide, and an object built for one target never links against another's.

:func:`prefetch` builds a library in a background thread: the front end asks for it
(:func:`codegen.backend.prepare`) as soon as a traced program shows a trig function, so
LLVM's work on it (released from the GIL) runs while differentiation and lowering run
on the other CPU -- when that pays: with the support-object cache on
(:mod:`codegen.support`, on by default even when the program cache is off: a library's
object is stored once per machine and code generator, and later processes only load
it, ~2 ms) or a CPU to spare.  Modules declare a
library's functions only once it is built or being built (else they define them, as
before); :func:`ensure` waits for it before a program object is loaded (or builds it, for
an object from the disk cache).  Targets this process cannot run keep defining the
helpers in each module (there is nothing to load).
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import threading
from typing import Iterable, Iterator

import llvmlite.ir as ir

from . import jit, support, target as targets
from .target import Target

__all__ = ["shared", "active", "tag", "finish", "ensure", "prefetch", "needed", "PREFIX",
           "FORMATS"]

PREFIX = "symgrad_vm_trig_huge_"     # every name a library defines starts so (+ format)
FORMATS = ("f64", "f32")

_ACTIVE: contextvars.ContextVar[Target | None] = contextvars.ContextVar(
    "symgrad_library", default=None)
_LOCK = threading.Lock()
_DONE: dict[tuple[str, str], object] = {}             # (tag, format) -> loaded object (kept)
_BUSY: dict[tuple[str, str], threading.Event] = {}    # ... -> set when its build ends


def tag(t: Target) -> str:
    """A short digest of the target's fingerprint, part of every library name."""
    return hashlib.blake2b(t.fingerprint().encode(), digest_size=4).hexdigest()


@contextlib.contextmanager
def shared(t: Target) -> Iterator[bool]:
    """Inside the block, modules built for ``t`` declare the libraries' functions instead
    of defining them, when this process can run ``t`` (yields whether they do)."""
    token = _ACTIVE.set(t if t.runnable else None)
    try:
        yield t.runnable
    finally:
        _ACTIVE.reset(token)


def active(fmt: str) -> Target | None:
    """The target whose library of format ``fmt`` modules built now call (see
    :func:`shared`): when it is built or being built; else None (they define the helpers
    themselves)."""
    t = _ACTIVE.get()
    if t is None:
        return None
    key = (tag(t), fmt)
    return t if key in _DONE or key in _BUSY else None


def _format_of(name: str) -> str | None:
    rest = name[len(PREFIX):] if name.startswith(PREFIX) else ""
    return next((f for f in FORMATS if rest.startswith(f + "_")), None)


def finish(module: ir.Module) -> set[str]:
    """Keep the library functions ``module`` declares until code generation, although
    only an attribute refers to the vector variants (``@llvm.compiler.used``); the
    formats of the libraries it calls."""
    declared = [fn for fn in module.functions if fn.is_declaration and _format_of(fn.name)]
    variants = [fn for fn in declared if isinstance(fn.function_type.return_type, ir.VectorType)]
    if variants:
        ty = ir.ArrayType(ir.PointerType(), len(variants))
        used = ir.GlobalVariable(module, ty, "llvm.compiler.used")
        used.linkage = "appending"
        used.section = "llvm.metadata"
        used.initializer = ir.Constant(ty, variants)
    return {_format_of(fn.name) for fn in declared}


def needed(names: Iterable[str]) -> set[str]:
    """The formats of the libraries that an object with these undefined symbols calls."""
    return {f for f in map(_format_of, names) if f is not None}


def _build_ir(t: Target, fmt_name: str) -> str:
    from .vecmath import trig                 # late: the IR builders load when one is built
    from .vecmath.core import F32, F64        # late: as above
    fmt = {"f64": F64, "f32": F32}[fmt_name]
    module = ir.Module(name=f"symgrad_library_{fmt_name}_{tag(t)}")
    trig.define_huge_helper(module, fmt, tag(t))
    for fn in module.functions:          # exported: other objects call them by name
        if fn.linkage == "weak_odr":
            fn.linkage = ""
    return str(module)


def _build(t: Target, fmt: str) -> None:
    with targets.use(t):
        loaded = support.load_or_compile(f"library-{fmt}", lambda: _build_ir(t, fmt), t)
    for name in loaded.functions:
        jit.add_symbol(name, loaded.address(name))
    _DONE[(tag(t), fmt)] = loaded


def _run(t: Target, todo: list[tuple[str, threading.Event]]) -> None:
    for fmt, done in todo:
        try:
            _build(t, fmt)
        except Exception:       # ensure() builds it again in the caller, raising there
            pass
        finally:
            with _LOCK:
                _BUSY.pop((tag(t), fmt), None)
            done.set()


def _worth_it() -> bool:
    """Whether building a library now should pay: its object can be kept on disk for the
    next processes, or a CPU is free to build it while this compile runs.  (On one busy
    CPU it costs a little more than the helpers defined in the module.)"""
    if support.enabled():
        return True
    try:
        return os.getloadavg()[0] < (os.cpu_count() or 1) - 0.5
    except OSError:                      # no load average here
        return False


def prefetch(t: Target, fmts: Iterable[str]) -> None:
    """Start building the libraries of ``fmts`` for ``t`` in a background thread (those
    not built or being built, if ``t`` runs here and it is worth it, see :func:`_worth_it`)."""
    if not t.runnable or not _worth_it():
        return
    key = tag(t)
    wanted = set(fmts)
    with _LOCK:
        todo = [(f, threading.Event()) for f in FORMATS if f in wanted
                and (key, f) not in _DONE and (key, f) not in _BUSY]
        if not todo:
            return
        for f, done in todo:
            _BUSY[(key, f)] = done
    threading.Thread(target=_run, args=(t, todo), name="symgrad-library", daemon=True).start()


def ensure(t: Target, fmts: Iterable[str]) -> None:
    """The libraries of ``fmts`` for ``t`` built and published (waits for
    :func:`prefetch`'s thread)."""
    key = tag(t)
    for fmt in fmts:
        if (key, fmt) in _DONE:
            continue
        with _LOCK:
            busy = _BUSY.get((key, fmt))
        if busy is not None:
            busy.wait()
        with _LOCK:
            if (key, fmt) not in _DONE:
                _build(t, fmt)
