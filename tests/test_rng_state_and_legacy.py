"""``get_rng_state`` / ``set_rng_state`` / ``initial_seed`` / ``Generator.get_state``
byte for byte PyTorch's ``CPUGeneratorImplState`` (a state saved by either library
restores the same stream in the other), and the legacy constructors ``torch.Tensor(...)``,
``FloatTensor``, ``LongTensor``, ... with PyTorch's results and errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg


def _same_bytes(a, b):
    assert a.dtype == sg.uint8 and b.dtype == torch.uint8
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("seed", [0, 5, 123456789012, 2 ** 63 - 1])
def test_rng_state_bytes_equal_torch(seed):
    sg.manual_seed(seed)
    torch.manual_seed(seed)
    for n in (0, 1, 3, 700, 17, 5000, 2):
        _same_bytes(sg.get_rng_state(), torch.get_rng_state())
        assert sg.initial_seed() == torch.initial_seed() == seed
        sg.randn(n)
        torch.randn(n)
        sg.rand(n)
        torch.rand(n)


def test_states_move_between_libraries():
    torch.manual_seed(9)
    torch.randn(1)                        # a cached second normal in the state
    s = torch.get_rng_state()
    sg.set_rng_state(sg.tensor(s.numpy()))
    assert sg.initial_seed() == 9
    np.testing.assert_allclose(sg.randn(5).numpy(), torch.randn(5).numpy(), rtol=1e-6)
    sg.manual_seed(4)
    sg.rand(10)
    torch.set_rng_state(torch.tensor(sg.get_rng_state().numpy()))
    np.testing.assert_array_equal(sg.rand(6).numpy(), torch.rand(6).numpy())


def test_round_trip_and_generators():
    sg.manual_seed(1)
    s = sg.get_rng_state()
    a = sg.rand(4)
    sg.manual_seed(2)
    sg.set_rng_state(s)
    assert sg.initial_seed() == 1
    assert (sg.rand(4) == a).all()
    g, tg = sg.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    _same_bytes(g.get_state(), tg.get_state())
    sg.rand(7, generator=g)
    torch.rand(7, generator=tg)
    _same_bytes(g.get_state(), tg.get_state())
    g2 = sg.Generator().set_state(g.get_state())
    assert g2.initial_seed() == 5
    assert (sg.rand(3, generator=g2) == sg.rand(3, generator=g)).all()


@pytest.mark.parametrize("call", [
    lambda lib: lib.set_rng_state(lib.zeros(10)),
    lambda lib: lib.set_rng_state(lib.zeros(10, dtype=lib.uint8)),
])
def test_set_rng_state_errors(call):
    with pytest.raises(Exception) as te:
        call(torch)
    with pytest.raises(Exception) as se:
        call(sg)
    assert type(se.value) is type(te.value) and str(se.value) == str(te.value)


# ---- legacy constructors ----------------------------------------------------------------------
CALLS = [
    lambda lib: lib.Tensor([1, 2]),
    lambda lib: lib.Tensor([[1, 2], [3, 4.5]]),
    lambda lib: lib.Tensor(),
    lambda lib: lib.Tensor((2, 3)),
    lambda lib: lib.Tensor([True, False]),
    lambda lib: lib.Tensor(np.array([1, 2])),
    lambda lib: lib.Tensor(lib.tensor([1, 2])),
    lambda lib: lib.FloatTensor([1, 2]),
    lambda lib: lib.DoubleTensor([1, 2]),
    lambda lib: lib.LongTensor([1, 2]),
    lambda lib: lib.IntTensor([1.5, 2]),
    lambda lib: lib.ByteTensor([1, 2]),
    lambda lib: lib.BoolTensor([1, 0]),
]


@pytest.mark.parametrize("call", CALLS)
def test_legacy_constructors_equal_torch(call):
    assert repr(call(sg)) == repr(call(torch))


@pytest.mark.parametrize("call", [
    lambda lib: lib.Tensor(2, 3),
    lambda lib: lib.Tensor(lib.Size([4])),
    lambda lib: lib.Tensor(size=(2, 1)),
    lambda lib: lib.DoubleTensor(3),
])
def test_uninitialised_sizes(call):
    s, t = call(sg), call(torch)
    assert tuple(s.shape) == tuple(t.shape) and repr(s.dtype) == repr(t.dtype)


def test_default_dtype_and_isinstance():
    prev = sg.get_default_dtype()
    sg.set_default_dtype(sg.float64)
    try:
        assert sg.Tensor([1, 2]).dtype == sg.float64
        assert sg.FloatTensor([1]).dtype == sg.float32
    finally:
        sg.set_default_dtype(prev)
    assert isinstance(sg.ones(1), sg.FloatTensor) and not isinstance(sg.ones(1), sg.LongTensor)
    assert isinstance(sg.Tensor([1]), sg.Tensor)
    p = sg.nn.Parameter(sg.Tensor([1.0]))
    assert repr(p) == repr(torch.nn.Parameter(torch.Tensor([1.0])))


@pytest.mark.parametrize("call", [
    lambda lib: lib.Tensor(3.5),
    lambda lib: lib.Tensor("a"),
    lambda lib: lib.Tensor(2, -1),
    lambda lib: lib.Tensor(1, "a"),
])
def test_legacy_errors(call):
    with pytest.raises(Exception) as te:
        call(torch)
    with pytest.raises(Exception) as se:
        call(sg)
    assert type(se.value) is type(te.value)
    assert str(se.value).split("\n")[0] == str(te.value).split("\n")[0]
