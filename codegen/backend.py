"""The LLVM backend: ``compile_program(program) -> LLVMExecutable``.

Pipeline (one LLVM module per program signature, one native kernel computing every
output -- forward and gradient -- per call):

1. :func:`codegen.plan.build_plan` -- schedule: roots, fused loops, steps, arena;
2. :func:`codegen.cache.load` -- a cached object for the same key skips 3-4 entirely
   (no LLVM optimisation or code generation; the object is only linked);
   :func:`load_executable` reloads it from its key and :class:`~codegen.executable.Interface`
   alone, skipping step 1 too (the front end's disk cache of traced programs);
3. :func:`codegen.module.build_module` -- IR with ``llvmlite.ir``; plus the CPython
   entry (:func:`codegen.callconv.build_entry`) for fully native plans; the bodies of
   its structured loops start compiling in a background thread first
   (:func:`codegen.loops.prefetch`);
4. :func:`codegen.jit.compile_module` -- O3 for the target, object code, stored in the
   disk cache with the IR texts (assembly is generated when first asked for).

Every step runs for one :class:`codegen.target.Target` (``target=``, default
:func:`codegen.target.current`), set as the current target while it runs, so every
decision the lowering makes reads the same object.  Code for a target this process cannot
run is generated and kept for inspection (not cached); calling it raises
:class:`codegen.target.TargetError`.

>>> import numpy as np, symgrad
>>> vg = symgrad.value_and_grad(lambda x: (3 * (x + 2) ** 2).mean(), backend="llvm")
>>> value, grad = vg(np.ones((2, 2)))
>>> float(value), grad.tolist()
(27.0, [[4.5, 4.5], [4.5, 4.5]])
"""
from __future__ import annotations

import zlib
from typing import Callable

import numpy as np

from symgrad.graph.node import toposort
from symgrad.graph.primitives import NUMPY_RULES
from symgrad.version import __version__

from . import binding, cache, callconv, jit, library, loops, runtime, target as targets, worker
from .executable import ENTRY_SUFFIX, STRUCTURED_SUFFIX, Interface, LLVMExecutable
from .dynamic.errors import NotGeneric
from .target import Target

__all__ = ["compile_program", "load_executable", "reload", "make_target", "prepare", "schedule",
           "native_calls", "entry_key", "source_digest", "load_entry", "store_entry",
           "LLVMExecutable", "ENTRY_SUFFIX", "portable", "from_portable",
           "STRUCTURED_SUFFIX", "stats", "set_threads", "max_threads", "on_blas_load",
           "compile_dynamic", "NotGeneric"]

stats = {"compiled": 0, "from_cache": 0}
_TEXTS = ("llvm", "llvm-opt")     # (entries stored before the optimised IR was on demand)


def _entry_specs(interface: Interface):
    args = [callconv.ArgSpec(b.name if b.name.isidentifier() else f"arg{k}", b.dtype, b.shape)
            for k, b in enumerate(interface.inputs)]
    return args, callconv.out_specs(interface.outputs, interface.donated)


def _fast_entry_possible(interface: Interface) -> bool:
    return (not interface.hybrid and len(interface.outputs) > 0 and
            all(b.dtype in callconv.SUPPORTED_DTYPES
                for b in (*interface.inputs, *interface.outputs)))


def _names(key: str, interface: Interface, entry: bool = True) -> tuple[str, str | None]:
    name = f"symgrad_{key[:16]}"
    return name, (name + ENTRY_SUFFIX if entry and _fast_entry_possible(interface) else None)


def _load(key: str, interface: Interface, plan, t: Target,
          entry: bool = True) -> LLVMExecutable | None:
    """The executable stored under ``key``, or None if it is absent or unusable."""
    if not t.runnable:
        return None
    hit = cache.load(key)
    if hit is None:
        return None
    name, entry_name = _names(key, interface, entry)
    try:
        runtime.register_for(hit["object"], t)
        handle = jit.load_object(hit["object"], t)
        texts = {k: zlib.decompress(hit[k]).decode() for k in _TEXTS if k in hit}
        exe = LLVMExecutable(interface, handle, texts, name, entry_name, True, plan, t)
    except (jit.UnresolvedSymbolError, zlib.error, KeyError, RuntimeError, ValueError):
        return None                                  # stale or unusable: rebuild
    exe.cache_key = key
    exe.object_code = hit["object"]
    stats["from_cache"] += 1
    return exe


