"""``symgrad.autograd``: backward, grad, grad modes, the Function graph and
``autograd.functional`` (jacobian, hessian, vjp, jvp)."""
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .engine import backward, grad
from .function import Function
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad,
                        set_grad_enabled)
from . import functional

__all__ = ["backward", "grad", "Function", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "inference_mode", "functional", "detect_anomaly",
           "set_detect_anomaly"]
