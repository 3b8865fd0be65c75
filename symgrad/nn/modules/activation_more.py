"""The layers of :mod:`symgrad.nn.activations` and :mod:`symgrad.nn.similarity`:
``LogSigmoid``, ``SELU``, ``CELU``, ``Mish``, ``Hardswish``, ``Hardsigmoid``, ``Softsign``,
``Tanhshrink``, ``Softshrink``, ``Hardshrink``, ``Threshold``, ``GLU``, ``Softmin``,
``CosineSimilarity``, ``PairwiseDistance``, ``KLDivLoss`` -- arguments and reprs as
PyTorch's."""
from __future__ import annotations

from .. import activations as A
from .. import similarity as S
from .module import Module

__all__ = ["LogSigmoid", "SELU", "CELU", "Mish", "Hardswish", "Hardsigmoid", "Softsign",
           "Tanhshrink", "Softshrink", "Hardshrink", "Threshold", "GLU", "Softmin",
           "CosineSimilarity", "PairwiseDistance", "KLDivLoss"]


def _plain(name: str, fn):
    """A layer without arguments applying ``fn``."""
    def forward(self, input):
        return fn(input)
    return type(name, (Module,), {"forward": forward, "__doc__": f"``{fn.__name__}`` as a layer.",
                                  "__module__": __name__})


LogSigmoid = _plain("LogSigmoid", A.logsigmoid)
Softsign = _plain("Softsign", A.softsign)
Tanhshrink = _plain("Tanhshrink", A.tanhshrink)


class _Inplace(Module):
    _fn = staticmethod(A.selu)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return self._fn(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class SELU(_Inplace):
    """``selu`` as a layer."""


class Mish(_Inplace):
    """``mish`` as a layer."""
    _fn = staticmethod(A.mish)


class Hardswish(_Inplace):
    """``hardswish`` as a layer."""
    _fn = staticmethod(A.hardswish)


class Hardsigmoid(_Inplace):
    """``hardsigmoid`` as a layer."""
    _fn = staticmethod(A.hardsigmoid)


class CELU(Module):
    """``celu`` as a layer."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return A.celu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softshrink(Module):
    """``softshrink`` as a layer."""
    _fn = staticmethod(A.softshrink)

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return self._fn(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    """``hardshrink`` as a layer."""
    _fn = staticmethod(A.hardshrink)


class Threshold(Module):
    """``threshold`` as a layer."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return A.threshold(input, self.threshold, self.value)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + \
            (", inplace=True" if self.inplace else "")


class _AlongDim(Module):
    """A layer applying ``_fn(input, dim)``."""
    _fn = staticmethod(A.glu)

    def __init__(self, dim: int | None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return self._fn(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class GLU(_AlongDim):
    """``glu`` as a layer."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__(dim)


class Softmin(_AlongDim):
    """``softmin`` as a layer."""
    _fn = staticmethod(A.softmin)

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim)


class CosineSimilarity(Module):
    """``cosine_similarity`` as a layer."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return S.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``pairwise_distance`` as a layer."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return S.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class KLDivLoss(Module):
    """``kl_div`` as a loss layer."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = S._legacy_reduction(size_average, reduce)
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input, target):
        return S.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
