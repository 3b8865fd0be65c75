"""symgrad.utils.data against torch.utils.data: batching, drop_last, lengths, default
collation of tensors / numbers / tuples / dicts, shuffling as a permutation per epoch,
splits, subsets, errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import symgrad as sg
import symgrad.utils.data as sud


def _flat(batches):
    out = []
    for b in batches:
        if isinstance(b, (list, tuple)):
            out.append([_flat([x])[0] for x in b])
        elif isinstance(b, dict):
            out.append({k: _flat([v])[0] for k, v in b.items()})
        else:
            out.append((np.asarray(b).tolist(), str(b.dtype).replace("torch.", "")))
    return out


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (10, False),
                                                   (None, False)])
def test_tensor_dataset_batches_equal_torch(batch_size, drop_last):
    x = np.arange(20.0).reshape(10, 2).astype(np.float32)
    y = np.arange(10)
    tl = tud.DataLoader(tud.TensorDataset(torch.tensor(x), torch.tensor(y)),
                        batch_size=batch_size, drop_last=drop_last)
    sl = sud.DataLoader(sud.TensorDataset(sg.tensor(x), sg.tensor(y)),
                        batch_size=batch_size, drop_last=drop_last)
    assert len(sl) == len(tl)
    assert _flat(sl) == _flat(tl)


class _Samples:
    def __init__(self, lib):
        self.lib = lib

    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"x": self.lib.ones(2) * i, "n": i, "f": float(i) / 2, "s": f"s{i}",
                "pair": (i, np.float32(i))}


def test_default_collate_of_nested_samples_equals_torch():
    class TDs(_Samples, tud.Dataset):
        pass

    class SDs(_Samples, sud.Dataset):
        pass
    t = list(tud.DataLoader(TDs(torch), batch_size=2))
    s = list(sud.DataLoader(SDs(sg), batch_size=2))
    assert len(s) == len(t)
    for bs, bt in zip(s, t):
        assert bs["s"] == bt["s"]
        for key in ("x", "n", "f"):
            assert bs[key].tolist() == bt[key].tolist()
            assert str(bs[key].dtype) == str(bt[key].dtype)
        for a, b in zip(bs["pair"], bt["pair"]):
            assert a.tolist() == b.tolist() and str(a.dtype) == str(b.dtype)


def test_shuffle_is_a_fresh_permutation_each_epoch_and_reproducible():
    ds = sud.TensorDataset(sg.arange(50))
    g1, g2 = sg.Generator().manual_seed(3), sg.Generator().manual_seed(3)
    a = [b[0].tolist() for b in sud.DataLoader(ds, batch_size=7, shuffle=True, generator=g1)]
    b = [b[0].tolist() for b in sud.DataLoader(ds, batch_size=7, shuffle=True, generator=g2)]
    assert a == b
    flat = sorted(v for batch in a for v in batch)
    assert flat == list(range(50))
    again = [b[0].tolist() for b in sud.DataLoader(ds, batch_size=7, shuffle=True, generator=g1)]
    assert again != a


def test_random_split_subset_concat():
    ds = sud.TensorDataset(sg.arange(10))
    parts = sud.random_split(ds, [0.5, 0.3, 0.2], generator=sg.Generator().manual_seed(0))
    tparts = tud.random_split(tud.TensorDataset(torch.arange(10)), [0.5, 0.3, 0.2])
    assert [len(p) for p in parts] == [len(p) for p in tparts]
    seen = sorted(int(p[i][0]) for p in parts for i in range(len(p)))
    assert seen == list(range(10))
    sub = sud.Subset(ds, [4, 1])
    assert [int(sub[i][0]) for i in range(2)] == [4, 1]
    cat = ds + sub
    assert len(cat) == 12 and int(cat[11][0]) == 1 and int(cat[-1][0]) == 1


def _same_error(fn):
    with pytest.raises(Exception) as t:
        fn(torch, tud)
    with pytest.raises(Exception) as s:
        fn(sg, sud)
    assert type(s.value) is type(t.value)
    assert str(s.value) == str(t.value)


@pytest.mark.parametrize("fn", [
    lambda m, d: d.TensorDataset(m.ones(3), m.ones(4)),
    lambda m, d: d.random_split(d.TensorDataset(m.ones(3)), [1, 1]),
    lambda m, d: d.DataLoader(d.TensorDataset(m.ones(3)), batch_size=0),
    lambda m, d: d.DataLoader(d.TensorDataset(m.ones(3)), sampler=[0, 1], shuffle=True),
    lambda m, d: d.DataLoader(d.TensorDataset(m.ones(3)), batch_size=None, drop_last=True),
    lambda m, d: d.DataLoader(d.TensorDataset(m.ones(3)), num_workers=-1),
])
def test_bad_arguments_raise_pytorchs_errors(fn):
    _same_error(fn)


def test_iterable_dataset_batches():
    class Stream(sud.IterableDataset):
        def __iter__(self):
            return iter(range(7))
    assert [b.tolist() for b in sud.DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5],
                                                                            [6]]
