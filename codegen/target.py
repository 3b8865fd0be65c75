"""The one place that talks to LLVM's machinery: host target, optimiser, JIT, objects.

Everything else in symgrad builds IR with ``llvmlite.ir`` and hands it here.  This
module owns:

* one-time LLVM initialisation (native target + asm printer; ``llvm.initialize()``
  is deprecated in llvmlite 0.50 and not called);
* the host target machine (``get_host_cpu_name()`` + ``get_host_cpu_features()``,
  opt level 3) and facts derived from it: :func:`host_fingerprint` (for cache keys),
  :func:`widest_vector_bits`, :func:`vector_lanes`, :func:`threads`, and
  :func:`set_vector_width` (a function's attributes for those vectors);
* :func:`optimize` -- the new pass manager at O3 with loop and SLP vectorisation;
* :func:`compile_module` -- IR (text, ``ir.Module`` or ``ModuleRef``) to a
  :class:`CompiledModule` holding the IR as generated, the optimised IR, the
  assembly (on demand), the object code and the loaded functions;
* :func:`load_object` -- load cached object code (e.g. in a new process) without
  running the optimiser or code generation.

Loading design: every compile goes through the *same* path as a cache reload --
the optimised module is emitted once as an ELF object, and that object is loaded
into its own MCJIT engine created over an empty module.  Code generation therefore
runs exactly once per module, a cached object behaves identically to a fresh one,
and each :class:`LoadedObject` owns its engine (functions stay valid while it is
alive; two modules may define the same symbol name).  External symbols (BLAS, the
Python C API, ...) are resolved *by name* at load time from the process and from
:func:`add_symbol`; an object with an unresolvable symbol raises
:class:`UnresolvedSymbolError` instead of jumping to address 0 later.  (MCJIT
rather than ORC's LLJIT: ``get_function_address`` finds any symbol by name without
declaring exports up front, and ``llvm.add_symbol`` feeds its resolver directly.)
Code model ``jitdefault`` (large): with the small model RuntimeDyld asserts on
32-bit relocations between separately mapped sections.  LLVM calls are
serialised by one lock, so threads may compile concurrently; native calls run
without it.

Measured on this host (AMD Zen 4, llvmlite 0.50.0 / LLVM 22.1; CPU time -- wall
time was 2-3x higher while other processes shared the 2 cores):

* compile latency (:func:`compile_module`: parse, O3, object, load) of a small
  module with one vectorised ``exp`` kernel: ~19 ms (optimise ~7, object ~7,
  load ~1.5); one ``sin`` kernel: ~47 ms; 20 mixed transcendental kernels:
  ~0.41 s.  Assembly is emitted only when :attr:`CompiledModule.asm` is first read
  (+50-70% of the compile time, so not paid by default);
* object reload (:func:`load_object`) in a fresh process: ~1.5-3.5 ms for those
  modules, after a one-time ~55 ms ``import codegen`` (llvmlite).

Example::

    >>> from codegen import target
    >>> cm = target.compile_module('''
    ... define double @twice(double %x) {
    ...   %y = fmul double %x, 2.0
    ...   ret double %y
    ... }''')
    >>> import ctypes
    >>> ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(cm.address("twice"))(21.0)
    42.0
    >>> again = target.load_object(cm.object_code)   # no optimiser, no codegen
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

import llvmlite
import llvmlite.binding as llvm
import llvmlite.ir as ir

IRInput = Union[ir.Module, str, "llvm.ModuleRef"]

_LOCK = threading.RLock()
_initialized = False


class UnresolvedSymbolError(RuntimeError):
    """An object references external symbols that neither the process nor
    :func:`add_symbol` provides."""


def init() -> None:
    """Initialise LLVM's native target and asm printer once (idempotent)."""
    global _initialized
    with _LOCK:
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            llvm.initialize_native_asmparser()
            _initialized = True


# --------------------------------------------------------------------------- host


@lru_cache(maxsize=None)
def host_cpu_name() -> str:
    """LLVM's name for the host CPU, e.g. ``'znver4'``."""
    init()
    return llvm.get_host_cpu_name()


@lru_cache(maxsize=None)
def host_features() -> str:
    """The host feature string, e.g. ``'+64bit,+adx,...,+avx512f,...'``."""
    init()
    return llvm.get_host_cpu_features().flatten()


def has_feature(name: str) -> bool:
    """True if the host CPU has feature ``name`` (e.g. ``'avx512f'``, ``'fma'``)."""
    return f"+{name}" in host_features().split(",")


@lru_cache(maxsize=None)
def host_fingerprint() -> str:
    """A string identifying everything about the host that changes generated code:
    CPU name, feature string, llvmlite and LLVM versions.  Use it in cache keys."""
    init()
    llvm_version = ".".join(str(v) for v in llvm.llvm_version_info)
    return (f"cpu={host_cpu_name()};features={host_features()};"
            f"llvmlite={llvmlite.__version__};llvm={llvm_version};"
            f"triple={llvm.get_process_triple()}")


