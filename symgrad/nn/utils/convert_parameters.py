"""Parameters as one flat vector and back."""
from __future__ import annotations

from ...autograd import grad_mode
from ...functions.shape import cat
from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters) -> Tensor:
    """The parameters flattened and concatenated (differentiable, as in PyTorch)."""
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Copy consecutive slices of ``vec`` into the parameters (their ``.data``)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    start = 0
    with grad_mode.no_grad():
        for p in parameters:
            n = p.numel()
            p.data = vec[start:start + n].reshape(p.shape).detach().clone()
            start += n
