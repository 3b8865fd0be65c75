"""Shape-generic native code: one kernel for every value of a runtime extent ``n``.

:func:`compile_dynamic` takes a program traced at one size and a
:class:`~symgrad.graph.dynamic_dims.DynamicDims` saying how its sizes move with ``n``
(found by the front end), lowers it with every extent computed at run time
(:mod:`.lower`) and returns a :class:`DynamicExecutable`: called with arrays, it solves
``n`` from the first dynamic dimension, checks every argument's shape and dtype
against the shapes at that ``n`` (so native code never reads past a buffer), allocates
the outputs and runs the kernel.  :class:`~.lower.NotGeneric` says which operation has
no such lowering (the caller then compiles per size).

The call passes the arrays themselves (their object addresses, ``id``) to a small native
wrapper, ``<name>.objects``, that reads each array's data pointer (numpy's
``PyArrayObject.data``, :func:`codegen.numpy_abi.numpy_layout`) and calls the kernel:
asking numpy for a data pointer from Python (``__array_interface__``) costs ~1.4 us an
array, which was half of a small generic call.
"""
from __future__ import annotations

import itertools

import ctypes
import threading

import llvmlite.ir as ir
import numpy as np

from symgrad.config import settings

from .. import jit, runtime, target as targets
from .. import status as statuses
from .. import types as T
from ..executable import release_arena_on_unload
from ..numpy_abi import numpy_layout
from ..lower.context import SANITIZE_FAULT
from .errors import NotGeneric
from .lower import DynamicModule, build
from .poly import affine

__all__ = ["compile_dynamic", "DynamicExecutable", "NotGeneric"]

OBJECTS = "objects"     # suffix of the wrapper taking the arrays' object addresses
_count = itertools.count(1)     # (next() is atomic: concurrent compiles get distinct names)


class DynamicExecutable:
    """Callable on a list of arrays (the program's inputs, any ``n >= dims.minimum``);
    returns the list of outputs."""

    def __init__(self, compiled, name: str, program, dims, steps=()) -> None:
        self._compiled = compiled          # keeps the machine code alive
        self._steps = list(steps)          # the node (or ("copy", node)) of each step
        self.name = name
        self.minimum = dims.minimum
        self.inputs = [(tuple(affine(a, b) for a, b in dims.dims(n)), n.dtype.np)
                       for n in program.inputs]
        self.outputs = [(tuple(affine(a, b) for a, b in dims.dims(n)), n.dtype.np)
                        for n in program.outputs]
        self.solve = next(((k, d, p) for k, (shape, _) in enumerate(self.inputs)
                           for d, p in enumerate(shape) if not p.is_const), None)
        if self.solve is None:
            raise NotGeneric("no argument dimension depends on the size")
        self._fn = compiled.cfunc(f"{name}.{OBJECTS}", ctypes.c_int32, ctypes.c_void_p,
                                  ctypes.c_int64, ctypes.POINTER(ctypes.c_int64))
        release_arena_on_unload(compiled.loaded, name)   # (the arena kept between calls)
        self._fault = compiled.address(f"{name}.{SANITIZE_FAULT}") if settings.sanitize else None
        self._shapes: dict = {}
        self._local = threading.local()
        self.texts = {"llvm": compiled.ir}

    def size_of(self, arrays) -> int:
        """The ``n`` these arguments are for (ValueError if their shapes are not one of
        this kernel's shapes)."""
        k, d, p = self.solve
        a, b = p.c[1], p.c[0]
        extent = np.shape(arrays[k])[d] if len(np.shape(arrays[k])) > d else -1
        n = (extent - b) // a
        if a * n + b != extent or n < self.minimum:
            raise ValueError(f"{self.name}: argument {k} has size {extent} in dim {d}, "
                             f"not a size this kernel takes")
        return n

    def shapes_at(self, n: int) -> tuple[list, list]:
        """(input shapes, output shapes) at size ``n`` (remembered per ``n``)."""
        got = self._shapes.get(n)
        if got is None:
            got = ([tuple(p.at(n) for p in shape) for shape, _ in self.inputs],
                   [tuple(p.at(n) for p in shape) for shape, _ in self.outputs])
            if len(self._shapes) < 4096:
                self._shapes[n] = got
        return got

    def __call__(self, arrays) -> list:
        if len(arrays) != len(self.inputs):
            raise ValueError(f"{self.name}: expected {len(self.inputs)} arguments, "
                             f"got {len(arrays)}")
        n = self.size_of(arrays)
        in_shapes, out_shapes = self.shapes_at(n)
        ptrs, err = self._buffers()
        keep = []
        for k, (a, want, (_, dt)) in enumerate(zip(arrays, in_shapes, self.inputs)):
            if type(a) is not np.ndarray:
                a = np.asarray(a)
            if a.shape != want or a.dtype != dt:
                raise ValueError(f"{self.name}: argument {k} is {a.dtype}{list(a.shape)}, "
                                 f"expected {np.dtype(dt)}{list(want)} at size {n}")
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            keep.append(a)
            ptrs[k] = id(a)          # an ndarray: the wrapper reads its data pointer
        outs = [np.empty(shape, dt) for shape, (_, dt) in zip(out_shapes, self.outputs)]
        base = len(self.inputs)
        for j, o in enumerate(outs):
            ptrs[base + j] = id(o)
        status = self._fn(ptrs, n, err)
        if self._fault is not None:
            word = ctypes.c_int64.from_address(self._fault)
            fault, word.value = word.value, 0
            if fault:
                raise RuntimeError(f"{self.name}: sanitizer: an access out of a buffer's bounds "
                                   f"at size {n}")
        if status:
            self._fail(status, n, err)
        return outs

    def _buffers(self):
        """The pointer array and error record of this call (one per thread: calls may
        run concurrently)."""
        local = self._local
        got = getattr(local, "bufs", None)
        if got is None:
            got = local.bufs = ((ctypes.c_void_p * (len(self.inputs) + len(self.outputs)))(),
                                (ctypes.c_int64 * 4)())
        return got

    def _fail(self, status: int, n: int, err):
        statuses.raise_for(status, list(err), self.name, lambda i: self._steps[i],
                           f"out of memory for temporaries at size {n}")

    def as_text(self, stage: str = "llvm") -> str:
        if stage not in self.texts:
            raise ValueError(f"stage {stage!r} of a shape-generic kernel: choose llvm")
        return self.texts[stage]


