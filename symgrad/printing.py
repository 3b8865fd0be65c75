"""Tensor printing for symgrad: ``repr``/``str`` text identical to PyTorch 2.13.

This module owns everything about how an eager tensor turns into text:

* :func:`tensor_repr` -- format a numpy array (the tensor's data) plus its dtype
  and autograd state exactly as ``repr(torch_tensor)`` does on CPU (the
  behaviour of ``torch/_tensor_str.py``: precision, fixed vs scientific
  notation, integer-valued floats, column alignment, line wrapping,
  summarisation with ``...``, and the ``size=``/``dtype=``/``grad_fn=``/
  ``requires_grad=`` suffixes).
* :func:`set_printoptions`, :func:`get_printoptions` and the
  :func:`printoptions` context manager -- the global print options, with the
  same defaults, profiles and quirks as ``torch.set_printoptions``.

It depends on numpy only (never on torch).  Values are formatted through Python
floats/ints, like torch does via ``.tolist()``/``.item()``, so rounding matches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["tensor_repr", "set_printoptions", "get_printoptions", "printoptions"]


@dataclasses.dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


_OPTS = _PrintOptions()

# profile name -> (precision, threshold, edgeitems, linewidth)
_PROFILES: dict[str, tuple[int, float, int, int]] = {
    "default": (4, 1000, 3, 80),
    "short": (2, 1000, 2, 80),
    "full": (4, math.inf, 3, 80),
}

_NP_DTYPES: dict[str, type] = {
    "float64": np.float64,
    "float32": np.float32,
    "float16": np.float16,
    "int64": np.int64,
    "int32": np.int32,
    "int16": np.int16,
    "int8": np.int8,
    "uint64": np.uint64,
    "uint32": np.uint32,
    "uint16": np.uint16,
    "uint8": np.uint8,
    "bool": np.bool_,
}

# torch aliases -> canonical names (torch always prints the canonical one)
_ALIASES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
}

# Dtypes that torch never names in a non-empty tensor's repr (besides the default
# float dtype); complex dtypes are not supported here.
_IMPLICIT_DTYPES = ("int64", "bool")


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """Set the global print options, like ``torch.set_printoptions``.

    A ``profile`` ("default", "short" or "full") is applied first, then any
    explicit option.  As in torch, ``sci_mode`` is always overwritten, so any
    call without ``sci_mode`` resets it to automatic (None).
    """
    if profile in _PROFILES:
        prof = _PROFILES[profile]
        _OPTS.precision, _OPTS.threshold, _OPTS.edgeitems, _OPTS.linewidth = prof
    if precision is not None:
        _OPTS.precision = precision
    if threshold is not None:
        _OPTS.threshold = threshold
    if edgeitems is not None:
        _OPTS.edgeitems = edgeitems
    if linewidth is not None:
        _OPTS.linewidth = linewidth
    _OPTS.sci_mode = sci_mode


def get_printoptions() -> dict[str, Any]:
    """Return the current print options as a dict usable as ``set_printoptions(**d)``."""
    return dataclasses.asdict(_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs: Any) -> Iterator[None]:
    """Temporarily change the print options (same arguments as ``set_printoptions``)."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    """Decides notation and common width for all printed elements of one tensor."""

    def __init__(self, flat: np.ndarray, floating: bool) -> None:
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        if floating:
            self._scan_floats(flat)
        else:
            lengths = [len(str(v)) for v in flat.tolist()]
            self.max_width = max([1, *lengths])

    def _scan_floats(self, flat: np.ndarray) -> None:
        vals = flat[np.isfinite(flat) & (flat != 0)]
        if vals.size == 0:
            return
        magnitudes = np.abs(vals).astype(np.float64)
        lo, hi = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        if _OPTS.sci_mode is None:
            with np.errstate(over="ignore"):  # max/tiny overflows to inf, as in torch
                self.sci_mode = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4)
        else:
            self.sci_mode = _OPTS.sci_mode
        # int mode without sci appends a "." to every number
        extra = 1 if self.int_mode and not self.sci_mode else 0
        texts = (self._number(v) for v in np.unique(vals).tolist())
        self.max_width = max(1, *(len(s) + extra for s in texts))

    def _number(self, value: float) -> str:
        """Unpadded text of a float, without int-mode's trailing dot."""
        if self.sci_mode:
            return f"{value:.{_OPTS.precision}e}"
        if self.int_mode:
            return f"{value:.0f}"
        return f"{value:.{_OPTS.precision}f}"

    def format(self, value: Any) -> str:
        """Text of one element, right-aligned to the common width."""
        if not self.floating:
            text = f"{value}"
        elif self.sci_mode:
            text = f"{value:{self.max_width}.{_OPTS.precision}e}"
        else:
            text = self._number(value)
            if self.int_mode and math.isfinite(value):
                text += "."
        return text.rjust(self.max_width)


