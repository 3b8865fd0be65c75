"""``symgrad.autograd``: backward, grad, grad modes, custom Functions, hooks and the
backward graph (``graph.Node``), gradcheck, and ``autograd.functional`` (jacobian,
hessian, vjp, jvp).

The package spans three layers (docs/architecture.md): its state modules
(``grad_mode``, ``anomaly_mode``, ``saved_hooks``) sit below the Tensor, which imports
them; its tape modules (``node_type``, ``nodes``, ``hooks``, ``graph``) sit between the
Tensor and its dispatch; the engine, custom Functions, ``functional`` and ``gradcheck``
build on the eager core. Importing the package runs while the Tensor is being defined,
so this file imports only the first kind, and ``import symgrad`` binds the rest with
:func:`_export_api` once the core is loaded."""
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad,
                        set_grad_enabled)

__all__ = ["backward", "grad", "Function", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "inference_mode", "functional", "detect_anomaly",
           "set_detect_anomaly", "function", "graph", "gradcheck", "gradgradcheck"]


def _export_api() -> None:
    """Bind the names that build on the eager core (``symgrad/__init__`` calls this once,
    after the core; see the module docstring)."""
    # late: these import the Tensor (the tape) or dispatch, which import this package's
    # state modules (a cycle)
    from .engine import backward, grad
    from .custom_function import Function
    from . import function, functional, graph
    from .gradcheck import gradcheck, gradgradcheck
    globals().update(graph=graph, backward=backward, grad=grad, Function=Function, function=function,
                     functional=functional, gradcheck=gradcheck, gradgradcheck=gradgradcheck)
