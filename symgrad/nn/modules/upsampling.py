"""``Upsample``, ``UpsamplingNearest2d`` and ``UpsamplingBilinear2d`` as PyTorch's: the
arguments kept as PyTorch keeps them (a scale factor as float), ``interpolate`` in
forward, reprs."""
from __future__ import annotations

from ..upsampling import interpolate
from .module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Upsample(Module):
    """Resize by :func:`symgrad.nn.functional.interpolate` to ``size`` or by
    ``scale_factor``.

    >>> import symgrad as torch
    >>> torch.nn.Upsample(scale_factor=2, mode="bilinear")
    Upsample(scale_factor=2.0, mode='bilinear')
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = "scale_factor=" + repr(self.scale_factor)
        else:
            info = "size=" + repr(self.size)
        return info + ", mode=" + repr(self.mode)


class UpsamplingNearest2d(Upsample):
    """2-D nearest-neighbour upsampling (``Upsample`` with ``mode='nearest'``)."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """2-D bilinear upsampling with ``align_corners=True``."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
