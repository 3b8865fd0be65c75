"""Compiling LLVM IR to loaded machine code, and reloading object code: the one place
that runs LLVM's optimiser, code generator and JIT linker.

Everything else in codegen builds IR with ``llvmlite.ir`` and hands it here, for the
target of :func:`codegen.target.current` unless one is named.

* :func:`optimize` -- the new pass manager at ``O<level>`` with loop and SLP
  vectorisation, tuned for the target;
* :func:`compile_module` -- IR (text, ``ir.Module`` or ``ModuleRef``) to a
  :class:`CompiledModule`: the IR as generated, the optimised IR, the assembly (on
  demand), the object code, and -- when this process can run the target's code -- the
  loaded functions.  Code for a target this process cannot run is generated and kept
  for inspection; asking for a function address raises :class:`~codegen.target.TargetError`;
* :func:`load_object` -- load cached object code (e.g. in a new process) without
  running the optimiser or code generation.

Loading design: every compile goes through the *same* path as a cache reload -- the
optimised module is emitted once as an ELF object, and that object is loaded into its
own MCJIT engine created over an empty module.  Code generation therefore runs exactly
once per module, a cached object behaves identically to a fresh one, and each
:class:`LoadedObject` owns its engine (functions stay valid while it is alive; two
modules may define the same symbol name).  External symbols (BLAS, the Python C API,
...) are resolved *by name* at load time from the process and from :func:`add_symbol`;
an object with an unresolvable symbol raises :class:`UnresolvedSymbolError` instead of
jumping to address 0 later.  (MCJIT rather than ORC's LLJIT: ``get_function_address``
finds any symbol by name without declaring exports up front, and ``llvm.add_symbol``
feeds its resolver directly.)  Code model ``jitdefault`` (large): with the small model
RuntimeDyld asserts on 32-bit relocations between separately mapped sections.  LLVM
calls are serialised by one lock, so threads may compile concurrently; native calls run
without it.

Example::

    >>> from codegen import jit
    >>> cm = jit.compile_module('''
    ... define double @twice(double %x) {
    ...   %y = fmul double %x, 2.0
    ...   ret double %y
    ... }''')
    >>> import ctypes
    >>> ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(cm.address("twice"))(21.0)
    42.0
    >>> again = jit.load_object(cm.object_code)   # no optimiser, no codegen
    >>> again.address("twice") != 0
    True
"""
from __future__ import annotations

import ctypes
import os
import struct
import threading
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, Callable, Union

import llvmlite.binding as llvm
import llvmlite.ir as ir

from . import split as splitting, target as targets
from .target import Target, _LOCK, init

__all__ = ["compile_module", "load_object", "assembly", "optimize", "optimized_text", "parse",
           "add_symbol", "OPT_LEVEL",
           "symbol_address", "CompiledModule", "LoadedObject", "UnresolvedSymbolError",
           "pack_objects", "object_parts", "set_compile_threads"]

IRInput = Union[ir.Module, str, "llvm.ModuleRef"]
OPT_LEVEL = 2   # programs' level: LLVM's O2 vectorises as O3 does; O3's extra passes only add compile time


class UnresolvedSymbolError(RuntimeError):
    """An object references external symbols that neither the process nor
    :func:`add_symbol` provides."""


@lru_cache(maxsize=None)
def _machine(t: Target) -> "llvm.TargetMachine":
    """The target machine used to optimise and emit code for ``t`` (one per target)."""
    return t.target_machine(3)


# ---------------------------------------------------------------------- optimise


def parse(module: IRInput, target: Target | None = None) -> "llvm.ModuleRef":
    """Parse and verify IR (text, ``ir.Module`` or an existing ``ModuleRef``), setting
    the target's triple and data layout."""
    init()
    tm = _machine(target or targets.current())
    with _LOCK:
        ref = module if isinstance(module, llvm.ModuleRef) else llvm.parse_assembly(str(module))
        ref.verify()
        ref.triple = tm.triple
        ref.data_layout = str(tm.target_data)
        return ref


def optimize(module: "llvm.ModuleRef", level: int = 3,
             target: Target | None = None, light_loops: bool = False,
             machine: "llvm.TargetMachine | None" = None) -> "llvm.ModuleRef":
    """Run the new-pass-manager ``O<level>`` pipeline, with loop vectorisation, SLP
    vectorisation, interleaving and unrolling, tuned for the target, in place.
    ``light_loops``: loops are vectorised but neither interleaved nor unrolled -- for
    code that runs briefly (a shape-generic kernel, which a size's own kernel replaces
    after a few calls): a third less LLVM time.  ``machine``: a part's own target machine
    (a module of its own context, see :func:`_compile_parts`): the pipeline then runs
    without llvmlite's lock, alongside other threads' LLVM work."""
    tm = machine or _machine(target or targets.current())
    with _LOCK:
        pto = llvm.create_pipeline_tuning_options(speed_level=level)
        pto.loop_vectorization = level > 0
        pto.slp_vectorization = level > 0
        pto.loop_interleaving = level > 0 and not light_loops
        pto.loop_unrolling = level > 0 and not light_loops
        if machine is None:
            targets.run_pipeline(tm, pto, module)
            return module
    targets.run_pipeline(tm, pto, module, _raw("LLVMPY_RunNewModulePassManager"))
    return module


