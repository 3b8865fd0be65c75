"""PyTorch's CPU random-number generator: its mt19937 engine and the way its kernels turn
the engine's 32-bit draws into numbers, so one seed gives PyTorch's numbers.

* engine: the 32-bit Mersenne twister seeded by ``init_genrand(seed mod 2**32)``
  (numpy's ``MT19937`` with the legacy seeding of ``RandomState``); a 64-bit draw is two
  32-bit ones, the first the high half;
* uniform in ``[a, b)`` (``rand``, ``uniform_``, ``nn.init``): a float32 element takes
  the low 24 bits of one draw, a float64 element the low 53 bits of a 64-bit draw, times
  2^-24 / 2^-53, then ``x * (b - a) + a`` (for float64 one fused multiply-add);
* normal (``randn``, ``normal_``): 16 or more elements are filled with uniforms, then
  transformed 16 at a time by Box-Muller (element ``j`` and ``j + 8`` of each block; a
  tail shorter than 16 redraws the last 16 elements); fewer elements draw pairs of
  float64 uniforms per element and keep the second normal of each pair for the next one;
* integers in ``[low, high)``: ``low + draw % (high - low)`` (a 64-bit draw for ranges
  of 2^32 or more);
* ``randperm(n)``: the swaps ``r[i] <-> r[i + draw % (n - i)]`` for ``i < n - 1``;
* exponential (``exponential_``, ``multinomial``): ``-log1p(-u)`` of a float64 uniform.

Uniforms and integers are PyTorch's bit for bit.  Normal values equal PyTorch's up to the
last bit or so: PyTorch computes ``log`` / ``cos`` / ``sin`` with its own vectorised
routines (float32 blocks with SLEEF), numpy with its own.

>>> rng = TorchRNG(0)
>>> rng.uniform(0.0, 1.0, (3,), np.float32)      # torch.manual_seed(0); torch.rand(3)
array([0.4962566 , 0.7682218 , 0.08847743], dtype=float32)
"""
from __future__ import annotations

import contextlib
import math
import threading

import numpy as np

__all__ = ["TorchRNG"]

_U53 = np.uint64((1 << 53) - 1)


def _engine(seed: int) -> np.random.MT19937:
    """mt19937 seeded as PyTorch's ``manual_seed(seed)`` seeds it."""
    legacy = np.random.RandomState(int(seed) % (1 << 32)).get_state()
    bits = np.random.MT19937()
    bits.state = {"bit_generator": "MT19937", "state": {"key": legacy[1], "pos": legacy[2]}}
    return bits


