"""Native code generation for symgrad: LLVM IR built with llvmlite, compiled for a target.

* :mod:`codegen.target` -- the machine code is built for (the host unless told
  otherwise) and every fact about it that code generation decides on.
* :mod:`codegen.jit` -- the O3 optimiser, compiling IR to loaded native code and
  reloading cached object code.
* :mod:`codegen.vecmath` -- branch-free, vectorisable exp/log/tanh/sin/pow/... emitted
  as IR functions that LLVM's loop vectoriser widens to the target's vectors.
* :mod:`codegen.callconv` -- the CPython METH_FASTCALL entry generated in IR;
  :mod:`codegen.binding` binds it to a Python callable; :mod:`codegen.numpy_abi` is
  numpy's and CPython's C side it relies on.
* :mod:`codegen.backend` -- the LLVM backend of ``symgrad.compile``:
  ``compile_program(program) -> LLVMExecutable`` (:mod:`codegen.executable`), built from
  :mod:`codegen.plan` (the schedule: :mod:`codegen.schedule` places the steps,
  :mod:`codegen.buffers` the storage, :mod:`codegen.steps` is their records; with
  :mod:`codegen.classify`, :mod:`codegen.layout`, :mod:`codegen.windows`,
  :mod:`codegen.rewrite`), :mod:`codegen.module` and the
  lowerings in :mod:`codegen.lower`; :mod:`codegen.types` maps dtypes to LLVM types,
  :mod:`codegen.runtime` publishes external symbols by name, :mod:`codegen.cache` is the
  disk cache.
"""
import importlib

from . import target

__all__ = ["target", "vecmath"]


def __getattr__(name: str):
    # submodules the IR builders need load on first use: a program reloaded from the
    # disk cache never imports them
    if name == "vecmath":
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