def load_executable(key: str, interface: Interface, plan,
                    target: Target | None = None) -> LLVMExecutable | None:
    """Reload the executable :func:`compile_program` stored under ``key`` (its
    ``cache_key``) from the disk cache, given its ``interface``, without the program:
    ``plan`` is a function returning the schedule, called only if it is needed (see
    :mod:`codegen.executable`).  None when the entry is absent, corrupt or stale."""
    runtime.register()
    return _load(key, interface, plan, target or targets.current())




def compile_program(program, target: Target | None = None,
                    on_stage: Callable[[str], None] | None = None,
                    entry: bool = True) -> LLVMExecutable:
    """Native code for ``program`` (see the module docstring).  ``on_stage(name)`` is
    told when each stage starts: "plan", "lower", "llvm-opt", "machine-code".
    ``entry=False``: no CPython entry (code only native code calls, as a loop body:
    the executable's checked Python path still runs it)."""
    with targets.use(target) as t:
        return _compile(program, t, on_stage or (lambda name: None), entry)


def _compile(program, t: Target, stage: Callable[[str], None],
             entry: bool = True) -> LLVMExecutable:
    # late: the planner and the IR builders load only when something is compiled (a run
    # from the disk cache needs neither)
    from .module import build_module
    from .plan import build_plan
    from .steps import NodeStep
    runtime.register()
    stage("plan")
    plan = build_plan(program)
    interface = Interface.of(plan)
    if not cache.enabled():     # the key only names the code: no structural key
        key = cache.transient_key()
    else:
        key = cache.cache_key(program)
        if not entry:           # other code than the same program with its entry
            key = cache.derived_key("no-entry", [key], t)
        exe = _load(key, interface, plan, t, entry)
        if exe is not None:
            return exe
    name, entry_name = _names(key, interface, entry)
    if t.runnable:          # loop bodies compile in the background meanwhile
        loops.prefetch([s.node for s in plan.steps if isinstance(s, NodeStep)], t)
    stage("lower")
    with library.shared(t) as shared:
        module, kernel = build_module(plan, name)
    if shared:
        library.ensure(t, library.finish(module))
    if entry_name is not None:
        args, outs = _entry_specs(interface)
        callconv.build_entry(module, kernel, entry_name, args, outs, tuple_result=True)
        structure = interface.structure
        if structure is not None:       # results nested as the function returns them
            callconv.build_entry(module, kernel, entry_name + STRUCTURED_SUFFIX, args, outs,
                                 structure=structure)
    if t.runnable:
        if any(name in module.globals for name in runtime.BLAS_GEMM.values()):
            runtime.register_blas()
        if runtime.THREAD_POST in module.globals:
            runtime.register_threads()
    compiled = jit.compile_module(str(module), level=jit.OPT_LEVEL, target=t, on_stage=stage)
    texts = {"llvm": compiled.ir}            # the optimised IR and asm: on demand
    if t.runnable and cache.enabled():
        cache.store(key, {"object": compiled.object_code,
                          "llvm": zlib.compress(compiled.ir.encode(), 1)})
    stats["compiled"] += 1
    exe = LLVMExecutable(interface, compiled.loaded, texts, name, entry_name, False, plan, t)
    exe.cache_key = key
    exe.object_code = compiled.object_code
    return exe


# ---- the rest of the interface the front end uses ----------------------------------------
# ``symgrad`` reaches the code generator only through this module (its compiler's stages,
# ``symgrad.compiler.persist``'s disk cache of traced programs, the dispatcher's counters).

def prepare(nodes, target: Target | None = None) -> None:
    """Start, in a background thread, what compiles for ``target`` share and no program
    decides, as far as the traced graph ``nodes`` (outputs) shows it will need it (the
    vector-math libraries, :mod:`codegen.library`): the front end calls this right after
    tracing, so that work runs while it differentiates and lowers."""
    fmts = {library_format(n.dtype) for n in toposort(list(nodes))
            if any(NUMPY_RULES.get(n.op) is f for f in _TRIG_UFUNCS)}
    fmts.discard(None)
    if fmts:
        library.prefetch(target or targets.current(), fmts)


_TRIG_UFUNCS = (np.sin, np.cos, np.tan)      # the primitives computing them call the library


def library_format(dtype) -> str | None:
    """The library format of a dtype's trig functions (None: not a float dtype here)."""
    return {"float64": "f64", "float32": "f32"}.get(getattr(dtype, "name", None))