# ------------------------------------------------------------------------ symbols


def add_symbol(name: str, address: int) -> None:
    """Make ``name`` resolve to ``address`` in every object loaded afterwards
    (e.g. ``dgemm_`` from ``scipy.linalg.cython_blas``)."""
    init()
    llvm.add_symbol(name, address)


# C library functions LLVM itself emits calls to (``frem`` is a call to fmod / fmodf on
# every target): published from the C library the process has loaded, on first need
_LIBC_FUNCTIONS = ("fmod", "fmodf")


def symbol_address(name: str) -> int | None:
    """Address that an external reference to ``name`` would resolve to, or None."""
    init()
    address = llvm.address_of_symbol(name)
    if address is None and name in _LIBC_FUNCTIONS:
        address = _libc_address(name)
        if address:
            llvm.add_symbol(name, address)
    return address


def _libc_address(name: str) -> int | None:
    import ctypes.util
    for lib in (None, ctypes.util.find_library("m"), ctypes.util.find_library("c")):
        try:
            return ctypes.cast(getattr(ctypes.CDLL(lib), name), ctypes.c_void_p).value
        except (OSError, AttributeError, TypeError):
            continue
    return None


def elf_symbols(obj: bytes) -> tuple[list[str], list[str]]:
    """(defined global functions, undefined symbols) of a little-endian ELF64 object, or
    of the objects :func:`pack_objects` packed (what none of them defines)."""
    found = [_elf_symbols(p) for p in object_parts(obj)]
    known = {name for _, data, _ in found for name in data}
    defined = [name for functions, _, _ in found for name in functions]
    undefined = list(dict.fromkeys(n for _, _, u in found for n in u if n not in known))
    return defined, undefined


def _elf_symbols(obj: bytes) -> tuple[list[str], set[str], list[str]]:
    """(global functions, every global symbol, undefined symbols) of one object."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return [], set(), []
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize)
                for i in range(shnum)]
    defined: list[str] = []
    every: set[str] = set()
    undefined: list[str] = []
    for sh in sections:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sh[6]]
        for off in range(sh[4], sh[4] + sh[5], 24):
            st_name, st_info, _, st_shndx, _, _ = struct.unpack_from("<IBBHQQ", obj, off)
            end = obj.index(b"\0", strtab[4] + st_name)
            name = obj[strtab[4] + st_name:end].decode()
            if name and st_shndx == 0:
                undefined.append(name)
            elif name and st_info >> 4 in (1, 2):      # global or weak
                every.add(name)
                if st_info >> 4 == 1 and st_info & 0xF == 2:
                    defined.append(name)
    return defined, every, undefined


# ------------------------------------------------------------------ load & compile


@dataclass(eq=False)
class LoadedObject:
    """Object code loaded into its own MCJIT engine.  Function addresses are valid
    as long as this object is alive."""

    object_code: bytes
    functions: tuple[str, ...]
    _engine: Any = field(repr=False)

    def address(self, name: str) -> int:
        """Address of the function or global ``name``; KeyError if absent."""
        addr = self._engine.get_function_address(name)
        if not addr:
            raise KeyError(f"symbol {name!r} is not defined by this object")
        return addr

    def cfunc(self, name: str, restype: Any, *argtypes: Any) -> Callable[..., Any]:
        """A ctypes callable for function ``name`` (keeps this object alive)."""
        fn = ctypes.CFUNCTYPE(restype, *argtypes)(self.address(name))
        fn._symgrad_owner = self  # type: ignore[attr-defined]
        return fn


def load_object(object_code: bytes, target: Target | None = None) -> LoadedObject:
    """Load object code emitted by :func:`compile_module` for ``target`` (default: the
    current one; possibly by another process) without optimising or compiling anything.
    External symbols are resolved by name.  Raises :class:`~codegen.target.TargetError`
    when this process cannot run the target's code."""
    t = target or targets.current()
    t.check_runnable()
    defined, undefined = elf_symbols(object_code)
    missing = [s for s in undefined if not symbol_address(s)]
    if missing:
        raise UnresolvedSymbolError(f"unresolved external symbols: {', '.join(missing)}")
    with _LOCK:
        empty = llvm.parse_assembly("")
        empty.triple = t.triple
        engine = llvm.create_mcjit_compiler(empty, t.target_machine(3))
        for part in object_parts(object_code):      # one engine: parts call each other
            engine.add_object_file(llvm.ObjectFileRef.from_data(part))
        engine.finalize_object()
    return LoadedObject(object_code, tuple(defined), engine)


