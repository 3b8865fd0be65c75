"""``symgrad.utils``: ``data`` (datasets and loaders) and ``hooks`` (RemovableHandle), as
``torch.utils``. ``data`` loads on first use (PEP 562): autograd imports ``hooks``
without paying for the data loaders."""
import importlib

from . import hooks

__all__ = ["data", "hooks"]


def __getattr__(name: str):
    if name == "data":
        return importlib.import_module(f"{__name__}.data")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
