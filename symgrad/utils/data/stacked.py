"""``StackDataset`` (samples of several equal-length datasets side by side, as a tuple or a
dict) and ``ChainDataset`` (iterable datasets one after another), as PyTorch's."""
from __future__ import annotations

from typing import Iterable

from .dataset import Dataset, IterableDataset

__all__ = ["StackDataset", "ChainDataset"]


class StackDataset(Dataset):
    """``ds[i] == (a[i], b[i], ...)`` (positional datasets) or ``{"x": a[i], ...}``
    (keyword datasets)."""

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args:
            if kwargs:
                raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                                 "``kwargs``) like input/output, but both types are given.")
            self._length = len(args[0])
            if any(self._length != len(d) for d in args):
                raise ValueError("Size mismatch between datasets")
            self.datasets = args
        elif kwargs:
            values = list(kwargs.values())
            self._length = len(values[0])
            if any(self._length != len(d) for d in values):
                raise ValueError("Size mismatch between datasets")
            self.datasets = kwargs
        else:
            raise ValueError("At least one dataset should be passed")

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list):
        """A batch of samples (a nested dataset's own ``__getitems__`` when it has one)."""
        named = isinstance(self.datasets, dict)
        parts = self.datasets.items() if named else enumerate(self.datasets)
        samples = [{} if named else [] for _ in indices]
        for key, d in parts:
            if callable(getattr(d, "__getitems__", None)):
                items = d.__getitems__(indices)
                if len(items) != len(indices):
                    raise ValueError(f"Nested dataset's output size mismatch. Expected "
                                     f"{len(indices)}, got {len(items)}")
            else:
                items = [d[i] for i in indices]
            for item, sample in zip(items, samples):
                if named:
                    sample[key] = item
                else:
                    sample.append(item)
        return samples if named else [tuple(s) for s in samples]

    def __len__(self) -> int:
        return self._length


class ChainDataset(IterableDataset):
    """The items of each iterable dataset in turn."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        super().__init__()
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total