@dataclass(eq=False)
class CompiledModule:
    """Every stage of one compiled module, for inspection and caching.  ``loaded`` is
    None when this process cannot run the target's code."""

    ir: str             #: the IR text as generated
    object_code: bytes  #: ELF object bytes; :func:`load_object` reloads them
    target: Target
    loaded: LoadedObject | None = None
    level: int = 3      #: the optimisation level it was built at
    light_loops: bool = False   #: loops neither interleaved nor unrolled (:func:`optimize`)

    @cached_property
    def optimized_ir(self) -> str:
        """The IR text after :func:`optimize` (made again from :attr:`ir` on first access:
        printing it costs a compile time few ever look at; the pipeline is deterministic)."""
        return optimized_text(self.ir, self.level, self.target, self.light_loops)

    @cached_property
    def asm(self) -> str:
        """Assembly of the optimised IR for the target (emitted on first access: code
        generation is a third of the compile time and rarely looked at)."""
        return assembly(self.optimized_ir, self.target)

    @property
    def functions(self) -> tuple[str, ...]:
        """Names of the global functions defined by the module."""
        return tuple(elf_symbols(self.object_code)[0])

    def _loaded(self) -> LoadedObject:
        if self.loaded is None:
            self.target.check_runnable()
            raise RuntimeError("module is not loaded")
        return self.loaded

    def address(self, name: str) -> int:
        """Address of the function ``name``."""
        return self._loaded().address(name)

    def cfunc(self, name: str, restype: Any, *argtypes: Any) -> Callable[..., Any]:
        """A ctypes callable for function ``name``."""
        return self._loaded().cfunc(name, restype, *argtypes)


_PART_MARK = "; ---- part "      # starts each part of a split module's optimised text


def optimized_text(ir_text: str, level: int, target: Target | None = None,
                   light_loops: bool = False) -> str:
    """The IR text :func:`compile_module` makes of ``ir_text`` at ``level`` before code
    generation (a module compiled in parts: each part's, after a ``; ---- part k of n``
    line)."""
    t = target or targets.current()
    parts = splitting.split(ir_text)
    texts = []
    for k, part in enumerate(parts):
        ref = optimize(parse(part, t), level, t, light_loops)
        with _LOCK:
            text = str(ref)
        texts.append(text if len(parts) == 1 else f"{_PART_MARK}{k + 1} of {len(parts)}\n{text}")
    return "".join(texts)


def assembly(optimized_ir: str, target: Target | None = None) -> str:
    """The target's assembly for optimised IR text (:func:`optimized_text`'s)."""
    t = target or targets.current()
    parts = [p for p in optimized_ir.split(_PART_MARK) if p.strip()]
    if len(parts) > 1:
        return "".join(_PART_MARK + p.split("\n", 1)[0] + "\n" +
                       assembly(p.split("\n", 1)[1], t) for p in parts)
    with _LOCK:
        return _machine(t).emit_assembly(parse(optimized_ir, t))


# ------------------------------------------------------------------ modules in parts
# A big module is split (:mod:`codegen.split`) and its parts are optimised and compiled
# on two threads at once.  llvmlite serialises every LLVM call with one lock; the two
# long calls of a part (the optimisation pipeline and code generation) run without it,
# which is safe because each part has its own LLVM context, module, pass builder and
# target machine (nothing another thread touches).  The parts' objects travel as one
# byte string (:func:`pack_objects`) and load into one engine.

_PACK = b"SGOBJS\x00\x01"
_threads = [2]                   # set_compile_threads: parts compiled at once, at most
_PART_MACHINES: dict = {}        # (target, slot) -> the target machine parts use there
_PARTS_LOCK = threading.Lock()   # one parts compile at a time uses those machines


def _after_fork_in_child() -> None:
    # a parts compile of another thread of the parent holds these: start afresh
    global _PARTS_LOCK
    _PARTS_LOCK = threading.Lock()
    _PART_MACHINES.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def set_compile_threads(n: int) -> None:
    """Compile the parts of a split module on at most ``n`` threads (1: one after the
    other, on the calling thread).  The object code is the same either way."""
    _threads[0] = max(1, int(n))


def pack_objects(objects: list[bytes]) -> bytes:
    """One byte string holding ``objects`` (one object: itself)."""
    if len(objects) == 1:
        return objects[0]
    head = _PACK + struct.pack("<I", len(objects)) + b"".join(struct.pack("<Q", len(o))
                                                             for o in objects)
    return head + b"".join(objects)