class TorchRNG:
    """PyTorch's CPU generator (see the module docstring).  Its methods take numpy's
    ``Generator`` arguments (``size``) and a ``dtype``, which decides the draws a
    uniform or normal element takes, as PyTorch's kernels for that dtype do."""

    def __init__(self, seed: int = 67280421310721):
        self.bit_generator = _engine(seed)
        self.next_normal: float | None = None    # the second normal of the last pair

    # ---- the engine --------------------------------------------------------------------
    def _u32(self, n: int) -> np.ndarray:
        return self.bit_generator.random_raw(n) if n else np.zeros(0, np.uint64)

    def _u64(self, n: int) -> np.ndarray:
        r = self._u32(2 * n)
        return (r[0::2] << np.uint64(32)) | r[1::2]

    @property
    def state(self) -> dict:
        return {"engine": self.bit_generator.state, "next_normal": self.next_normal}

    @state.setter
    def state(self, value: dict) -> None:
        self.bit_generator.state = value["engine"]
        self.next_normal = value["next_normal"]

    # ---- uniform -----------------------------------------------------------------------
    def _unit(self, n: int, dtype) -> np.ndarray:
        """``n`` uniforms in [0, 1), as float64 values of ``dtype``'s precision: its
        significand's bits (53 of a 64-bit draw for float64, 24 or 11 of a 32-bit one)."""
        dt = np.dtype(dtype)
        if dt == np.float64:
            return (self._u64(n) & _U53).astype(np.float64) * 2.0 ** -53
        bits = np.finfo(dt).nmant + 1 if dt.kind == "f" else 24
        return (self._u32(n) & np.uint64((1 << bits) - 1)).astype(np.float64) * 2.0 ** -bits

    def unit(self, n: int, dtype=np.float64) -> np.ndarray:
        """``n`` uniforms in [0, 1) of ``dtype``'s precision, as float64 (one draw each:
        64 bits for float64, 32 otherwise)."""
        return self._unit(n, dtype)

    def uniform(self, low=0.0, high=1.0, size=None, dtype=np.float64) -> np.ndarray:
        dt = np.dtype(dtype)
        shape = _shape(size)
        if dt == np.float64:
            lo, span = float(low), float(high) - float(low)
        else:                            # PyTorch casts the bounds to the dtype first
            lo = float(np.asarray(low, dt))
            span = float(np.asarray(high, dt) - np.asarray(low, dt))
        x = self._unit(math.prod(shape), dt)
        out = _fma(x, span, lo) if dt == np.float64 else x * span + lo
        return out.astype(dt).reshape(shape)

    def random(self, size=None, dtype=np.float64) -> np.ndarray:
        return self.uniform(0.0, 1.0, size, dtype)

    # ---- normal ------------------------------------------------------------------------
    def normal(self, loc=0.0, scale=1.0, size=None, dtype=np.float64) -> np.ndarray:
        dt = np.dtype(dtype)
        if dt not in (np.float32, np.float64):
            dt = np.dtype(np.float64)
        shape = _shape(size)
        n = math.prod(shape)
        if n >= 16:
            out = self._normal_blocks(n, dt, dt.type(loc), dt.type(scale))
        else:
            out = np.array([self._normal_pair() * float(scale) + float(loc)
                            for _ in range(n)], np.float64).astype(dt)
        return out.reshape(shape)

    def standard_normal(self, size=None, dtype=np.float64) -> np.ndarray:
        return self.normal(0.0, 1.0, size, dtype)

    def _normal_blocks(self, n: int, dt, mean, std) -> np.ndarray:
        """PyTorch's ``normal_fill``: uniforms, then Box-Muller on blocks of 16."""
        data = self._unit(n, dt).astype(dt)
        full = n - n % 16
        data[:full] = _box_muller(data[:full].reshape(-1, 16), mean, std).reshape(-1)
        if n % 16:
            tail = self._unit(16, dt).astype(dt).reshape(1, 16)
            data[n - 16:] = _box_muller(tail, mean, std).reshape(-1)
        return data

    def _normal_pair(self) -> float:
        """One standard normal of PyTorch's scalar path (``normal_distribution<double>``)."""
        if self.next_normal is not None:
            v, self.next_normal = self.next_normal, None
            return v
        u1, u2 = self._unit(2, np.float64).tolist()
        r = math.sqrt(-2.0 * math.log1p(-u2))
        theta = 2.0 * math.pi * u1
        self.next_normal = r * math.sin(theta)
        return r * math.cos(theta)

    # ---- exponential ---------------------------------------------------------------------
    def exponential(self, size=None, dtype=np.float64) -> np.ndarray:
        """``exponential_(1)``: ``-log1p(-u)`` of a float64 uniform (53 bits of a 64-bit
        draw) per element, in float64, then cast to ``dtype``."""
        shape = _shape(size)
        return (-np.log1p(-self._unit(math.prod(shape), np.float64))).astype(dtype).reshape(shape)

    # ---- integers ----------------------------------------------------------------------
    def integers(self, low, high=None, size=None, dtype=np.int64) -> np.ndarray:
        if high is None:
            low, high = 0, low
        shape = _shape(size)
        span = int(high) - int(low)
        n = math.prod(shape)
        draws = self._u64(n) if span >= 1 << 28 else self._u32(n)   # (PyTorch's threshold)
        return ((draws % np.uint64(span)).astype(np.int64) + int(low)).astype(dtype).reshape(shape)

    def random_int64(self) -> int:
        """``torch.empty((), dtype=torch.int64).random_()``: a 64-bit draw mod 2^63."""
        return int(self._u64(1)[0] % np.uint64(1 << 63))

    def permutation(self, n: int) -> np.ndarray:
        n = int(n)
        out = np.arange(n, dtype=np.int64)
        if n < 2:
            return out
        picks = (self._u32(n - 1) % np.arange(n, 1, -1, dtype=np.uint64)).astype(np.int64)
        picks += np.arange(n - 1)
        r = out.tolist()
        for i, z in enumerate(picks.tolist()):
            r[i], r[z] = r[z], r[i]
        return np.array(r, np.int64)


_lead = threading.local()       # leading_axis's size, and whether a draw used it


@contextlib.contextmanager
def leading_axis(n: int):
    """Inside, every draw of a shaped method (uniform, normal, integers, ...) has one more
    leading axis of size ``n``: ``vmap(randomness="different")`` draws one (n, *shape)
    tensor, as torch's vmap does. Yields a list that holds True once a draw used it."""
    prev = getattr(_lead, "n", None), getattr(_lead, "used", None)
    _lead.n, _lead.used = int(n), [False]
    try:
        yield _lead.used
    finally:
        _lead.n, _lead.used = prev


def _shape(size) -> tuple:
    if size is None:
        shape = ()
    elif isinstance(size, (int, np.integer)):
        shape = (int(size),)
    else:
        shape = tuple(int(s) for s in size)
    n = getattr(_lead, "n", None)
    if n is None:
        return shape
    _lead.used[0] = True
    return (n,) + shape


def _fma(a: np.ndarray, b: float, c: float) -> np.ndarray:
    """``a * b + c`` rounded once, as the fused multiply-add PyTorch's float64 uniform
    kernel compiles to: the product exactly as a sum of two doubles (Dekker's split),
    then the additions error-free (numpy has no fma)."""
    p = a * b
    split = 134217729.0                       # 2^27 + 1

    def halves(v):
        t = split * v
        hi = t - (t - v)
        return hi, v - hi
    ah, al = halves(a)
    bh, bl = halves(np.float64(b))
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl      # p + e == a * b exactly
    s = p + c
    bb = s - p
    t = (p - (s - bb)) + (c - bb)                          # s + t == p + c exactly
    return s + (t + e)


def _box_muller(blocks: np.ndarray, mean, std) -> np.ndarray:
    """``normal_fill_16`` on each row of 16 uniforms, in the rows' dtype."""
    dt = blocks.dtype.type
    u1, u2 = dt(1) - blocks[:, :8], blocks[:, 8:]
    radius = np.sqrt(dt(-2) * np.log(u1))
    theta = dt(2.0 * math.pi) * u2
    return np.concatenate([radius * np.cos(theta) * std + mean,
                           radius * np.sin(theta) * std + mean], axis=1)