def threads() -> int:
    """Threads a loop may use: 2 when this process may run on two CPUs, else 1 (part
    of the cache key: generated code differs)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return 2 if cpus >= 2 else 1


def widest_vector_bits() -> int:
    """Width in bits of the widest floating-point vector register of the host:
    512 with avx512f, 256 with avx/avx2, 128 otherwise."""
    if has_feature("avx512f"):
        return 512
    if has_feature("avx") or has_feature("avx2"):
        return 256
    return 128


def set_vector_width(fn: ir.Function) -> None:
    """Let the code generator use the host's widest vectors in ``fn`` (LLVM keeps
    x86 functions to 256-bit vectors unless told otherwise)."""
    bits = widest_vector_bits()
    set.add(fn.attributes, f'"prefer-vector-width"="{bits}"')
    set.add(fn.attributes, f'"min-legal-vector-width"="{bits}"')


def vector_lanes(bits_per_element: int) -> int:
    """Lanes of the widest host vector for elements of ``bits_per_element`` bits
    (8 for double and 16 for float on AVX-512)."""
    return widest_vector_bits() // bits_per_element


def create_target_machine(opt: int = 3) -> "llvm.TargetMachine":
    """A new target machine for the host CPU and features.  (A new one each call:
    an MCJIT engine takes ownership of the machine it is given.)"""
    init()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(
        cpu=host_cpu_name(), features=host_features(), opt=opt,
        reloc="default", codemodel="jitdefault", jit=True)


@lru_cache(maxsize=None)
def _shared_target_machine() -> "llvm.TargetMachine":
    return create_target_machine(3)


# ---------------------------------------------------------------------- optimise


def parse(module: IRInput) -> "llvm.ModuleRef":
    """Parse and verify IR (text, ``ir.Module`` or an existing ``ModuleRef``),
    setting the host triple and data layout."""
    init()
    with _LOCK:
        ref = module if isinstance(module, llvm.ModuleRef) else llvm.parse_assembly(str(module))
        ref.verify()
        tm = _shared_target_machine()
        ref.triple = tm.triple
        ref.data_layout = str(tm.target_data)
        return ref


def optimize(module: "llvm.ModuleRef", level: int = 3) -> "llvm.ModuleRef":
    """Run the new-pass-manager ``O<level>`` pipeline, with loop vectorisation,
    SLP vectorisation, interleaving and unrolling, tuned for the host, in place."""
    with _LOCK:
        pto = llvm.create_pipeline_tuning_options(speed_level=level)
        pto.loop_vectorization = level > 0
        pto.slp_vectorization = level > 0
        pto.loop_interleaving = level > 0
        pto.loop_unrolling = level > 0
        builder = llvm.create_pass_builder(_shared_target_machine(), pto)
        builder.getModulePassManager().run(module, builder)
        return module


# ------------------------------------------------------------------------ symbols


def add_symbol(name: str, address: int) -> None:
    """Make ``name`` resolve to ``address`` in every object loaded afterwards
    (e.g. ``dgemm_`` from ``scipy.linalg.cython_blas``)."""
    init()
    llvm.add_symbol(name, address)


def symbol_address(name: str) -> int | None:
    """Address that an external reference to ``name`` would resolve to, or None."""
    init()
    return llvm.address_of_symbol(name)


def _elf_symbols(obj: bytes) -> tuple[list[str], list[str]]:
    """(defined global functions, undefined symbols) of a little-endian ELF64 object."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return [], []
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize)
                for i in range(shnum)]
    defined: list[str] = []
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
            elif name and st_info >> 4 == 1 and st_info & 0xF == 2:
                defined.append(name)
    return defined, undefined


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


def load_object(object_code: bytes) -> LoadedObject:
    """Load object code emitted by :func:`compile_module` (possibly by another
    process with the same :func:`host_fingerprint`) without optimising or
    compiling anything.  External symbols are resolved by name."""
    defined, undefined = _elf_symbols(object_code)
    missing = [s for s in undefined if not symbol_address(s)]
    if missing:
        raise UnresolvedSymbolError(f"unresolved external symbols: {', '.join(missing)}")
    with _LOCK:
        empty = llvm.parse_assembly("")
        empty.triple = llvm.get_process_triple()
        engine = llvm.create_mcjit_compiler(empty, create_target_machine(3))
        engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
        engine.finalize_object()
    return LoadedObject(object_code, tuple(defined), engine)


@dataclass(eq=False)
class CompiledModule:
    """Every stage of one compiled module, for inspection and caching."""

    ir: str             #: the IR text as generated
    optimized_ir: str   #: the IR text after :func:`optimize`
    loaded: LoadedObject

    @cached_property
    def asm(self) -> str:
        """Host assembly of the optimised IR (emitted on first access: code
        generation is a third of the compile time and rarely looked at)."""
        with _LOCK:
            return _shared_target_machine().emit_assembly(parse(self.optimized_ir))

    @property
    def object_code(self) -> bytes:
        """ELF object bytes; feed them to :func:`load_object` to reload."""
        return self.loaded.object_code

    @property
    def functions(self) -> tuple[str, ...]:
        """Names of the global functions defined by the module."""
        return self.loaded.functions

    def address(self, name: str) -> int:
        """Address of the function ``name``."""
        return self.loaded.address(name)

    def cfunc(self, name: str, restype: Any, *argtypes: Any) -> Callable[..., Any]:
        """A ctypes callable for function ``name``."""
        return self.loaded.cfunc(name, restype, *argtypes)


def compile_module(module: IRInput, level: int = 3) -> CompiledModule:
    """Verify, optimise (``O<level>``), emit object code for the host and load it.
    Declare external functions in the IR and provide them via the process or
    :func:`add_symbol` before calling this."""
    text = str(module)
    ref = parse(module)
    optimize(ref, level)
    with _LOCK:
        optimized = str(ref)
        obj = _shared_target_machine().emit_object(ref)
    return CompiledModule(text, optimized, load_object(obj))
