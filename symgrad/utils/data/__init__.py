"""``symgrad.utils.data``: ``Dataset``, ``TensorDataset``, ``Subset``, ``random_split``,
``DataLoader`` with PyTorch's batching, shuffling and default collation."""
from .dataloader import DataLoader, default_collate, default_convert
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .stacked import ChainDataset, StackDataset
from .worker import get_worker_info
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset",
           "random_split", "DataLoader", "default_collate", "default_convert", "Sampler",
           "SequentialSampler",
           "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "StackDataset", "ChainDataset",
           "get_worker_info"]
