"""``symgrad.autograd``: backward, grad, grad modes, custom Functions, hooks and the
backward graph (``graph.Node``), gradcheck, and ``autograd.functional`` (jacobian,
hessian, vjp, jvp).

The package spans two layers (docs/architecture.md): its state and tape modules
(``grad_mode``, ``anomaly_mode``, ``saved_hooks``, ``graph``, ``nodes``, ``hooks``) sit
below the Tensor's dispatch, which imports them; the engine, custom Functions,
``functional`` and ``gradcheck`` build on the eager core. So this file imports only the
first kind, and ``import symgrad`` re-exports the rest with :func:`_export_api` once the
core is loaded (importing them here would close an import cycle through ``dispatch``)."""
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad,
                        set_grad_enabled)
from . import graph

__all__ = ["backward", "grad", "Function", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "inference_mode", "functional", "detect_anomaly",
           "set_detect_anomaly", "function", "graph", "gradcheck", "gradgradcheck"]


def _export_api() -> None:
    """Bind the names that build on the eager core (``symgrad/__init__`` calls this once,
    after the core; see the module docstring)."""
    # late: these import dispatch, which imports this package's state modules (a cycle)
    from .engine import backward, grad
    from .custom_function import Function
    from . import function, functional
    from .gradcheck import gradcheck, gradgradcheck
    globals().update(backward=backward, grad=grad, Function=Function, function=function,
                     functional=functional, gradcheck=gradcheck, gradgradcheck=gradgradcheck)
