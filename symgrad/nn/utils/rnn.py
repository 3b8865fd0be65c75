"""``nn.utils.rnn``: variable-length batches for recurrent layers, as PyTorch's —
``PackedSequence``, ``pack_padded_sequence``, ``pad_packed_sequence``, ``pad_sequence``,
``unpad_sequence``, ``pack_sequence``, ``unpack_sequence``, ``invert_permutation``.

A packed batch stores the sequences time-major, longest first: step ``t`` holds the
first ``batch_sizes[t]`` sequences.  Packing and padding are built from slicing and
concatenation, so gradients flow through them.  Lengths are data-independent shapes:
under ``symgrad.compile`` they must be Python ints or tensors known when tracing.

>>> import symgrad as torch
>>> from symgrad.nn.utils.rnn import pack_sequence
>>> pack_sequence([torch.tensor([1., 2., 3.]), torch.tensor([4.])]).batch_sizes
tensor([2, 1, 1])
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ...device import check_device
from ...functions.creation import arange, as_tensor, full
from ...functions.selection import argsort, index_select, sort
from ...functions.composite import named
from ...functions.shape import cat, stack
from ...graph import dtypes
from ...tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


def _bind(t, fn):
    return None if t is None else fn(t)


class PackedSequence(_PackedFields):
    """The data and ``batch_sizes`` of a packed batch (made by :func:`pack_sequence` or
    :func:`pack_padded_sequence`); every recurrent layer accepts one."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> "PackedSequence":
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def cpu(self, *args, **kwargs) -> "PackedSequence":
        return self.to("cpu")

    def cuda(self, *args, **kwargs) -> "PackedSequence":
        check_device("cuda")
        return self                               # (unreachable: no CUDA here)

    def pin_memory(self) -> "PackedSequence":
        return self

    def _as(self, dtype) -> "PackedSequence":
        return self.to(dtype=dtype)

    def double(self):
        return self._as(dtypes.float64)

    def float(self):
        return self._as(dtypes.float32)

    def half(self):
        return self._as(dtypes.float16)

    def long(self):
        return self._as(dtypes.int64)

    def int(self):
        return self._as(dtypes.int32)

    def short(self):
        return self._as(dtypes.int16)

    def char(self):
        return self._as(dtypes.int8)

    def byte(self):
        return self._as(dtypes.uint8)

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False

    def __repr__(self) -> str:
        return (f"PackedSequence(data={self.data!r}, batch_sizes={self.batch_sizes!r}, "
                f"sorted_indices={self.sorted_indices!r}, "
                f"unsorted_indices={self.unsorted_indices!r})")


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The permutation that undoes ``permutation`` (None for None)."""
    if permutation is None:
        return None
    return argsort(permutation)


def batch_size_list(batch_sizes) -> list[int]:
    """``batch_sizes`` as Python ints (they decide shapes, so they must be known)."""
    return [int(b) for b in (batch_sizes.tolist() if isinstance(batch_sizes, Tensor)
                             else batch_sizes)]


def _lengths_tensor(lengths) -> Tensor:
    if isinstance(lengths, Tensor):
        if lengths.dim() != 1:
            raise RuntimeError("'lengths' argument should be a 1D CPU int64 tensor, but got "
                               f"{lengths.dim()}D cpu Long tensor")
        return lengths.to(dtypes.int64)
    return as_tensor(lengths, dtype=dtypes.int64)


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack the padded batch ``input`` (T, B, *) — (B, T, *) with ``batch_first`` — of
    sequences of ``lengths``; with ``enforce_sorted=False`` any order of lengths is taken
    (the batch is sorted and ``sorted_indices`` remembers how)."""
    lengths = _lengths_tensor(lengths)
    if enforce_sorted:
        sorted_indices = None
    else:
        lengths, sorted_indices = sort(lengths, descending=True)
        input = index_select(input, 0 if batch_first else 1, sorted_indices)
    if batch_first:
        input = input.transpose(0, 1)
    lens = [int(v) for v in lengths.tolist()]
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    T, B = int(input.shape[0]), int(input.shape[1])
    if len(lens) != B:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lens)} (batch_size={B})")
    if lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if any(a < b for a, b in zip(lens, lens[1:])):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
            "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
            "pack_sequence to sidestep this requirement if you do not need ONNX "
            "exportability.")
    if lens[0] > T:
        raise RuntimeError(f"pack_padded_sequence: a length ({lens[0]}) is larger than the "
                           f"padded sequence length ({T})")
    sizes = [sum(1 for n in lens if n > t) for t in range(lens[0])]
    data = named("PackPaddedSequenceBackward0",
                 lambda v: cat([v[t, :b] for t, b in enumerate(sizes)], 0), input)
    return PackedSequence(data, as_tensor(sizes, dtype=dtypes.int64), sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """The padded batch (T, B, *) — (B, T, *) with ``batch_first`` — of a packed one, and
    the length of each sequence (in the original order)."""
    sizes = batch_size_list(sequence.batch_sizes)
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence "
                f"in input, but got total_length={total_length} and max sequence length "
                f"being {steps}")
        steps = total_length
    data = sequence.data
    B, rest = sizes[0], tuple(data.shape[1:])

    def pad_rows(n):
        return full((n,) + rest, padding_value, dtype=data.dtype)

    def pad(v):
        rows, start = [], 0
        for b in sizes:
            rows.append(v[start:start + b] if b == B
                        else cat([v[start:start + b], pad_rows(B - b)], 0))
            start += b
        return stack(rows + [pad_rows(B)] * (steps - len(sizes)), 0)
    padded = named("CopySlices", pad, data)
    lengths = as_tensor([sum(1 for b in sizes if b > i) for i in range(B)], dtype=dtypes.int64)
    if batch_first:
        padded = padded.transpose(0, 1)
    if sequence.unsorted_indices is not None:
        padded = index_select(padded, 0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices]
    return padded, lengths


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack the sequences (each (L_i, *)) padded with ``padding_value`` to the longest:
    (T, B, *), or (B, T, *) with ``batch_first``; ``padding_side='left'`` pads in front."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got arg "
                           f"of type: {type(sequences)}")
    seqs = list(sequences)
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise RuntimeError("Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    if any(s.dim() == 0 for s in seqs):
        raise RuntimeError("ArrayRef: invalid slice, N = 1; size = 0")
    longest = max(int(s.shape[0]) for s in seqs)
    rest, dt = tuple(seqs[0].shape[1:]), seqs[0].dtype
    return named("CopySlices", lambda *vs: stack(_padded(vs, longest, rest, dt, padding_value,
                                                         padding_side), 0 if batch_first else 1),
                 *seqs)


def _padded(seqs, longest: int, rest: tuple, dt, padding_value, padding_side) -> list:
    out = []
    for s in seqs:
        s = _copy_shape(s.to(dt), (int(s.shape[0]),) + rest)
        n = longest - int(s.shape[0])
        if n:
            fill = full((n,) + rest, padding_value, dtype=dt)
            s = cat([s, fill] if padding_side == "right" else [fill, s], 0)
        out.append(s)
    return out


def _copy_shape(s: Tensor, target: tuple) -> Tensor:
    """``s`` broadcast to ``target`` as PyTorch's ``copy_`` into a slot of that shape
    would (and its errors when it cannot)."""
    src = tuple(s.shape)
    n = max(len(src), len(target))
    a, b = (1,) * (n - len(target)) + target, (1,) * (n - len(src)) + src
    for i in range(n - 1, -1, -1):
        if a[i] != b[i] and 1 not in (a[i], b[i]):
            raise RuntimeError(f"The size of tensor a ({a[i]}) must match the size of tensor "
                               f"b ({b[i]}) at non-singleton dimension {i}")
    shape = tuple(max(x, y) for x, y in zip(a, b))
    if shape != target:
        raise RuntimeError(f"output with shape {list(target)} doesn't match the broadcast "
                           f"shape {list(shape)}")
    return s if src == target else s.expand(target)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor,
                   batch_first: bool = False) -> list[Tensor]:
    """The list of sequences of a padded batch, each cut to its length.  (PyTorch
    transposes a time-major ``padded_sequences`` in place; here it is left as given.)"""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    idx = arange(int(padded_sequences.shape[1]))
    return [seq[idx < length] for seq, length in zip(padded_sequences, lengths)]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences (each (L_i, *)): :func:`pad_sequence` then
    :func:`pack_padded_sequence`."""
    lengths = as_tensor([int(v.shape[0]) for v in sequences])
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences of a packed batch, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
