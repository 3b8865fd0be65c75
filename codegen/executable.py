"""The object ``compile_program`` returns: native code for one program signature.

* ``exe(arrays)`` -- the checked Python path: every argument is validated (type,
  dtype, shape; non-contiguous, misaligned or byte-swapped arrays are copied) before
  native code runs; outputs are new arrays.  Hybrid executables run their numpy steps
  between native segments here.  An out-of-range index raises ``IndexError`` with
  numpy's text.
* ``exe.native_entry(fallback)`` -- a builtin (CPython METH_FASTCALL, generated in IR by
  :mod:`codegen.callconv`): ``entry(*arrays) -> tuple of outputs`` in well under a microsecond.  Any
  argument it does not accept -- and any failure inside the kernel -- goes to
  ``fallback(*arrays)`` instead.  Hybrid executables return a Python function.
* ``exe.as_text(kind)`` with kind ``"llvm"`` (as generated), ``"llvm-opt"``, ``"asm"``,
  ``"program"`` (the program and its schedule, saying what runs through numpy).

Calling the native code needs only an :class:`Interface` (the buffers' names, dtypes and
shapes, the number of native segments, the nesting of the structured entry's result),
not the program or its schedule: an executable reloaded by the front end's disk cache
(:func:`codegen.backend.load_executable`) is built from a stored interface, and its
:class:`~codegen.plan.Plan` is made only if something asks for it (a hybrid call,
``as_text("program")``).
"""
from __future__ import annotations

import ctypes
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from symgrad.graph.interpret import run_node

from . import binding, callconv, jit, loops
from . import status as status_errors

__all__ = ["LLVMExecutable", "Interface", "Buffer", "check_arrays"]

STACK_ARENA = 32 * 1024     # temporaries up to this many bytes live on the stack


def heap_arena(size: int) -> bool:
    """Whether an arena of ``size`` bytes lives on the heap (else on the stack, or none)."""
    return size > STACK_ARENA


def arena_release_name(name: str) -> str:
    """The function freeing the heap arena that module ``name`` keeps between calls
    (defined when :func:`heap_arena` holds for its plan's arena)."""
    return f"{name}.arena.release"


def _release_arena(address: int) -> None:
    ctypes.CFUNCTYPE(None)(address)()


def release_arena_on_unload(handle: Any, name: str) -> None:
    """Free the arena module ``name`` keeps between calls (its
    :func:`arena_release_name` function) when ``handle``, the loaded code, goes."""
    weakref.finalize(handle, _release_arena, handle.address(arena_release_name(name)))


_KERNEL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
TEXT_KINDS = ("llvm", "llvm-opt", "asm", "program")
ENTRY_SUFFIX = ".entry"              # the CPython entry of a module's kernel
STRUCTURED_SUFFIX = ".structured"   # the entry returning results nested as the function does


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