def compile_dynamic(program, dims, target=None, on_stage=None) -> DynamicExecutable:
    """One kernel for ``program`` at every ``n >= dims.minimum`` (see the module
    docstring); raises :class:`NotGeneric` when an operation has no such lowering."""
    stage = on_stage or (lambda name: None)
    with targets.use(target) as t:
        stage("plan")
        name = f"symgrad_dyn{next(_count)}"
        dm = DynamicModule(program, dims, name)
        stage("lower")
        runtime.register()
        module = build(dm)
        _objects_wrapper(module, name, len(program.inputs) + len(program.outputs))
        if any(sym in module.globals for sym in runtime.BLAS_GEMM.values()):
            runtime.register_blas()
        # light loops: this kernel serves a size only until its own is compiled
        # (symgrad.compiler.dynamic), and its LLVM time is most of a new size's first call
        compiled = jit.compile_module(str(module), level=jit.OPT_LEVEL, target=t, on_stage=stage,
                                      light_loops=True)
        t.check_runnable()
        return DynamicExecutable(compiled, name, program, dims, dm.order)


def _objects_wrapper(module: ir.Module, name: str, count: int) -> ir.Function:
    """``i32 @<name>.objects(ptr objs, i64 n, ptr err)``: ``objs`` holds ``count``
    ndarray object addresses; their data pointers, in order, are the kernel's ``bufs``."""
    kernel = module.get_global(name)
    fn = ir.Function(module, kernel.function_type, f"{name}.{OBJECTS}")
    objs, n, err = fn.args
    objs.name, n.name, err.name = "objs", "n", "err"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    bufs = b.alloca(T.PTR, size=T.I64(max(count, 1)), name="bufs")
    offset = T.I64(numpy_layout().data)
    for k in range(count):
        obj = b.load(b.gep(objs, [T.I64(k)], inbounds=True, source_etype=T.PTR), typ=T.PTR)
        data = b.load(b.gep(obj, [offset], inbounds=True, source_etype=T.I8), typ=T.PTR)
        b.store(data, b.gep(bufs, [T.I64(k)], inbounds=True, source_etype=T.PTR))
    b.ret(b.call(kernel, [bufs, n, err]))
    return fn
