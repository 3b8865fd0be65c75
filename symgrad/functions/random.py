"""Random tensors from one seeded generator: manual_seed, rand, randn, randint,
rand_like, randn_like, and the in-place fills normal_ / uniform_.  The generator is
PyTorch's CPU generator (:class:`~symgrad.functions.torch_rng.TorchRNG`): after
``manual_seed(s)``, ``rand``, ``randint``, ``randperm``, ``uniform_`` and the layers'
initialisation give PyTorch's numbers, ``randn`` / ``normal_`` PyTorch's up to the last
bit or so."""
from __future__ import annotations

import threading
import warnings
from typing import TYPE_CHECKING

import numpy as np

from .. import dispatch
from ..ops import lax
from ..graph import dtypes
from .common import shape_arg
from .creation import _finish
from ..utils.thread_flag import ThreadFlag
from . import rng_state
from .torch_rng import TorchRNG
from ..device import check_device
from ..tensor import Tensor
from ..tracing import python_effect

if TYPE_CHECKING:
    from collections.abc import Sequence
    from ..types import DeviceLike, DTypeLike

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "rand", "randn", "randint", "randint_like", "rand_like",
           "randn_like",
           "randperm", "normal", "bernoulli", "multinomial", "generator", "Generator"]

_gen = [TorchRNG()]         # PyTorch's default seed
_initial_seed = [67280421310721]


def _fresh_seed() -> int:
    """A nondeterministic seed, as ``torch.seed()`` draws."""
    return int(np.random.SeedSequence().entropy % (2 ** 63))


class Generator:
    """A random-number generator object, as ``torch.Generator``: PyTorch's CPU generator
    (its numbers for one seed).

    >>> a = rand(3, generator=Generator().manual_seed(0))
    >>> b = rand(3, generator=Generator().manual_seed(0))
    >>> a.tolist() == b.tolist()
    True
    """

    def __init__(self, device="cpu"):
        check_device(device)
        self._seed = 67280421310721            # PyTorch's default seed
        self._rng = TorchRNG(self._seed)
        self.device = device

    def manual_seed(self, seed: int) -> "Generator":
        python_effect("Generator.manual_seed()")    # (in a compiled function: every call)
        self._seed = int(seed)
        self._rng = TorchRNG(self._seed)
        return self

    def seed(self) -> int:
        self.manual_seed(_fresh_seed())
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        """The state as PyTorch's ByteTensor (see :mod:`~symgrad.functions.rng_state`)."""
        return rng_state.encode(self._rng, self._seed)

    def set_state(self, state) -> "Generator":
        python_effect("Generator.set_state()")
        self._seed = rng_state.decode(state, self._rng)
        return self


_probing = ThreadFlag()


def probing():
    """Inside (a context manager), draws come from throw-away copies of the generators:
    a trace made only to learn how a program depends on a size (a dynamic-shape
    sentinel) leaves every generator where it was, so later numbers stay PyTorch's."""
    return _probing.set()


def generator(g: Generator | None = None) -> TorchRNG:
    """The generator behind ``g`` (None: the global one ``manual_seed`` seeds)."""
    rng = g._rng if g is not None else _gen[0]
    if _probing.on:
        copy = TorchRNG(0)
        copy.state = rng.state
        return copy
    log = _states.log
    if log is not None and id(rng) not in log:
        log[id(rng)] = (rng, rng.state)
    return rng


class _StateLog(threading.local):
    log = None          # {id: (generator, its state when first used)} while one is kept


_states = _StateLog()


def keep_states():
    """Start keeping the state every generator (the global one, private ``Generator``
    objects) has when first used from now on -- a compiled call that may fail and run
    again eagerly must leave each generator where it found it. Returns what
    :func:`end_keep_states` takes."""
    prev = _states.log
    _states.log = {}
    return prev


def end_keep_states(prev, restore: bool) -> None:
    """Stop keeping states (`prev`: :func:`keep_states`'s result); ``restore``: put
    every generator used since back where it was."""
    log = _states.log
    _states.log = prev
    if restore:
        for rng, state in log.values():
            rng.state = state
    if prev is not None:           # (an enclosing call keeps them too)
        for k, v in log.items():
            prev.setdefault(k, v)


def manual_seed(s: int) -> TorchRNG:
    """Seed symgrad's generator as ``torch.manual_seed(s)`` seeds PyTorch's. Inside a
    ``symgrad.compile`` trace it is a Python effect (the call runs uncompiled: the seed
    is set at every call, as torch.compile does)."""
    python_effect("manual_seed()")
    _gen[0] = TorchRNG(int(s))
    _initial_seed[0] = int(s)
    return _gen[0]