def object_parts(blob: bytes) -> list[bytes]:
    """The objects :func:`pack_objects` packed into ``blob`` (a plain object: itself)."""
    if not blob.startswith(_PACK):
        return [blob]
    n, = struct.unpack_from("<I", blob, len(_PACK))
    sizes = struct.unpack_from(f"<{n}Q", blob, len(_PACK) + 4)
    at, parts = len(_PACK) + 4 + 8 * n, []
    for size in sizes:
        parts.append(blob[at:at + size])
        at += size
    if at != len(blob):
        raise ValueError("truncated object pack")
    return parts


def _part_machine(t: Target, slot: int) -> "llvm.TargetMachine":
    key = (t, slot)
    if key not in _PART_MACHINES:
        _PART_MACHINES[key] = t.target_machine(3)
    return _PART_MACHINES[key]


def _raw(name: str):
    """llvmlite's ctypes function ``name`` without its global lock (see above)."""
    return getattr(llvm.ffi.lib, name)._cfn


def _compile_part(text: str, level: int, tm, light_loops: bool, out: list, k: int,
                  optimized: Callable[[], None] = lambda: None) -> None:
    try:
        with _LOCK:
            context = llvm.create_context()
            ref = llvm.parse_assembly(text, context=context)
            ref.verify()
            ref.triple = tm.triple
            ref.data_layout = str(tm.target_data)
        optimize(ref, level, light_loops=light_loops, machine=tm)
        optimized()
        with llvm.ffi.OutputString() as error:
            buffer = _raw("LLVMPY_TargetMachineEmitToMemory")(tm, ref, 1, error)
            if not buffer:
                raise RuntimeError(str(error))
        with _LOCK:
            try:
                out[k] = ctypes.string_at(llvm.ffi.lib.LLVMPY_GetBufferStart(buffer),
                                          llvm.ffi.lib.LLVMPY_GetBufferSize(buffer))
            finally:
                llvm.ffi.lib.LLVMPY_DisposeMemoryBuffer(buffer)
                ref.close()
                context.close()
    except BaseException as e:      # noqa: BLE001 -- re-raised by the caller's thread
        out[k] = e


def _compile_parts(parts: list[str], level: int, t: Target, light_loops: bool,
                   stage: Callable[[str], None]) -> bytes:
    """Object code of the module split into ``parts``: part 0 on this thread, the others
    on threads of their own while :func:`set_compile_threads` allows it.  ``stage`` is
    told "machine-code" when this thread's part has been optimised."""
    init()
    out: list = [None] * len(parts)
    with _PARTS_LOCK:
        machines = [_part_machine(t, k) for k in range(len(parts))]
        helpers = [threading.Thread(target=_compile_part, name="symgrad-llvm-part",
                                    args=(parts[k], level, machines[k], light_loops, out, k),
                                    daemon=True)
                   for k in range(1, min(len(parts), _threads[0], targets.threads()))]
        for h in helpers:
            h.start()
        _compile_part(parts[0], level, machines[0], light_loops, out, 0,
                      lambda: stage("machine-code"))
        for k in range(1 + len(helpers), len(parts)):
            _compile_part(parts[k], level, machines[k], light_loops, out, k)
        for h in helpers:
            h.join()
    for o in out:
        if isinstance(o, BaseException):
            raise o
    return pack_objects(out)


def compile_module(module: IRInput, level: int = 3, target: Target | None = None,
                   on_stage: Callable[[str], None] | None = None,
                   light_loops: bool = False) -> CompiledModule:
    """Verify, optimise (``O<level>``, ``light_loops`` as :func:`optimize`) and emit
    object code for ``target`` (default: :func:`codegen.target.current`), and load it
    when this process can run it.  A big module compiles in parts, on two threads
    (:mod:`codegen.split`; its object code is the parts' :func:`pack_objects`).
    ``on_stage(name)`` is told when "llvm-opt" and "machine-code" start (a module in
    parts: code generation starts when the calling thread's part is optimised).
    Declare external functions in the IR and provide them via the process or
    :func:`add_symbol` before calling this."""
    t = target or targets.current()
    stage = on_stage or (lambda name: None)
    text = str(module)
    stage("llvm-opt")
    parts = splitting.split(text) if not isinstance(module, llvm.ModuleRef) else [text]
    if len(parts) > 1:
        obj = _compile_parts(parts, level, t, light_loops, stage)
    else:
        ref = parse(module, t)
        optimize(ref, level, t, light_loops)
        stage("machine-code")
        with _LOCK:
            obj = _machine(t).emit_object(ref)
    loaded = load_object(obj, t) if t.runnable else None
    return CompiledModule(text, obj, t, loaded, level, light_loops)
