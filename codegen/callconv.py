"""Calling compiled kernels from Python: a CPython ``METH_FASTCALL`` entry point in LLVM IR.

This module owns the boundary between Python and native code as IR: the kernel ABI and
the entry that checks arguments and calls a kernel (binding an entry to a Python
callable: :mod:`codegen.binding`; numpy's C side: :mod:`codegen.numpy_abi`).

* the **kernel ABI** every compiled kernel implements::

      void @kernel(ptr %bufs)        (or  i32 @kernel(ptr %bufs): nonzero = failed)

  ``bufs`` points to ``[n_inputs + n_outputs x ptr]`` data pointers: the inputs in
  signature order, then the outputs in order.  Every buffer is C-contiguous, aligned
  for its dtype, native byte order, with exactly the dtype and shape of its spec.
  Outputs are freshly allocated and uninitialised; the kernel writes every element --
  except an output written in place (``OutSpec.input``): its pointer is unused, the
  kernel updates that argument's buffer, and the entry returns the argument array.
  There is deliberately **no scratch pointer**: an entry-provided scratch area would be
  a malloc per call or a shared buffer that breaks once the GIL is released, so a
  kernel that needs temporaries uses ``alloca`` (small) or its own allocation (large).
  A kernel may run without the GIL and on several threads at once: it must not touch
  Python objects and must not write mutable globals.  A kernel returning ``i32`` may
  fail (nonzero, e.g. an index out of range): the entry then drops the outputs and
  takes the fallback path, which can rerun the work slowly and raise the error.

* :func:`build_entry` — emits, with ``llvmlite.ir.IRBuilder``, the wrapper
  ``PyObject *entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs)`` that
  checks every argument (exact ``numpy.ndarray``, dtype number, byte order, ndim,
  every dimension, C-contiguous + aligned flags), allocates the outputs through
  numpy's C-API table (``PyArray_NewFromDescr``), releases the GIL around the kernel
  when the call touches more than ``gil_release_threshold`` elements, and returns the
  output array or a tuple of them.  On any mismatch the kernel is not run: the entry
  returns ``PyObject_Vectorcall(self, args, nargs, NULL)``, i.e. it calls the
  function's ``__self__`` (a :class:`CompiledEntry`), which calls the fallback.
  The checks, the outputs and the kernel call are one internal ``noinline`` function,
  ``i32 @"<kernel>.entry.core<digest>"(argv, nargs, ptr arrays)`` (0: ran, the new output
  arrays in ``arrays``; 1: fall back; 2: an exception is set), which the entries of one
  kernel and signature share: a program's flat and structured entries differ only in
  how they return the arrays, and LLVM compiles the checks once.

The cost of a call is measured in ``bench/README.md`` (Native call overhead).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from llvmlite import ir

from .numpy_abi import (
    _DESCR_PREFIX, _NDARRAY_TYPE, _NEW_FROM_DESCR, _NEW_FROM_DESCR_TYPE, NPY_ARRAY_ALIGNED,
    NPY_ARRAY_C_CONTIGUOUS, SUPPORTED_DTYPES, NumpyLayout, _constant_global,
    _declare_function, _declare_python, _declare_symbol, _swapped_byteorder, numpy_layout,
    register_runtime_symbols)

__all__ = ["ArgSpec", "OutSpec", "out_specs", "SUPPORTED_DTYPES", "DEFAULT_GIL_RELEASE_THRESHOLD",
           "build_entry", "signature_text"]

DEFAULT_GIL_RELEASE_THRESHOLD = 1 << 14  # elements (inputs + outputs) per call
METH_FASTCALL = 0x0080

_PTR = ir.PointerType()
_I8, _I32, _I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
_VOID = ir.VoidType()
_NULL = ir.Constant(_PTR, None)


# --------------------------------------------------------------------------- specs


def _check_dtype_and_shape(dtype: str, shape: tuple[int, ...]) -> None:
    if dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype {dtype!r} not supported; expected one of {SUPPORTED_DTYPES}")
    if not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError(f"shape {shape!r} must be a tuple of non-negative ints")


@dataclass(frozen=True)
class ArgSpec:
    """One input of a compiled function: ``ArgSpec("x", "float64", (2, 3))``."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        _check_dtype_and_shape(self.dtype, self.shape)


