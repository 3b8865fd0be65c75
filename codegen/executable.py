"""The object ``compile_program`` returns: native code for one program signature.

* ``exe(arrays)`` -- the checked Python path: every argument is validated (type,
  dtype, shape; non-contiguous, misaligned or byte-swapped arrays are copied) before
  native code runs; outputs are new arrays.  Hybrid executables run their numpy steps
  between native segments here.  An out-of-range index raises ``IndexError`` with
  numpy's text.
* ``exe.native_entry(fallback)`` -- a builtin (CPython METH_FASTCALL, generated in IR by
  :mod:`codegen.callconv`): ``entry(*arrays) -> tuple of outputs`` in ~0.15 us.  Any
  argument it does not accept -- and any failure inside the kernel -- goes to
  ``fallback(*arrays)`` instead.  Hybrid executables return a Python function.
* ``exe.as_text(kind)`` with kind ``"llvm"`` (as generated), ``"llvm-opt"``, ``"asm"``,
  ``"program"`` (the program and its schedule, saying what runs through numpy).
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, Sequence

import numpy as np

from symgrad.graph.interpret import run_node

from . import callconv
from .plan import NodeStep, Plan

__all__ = ["LLVMExecutable", "check_arrays"]

_KERNEL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
TEXT_KINDS = ("llvm", "llvm-opt", "asm", "program")


def check_arrays(arrays: Any, specs: Sequence[Any], where: str = "compiled function") -> list[np.ndarray]:
    """Validate ``arrays`` against ``specs`` (objects with name, dtype, shape); copy
    arrays that are not C-contiguous/aligned/native; raise TypeError/ValueError."""
    if not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{where}: expected a list of numpy arrays, got {type(arrays).__name__}")
    if len(arrays) != len(specs):
        raise TypeError(f"{where}: expected {len(specs)} arrays, got {len(arrays)}")
    out = []
    for a, spec in zip(arrays, specs):
        want = np.dtype(spec.dtype)
        if not isinstance(a, np.ndarray) or isinstance(a, np.ma.MaskedArray):
            raise TypeError(f"{where}: argument {spec.name!r} must be a numpy.ndarray of dtype "
                            f"{want} and shape {tuple(spec.shape)}, got {type(a).__name__}")
        if a.dtype != want and not (a.dtype.kind == want.kind and a.dtype.itemsize == want.itemsize):
            raise TypeError(f"{where}: argument {spec.name!r} must have dtype {want}, got {a.dtype}")
        if a.shape != tuple(spec.shape):
            raise ValueError(f"{where}: argument {spec.name!r} must have shape {tuple(spec.shape)}, "
                             f"got {a.shape}")
        if not (a.flags.c_contiguous and a.flags.aligned and a.dtype.isnative and type(a) is np.ndarray):
            a = np.array(a, dtype=want.newbyteorder("="), order="C", copy=True)
        out.append(a)
    return out


class LLVMExecutable:
    """Native code for one program signature (see the module docstring)."""

    backend = "llvm"

    def __init__(self, plan: Plan, handle: Any, texts: dict[str, str], name: str,
                 entry_name: str | None, from_cache: bool) -> None:
        self.plan = plan
        self.handle = handle          # codegen.target.LoadedObject: keeps the code alive
        self.texts = texts
        self.name = name
        self.entry_name = entry_name
        self.from_cache = from_cache
        self.arg_specs = [callconv.ArgSpec(st.name if st.name.isidentifier() else f"arg{k}",
                                           st.dtype.name, st.shape) if st.dtype.name in
                          callconv.SUPPORTED_DTYPES else _Spec(st.name, st.dtype.name, st.shape)
                          for k, st in enumerate(plan.inputs)]
        self._segments = [_KERNEL(handle.address(f"{name}.seg{k}"))
                          for k in range(len(plan.segments))]

    # ---- the checked Python path ---------------------------------------------------------
    def __call__(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        arrays = check_arrays(arrays, self.arg_specs, self.name)
        plan = self.plan
        outs = [np.empty(st.shape, st.dtype.np) for st in plan.outputs]
        ext = [np.empty(st.shape, st.dtype.np) for st in plan.externals]
        buffers = list(arrays) + outs + ext
        if not plan.hybrid:
            self._run_segment(0, buffers)
            return outs
        segment = 0
        self._run_segment(segment, buffers)
        for step in plan.steps:
            if isinstance(step, NodeStep) and step.kind == "numpy":
                self._run_numpy(step.node, buffers)
                segment += 1
                self._run_segment(segment, buffers)
        return outs

    def _run_segment(self, k: int, buffers: list[np.ndarray]) -> None:
        ptrs = (ctypes.c_void_p * max(len(buffers), 1))(*[b.ctypes.data for b in buffers])
        err = (ctypes.c_int64 * 4)()
        status = self._segments[k](ctypes.addressof(ptrs), ctypes.addressof(err))
        if status == 1:
            _, value, axis, size = err
            raise IndexError(f"index {value} is out of bounds for axis {axis} with size {size}")
        if status == 2:
            raise MemoryError(f"{self.name}: could not allocate {self.plan.arena_size} bytes "
                              f"of temporaries")
        if status:
            raise RuntimeError(f"{self.name}: native code failed with status {status}")

    def _value(self, node, buffers: list[np.ndarray]) -> np.ndarray:
        st = self.plan.storage.get(id(node))
        if node.op == "const":
            return node.attr("value").value
        if st is not None and st.kind in ("in", "out", "ext"):
            return buffers[st.slot].reshape(node.shape)
        if self.plan.kinds[id(node)] == "view":
            return run_node(node, [self._value(node.args[0], buffers)])
        raise AssertionError(f"numpy step argument {node.op} is not materialised")

    def _run_numpy(self, node, buffers: list[np.ndarray]) -> None:
        with np.errstate(all="ignore"):
            result = run_node(node, [self._value(a, buffers) for a in node.args])
        st = self.plan.storage[id(node)]
        np.copyto(buffers[st.slot].reshape(node.shape), result, casting="unsafe")

    # ---- the fast path ---------------------------------------------------------------------
    def native_entry(self, fallback: Callable[..., Any] | None = None,
                     structured: bool = False) -> Callable[..., Any]:
        """A builtin ``entry(*arrays) -> tuple(outputs)`` (see the module docstring);
        ``fallback`` (default: the checked path, raising clear errors) gets the same
        arguments whenever the fast checks or the kernel refuse them. With
        ``structured=True`` the result is nested as the program's outputs are (see
        ``Program.native_structure``), when the module has that entry."""
        if fallback is None:
            fallback = self._fallback
        if self.entry_name is None:
            def entry(*arrays: Any) -> tuple:
                try:
                    return tuple(self(list(arrays)))
                except (TypeError, ValueError):
                    return fallback(*arrays)
            return entry
        outs = [callconv.OutSpec(st.dtype.name, st.shape) for st in self.plan.outputs]
        name = self.structured_entry_name if structured else self.entry_name
        return callconv.make_callable(self.handle, name, self.arg_specs, outs,
                                      fallback, name="compiled")

    @property
    def structured_entry_name(self) -> str | None:
        """The entry returning nested results, if the module has one."""
        from .backend import STRUCTURED_SUFFIX
        if self.entry_name is None or self.plan.program.native_structure() is None:
            return None
        return self.entry_name + STRUCTURED_SUFFIX

    def _fallback(self, *arrays: Any) -> tuple:
        return tuple(self(list(arrays)))

    # ---- inspection --------------------------------------------------------------------------
    def as_text(self, kind: str = "llvm") -> str:
        if kind == "program":
            return self.plan.program.as_text() + "\n# schedule\n" + self.plan.summary()
        if kind not in TEXT_KINDS:
            raise ValueError(f"unknown text kind {kind!r}; choose one of {TEXT_KINDS}")
        if kind == "asm" and "asm" not in self.texts:       # code generation, on demand
            from . import target
            module = target.CompiledModule(self.texts["llvm"], self.texts["llvm-opt"], self.handle)
            self.texts["asm"] = module.asm
        return self.texts[kind]

    def __repr__(self) -> str:
        how = "hybrid" if self.plan.hybrid else "native"
        return (f"<LLVMExecutable {self.name} ({how}, {len(self.plan.steps)} steps"
                f"{', from disk cache' if self.from_cache else ''})>")


class _Spec:
    def __init__(self, name: str, dtype: str, shape: tuple) -> None:
        self.name, self.dtype, self.shape = name, dtype, shape
