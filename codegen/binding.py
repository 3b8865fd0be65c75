"""A compiled entry as a Python callable, and its slow path.

* :func:`make_callable` — wraps a compiled entry into a real builtin function
  (``PyMethodDef`` + ``PyCFunction_NewEx``) whose ``__self__`` keeps the JIT handle,
  the method definition and the fallback alive.

* :class:`ConvertingFallback` — the default slow path: it names the bad argument in a
  ``TypeError``/``ValueError``, or converts (copies, casts within a dtype kind, turns
  lists/scalars into arrays) and calls the fast entry again.
"""
from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from .callconv import METH_FASTCALL, ArgSpec, OutSpec, signature_text

__all__ = ["native_calls", "CompiledEntry", "ConvertingFallback", "make_callable"]


# ------------------------------------------------------------------------ binding


def native_calls(handle: Any, entry_name: str) -> int:
    """Calls completed by the native path of ``entry_name`` (its atomic counter)."""
    name = f"{entry_name}.calls"
    engine = getattr(handle, "_engine", None)
    address = engine.get_global_value_address(name) if engine is not None else 0
    return ctypes.c_int64.from_address(address or _symbol_address(handle, name)).value


class _PyMethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


_PyCFunction_NewEx = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.POINTER(_PyMethodDef), ctypes.py_object, ctypes.py_object,
)(("PyCFunction_NewEx", ctypes.pythonapi))


class CompiledEntry:
    """``__self__`` of a compiled builtin: owns the JIT handle and method definition; is the slow path.

    The native entry calls this object (``PyObject_Vectorcall(self, ...)``) whenever it
    refuses its arguments; it forwards to ``fallback``.
    """

    __slots__ = ("handle", "entry_name", "args", "outs", "fallback", "_method_def", "_strings",
                 "__weakref__")

    def __init__(self, handle: Any, entry_name: str, args: tuple[ArgSpec, ...],
                 outs: tuple[OutSpec, ...], fallback: Callable[..., Any]) -> None:
        self.handle, self.entry_name = handle, entry_name
        self.args, self.outs, self.fallback = args, outs, fallback

    def __call__(self, *values: Any) -> Any:
        return self.fallback(*values)

    def __repr__(self) -> str:
        return f"<CompiledEntry {self.entry_name} args={self.args} outs={self.outs}>"


def _symbol_address(handle: Any, name: str) -> int:
    """Address of ``name`` in a JIT handle.

    Accepted handles: anything with ``address(name)`` (``codegen.jit.CompiledModule``
    / ``LoadedObject``) or ``symbol_address(name)``, an ``llvm.ExecutionEngine``, or a
    mapping name -> address (an ORC ``ResourceTracker``).
    """
    for method in ("address", "symbol_address", "get_global_value_address"):
        if callable(getattr(handle, method, None)):
            address = getattr(handle, method)(name)
            break
    else:
        address = handle[name]
    if not address:
        raise KeyError(f"symbol {name!r} not found in {handle!r}")
    return address


def _check_signature(handle: Any, entry_name: str, args: tuple[ArgSpec, ...],
                     outs: tuple[OutSpec, ...]) -> None:
    stored = ctypes.string_at(_symbol_address(handle, f"{entry_name}.signature")).decode()
    if stored != signature_text(args, outs):
        raise ValueError(f"entry {entry_name!r} was built for {stored}, not {signature_text(args, outs)}")


def _doc_with_signature(name: str, args: Sequence[ArgSpec], doc: str) -> str:
    names = [spec.name for spec in args]
    if name.isidentifier() and all(n.isidentifier() for n in names):
        return f"{name}({', '.join(names)})\n--\n\n{doc}"  # gives inspect.signature()
    return doc