@dataclass(frozen=True)
class OutSpec:
    """One output of a compiled function: ``OutSpec("float64", ())`` is a 0-d array.
    ``input=k``: the kernel writes this output into argument k's buffer (state updated
    in place), and the entry returns that argument array instead of allocating one."""

    dtype: str
    shape: tuple[int, ...]
    input: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        _check_dtype_and_shape(self.dtype, self.shape)


def out_specs(buffers: Sequence[Any], donated: Sequence[tuple[int, int]] = ()) -> list[OutSpec]:
    """The OutSpecs of output ``buffers`` (objects with dtype and shape); ``donated``:
    (output j, input k) pairs the kernel writes in place (see :class:`OutSpec`)."""
    into = dict(donated)
    return [OutSpec(b.dtype, b.shape, into.get(j)) for j, b in enumerate(buffers)]


def signature_text(args: Sequence[ArgSpec], outs: Sequence[OutSpec]) -> str:
    """Canonical text of a signature; stored in the module and checked at bind time."""
    return repr((tuple(args), tuple(outs)))


def _accepted_type_nums(dtype: str) -> tuple[int, ...]:
    """numpy type numbers with the same kind and size (int64 is both NPY_LONG and NPY_LONGLONG)."""
    want = np.dtype(dtype)
    same = {np.dtype(c).num for c in np.typecodes["All"]
            if np.dtype(c).kind == want.kind and np.dtype(c).itemsize == want.itemsize}
    return tuple(sorted(same))


# ------------------------------------------------------------------ IR generation


def build_entry(module: ir.Module, kernel: ir.Function | str, entry_name: str,
                args: Sequence[ArgSpec], outs: Sequence[OutSpec], *,
                gil_release_threshold: int = DEFAULT_GIL_RELEASE_THRESHOLD,
                tuple_result: bool = False, structure: Any = None) -> ir.Function:
    """Emit ``entry_name`` (a METH_FASTCALL function) calling ``kernel`` into ``module``.

    Also emits the constant ``@"<entry_name>.signature"`` that :func:`make_callable`
    checks.  The GIL is released around the kernel when the total element count of
    inputs and outputs exceeds ``gil_release_threshold``.  The result is the output
    array, or a tuple of them (always a tuple with ``tuple_result=True``); ``structure``,
    a nesting of tuples of output indices such as ``(0, (1, 2))``, returns nested tuples
    (``0``: the single output array itself).

    >>> m = ir.Module()
    >>> k = ir.Function(m, ir.FunctionType(ir.VoidType(), [ir.PointerType()]), "k")
    >>> _ = ir.IRBuilder(k.append_basic_block()).ret_void()
    >>> build_entry(m, k, "k_entry", [ArgSpec("x", "float64", (2,))], [OutSpec("float64", (2,))]).name
    'k_entry'
    """
    if not outs:
        raise ValueError("a compiled function needs at least one output")
    for spec in outs:
        if spec.input is not None and not (0 <= spec.input < len(args)
                                           and args[spec.input].dtype == spec.dtype
                                           and args[spec.input].shape == spec.shape):
            raise ValueError(f"an output written into argument {spec.input} must have its "
                             f"dtype and shape: {spec}")
    kernel_fn = module.get_global(kernel) if isinstance(kernel, str) else kernel
    if kernel_fn.function_type not in (ir.FunctionType(_VOID, [_PTR]), ir.FunctionType(_I32, [_PTR])):
        raise TypeError(f"kernel must be 'void (ptr)' or 'i32 (ptr)', got {kernel_fn.function_type}")
    register_runtime_symbols()
    signature = signature_text(args, outs)
    text = bytearray(signature.encode() + b"\0")
    _constant_global(module, f"{entry_name}.signature",
                     ir.Constant(ir.ArrayType(_I8, len(text)), text))
    if structure is not None and structure != 0:
        _check_structure(structure, len(outs))
    release_gil = _element_count(args, outs) > gil_release_threshold
    digest = hashlib.blake2b(f"{signature}|{release_gil}".encode(), digest_size=6).hexdigest()
    core_name = f"{kernel_fn.name}.entry.core{digest}"
    core = module.globals.get(core_name)
    if core is None:
        core = _CoreEmitter(module, kernel_fn, core_name, tuple(args), tuple(outs),
                            numpy_layout()).emit(release_gil)
    emitter = _EntryEmitter(module, core, entry_name, len(outs))
    emitter.tuple_result = tuple_result
    emitter.structure = structure
    return emitter.emit()


