"""Random tensors from one seeded generator: manual_seed, rand, randn, randint,
rand_like, randn_like, and the in-place fills normal_ / uniform_."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..graph import dtypes
from .common import shape_arg
from .creation import _finish
from ..device import check_device

if TYPE_CHECKING:
    from collections.abc import Sequence
    from ..tensor import Tensor
    from ..types import DeviceLike, DTypeLike

__all__ = ["manual_seed", "seed", "rand", "randn", "randint", "rand_like", "randn_like",
           "randperm", "generator", "Generator"]

_gen = [np.random.default_rng()]


class Generator:
    """A random-number generator object, as ``torch.Generator`` (numpy's PCG64 inside:
    its draws differ from PyTorch's for one seed).

    >>> a = rand(3, generator=Generator().manual_seed(0))
    >>> b = rand(3, generator=Generator().manual_seed(0))
    >>> a.tolist() == b.tolist()
    True
    """

    def __init__(self, device="cpu"):
        check_device(device)
        self._seed = int(np.random.SeedSequence().entropy % (2 ** 63))
        self._rng = np.random.default_rng(self._seed)
        self.device = device

    def manual_seed(self, seed: int) -> "Generator":
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        self.manual_seed(int(np.random.SeedSequence().entropy % (2 ** 63)))
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        return self._rng.bit_generator.state

    def set_state(self, state) -> "Generator":
        self._rng.bit_generator.state = state
        return self


def generator(g: Generator | None = None) -> np.random.Generator:
    """numpy's generator behind ``g`` (None: the global one ``manual_seed`` seeds)."""
    return g._rng if g is not None else _gen[0]


def manual_seed(s: int) -> np.random.Generator:
    """Seed symgrad's generator (numpy PCG64: its draws differ from PyTorch's)."""
    _gen[0] = np.random.default_rng(int(s))
    return _gen[0]


def seed() -> int:
    s = int(np.random.SeedSequence().entropy % (2 ** 63))
    manual_seed(s)
    return s


def _float_dt(dtype):
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    if not dt.is_floating_point:
        raise RuntimeError(f"\"normal_kernel_cpu\" not implemented for '{dt.c_name}'")
    return dt


def _size_kw(size, kw, name):
    """The size from ``f(2, 3)``, ``f((2, 3))`` or ``f(size=(2, 3))``."""
    if kw:
        extra = set(kw) - {"size"}
        if extra or size:
            bad = next(iter(extra or kw))
            raise TypeError(f"{name}() got an unexpected keyword argument '{bad}'")
        return (kw["size"],)
    return size


def rand(*size: int | Sequence[int], dtype: DTypeLike | None = None,
         device: DeviceLike | None = None, requires_grad: bool = False,
         generator: Generator | None = None, **kw: Sequence[int]) -> Tensor:
    size = _size_kw(size, kw, "rand")
    check_device(device)
    dt = _float_dt(dtype)
    return _finish(_generator_fn(generator).random(shape_arg(size)).astype(dt.np), dt,
                   requires_grad)


def randn(*size: int | Sequence[int], dtype: DTypeLike | None = None,
          device: DeviceLike | None = None, requires_grad: bool = False,
          generator: Generator | None = None, **kw: Sequence[int]) -> Tensor:
    size = _size_kw(size, kw, "randn")
    check_device(device)
    dt = _float_dt(dtype)
    return _finish(_generator_fn(generator).standard_normal(shape_arg(size)).astype(dt.np), dt,
                   requires_grad)


def randint(low: int, high: int | None = None, size: int | Sequence[int] | None = None, *,
            generator: Generator | None = None, dtype: DTypeLike | None = None,
            device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    check_device(device)
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing 1 required positional argument: 'size'")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64
    arr = _generator_fn(generator).integers(low, high, size=shape_arg((size,) if isinstance(size, int) else size))
    return _finish(arr.astype(dt.np), dt, requires_grad)


def randperm(n: int, *, generator: Generator | None = None, dtype: DTypeLike | None = None,
             device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    check_device(device)
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64
    return _finish(_generator_fn(generator).permutation(int(n)).astype(dt.np), dt,
                   requires_grad)


def rand_like(x: Tensor, *, dtype: DTypeLike | None = None, device: DeviceLike | None = None,
              requires_grad: bool = False) -> Tensor:
    check_device(device)
    return rand(tuple(x.shape), dtype=dtype or x.dtype, requires_grad=requires_grad)


def randn_like(x: Tensor, *, dtype: DTypeLike | None = None, device: DeviceLike | None = None,
               requires_grad: bool = False) -> Tensor:
    check_device(device)
    return randn(tuple(x.shape), dtype=dtype or x.dtype, requires_grad=requires_grad)


_generator_fn = generator   # (the functions above take a `generator` argument)