def make_callable(handle: Any, entry_name: str, args: Sequence[ArgSpec], outs: Sequence[OutSpec],
                  fallback: Callable[..., Any] | None = None, *, name: str | None = None,
                  doc: str = "", module_name: str = "symgrad.compiled") -> Callable[..., Any]:
    """Wrap the compiled ``entry_name`` into a builtin function (METH_FASTCALL).

    ``handle`` is the JIT that holds the code (an ``llvm.ExecutionEngine``, anything with
    ``symbol_address(name)``, or a mapping name -> address); it stays alive as long as the
    returned function.  ``fallback(*args)`` is called with the original arguments when
    the fast checks fail; ``None`` means a :class:`ConvertingFallback`.

    >>> from llvmlite import ir
    >>> from codegen import jit
    >>> from codegen.callconv import build_entry
    >>> m = ir.Module()
    >>> k = ir.Function(m, ir.FunctionType(ir.VoidType(), [ir.PointerType()]), "fill")
    >>> b = ir.IRBuilder(k.append_basic_block())
    >>> out = b.load(b.gep(k.args[0], [ir.IntType(64)(1)], source_etype=ir.PointerType()),
    ...              typ=ir.PointerType())
    >>> _ = b.store(ir.DoubleType()(7.0), out); _ = b.ret_void()
    >>> args, outs = [ArgSpec("x", "float64", (3,))], [OutSpec("float64", ())]
    >>> _ = build_entry(m, k, "seven", args, outs)
    >>> seven = make_callable(jit.compile_module(m), "seven", args, outs)
    >>> seven(np.zeros(3)), seven([1, 2, 3])          # fast path, then via the fallback
    (array(7.), array(7.))
    >>> seven(np.zeros(4))
    Traceback (most recent call last):
    ValueError: seven(): argument 'x' must have shape (3,), got ndarray of dtype <f8 (float64), shape (4,), C-contiguous
    """
    args, outs = tuple(args), tuple(outs)
    name = name or entry_name
    _check_signature(handle, entry_name, args, outs)
    converting = ConvertingFallback(name, args) if fallback is None else None
    owner = CompiledEntry(handle, entry_name, args, outs, fallback or converting)
    owner._strings = (name.encode(), _doc_with_signature(name, args, doc).encode())
    owner._method_def = _PyMethodDef(owner._strings[0], _symbol_address(handle, entry_name),
                                     METH_FASTCALL, owner._strings[1])
    function = _PyCFunction_NewEx(ctypes.byref(owner._method_def), owner, module_name)
    if converting is not None:
        converting.bind(function)
    return function


# ---------------------------------------------------------------------- fallback


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        layout = "C-contiguous" if value.flags.c_contiguous else "non-contiguous"
        return (f"{type(value).__name__} of dtype {value.dtype.str} ({value.dtype}), "
                f"shape {value.shape}, {layout}{'' if value.flags.aligned else ', misaligned'}")
    return f"{type(value).__name__} {value!r:.60}"


class ConvertingFallback:
    """Default slow path: explain a bad argument, or convert it and call the fast entry again.

    Accepted conversions: any array-like (list, scalar, numpy subclass other than a
    masked array, non-contiguous, misaligned or byte-swapped array) whose dtype casts to
    the expected one within its kind (``np.can_cast(..., "same_kind")``: int -> float, float64 -> float32, bool ->
    anything) and whose shape matches exactly.  Otherwise ``TypeError`` (count, dtype) or
    ``ValueError`` (shape) naming the argument, what was expected and what was given.
    """

    def __init__(self, name: str, args: Sequence[ArgSpec]) -> None:
        self.name, self.args = name, tuple(args)
        self._fast: Callable[[], Callable[..., Any] | None] = lambda: None
        self._local = threading.local()

    def bind(self, fast: Callable[..., Any]) -> None:
        """Remember (weakly: no reference cycle) the fast function to retry."""
        self._fast = weakref.ref(fast)

    def __call__(self, *values: Any) -> Any:
        if len(values) != len(self.args):
            names = ", ".join(spec.name for spec in self.args)
            raise TypeError(f"{self.name}() takes {len(self.args)} positional arguments "
                            f"({names}) but {len(values)} were given")
        converted = tuple(self.convert(spec, value) for spec, value in zip(self.args, values))
        fast = self._fast()
        if fast is None:
            raise RuntimeError(f"{self.name}: the compiled function is gone")
        if getattr(self._local, "retrying", False):
            raise RuntimeError(f"{self.name}: compiled entry refused converted arguments "
                               f"{[_describe(v) for v in converted]} (internal error)")
        self._local.retrying = True
        try:
            return fast(*converted)
        finally:
            self._local.retrying = False

    def convert(self, spec: ArgSpec, value: Any) -> np.ndarray:
        """``value`` as an exact, C-contiguous, aligned, native ndarray matching ``spec``."""
        want = np.dtype(spec.dtype)
        if isinstance(value, np.ma.MaskedArray):  # converting would silently drop the mask
            raise TypeError(f"{self.name}(): argument '{spec.name}' must be a plain array, got a "
                            f"masked array; pass value.filled(fill) instead")
        try:
            array = np.asarray(value)
        except Exception as error:  # e.g. ragged lists
            raise TypeError(f"{self.name}(): argument '{spec.name}' must be a {spec.dtype} array of "
                            f"shape {spec.shape}, got {_describe(value)}") from error
        if array.dtype.kind not in "biuf" or not np.can_cast(array.dtype, want, "same_kind"):
            raise TypeError(f"{self.name}(): argument '{spec.name}' must have dtype {spec.dtype} "
                            f"(or one that casts to it within its kind), got {_describe(value)}")
        if array.shape != spec.shape:
            raise ValueError(f"{self.name}(): argument '{spec.name}' must have shape {spec.shape}, "
                             f"got {_describe(value)}")
        if _fits_fast_path(array, want):
            return array
        return np.array(array, dtype=want, order="C", copy=True)


def _fits_fast_path(array: np.ndarray, want: np.dtype) -> bool:
    flags = array.flags
    return (type(array) is np.ndarray and array.dtype == want and array.dtype.isnative
            and flags.c_contiguous and flags.aligned)