def _check_structure(structure: Any, n: int) -> None:
    """A nested tuple using each output index 0..n-1 exactly once."""
    seen: list[int] = []

    def walk(node: Any) -> None:
        if isinstance(node, int) and not isinstance(node, bool):
            seen.append(node)
        elif isinstance(node, tuple):
            for child in node:
                walk(child)
        else:
            raise TypeError(f"structure entries are ints or tuples, got {node!r}")
    if not isinstance(structure, tuple):
        raise TypeError(f"structure must be a tuple, got {structure!r}")
    walk(structure)
    if sorted(seen) != list(range(n)):
        raise ValueError(f"structure {structure!r} must use each of the {n} outputs once")


def _element_count(args: Sequence[ArgSpec], outs: Sequence[OutSpec]) -> int:
    return sum(math.prod(spec.shape) for spec in (*args, *outs))


class _Emitter:
    """What both emitters share: the builder in a new function, and error returns."""

    failed: ir.Value      # what the function returns when an exception is set

    def __init__(self, module: ir.Module, name: str, fnty: ir.FunctionType) -> None:
        self.module = module
        self.fn = ir.Function(module, fnty, name)
        self.builder = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.fallback_block = self.fn.append_basic_block("fallback")

    def call_python(self, name: str, *values: ir.Value) -> ir.Instruction:
        return self.builder.call(_declare_python(self.module, name), values)

    def return_null_if_null(self, value: ir.Value, owned: Sequence[ir.Value]) -> None:
        """Error path: release ``owned`` references and return :attr:`failed` (the
        exception is already set)."""
        b = self.builder
        with b.if_then(b.icmp_unsigned("==", value, _NULL), likely=False):
            for obj in owned:
                self.call_python("Py_DecRef", obj)
            b.ret(self.failed)


# the core's status: the kernel ran; the call goes to the fallback; an exception is set
_RAN, _FALL_BACK, _RAISED = 0, 1, 2


