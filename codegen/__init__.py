"""Native code generation for symgrad: LLVM IR built with llvmlite, compiled for the host.

* :mod:`codegen.target` -- the host target machine, the O3 optimiser, compiling IR to
  loaded native code and reloading cached object code.
* :mod:`codegen.vecmath` -- branch-free, vectorisable exp/log/tanh/sin/pow/... emitted
  as IR functions that LLVM's loop vectoriser widens to the host's widest vectors.
"""
from . import target, vecmath

__all__ = ["target", "vecmath"]