def make_target(spec: "Target | str | None" = None) -> Target:
    """A validated target from ``spec`` (a :class:`Target` or a string such as
    ``"x86_64-unknown-linux-gnu:znver4"``); None: the current one."""
    return targets.make(spec) if spec is not None else targets.current()


def schedule(program, target: Target | None = None):
    """The plan (schedule, arena) ``program`` compiles to for ``target``: what an
    executable reloaded from the disk cache without its program computes it from."""
    from .plan import build_plan   # late: see _compile
    with targets.use(target):
        return build_plan(program)


def native_calls(exe: LLVMExecutable, entry_name: str) -> int:
    """How many times ``exe``'s native entry ``entry_name`` has run (its own counter)."""
    return binding.native_calls(exe.handle, entry_name)


def reload(key: str, interface_json, plan, target: Target | None = None) -> LLVMExecutable | None:
    """:func:`load_executable` from an interface in its JSON form (as another layer's disk
    entry stores it); None when that form is not one this version wrote."""
    try:
        interface = Interface.from_json(interface_json)
    except (KeyError, ValueError, TypeError, AttributeError):
        return None
    return load_executable(key, interface, plan, target)


def _portable_version(t: Target) -> str:
    """The code generator, its environment (LLVM, Python, numpy, the CPU) and symgrad's
    version: a payload made under another is compiled again, not loaded."""
    return cache.derived_key("portable", [__version__], t)


def portable(exe: LLVMExecutable) -> dict | None:
    """What another process needs to run ``exe`` without compiling (its key, interface,
    target and object code: see :func:`from_portable`), or None if it cannot (not
    runnable here, or built before this was kept).  A hybrid executable's numpy steps
    come from its schedule: the receiver passes :func:`from_portable` a way to make it."""
    code = getattr(exe, "object_code", None)
    key = getattr(exe, "cache_key", None)
    if code is None or key is None or exe.handle is None:
        return None
    return {"key": key, "interface": exe.interface.to_json(), "target": exe.target,
            "object": code, "version": _portable_version(exe.target)}


def from_portable(payload: dict, target: Target | None = None,
                  plan: Callable[[], object] | None = None) -> LLVMExecutable | None:
    """The executable :func:`portable` described, loaded for ``target`` (default: the
    current one); None -- so the caller compiles again -- when it was built for another
    target or another version of the code generator and its environment, does not load,
    or is hybrid and ``plan`` (a function making its schedule, as :func:`schedule` does
    from the program) is not given."""
    t = target or targets.current()
    try:
        if payload["target"] != t or not t.runnable or \
                payload["version"] != _portable_version(t):
            return None
        interface = Interface.from_json(payload["interface"])
        if interface.hybrid and plan is None:
            return None
        runtime.register()
        runtime.register_for(payload["object"], t)
        handle = jit.load_object(payload["object"], t)
        name, entry_name = _names(payload["key"], interface)
        exe = LLVMExecutable(interface, handle, {}, name, entry_name, True, plan, t)
    except (KeyError, TypeError, ValueError, RuntimeError, jit.UnresolvedSymbolError):
        return None
    exe.cache_key = payload["key"]
    exe.object_code = payload["object"]
    return exe


def set_threads(n: int) -> None:
    """Native code runs on at most ``n`` threads from its next call on: 1 -> on the
    calling thread alone (no helper thread is started), 2 or more -> the caller and the
    process's helper thread, two at most (:mod:`codegen.worker`).  Compiled code is the
    same either way (the cache keeps one copy); so is the code of a big module, which
    compiles on two threads or on one (:func:`codegen.jit.set_compile_threads`)."""
    worker.set_helper_allowed(n >= 2)
    jit.set_compile_threads(n)


def max_threads() -> int:
    """Threads a native kernel may use now: 2 when this process may run on two CPUs and
    :func:`set_threads` allows it, else 1."""
    return targets.threads() if worker.helper_allowed() else 1


on_blas_load = runtime.on_blas_load
entry_key = cache.derived_key
source_digest = cache.source_digest
load_entry = cache.load
store_entry = cache.store


def compile_dynamic(program, dims, target: Target | None = None,
                    on_stage: Callable[[str], None] | None = None):
    """One kernel for ``program`` at every value of its runtime extent (``dims``: a
    :class:`symgrad.graph.dynamic_dims.DynamicDims`); raises :class:`NotGeneric` naming
    the operation that has no such lowering (see :mod:`codegen.dynamic`)."""
    from .dynamic.executable import compile_dynamic as build   # late: IR builders
    return build(program, dims, target, on_stage)
