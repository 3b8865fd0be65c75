"""``GroupNorm``, ``PixelShuffle`` and ``PixelUnshuffle`` as PyTorch's: parameters,
initialisation, reprs."""
from __future__ import annotations

from ...device import check_device
from .. import grouping as G
from .misc import affine_parameters, reset_affine
from .module import Module

__all__ = ["GroupNorm", "PixelShuffle", "PixelUnshuffle"]


class GroupNorm(Module):
    """``group_norm`` with a learnable per-channel ``weight`` (ones) and ``bias`` (zeros).

    >>> import symgrad as torch
    >>> torch.nn.GroupNorm(3, 6)
    GroupNorm(3, 6, eps=1e-05, affine=True, bias=True)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        check_device(device)
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = \
            num_groups, num_channels, eps, affine
        affine_parameters(self, (num_channels,), affine, bias, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_affine(self)

    def forward(self, input):
        return G.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class PixelShuffle(Module):
    """``pixel_shuffle`` as a layer."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return G.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``pixel_unshuffle`` as a layer."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return G.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
