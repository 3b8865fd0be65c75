"""StackDataset, ChainDataset (and ``IterableDataset + IterableDataset``) and
get_worker_info against torch.utils.data: items, lengths, batches through a DataLoader,
errors."""
import numpy as np
import pytest
import torch

import symgrad as sg


def _datasets(m):
    a = m.utils.data.TensorDataset(m.arange(6.0).reshape(3, 2))
    b = m.utils.data.TensorDataset(m.tensor([1, 2, 3]))

    class Stream(m.utils.data.IterableDataset):
        def __init__(self, lo, hi):
            self.lo, self.hi = lo, hi

        def __iter__(self):
            return iter(range(self.lo, self.hi))

        def __len__(self):
            return self.hi - self.lo
    return a, b, Stream


def _plain(x):
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x).tolist()


@pytest.mark.parametrize("build", [
    lambda m, a, b, S: list(m.utils.data.StackDataset(a, b)),
    lambda m, a, b, S: [m.utils.data.StackDataset(x=a, y=b)[i] for i in range(3)],
    lambda m, a, b, S: len(m.utils.data.StackDataset(a, b)),
    lambda m, a, b, S: list(m.utils.data.DataLoader(m.utils.data.StackDataset(x=a, y=b),
                                                    batch_size=2)),
    lambda m, a, b, S: list(m.utils.data.DataLoader(m.utils.data.StackDataset(a, b), batch_size=2)),
    lambda m, a, b, S: list(m.utils.data.ChainDataset([S(0, 3), S(5, 7)])),
    lambda m, a, b, S: len(m.utils.data.ChainDataset([S(0, 3), S(5, 7)])),
    lambda m, a, b, S: list(S(0, 2) + S(4, 6)),
    lambda m, a, b, S: list(m.utils.data.DataLoader(m.utils.data.ChainDataset([S(0, 3), S(5, 7)]),
                                                    batch_size=2)),
    lambda m, a, b, S: m.utils.data.get_worker_info(),
])
def test_same_as_torch(build):
    assert _plain(build(sg, *_datasets(sg))) == _plain(build(torch, *_datasets(torch)))


@pytest.mark.parametrize("build", [
    lambda m, a, b, S: m.utils.data.StackDataset(),
    lambda m, a, b, S: m.utils.data.StackDataset(a, y=b),
    lambda m, a, b, S: m.utils.data.StackDataset(a, m.utils.data.TensorDataset(m.ones(2))),
    lambda m, a, b, S: m.utils.data.StackDataset(x=a, y=m.utils.data.TensorDataset(m.ones(2))),
    lambda m, a, b, S: list(m.utils.data.ChainDataset([S(0, 1), a])),
    lambda m, a, b, S: len(m.utils.data.ChainDataset([a])),
])
def test_errors_as_torch(build):
    with pytest.raises(Exception) as t:
        build(torch, *_datasets(torch))
    with pytest.raises(Exception) as s:
        build(sg, *_datasets(sg))
    assert type(s.value) is type(t.value) and str(s.value) == str(t.value)
