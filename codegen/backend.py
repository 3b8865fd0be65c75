"""The LLVM backend: ``compile_program(program) -> LLVMExecutable``.

Pipeline (one LLVM module per program signature, one native kernel computing every
output -- forward and gradient -- per call):

1. :func:`codegen.plan.build_plan` -- schedule: roots, fused loops, steps, arena;
2. :func:`codegen.cache.load` -- a cached object for the same key skips 3-4 entirely
   (no LLVM optimisation or code generation; the object is only linked);
3. :func:`codegen.module.build_module` -- IR with ``llvmlite.ir``; plus the CPython
   entry (:func:`codegen.callconv.build_entry`) for fully native plans;
4. :func:`codegen.target.compile_module` -- O3 for the host CPU, object code, stored
   in the disk cache with the IR texts (assembly is generated when first asked for).

>>> import numpy as np, symgrad
>>> vg = symgrad.value_and_grad(lambda x: (3 * (x + 2) ** 2).mean(), backend="llvm")
>>> value, grad = vg(np.ones((2, 2)))
>>> float(value), grad.tolist()
(27.0, [[4.5, 4.5], [4.5, 4.5]])
"""
from __future__ import annotations

import zlib

from . import cache, callconv, runtime, target
from .executable import LLVMExecutable
from .module import build_module
from .plan import build_plan

__all__ = ["compile_program", "LLVMExecutable", "ENTRY_SUFFIX", "STRUCTURED_SUFFIX", "stats"]

ENTRY_SUFFIX = ".entry"
STRUCTURED_SUFFIX = ".structured"
stats = {"compiled": 0, "from_cache": 0}
_TEXTS = ("llvm", "llvm-opt")


def _entry_specs(plan):
    args = [callconv.ArgSpec(st.name if st.name.isidentifier() else f"arg{k}", st.dtype.name,
                             st.shape) for k, st in enumerate(plan.inputs)]
    outs = [callconv.OutSpec(st.dtype.name, st.shape) for st in plan.outputs]
    return args, outs


def _fast_entry_possible(plan) -> bool:
    return (not plan.hybrid and len(plan.outputs) > 0 and
            all(st.dtype.name in callconv.SUPPORTED_DTYPES for st in (*plan.inputs, *plan.outputs)))


def compile_program(program) -> LLVMExecutable:
    """Native code for ``program`` (see the module docstring)."""
    runtime.register()
    plan = build_plan(program)
    key = cache.cache_key(program)
    name = f"symgrad_{key[:16]}"
    entry_name = name + ENTRY_SUFFIX if _fast_entry_possible(plan) else None
    hit = cache.load(key)
    if hit is not None:
        try:
            runtime.register_for(hit["object"])
            handle = target.load_object(hit["object"])
            texts = {k: zlib.decompress(hit[k]).decode() for k in _TEXTS if k in hit}
            stats["from_cache"] += 1
            return LLVMExecutable(plan, handle, texts, name, entry_name, from_cache=True)
        except (target.UnresolvedSymbolError, zlib.error, KeyError, RuntimeError):
            pass                                     # stale or unusable: rebuild below
    module, kernel = build_module(plan, name)
    if entry_name is not None:
        args, outs = _entry_specs(plan)
        callconv.build_entry(module, kernel, entry_name, args, outs, tuple_result=True)
        structure = getattr(program, "native_structure", lambda: None)()
        if structure is not None:       # results nested as the function returns them
            callconv.build_entry(module, kernel, entry_name + STRUCTURED_SUFFIX, args, outs,
                                 structure=structure)
    if any(name in module.globals for name in runtime.BLAS_GEMM.values()):
        runtime.register_blas()
    if runtime.THREAD_TRAMPOLINE in module.globals:
        runtime.register_threads()
    compiled = target.compile_module(str(module))
    texts = {"llvm": compiled.ir, "llvm-opt": compiled.optimized_ir}   # asm: on demand
    sections = {"object": compiled.object_code}
    sections.update({k: zlib.compress(v.encode(), 1) for k, v in texts.items()})
    cache.store(key, sections)
    stats["compiled"] += 1
    return LLVMExecutable(plan, compiled.loaded, texts, name, entry_name, from_cache=False)
