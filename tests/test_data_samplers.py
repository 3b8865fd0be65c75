"""SubsetRandomSampler and WeightedRandomSampler as torch's: the same indices for a seed
(global or a Generator), through a DataLoader too; PyTorch's argument errors. Default
collation (batches) and conversion (batch_size=None) as torch's, container types kept."""
import numpy as np
import pytest
import torch

import symgrad as sg


def _draw(L, make, seed=0):
    L.manual_seed(seed)
    return [list(make(L)) for _ in range(2)]      # two epochs


@pytest.mark.parametrize("seed", [0, 7])
def test_subset_random_sampler_as_torch(seed):
    make = lambda L: L.utils.data.SubsetRandomSampler([5, 6, 7, 8, 9, 3])   # noqa: E731
    assert _draw(sg, make, seed) == _draw(torch, make, seed)
    make = lambda L: L.utils.data.SubsetRandomSampler(                     # noqa: E731
        list(range(12)), generator=L.Generator().manual_seed(seed))
    assert _draw(sg, make) == _draw(torch, make)
    assert len(sg.utils.data.SubsetRandomSampler([1, 2, 3])) == 3


@pytest.mark.parametrize("replacement", [True, False])
def test_weighted_random_sampler_as_torch(replacement):
    w = [0.1, 0.9, 0.4, 0.7, 3.0, 0.6]
    make = lambda L: L.utils.data.WeightedRandomSampler(w, 5, replacement)  # noqa: E731
    assert _draw(sg, make, 3) == _draw(torch, make, 3)
    make = lambda L: L.utils.data.WeightedRandomSampler(                    # noqa: E731
        w, 4, replacement, generator=L.Generator().manual_seed(11))
    assert _draw(sg, make) == _draw(torch, make)


def test_weighted_sampler_in_a_dataloader_as_torch():
    out = []
    for L in (torch, sg):
        L.manual_seed(1)
        ds = L.utils.data.TensorDataset(L.arange(10))
        dl = L.utils.data.DataLoader(ds, batch_size=3, sampler=L.utils.data.WeightedRandomSampler(
            [1.0] * 5 + [4.0] * 5, 8))
        out.append([b[0].tolist() for b in dl])
    assert out[0] == out[1]


@pytest.mark.parametrize("args", [((1.0, 2.0), 0), ((1.0, 2.0), 2.5), ((1.0, 2.0), True),
                                  ([[1.0, 2.0]], 2)])
def test_weighted_sampler_errors_as_torch(args):
    msgs = []
    for L in (torch, sg):
        with pytest.raises(ValueError) as e:
            L.utils.data.WeightedRandomSampler(*args)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    with pytest.raises(ValueError, match="replacement should be a boolean"):
        sg.utils.data.WeightedRandomSampler([1.0], 1, replacement=1)


class _Samples:
    """A map-style dataset of mixed samples (for both libraries)."""

    def __init__(self, L):
        self.L = L

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return (self.L.tensor([float(i), 2.0 * i]), ("a%d" % i, "b"), i, np.float64(i) / 2,
                {"k": [i, i + 1], "s": "x%d" % i})


def _plain(v):
    """Containers and tensors as plain Python values, keeping tuple / list types."""
    if hasattr(v, "numpy"):
        return ("T", str(v.dtype).split(".")[-1], v.tolist())
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, [_plain(x) for x in v])
    return v


@pytest.mark.parametrize("batch_size", [2, None])
def test_default_collate_and_convert_as_torch(batch_size):
    got = []
    for L in (torch, sg):
        dl = L.utils.data.DataLoader(_Samples(L), batch_size=batch_size)
        got.append([_plain(b) for b in dl])
    assert got[0] == got[1]