def _summarized_values(a: np.ndarray) -> np.ndarray:
    """Flat array of the elements that a summarised print actually shows."""
    e = _OPTS.edgeitems
    if a.ndim == 0:
        return a.reshape(-1)
    if a.ndim == 1:
        if a.shape[0] > 2 * e:
            return np.concatenate((a[:e], a[-e:]))  # a[-0:] is all of a, as in torch
        return a
    if not e:
        return a.reshape(-1)[:0]
    parts = [_summarized_values(a[i]) for i in _shown_indices(a.shape[0], True)]
    return np.concatenate(parts)


def _shown_indices(n: int, summarize: bool) -> list[int]:
    """Indices along a dimension of length n that are printed (gap after edgeitems)."""
    e = _OPTS.edgeitems
    if summarize and n > 2 * e:
        return [*range(e), *range(n - e, n)]
    return list(range(n))


def _vector_str(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    e = _OPTS.edgeitems
    per_line = max(1, math.floor((_OPTS.linewidth - indent) / (fmt.max_width + 2)))
    if summarize and not e:
        items = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        head = [fmt.format(v) for v in a[:e].tolist()]
        tail = [fmt.format(v) for v in a[-e:].tolist()]
        items = [*head, " ...", *tail]
    else:
        items = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested_str(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    e = _OPTS.edgeitems
    shown = _shown_indices(a.shape[0], summarize)
    rows = [_nested_str(a[i], indent + 1, summarize, fmt) for i in shown]
    if summarize and a.shape[0] > 2 * e:
        rows.insert(e, "...")
    separator = "," + "\n" * (a.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(rows) + "]"


def _body_str(a: np.ndarray, indent: int) -> str:
    """The bracketed data part of the repr (no prefix, no suffixes)."""
    if a.size == 0:
        return "[]"
    summarize = a.size > _OPTS.threshold
    shown = _summarized_values(a) if summarize else a.reshape(-1)
    fmt = _Formatter(shown, floating=a.dtype.kind == "f")
    return _nested_str(a, indent, summarize, fmt)


def _add_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    """Append ``, suffix`` items, wrapping to a new line when past the linewidth."""
    parts = [text]
    # torch's measure of the last line is 2 more than its true length; kept as is
    line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if line_len + len(suffix) + 2 > _OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def _canonical_dtype(dtype: str) -> str:
    name = str(dtype).removeprefix("torch.")
    name = _ALIASES.get(name, name)
    if name not in _NP_DTYPES:
        raise ValueError(f"tensor_repr: unsupported dtype {dtype!r}")
    return name


def _data_suffixes(a: np.ndarray, dtype: str, default_dtype: str) -> list[str]:
    """The ``size=``/``dtype=`` suffixes, in torch's order."""
    suffixes = []
    if a.size == 0:
        if a.ndim != 1:
            suffixes.append(f"size={tuple(a.shape)}")
        if dtype != default_dtype:  # an empty tensor always names a non-default dtype
            suffixes.append(f"dtype=torch.{dtype}")
        return suffixes
    if not _OPTS.edgeitems:
        suffixes.append(f"size={tuple(a.shape)}")
    if dtype != default_dtype and dtype not in _IMPLICIT_DTYPES:
        suffixes.append(f"dtype=torch.{dtype}")
    return suffixes


def tensor_repr(
    values: np.ndarray,
    *,
    dtype: str,
    requires_grad: bool = False,
    grad_fn_name: str | None = None,
    default_dtype: str = "float32",
) -> str:
    """Return exactly what ``repr(t)`` (== ``str(t)``) prints for a CPU torch tensor.

    ``values`` holds the data (any shape and strides; cast to ``dtype`` if it is
    not already).  ``dtype`` is a torch dtype name such as "float32" or
    "torch.int64".  ``grad_fn_name`` (e.g. "MulBackward0") takes precedence over
    ``requires_grad``.  ``default_dtype`` mirrors ``torch.get_default_dtype()``.
    """
    name = _canonical_dtype(dtype)
    default = _canonical_dtype(default_dtype)
    a = np.asarray(values, dtype=_NP_DTYPES[name])
    prefix = "tensor("
    suffixes = _data_suffixes(a, name, default)
    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    body = _body_str(a, len(prefix))
    return _add_suffixes(prefix + body, suffixes, len(prefix))