def initial_seed() -> int:
    """The seed the global generator was last seeded with (``torch.initial_seed()``)."""
    return _initial_seed[0]


def get_rng_state() -> Tensor:
    """The global generator's state as PyTorch's ByteTensor (``torch.get_rng_state()``).

    >>> s = get_rng_state(); a = rand(2); set_rng_state(s); bool((rand(2) == a).all())
    True
    """
    return rng_state.encode(_gen[0], _initial_seed[0])


def set_rng_state(new_state: Tensor) -> None:
    """Restore the global generator from a ByteTensor of :func:`get_rng_state` (or of
    PyTorch's ``torch.get_rng_state()``)."""
    python_effect("set_rng_state()")
    _initial_seed[0] = rng_state.decode(new_state, _gen[0])


def seed() -> int:
    s = _fresh_seed()
    manual_seed(s)
    return s


def per_shape(draw_at, shape: tuple):
    """A runtime-value getter drawing ``draw_at(shape)`` that can also draw at another
    shape (``getter.at_shape(other)``): a shape-generic compiled program (one kernel for
    every batch size) draws a dropout mask, or ``randn(n, d)``, of the call's size."""
    def get():
        return draw_at(shape)
    get.at_shape = draw_at
    return get


def _drawn(draw_at, shape: tuple, dt: dtypes.DType, name: str, requires_grad: bool,
           shaped: bool = True) -> Tensor:
    """``draw_at(shape)`` as a tensor of ``dt``. In a trace (``symgrad.compile``) it is an
    input of the program drawn at each call, from the generator's state then, as PyTorch
    draws anew at each call -- never numbers frozen when the function was traced; a draw
    whose numbers depend on nothing but its shape (``shaped``) may be drawn at another
    shape by a shape-generic program (:func:`per_shape`)."""
    tracer = dispatch._lifter[0]
    per_call = getattr(tracer, "runtime_value", None)
    if per_call is None:
        return _finish(draw_at(shape), dt, requires_grad)
    t = per_call(per_shape(draw_at, shape) if shaped else (lambda: draw_at(shape)), dt, name)
    if t._data is not None:               # (as a traced value: never copied as data)
        t = Tensor._from_node(tracer(t))
    return t.requires_grad_() if requires_grad else t


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
    shape = shape_arg(size)
    return _drawn(lambda s: _generator_fn(generator).random(s, dt.np), shape, dt, "rand",
                  requires_grad)


def randn(*size: int | Sequence[int], dtype: DTypeLike | None = None,
          device: DeviceLike | None = None, requires_grad: bool = False,
          generator: Generator | None = None, **kw: Sequence[int]) -> Tensor:
    size = _size_kw(size, kw, "randn")
    check_device(device)
    dt = _float_dt(dtype)
    shape = shape_arg(size)
    return _drawn(lambda s: _generator_fn(generator).standard_normal(s, dt.np), shape, dt, "randn",
                  requires_grad)


def randint(low: int, high: int | None = None, size: int | Sequence[int] | None = None, *,
            generator: Generator | None = None, dtype: DTypeLike | None = None,
            device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    check_device(device)
    if size is None and high is not None and not isinstance(high, (int, np.integer)):
        low, high, size = 0, low, high            # randint(high, size)
    elif high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing 1 required positional argument: 'size'")
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64
    low, high = _check_from_to(int(low), int(high), dt)
    shape = shape_arg((size,) if isinstance(size, int) else size)
    return _drawn(lambda s: _generator_fn(generator).integers(low, high, size=s).astype(dt.np),
                  shape, dt, "randint", requires_grad)


def randint_like(input: Tensor, low: int = 0, high: int | None = None, *,
                 generator: Generator | None = None, dtype: DTypeLike | None = None,
                 device: DeviceLike | None = None, requires_grad: bool = False,
                 memory_format: object = None) -> Tensor:
    """Random integers in [low, high) (``randint_like(x, high)``: [0, high)) with the shape
    of ``input`` and its dtype unless ``dtype`` is given: PyTorch's numbers for a seed
    (``randint``'s draws, converted to the dtype).

    >>> import symgrad as torch
    >>> _ = torch.manual_seed(0)
    >>> torch.randint_like(torch.zeros(5), 10)
    tensor([4., 9., 3., 0., 3.])
    """
    check_device(device)
    if high is None:
        low, high = 0, low
    for v in (low, high):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise TypeError(f"randint_like() received an invalid combination of arguments - "
                            f"got (Tensor, {type(v).__name__}), but expected (Tensor input, "
                            "int low, int high, ...)")
    dt = dtypes.as_dtype(dtype) if dtype is not None else input.dtype
    return randint(int(low), int(high), tuple(input.shape), generator=generator, dtype=dt,
                   requires_grad=requires_grad)


# the C++ type names PyTorch's bound checks of random integers quote
_C_TYPES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char",
            "int16": "short int", "int32": "int", "int64": "long int"}
