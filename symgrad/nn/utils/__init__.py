"""``nn.utils``: gradient clipping, flat parameter vectors, ``rnn`` (packed sequences),
``parametrize`` / ``parametrizations``, the hook-based weight and spectral norms and
``stateless``. The last ones build on ``nn.modules`` (which imports ``rnn`` from here), so
they load on first access (``__getattr__``), not with this package."""
import importlib

from . import rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["rnn", "clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
           "parameters_to_vector", "vector_to_parameters", "parametrize", "parametrizations",
           "stateless", "weight_norm", "remove_weight_norm", "spectral_norm",
           "remove_spectral_norm"]

_SUBMODULES = ("parametrize", "parametrizations", "stateless")
_HOOKED = ("weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm")


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _HOOKED:
        return getattr(importlib.import_module(f"{__name__}.weight_hooks"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