@dataclass(frozen=True)
class Buffer:
    """One argument, output or external buffer of the kernel: name, dtype name, shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]


def _buffers(storages) -> tuple[Buffer, ...]:
    return tuple(Buffer(st.name, st.dtype.name, tuple(st.shape)) for st in storages)


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Interface:
    """What calling an executable's native code needs (see the module docstring).
    ``structure``: the structured entry's result nesting (``Program.native_structure``).

    >>> i = Interface((Buffer("x", "float64", (2,)),), (Buffer("out", "float64", ()),), (),
    ...               1, 0, 0, False)
    >>> Interface.from_json(i.to_json()) == i
    True
    """

    inputs: tuple[Buffer, ...]
    outputs: tuple[Buffer, ...]
    externals: tuple[Buffer, ...]
    segments: int
    arena_size: int
    structure: Any
    hybrid: bool
    donated: tuple = ()     # (output j, input k): the kernel writes output j into input k

    @classmethod
    def of(cls, plan) -> "Interface":
        return cls(_buffers(plan.inputs), _buffers(plan.outputs), _buffers(plan.externals),
                   len(plan.segments), plan.arena_size, plan.program.native_structure(),
                   plan.hybrid, tuple(sorted(plan.donated.items())))

    def to_json(self) -> dict:
        bufs = lambda bs: [[b.name, b.dtype, list(b.shape)] for b in bs]
        return {"inputs": bufs(self.inputs), "outputs": bufs(self.outputs),
                "externals": bufs(self.externals), "segments": self.segments,
                "arena_size": self.arena_size, "structure": self.structure,
                "hybrid": self.hybrid, "donated": [list(p) for p in self.donated]}

    @classmethod
    def from_json(cls, d: dict) -> "Interface":
        bufs = lambda bs: tuple(Buffer(str(n), str(dt), tuple(int(s) for s in shape))
                                for n, dt, shape in bs)
        return cls(bufs(d["inputs"]), bufs(d["outputs"]), bufs(d["externals"]),
                   int(d["segments"]), int(d["arena_size"]), _tuples(d["structure"]),
                   bool(d["hybrid"]), tuple((int(j), int(k)) for j, k in d.get("donated", ())))


class LLVMExecutable:
    """Native code for one program signature (see the module docstring). ``plan`` is
    the schedule, or a function making it when first needed."""

    backend = "llvm"

    def __init__(self, interface: Interface, handle: Any, texts: dict[str, str], name: str,
                 entry_name: str | None, from_cache: bool, plan: Any, target: Any) -> None:
        self.interface = interface
        self._plan = plan
        self.target = target          # codegen.target.Target the code was built for
        self.handle = handle          # codegen.jit.LoadedObject (keeps the code alive), or
                                      # None: code for a target this process cannot run
        self.texts = texts
        self.name = name
        self.entry_name = entry_name
        self.from_cache = from_cache
        self.arg_specs = [callconv.ArgSpec(b.name if b.name.isidentifier() else f"arg{k}",
                                           b.dtype, b.shape) if b.dtype in
                          callconv.SUPPORTED_DTYPES else _Spec(b.name, b.dtype, b.shape)
                          for k, b in enumerate(interface.inputs)]
        self._segments = [_KERNEL(handle.address(f"{name}.seg{k}"))
                          for k in range(interface.segments)] if handle is not None else None
        if handle is not None and heap_arena(interface.arena_size):
            # the arena the code keeps between calls is freed when the code is unloaded
            release_arena_on_unload(handle, name)

    @property
    def plan(self):
        """The schedule (:class:`codegen.plan.Plan`), made on first use when this
        executable was reloaded from an interface; it must describe the same code."""
        if callable(self._plan):
            plan = self._plan()
            if Interface.of(plan) != self.interface:
                raise RuntimeError(f"{self.name}: the program's schedule does not match the "
                                   "cached native code (cache key collision)")
            self._plan = plan
        return self._plan

    # ---- the checked Python path ---------------------------------------------------------
    def __call__(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self._segments is None:
            self.target.check_runnable()
        arrays = check_arrays(arrays, self.arg_specs, self.name)
        interface = self.interface
        outs = [np.empty(b.shape, b.dtype) for b in interface.outputs]
        for j, k in interface.donated:        # written into the (checked) input array
            outs[j] = arrays[k]
        ext = [np.empty(b.shape, b.dtype) for b in interface.externals]
        buffers = list(arrays) + outs + ext
        if not interface.hybrid:
            self._run_segment(0, buffers)
            return outs
        from .plan import NodeStep   # late: a run from the disk cache needs no planner
        plan = self.plan
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
        self.raise_for(status, err)
        self._check_sanitizer()

    def raise_for(self, status: int, err) -> None:
        """Raise the error a kernel's non-zero ``status`` reports (:mod:`codegen.status`)."""
        status_errors.raise_for(status, err, self.name, lambda i: self.plan.steps[i].node,
                                f"could not allocate {self.interface.arena_size} bytes of "
                                "temporaries")

    def _check_sanitizer(self) -> None:
        """Sanitized kernels: raise if a load or store was out of range (and clear)."""
        try:
            address = self.handle.address(f"{self.name}.sanitize_fault")
        except (KeyError, AttributeError):
            return
        fault = ctypes.c_int64.from_address(address)
        if fault.value:
            fault.value = 0
            raise RuntimeError(f"{self.name}: an out-of-bounds load or store in compiled code "
                               "was stopped by the sanitizer (SYMGRAD_SANITIZE=1); this is a "
                               "bug in symgrad's code generator -- please report it")

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
            args = [self._value(a, buffers) for a in node.args]
            if node.op in loops.RUNNERS:           # a structured loop: its body natively
                result = loops.RUNNERS[node.op](node, args, self.target)
            else:
                result = run_node(node, args)
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
        if self.handle is None:
            self.target.check_runnable()
        if fallback is None:
            fallback = self._fallback
        if self.entry_name is None:
            def entry(*arrays: Any) -> tuple:
                try:
                    return tuple(self(list(arrays)))
                except (TypeError, ValueError):
                    return fallback(*arrays)
            return entry
        outs = callconv.out_specs(self.interface.outputs, self.interface.donated)
        name = self.structured_entry_name if structured else self.entry_name
        return binding.make_callable(self.handle, name, self.arg_specs, outs,
                                      fallback, name="compiled")

    @property
    def structured_entry_name(self) -> str | None:
        """The entry returning nested results, if the module has one."""
        if self.entry_name is None or self.interface.structure is None:
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
        if kind == "llvm-opt" and kind not in self.texts:  # the optimiser again, on demand
            self.texts[kind] = jit.optimized_text(self.texts["llvm"], jit.OPT_LEVEL, self.target)
        if kind == "asm" and "asm" not in self.texts:       # code generation, on demand
            self.texts["asm"] = jit.assembly(self.as_text("llvm-opt"), self.target)
        return self.texts[kind]

    def __repr__(self) -> str:
        how = "hybrid" if self.interface.hybrid else "native"
        steps = "" if callable(self._plan) else f", {len(self._plan.steps)} steps"
        runs = "" if self.handle is not None else f", for {self.target.name}: not runnable here"
        return (f"<LLVMExecutable {self.name} ({how}{steps}"
                f"{', from disk cache' if self.from_cache else ''}{runs})>")


class _Spec:
    def __init__(self, name: str, dtype: str, shape: tuple) -> None:
        self.name, self.dtype, self.shape = name, dtype, shape
