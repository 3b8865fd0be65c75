"""``symgrad.nn``: the functional API (``symgrad.nn.functional``)."""
from . import functional

__all__ = ["functional"]
