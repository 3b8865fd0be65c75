"""A generator's state as PyTorch stores it: the 5056 bytes of a
``CPUGeneratorImplState`` (initial seed, mt19937's ``left`` / ``seeded`` / ``next`` and
624 words, the cached second normal of a pair, the float normal slot), so
``get_rng_state`` / ``set_rng_state`` / ``Generator.get_state`` take and give PyTorch's
``ByteTensor`` -- a state saved by PyTorch restores the same stream here, and back.

numpy's mt19937 keeps ``pos`` (words used of the current block); PyTorch keeps ``next``
and ``left = 625 - next``.  A freshly seeded engine (``pos`` 624 before its first block)
is written as PyTorch writes it (``left`` 1, ``next`` 0).
"""
from __future__ import annotations

import struct

import numpy as np

from ..graph import dtypes
from ..tensor import Tensor
from .creation import tensor as make_tensor

__all__ = ["STATE_SIZE", "encode", "decode"]

STATE_SIZE = 5056
_WORDS = 624
_HEAD = "<QiiQ"                       # the_initial_seed, left, seeded, next
_NORMAL = "<dddi"                     # normal_x, normal_y, normal_rho, normal_is_valid
_NORMAL_AT = 24 + 8 * _WORDS
_FLOAT_AT = _NORMAL_AT + 28           # next_float_normal_sample, its valid flag


def encode(rng, seed: int) -> Tensor:
    """``rng``'s state (a :class:`~symgrad.functions.torch_rng.TorchRNG`) as PyTorch's
    ByteTensor."""
    st = rng.bit_generator.state["state"]
    pos = int(st["pos"])
    nxt, left = (0, 1) if pos >= _WORDS else (pos, _WORDS + 1 - pos)
    buf = bytearray(STATE_SIZE)
    struct.pack_into(_HEAD, buf, 0, int(seed) % (1 << 64), left, 1, nxt)
    buf[24:_NORMAL_AT] = np.asarray(st["key"], dtype="<u8").tobytes()
    cached = rng.next_normal
    struct.pack_into(_NORMAL, buf, _NORMAL_AT, 0.0, 0.0 if cached is None else cached, 0.0,
                     int(cached is not None))
    return make_tensor(np.frombuffer(bytes(buf), dtype=np.uint8).copy())


def decode(state, rng) -> int:
    """Put PyTorch's ByteTensor ``state`` into ``rng``; returns its initial seed."""
    if not isinstance(state, Tensor):
        raise TypeError(f"expected a torch.ByteTensor, but got {type(state).__name__}")
    if state.dtype != dtypes.uint8:
        raise TypeError("RNG state must be a torch.ByteTensor")
    raw = np.ascontiguousarray(state.detach().numpy()).tobytes()
    if len(raw) != STATE_SIZE:
        raise RuntimeError(f"Expected a CPUGeneratorImplState of size {STATE_SIZE} but found "
                           f"the input RNG state size to be {len(raw)}")
    seed, left, _, nxt = struct.unpack_from(_HEAD, raw, 0)
    key = np.frombuffer(raw, dtype="<u8", count=_WORDS, offset=24).astype(np.uint32)
    _, cached, _, valid = struct.unpack_from(_NORMAL, raw, _NORMAL_AT)
    pos = _WORDS if left <= 1 else _WORDS + 1 - left
    rng.bit_generator.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}
    rng.next_normal = cached if valid else None
    return int(seed)
