"""``get_worker_info``: the worker a dataset is being read in. symgrad's ``DataLoader``
reads every batch in the calling process (``num_workers > 0`` included), where PyTorch's
answer is ``None`` -- so it is ``None`` here always, and an ``IterableDataset`` that
splits its stream by worker reads all of it once, as in PyTorch's main process."""
from __future__ import annotations

__all__ = ["get_worker_info"]


def get_worker_info():
    """``None``: the caller is not a worker process."""
    return None
