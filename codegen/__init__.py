"""Native code generation for symgrad: LLVM IR built with llvmlite, compiled for the host.

* :mod:`codegen.target` -- the host target machine, the O3 optimiser, compiling IR to
  loaded native code and reloading cached object code.
* :mod:`codegen.vecmath` -- branch-free, vectorisable exp/log/tanh/sin/pow/... emitted
  as IR functions that LLVM's loop vectoriser widens to the host's widest vectors.
* :mod:`codegen.callconv` -- the CPython METH_FASTCALL entry generated in IR.
* :mod:`codegen.backend` -- the LLVM backend of ``symgrad.compile``:
  ``compile_program(program) -> LLVMExecutable`` (:mod:`codegen.executable`), built from
  :mod:`codegen.plan` (the schedule; :mod:`codegen.classify`, :mod:`codegen.layout`,
  :mod:`codegen.windows`, :mod:`codegen.rewrite`), :mod:`codegen.module` and the
  lowerings in :mod:`codegen.lower`; :mod:`codegen.types` maps dtypes to LLVM types,
  :mod:`codegen.runtime` publishes external symbols by name, :mod:`codegen.cache` is the
  disk cache, :mod:`codegen.measure` times the benchmark workloads.
"""
from . import target, vecmath

__all__ = ["target", "vecmath"]