_PRECISION = (" Due to precision limitations {t} can support discrete uniform distribution "
              "only within this range. This warning will become an error in version 1.7 "
              "release, please fix the code in advance (Triggered internally at /__w/pytorch/"
              "pytorch/aten/src/ATen/native/DistributionTemplates.h:111.)")


def _check_from_to(low: int, high: int, dt: dtypes.DType) -> None:
    """PyTorch's checks of random_(from, to) for ``dt``: from < to; an integer dtype
    holds from and to - 1; a float dtype warns past the integers it represents, and moves
    bounds that round outward in it inward (its update_from / update_to). Returns the
    (from, to) drawn with."""
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    if dt.is_floating_point:
        low, high = _update_from(low, dt.np), _update_to(high, dt.np)
        if low >= high:
            raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than 'to' "
                               f"casted to dtype, but got from={low} >= to={high}")
        digits = np.finfo(dt.np).nmant + 1
        t = "float" if dt.np == np.float32 else "double" if dt.np == np.float64 else dt.name
        for what, v in (("from", low), ("to - 1", high - 1)):
            if not -(1 << digits) <= v <= 1 << digits:
                warnings.warn(f"{what} is out of bounds [-(2^{digits}), 2^{digits}]."
                              + _PRECISION.format(t=t), UserWarning, stacklevel=4)
        return low, high
    lo, hi = (0, 1) if dt is dtypes.bool_ else (int(np.iinfo(dt.np).min), int(np.iinfo(dt.np).max))
    for what, v in (("from", low), ("to - 1", high - 1)):
        if not lo <= v <= hi:
            raise RuntimeError(f"{what} is out of bounds for {_C_TYPES.get(dt.name, dt.name)}")
    return low, high


def _update_from(low: int, np_dt) -> int:
    """PyTorch's update_from: a lower bound whose successor rounds below it in the dtype
    moves up to the next representable step."""
    plus1 = int(np.asarray(low + 1, np.float64).astype(np_dt).astype(np.float64)) \
        if abs(low) < 1 << 62 else low + 1
    if plus1 < low:
        n = abs(low + 1).bit_length() - 1
        low = plus1 + (1 << (n - (np.finfo(np_dt).nmant + 1) + 1))
    return low


def _update_to(high: int, np_dt) -> int:
    """PyTorch's update_to: an upper bound whose predecessor rounds up to it in the dtype
    moves down a representable step."""
    minus1 = int(np.asarray(high - 1, np.float64).astype(np_dt).astype(np.float64)) \
        if abs(high) < 1 << 62 else high - 1
    if minus1 >= high:
        n = abs(high - 1).bit_length() - 1
        high = minus1 - (1 << (n - (np.finfo(np_dt).nmant + 1) + 1))
    return high


def randperm(n: int, *, generator: Generator | None = None, dtype: DTypeLike | None = None,
             device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    check_device(device)
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64
    return _drawn(lambda s: _generator_fn(generator).permutation(s[0]).astype(dt.np), (int(n),), dt,
                  "randperm", requires_grad)


def rand_like(x: Tensor, *, dtype: DTypeLike | None = None, device: DeviceLike | None = None,
              requires_grad: bool = False) -> Tensor:
    check_device(device)
    return rand(tuple(x.shape), dtype=dtype or x.dtype, requires_grad=requires_grad)


def randn_like(x: Tensor, *, dtype: DTypeLike | None = None, device: DeviceLike | None = None,
               requires_grad: bool = False) -> Tensor:
    check_device(device)
    return randn(tuple(x.shape), dtype=dtype or x.dtype, requires_grad=requires_grad)


def normal(mean: Tensor | float, std: Tensor | float = 1.0,
           size: int | Sequence[int] | None = None, *, generator: Generator | None = None,
           dtype: DTypeLike | None = None, device: DeviceLike | None = None,
           requires_grad: bool = False) -> Tensor:
    """``torch.normal``: normals of tensor means and / or standard deviations (their
    broadcast shape; PyTorch's draws: standard normals scaled, then shifted), or of two
    numbers with a ``size``."""
    check_device(device)
    rng = _generator_fn(generator)
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments: two "
                            "numbers need a size")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
        dt = _float_dt(dtype)
        shape = shape_arg((size,) if isinstance(size, int) else size)
        return _drawn(lambda s: _generator_fn(generator).normal(float(mean), float(std), s, dt.np),
                      shape, dt, "normal", requires_grad)
    dt = (mean if isinstance(mean, Tensor) else std).dtype
    if not dt.is_floating_point:
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{dt.c_name}'")
    mv = mean.detach().numpy() if isinstance(mean, Tensor) else np.asarray(mean, dt.np)
    sv = std.detach().numpy() if isinstance(std, Tensor) else np.asarray(std, dt.np)
    if isinstance(std, Tensor) and not (sv >= 0).all():
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if not isinstance(std, Tensor) and float(std) < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {float(std):g}")
    if isinstance(mean, Tensor) and isinstance(std, Tensor):
        try:
            shape = np.broadcast_shapes(mv.shape, sv.shape)
        except ValueError:
            from ..graph.shapes import broadcast_shapes     # PyTorch's error text
            shape = broadcast_shapes(mv.shape, sv.shape)
    else:
        shape = mv.shape if isinstance(mean, Tensor) else sv.shape
    z = rng.standard_normal(shape, dt.np)
    return _finish((z * sv + mv).astype(dt.np), dt, requires_grad)