class _CoreEmitter(_Emitter):
    """Writes the core one kernel's entries share (see the module docstring): checks
    every argument, allocates the outputs, calls the kernel; each method emits one step
    at the builder's position."""

    failed = _I32(_RAISED)

    def __init__(self, module: ir.Module, kernel: ir.Function, name: str,
                 args: tuple[ArgSpec, ...], outs: tuple[OutSpec, ...], layout: NumpyLayout) -> None:
        super().__init__(module, name, ir.FunctionType(_I32, [_PTR, _I64, _PTR]))
        self.fn.linkage = "internal"
        self.fn.attributes.add("noinline")       # one copy, whichever entries call it
        self.kernel, self.args, self.outs, self.lay = kernel, args, outs, layout
        self.argv, self.nargs, self.arrays = self.fn.args

    def field(self, obj: ir.Value, offset: int, typ: ir.Type, name: str = "") -> ir.Value:
        b = self.builder
        return b.load(b.gep(obj, [_I64(offset)], inbounds=True, source_etype=_I8), typ=typ, name=name)

    def require(self, condition: ir.Value, label: str) -> None:
        """Continue in a new block when ``condition`` holds, else go to the fallback."""
        ok = self.fn.append_basic_block(label)
        self.builder.cbranch(condition, ok, self.fallback_block).set_weights([1000, 1])
        self.builder.position_at_end(ok)

    def emit(self, release_gil: bool) -> ir.Function:
        b = self.builder
        bufs = b.alloca(_PTR, size=_I32(len(self.args) + len(self.outs)), name="bufs")
        self.require(b.icmp_signed("==", self.nargs, _I64(len(self.args))), "nargs_ok")
        objects = []
        for i, spec in enumerate(self.args):
            obj, data = self.checked_data(i, spec)
            objects.append(obj)
            self.store_buffer(bufs, i, data)
        arrays: list[ir.Value] = []
        for j, spec in enumerate(self.outs):
            if spec.input is not None:          # written in place: the argument itself
                self.call_python("Py_IncRef", objects[spec.input])
                arrays.append(objects[spec.input])
                continue
            arrays.append(self.new_output(j, spec, bufs, owned=tuple(arrays)))
        status = self.call_kernel(bufs, release_gil)
        if status is not None:  # an i32 kernel reports failure (e.g. a bad index): fall back
            with b.if_then(b.icmp_signed("!=", status, _I32(0)), likely=False):
                for obj in arrays:
                    self.call_python("Py_DecRef", obj)
                b.branch(self.fallback_block)
        for j, array in enumerate(arrays):
            b.store(array, b.gep(self.arrays, [_I64(j)], inbounds=True, source_etype=_PTR))
        b.ret(_I32(_RAN))
        b.position_at_end(self.fallback_block)
        b.ret(_I32(_FALL_BACK))
        return self.fn

    def store_buffer(self, bufs: ir.Value, index: int, data: ir.Value) -> None:
        slot = self.builder.gep(bufs, [_I64(index)], inbounds=True, source_etype=_PTR)
        self.builder.store(data, slot)

    def checked_data(self, index: int, spec: ArgSpec) -> tuple[ir.Value, ir.Value]:
        """Check argument ``index`` against ``spec``; return it and its data pointer."""
        b, lay = self.builder, self.lay
        slot = b.gep(self.argv, [_I64(index)], inbounds=True, source_etype=_PTR)
        obj = b.load(slot, typ=_PTR, name=spec.name)
        ob_type = self.field(obj, lay.ob_type, _PTR)
        ndarray = _declare_symbol(self.module, _NDARRAY_TYPE)
        self.require(b.icmp_unsigned("==", ob_type, ndarray), f"{spec.name}.is_ndarray")
        nd = self.field(obj, lay.nd, _I32)
        self.require(b.icmp_signed("==", nd, _I32(len(spec.shape))), f"{spec.name}.ndim_ok")
        ok = b.and_(self.flags_ok(obj), self.dtype_ok(obj, spec.dtype))
        self.require(b.and_(ok, self.shape_ok(obj, spec.shape)), f"{spec.name}.ok")
        return obj, self.field(obj, lay.data, _PTR, name=f"{spec.name}.data")

    def flags_ok(self, obj: ir.Value) -> ir.Value:
        need = _I32(NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED)
        flags = self.field(obj, self.lay.flags, _I32)
        return self.builder.icmp_unsigned("==", self.builder.and_(flags, need), need)

    def dtype_ok(self, obj: ir.Value, dtype: str) -> ir.Value:
        b = self.builder
        descr = self.field(obj, self.lay.descr, _PTR)
        type_num = self.field(descr, self.lay.descr_type_num, _I32)
        ok = ir.Constant(ir.IntType(1), 0)
        for num in _accepted_type_nums(dtype):
            ok = b.or_(ok, b.icmp_signed("==", type_num, _I32(num)))
        byteorder = self.field(descr, self.lay.descr_byteorder, _I8)
        native = b.icmp_unsigned("!=", byteorder, _I8(_swapped_byteorder()[0]))
        return b.and_(ok, native)

    def shape_ok(self, obj: ir.Value, shape: tuple[int, ...]) -> ir.Value:
        b = self.builder
        ok = ir.Constant(ir.IntType(1), 1)
        if not shape:
            return ok
        dims = self.field(obj, self.lay.dimensions, _PTR)
        for axis, size in enumerate(shape):
            slot = b.gep(dims, [_I64(axis)], inbounds=True, source_etype=_I64)
            ok = b.and_(ok, b.icmp_signed("==", b.load(slot, typ=_I64), _I64(size)))
        return ok

    def new_output(self, index: int, spec: OutSpec, bufs: ir.Value,
                   owned: tuple[ir.Value, ...]) -> ir.Value:
        """Allocate output ``index``; on failure release ``owned`` and return NULL.

        ``PyArray_NewFromDescr`` steals one reference to the dtype object, even on failure.
        """
        b = self.builder
        descr = _declare_symbol(self.module, _DESCR_PREFIX + spec.dtype)
        self.call_python("Py_IncRef", descr)
        dims = _NULL
        if spec.shape:
            dims_const = ir.Constant(ir.ArrayType(_I64, len(spec.shape)), list(spec.shape))
            dims = _constant_global(self.module, f"{self.fn.name}.out{index}.shape", dims_const)
        new = _declare_function(self.module, _NEW_FROM_DESCR, _NEW_FROM_DESCR_TYPE)
        ndarray = _declare_symbol(self.module, _NDARRAY_TYPE)
        array = b.call(new, [ndarray, descr, _I32(len(spec.shape)), dims, _NULL, _NULL, _I32(0), _NULL],
                       name=f"out{index}")
        self.return_null_if_null(array, owned)
        self.store_buffer(bufs, len(self.args) + index, self.field(array, self.lay.data, _PTR))
        return array

    def call_kernel(self, bufs: ir.Value, release_gil: bool) -> ir.Value | None:
        """Call the kernel; return its i32 status (None for a void kernel)."""
        state = self.call_python("PyEval_SaveThread") if release_gil else None
        result = self.builder.call(self.kernel, [bufs])
        if state is not None:
            self.call_python("PyEval_RestoreThread", state)
        return result if self.kernel.function_type.return_type == _I32 else None


