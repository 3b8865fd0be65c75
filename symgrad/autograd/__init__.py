"""``symgrad.autograd``: backward, grad, grad modes, custom Functions, hooks and the
backward graph (``graph.Node``), gradcheck, and ``autograd.functional`` (jacobian,
hessian, vjp, jvp)."""
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .engine import backward, grad
from .custom_function import Function
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad,
                        set_grad_enabled)
from . import function, functional, graph
from .gradcheck import gradcheck, gradgradcheck

__all__ = ["backward", "grad", "Function", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "inference_mode", "functional", "detect_anomaly",
           "set_detect_anomaly", "function", "graph", "gradcheck", "gradgradcheck"]
