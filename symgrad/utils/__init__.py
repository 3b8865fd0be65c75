"""``symgrad.utils``: ``data`` (datasets and loaders), as ``torch.utils``."""
from . import data

__all__ = ["data"]