def bernoulli(input: Tensor, p: float | None = None, *,
              generator: Generator | None = None) -> Tensor:
    """``torch.bernoulli``: 1 with probability ``input`` (or ``p``) per element, else 0,
    in the input's dtype; PyTorch's draws for probabilities in a tensor (a uniform of the
    dtype's precision below the probability).  (A number ``p``, which PyTorch draws
    through MKL, gives other, equally distributed, numbers.)"""
    dt = input.dtype
    if not dt.is_floating_point:
        raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for "
                                  f"'{dt.c_name}'")
    shape = tuple(input.shape)
    if p is None and input._data is None:      # traced probabilities: compared in the program
        u = _drawn(lambda s: _generator_fn(generator).random(s, dt.np), shape, dt, "bernoulli",
                   False)
        return lax.cast(lax.apply("lt", u, input.detach()), dt)
    probs = input.detach().numpy() if p is None else np.full(shape, p, dt.np)
    if not ((probs >= 0) & (probs <= 1)).all():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  "
                           "(Could this error message be improved?  If so, please report an "
                           "enhancement request to PyTorch.)")
    return _drawn(lambda s: (_generator_fn(generator).random(s, dt.np) < probs).astype(dt.np),
                  shape, dt, "bernoulli", False, shaped=False)    # (probs: of this shape)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Generator | None = None) -> Tensor:
    """``torch.multinomial``: ``num_samples`` category indices per row of ``input`` (1-D
    or 2-D, non-negative weights), PyTorch's numbers for a seed: one sample, or samples
    without replacement, take the largest ``input / q`` with ``q ~ Exp(1)`` drawn per
    element (argmax, or the top ``num_samples`` in order); samples with replacement a
    float64 uniform each, row by row, found in the row's cumulative distribution
    (accumulated in the input's dtype, divided by its total, the last bucket 1).  (Ties
    among the top values -- categories of probability 0 when more samples than positive
    weights are asked for -- come in index order; PyTorch's partial sort does not
    promise an order.)"""
    dt = input.dtype
    if not dt.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{dt.c_name}")
    if input.dim() not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    n, k = int(num_samples), int(input.shape[-1])
    if n <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and n > k:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    if k > 1 << 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    probs = input.detach().numpy()
    rows = probs.reshape(-1, k)
    rng = _generator_fn(generator)
    if rows.shape[0] == 0:
        out = np.zeros((0, n), np.int64)
    elif not replacement or n == 1:
        if not (np.all(rows >= 0) and np.all(rows < np.inf)):
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if np.any(rows.sum(axis=1) == 0):
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        q = rows / rng.exponential(rows.shape, dt.np)
        out = np.argsort(-q, axis=1, kind="stable")[:, :n].astype(np.int64)
    else:
        out = np.empty((rows.shape[0], n), np.int64)
        for i, row in enumerate(rows):
            bad = np.flatnonzero(~(row >= 0) | ~np.isfinite(row))
            if bad.size:
                what = "< 0" if row[bad[0]] < 0 else "= infinity or NaN"
                raise RuntimeError(f"invalid multinomial distribution (encountering "
                                   f"probability entry {what})")
            cum = np.add.accumulate(row, dtype=dt.np)
            if not cum[-1] > 0:
                raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
            cum = cum / cum[-1]
            cum[-1] = 1
            u = rng.random((n,), np.float64)
            out[i] = np.searchsorted(cum.astype(np.float64), u, side="left")
    return _finish(out.reshape(tuple(input.shape[:-1]) + (n,)), dtypes.int64, False)


_generator_fn = generator   # (the functions above take a `generator` argument)
