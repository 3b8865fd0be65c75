"""The compiler: tracing, symbolic transforms, rewrites, fusion, backends and the
compile-and-cache API (``symgrad.compile``, ``symgrad.grad``, ...)."""
from .api import (CacheInfo, Compiled, Lowered, compile, grad, hessian, jacobian, jit, jvp, vjp,
                  value_and_grad)
from .vmap import vmap
from .dispatcher import reset

__all__ = ["compile", "jit", "grad", "value_and_grad", "jacobian", "hessian", "jvp", "vjp",
           "vmap", "Compiled", "Lowered", "CacheInfo", "reset"]