class _EntryEmitter(_Emitter):
    """Writes one METH_FASTCALL entry: the core, then the result as the entry returns it
    (:func:`build_entry`), or the fallback."""

    failed = _NULL

    def __init__(self, module: ir.Module, core: ir.Function, name: str, n_outs: int) -> None:
        super().__init__(module, name, ir.FunctionType(_PTR, [_PTR, _PTR, _I64]))
        self.core, self.n_outs = core, n_outs
        self.self_obj, self.argv, self.nargs = self.fn.args
        self.tuple_result = False
        self.structure: Any = None

    def emit(self) -> ir.Function:
        b = self.builder
        slots = b.alloca(_PTR, size=_I32(self.n_outs), name="arrays")
        status = b.call(self.core, [self.argv, self.nargs, slots], name="status")
        raised = self.fn.append_basic_block("raised")
        ran = self.fn.append_basic_block("ran")
        switch = b.switch(status, raised)
        switch.add_case(_I32(_RAN), ran)
        switch.add_case(_I32(_FALL_BACK), self.fallback_block)
        b.position_at_end(raised)
        b.ret(_NULL)
        b.position_at_end(ran)
        arrays = [b.load(b.gep(slots, [_I64(j)], inbounds=True, source_etype=_PTR), typ=_PTR,
                         name=f"out{j}") for j in range(self.n_outs)]
        single = len(arrays) == 1 and not self.tuple_result
        if self.structure == 0:                 # one bare output array
            result = arrays[0]
        elif self.structure is not None:
            result = self.pack_nested(self.structure, arrays)
        else:
            result = arrays[0] if single else self.pack_tuple(arrays)
        b.atomic_rmw("add", self.call_counter(), _I64(1), "monotonic")
        b.ret(result)
        self.emit_fallback()
        return self.fn

    def call_counter(self) -> ir.GlobalVariable:
        """``@"<entry>.calls"``: calls completed by the native path (:func:`native_calls`)."""
        counter = ir.GlobalVariable(self.module, _I64, f"{self.fn.name}.calls")
        counter.initializer = _I64(0)
        return counter

    def pack_nested(self, structure: tuple, arrays: Sequence[ir.Value]) -> ir.Value:
        """Nested tuples of the outputs: every tuple is created first (on failure all are
        released with the arrays), then filled — PyTuple_SetItem cannot fail then."""
        items: list[list[tuple[str, int]]] = []        # per tuple, in preorder: its items

        def preorder(node: tuple) -> int:
            k = len(items)
            items.append([])
            for child in node:
                items[k].append(("tuple", preorder(child)) if isinstance(child, tuple)
                                else ("array", child))
            return k
        preorder(structure)
        created: list[ir.Value] = []
        for entries in items:
            t = self.call_python("PyTuple_New", _I64(len(entries)))
            self.return_null_if_null(t, tuple(arrays) + tuple(created))
            created.append(t)
        for obj, entries in zip(created, items):
            for position, (kind, k) in enumerate(entries):    # steals each item's reference
                item = arrays[k] if kind == "array" else created[k]
                self.call_python("PyTuple_SetItem", obj, _I64(position), item)
        return created[0]

    def pack_tuple(self, arrays: Sequence[ir.Value]) -> ir.Value:
        result = self.call_python("PyTuple_New", _I64(len(arrays)))
        self.return_null_if_null(result, arrays)
        for position, array in enumerate(arrays):  # steals each array's reference
            self.call_python("PyTuple_SetItem", result, _I64(position), array)
        return result

    def emit_fallback(self) -> None:
        self.builder.position_at_end(self.fallback_block)
        result = self.call_python("PyObject_Vectorcall", self.self_obj, self.argv, self.nargs, _NULL)
        self.builder.ret(result)


