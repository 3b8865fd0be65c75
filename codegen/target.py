"""The machine generated code is built for: one :class:`Target` object, chosen once.

A target is an LLVM triple, a CPU name, a feature string and the vector width generated
code uses.  Every code-generation decision that depends on the machine reads it from
here -- vector lanes, vector registers, whether FMA is a single instruction, the calling
convention of out-of-line math helpers, the spin-wait hint, the tuning flags handed to
LLVM -- and nothing else in ``codegen`` asks LLVM or the OS about the CPU.

* :func:`host` -- this process's CPU (``get_host_cpu_name`` / ``get_host_cpu_features``);
* :func:`default` -- the host, unless ``SYMGRAD_TARGET_TRIPLE`` / ``SYMGRAD_TARGET_CPU`` /
  ``SYMGRAD_TARGET_FEATURES`` / ``SYMGRAD_TARGET_VECTOR_BITS`` (read once, in
  :mod:`symgrad.config`) name another;
* :func:`current` / :func:`use` -- the target code is being built for right now (a
  context variable: ``compile(..., target=...)`` and the tests' target matrix set it);
* :func:`make` -- a validated target from user input (``"x86-64-v3"``,
  ``"aarch64-unknown-linux-gnu:neoverse-n1"``, keywords): an unknown CPU, feature or
  triple is a ``ValueError``, never a silently ignored setting.

Facts about a CPU other than the host's come from LLVM itself: a few tiny probe
functions are compiled to assembly for it once (is a 512-bit vector one register? is
``llvm.fma`` one instruction?), so no table of CPUs is kept here.  Whether this process
may *run* a target's code (:attr:`Target.runnable`) is decided conservatively: the host
itself, or a target whose instruction sets are known (the generic x86-64 levels of the
psABI, or an explicit complete feature list) and all present on the host.  Code for any
other target can be generated and inspected, never executed: no SIGILL.

Vector width: LLVM's tuning for some CPUs (Intel's AVX-512 server parts) prefers 256-bit
vectors; symgrad uses the widest vectors a target has unless told otherwise, and says so
to LLVM through the target machine's tuning features (``-prefer-256-bit``), so every
function compiled for the target -- generated kernels and hand-built test modules
alike -- gets the same width.

>>> t = make("x86_64-unknown-linux-gnu:x86-64-v3")
>>> t.vector_bits, t.lanes(64), t.fma, t.vector_registers
(256, 4, True, 16)
>>> make("aarch64-unknown-linux-gnu:neoverse-n1").lanes(32)
4
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import re
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Iterator

import llvmlite
import llvmlite.binding as llvm

from symgrad.config import settings

__all__ = ["Target", "TargetError", "host", "default", "current", "use", "make", "init",
           "threads", "X86_LEVELS"]

_LOCK = threading.RLock()
_initialized = False


class TargetError(ValueError):
    """A target LLVM does not know (triple, CPU or feature), or one this process cannot
    run code for."""


def init() -> None:
    """Initialise LLVM's targets and asm printers once (idempotent): all of them, so
    code for another machine can be generated and inspected."""
    global _initialized
    with _LOCK:
        if not _initialized:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            llvm.initialize_native_asmparser()
            _initialized = True



def run_pipeline(tm: "llvm.TargetMachine", pto: "llvm.PipelineTuningOptions",
                 module: "llvm.ModuleRef", run=None) -> None:
    """Run LLVM's default module pipeline for ``pto`` on ``module`` in place, then free the
    pass manager.  llvmlite (0.50) never frees a ``ModulePassManager``: ``ObjectRef``'s
    empty ``_dispose`` shadows the pass manager's own in its method order, so every
    pipeline -- its passes and their grown tables -- stayed alive (~70 KB a compile).
    ``run``: the function that runs it, called as ``run(passes, module, builder)``
    outside :data:`_LOCK` (default: llvmlite's, under the lock)."""
    from llvmlite.binding.newpassmanagers import NewPassManager
    with _LOCK:
        builder = llvm.create_pass_builder(tm, pto)
        passes = builder.getModulePassManager()
    try:
        if run is None:
            with _LOCK:
                passes.run(module, builder)
        else:
            run(passes, module, builder)
    finally:
        with _LOCK:
            NewPassManager._dispose(passes)
            passes.detach()

# The x86-64 micro-architecture levels of the System V psABI: what each level promises.
X86_LEVELS: dict[str, frozenset[str]] = {"x86-64": frozenset({"sse", "sse2", "cx8", "cmov",
                                                               "fxsr", "mmx"})}
X86_LEVELS["x86-64-v2"] = X86_LEVELS["x86-64"] | {"cx16", "sahf", "popcnt", "sse3", "sse4.1",
                                                  "sse4.2", "ssse3"}
X86_LEVELS["x86-64-v3"] = X86_LEVELS["x86-64-v2"] | {"avx", "avx2", "bmi", "bmi2", "f16c", "fma",
                                                     "lzcnt", "movbe", "xsave"}
X86_LEVELS["x86-64-v4"] = X86_LEVELS["x86-64-v3"] | {"avx512f", "avx512bw", "avx512cd",
                                                     "avx512dq", "avx512vl"}


def _arch(triple: str) -> str:
    arch = triple.split("-", 1)[0].lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


def _os(triple: str) -> str:
    parts = triple.lower().split("-")
    return next((p for p in parts[1:] if p.startswith(("linux", "darwin", "macos", "windows",
                                                       "freebsd", "none"))), "")


def _feature_set(features: str) -> tuple[frozenset[str], frozenset[str]]:
    """(enabled, disabled) feature names of an LLVM feature string."""
    on, off = set(), set()
    for f in filter(None, (s.strip() for s in features.split(","))):
        (off if f[0] == "-" else on).add(f.lstrip("+-"))
    return frozenset(on), frozenset(off)


@dataclass(frozen=True)
class Target:
    """An LLVM target: ``triple``, ``cpu``, ``features`` (an LLVM feature string, may be
    empty: the CPU's own) and ``vector_bits`` (0: the widest the target has).  Build one
    with :func:`make` (validated) or :func:`host`."""

    triple: str
    cpu: str
    features: str = ""
    requested_vector_bits: int = 0
    is_host: bool = field(default=False, compare=False)

    # ---- facts LLVM knows about the CPU --------------------------------------------------
    @property
    def arch(self) -> str:
        """``x86_64``, ``aarch64``, ... (normalised from the triple)."""
        return _arch(self.triple)

    @cached_property
    def _probe(self) -> dict[str, object]:
        return _probe_facts(self.triple, self.cpu, self.features) if not self.is_host \
            else _host_facts(self.triple, self.features)

    @property
    def widest_vector_bits(self) -> int:
        """Width of the target's widest floating-point vector register."""
        return int(self._probe["vector_bits"])  # type: ignore[arg-type]

    @property
    def vector_bits(self) -> int:
        """Width of the vectors generated code uses (the widest unless asked otherwise)."""
        return self.requested_vector_bits or self.widest_vector_bits

    @property
    def fma(self) -> bool:
        """Whether a fused multiply-add is one instruction (else ``llvm.fma`` would be a
        libm call: code that needs an exact product computes it another way)."""
        return bool(self._probe["fma"])

    @property
    def native_rounding(self) -> bool:
        """Whether floor / ceil / trunc / round-to-even are instructions (x86 before
        SSE4.1 makes them libm calls: code computes them another way there)."""
        return bool(self._probe["rounding"])

    @property
    def scalable_vectors(self) -> bool:
        """Whether LLVM vectorises loops for this target with scalable vectors
        (``<vscale x 2 x double>``: Arm SVE) rather than fixed-width ones."""
        return bool(self._probe["scalable"])

    @property
    def masked_tails(self) -> bool:
        """Whether a vectorised loop's last, partial vector is cheap as masked vector
        operations (AVX-512's mask registers, SVE's predicates) -- instead of a scalar
        remainder loop, a second copy of the body (see :mod:`codegen.lower.fused_loop`)."""
        if self.arch == "x86_64":
            return self.widest_vector_bits >= 512
        return self.scalable_vectors

    def loop_vector_type(self, element: str, bits_per_element: int) -> str:
        """The IR type a vectorised loop over ``element`` uses on this target, e.g.
        ``<8 x double>``, or ``<vscale x 2 x double>`` with SVE."""
        scale = "vscale x " if self.scalable_vectors else ""
        return f"<{scale}{self.lanes(bits_per_element)} x {element}>"

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers (register-blocked kernels size tiles by it)."""
        if self.arch == "x86_64":
            return 32 if self.widest_vector_bits >= 512 else 16
        return 32 if self.arch == "aarch64" else 16

    def lanes(self, bits_per_element: int) -> int:
        """Lanes of one vector of :attr:`vector_bits` for elements of that many bits."""
        return max(1, self.vector_bits // bits_per_element)

    # ---- what generated code looks like for it -------------------------------------------
    @property
    def helper_cconv(self) -> str:
        """Calling convention of out-of-line vector helpers: the C convention on every
        target.  (``intel_ocl_bicc``, whose callee preserves zmm16-31, was tried and is
        miscompiled by LLVM: with AVX-512, a caller that realigns its stack spilled
        zmm registers with ``vmovaps`` to 16-byte-aligned slots -- SIGSEGV, issue 13; on
        AVX2 ``<4 x double>`` helpers returned wrong lanes.  The C convention costs 10-25%
        of a sin/cos loop's throughput, as the loop spills its registers around the call.)"""
        return ""

    @property
    def spin_hint(self) -> str | None:
        """The intrinsic a spin-wait loop calls between polls, or None."""
        return "llvm.x86.sse2.pause" if self.arch == "x86_64" else None

    @property
    def machine_features(self) -> str:
        """The feature string handed to LLVM: :attr:`features` plus the tuning flag that
        makes LLVM use :attr:`vector_bits`-wide vectors in every function."""
        extra = []
        if self.arch == "x86_64" and self.widest_vector_bits >= 256:
            if self.vector_bits >= 512:
                extra = ["-prefer-256-bit", "-prefer-128-bit"]
            elif self.vector_bits == 256:
                extra = ["+prefer-256-bit", "-prefer-128-bit"]
            else:
                extra = ["+prefer-128-bit"]
        return ",".join(filter(None, [self.features, *extra]))

    # ---- running it ----------------------------------------------------------------------
    @cached_property
    def not_runnable_reason(self) -> str | None:
        """Why this process cannot run code built for this target, or None if it can."""
        if self.is_host:
            return None
        h = host()
        if (self.arch, _os(self.triple)) != (h.arch, _os(h.triple)):
            return f"it is for {self.triple}, this process runs on {h.triple}"
        on, _ = _feature_set(self.features)
        if self.cpu == h.cpu:
            need = on
        elif self.cpu in X86_LEVELS or self.cpu == "generic":
            need = X86_LEVELS.get(self.cpu, frozenset()) | on
        else:
            return (f"its CPU {self.cpu!r} is not this host's ({h.cpu!r}); use the host or a "
                    f"generic level ({', '.join(X86_LEVELS)}) to run code")
        host_on, _ = _feature_set(h.features)
        missing = sorted(need - host_on)
        if missing:
            return f"this host lacks {', '.join(missing)}"
        if self.vector_bits > h.widest_vector_bits:
            return f"this host has no {self.vector_bits}-bit vectors"
        return None

    @property
    def runnable(self) -> bool:
        """Whether this process can execute code built for this target."""
        return self.not_runnable_reason is None

    def check_runnable(self) -> None:
        """Raise :class:`TargetError` unless this process can run this target's code."""
        reason = self.not_runnable_reason
        if reason is not None:
            raise TargetError(f"code built for target {self.name} cannot run in this process: "
                              f"{reason} (it can be inspected: as_text('llvm-opt'), "
                              f"as_text('asm'))")

    # ---- identity ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """``triple:cpu`` plus the non-default parts, e.g. ``x86_64-unknown-linux-gnu:x86-64-v3``."""
        text = f"{self.triple}:{self.cpu}"
        if self.features and not self.is_host and self.features != host().features:
            text += f":{self.features}"
        if self.requested_vector_bits:
            text += f"@{self.requested_vector_bits}"
        return text

    def fingerprint(self) -> str:
        """Everything about the target and the compiler that changes generated code (for
        cache keys: code built for one CPU is never loaded for another)."""
        llvm_version = ".".join(str(v) for v in llvm.llvm_version_info)
        return (f"triple={self.triple};cpu={self.cpu};features={self.features};"
                f"vector_bits={self.vector_bits};llvmlite={llvmlite.__version__};"
                f"llvm={llvm_version}")

    def __str__(self) -> str:
        return self.name

    def describe(self) -> str:
        """One line a person can read: the target and the facts codegen uses."""
        return (f"{self.name}: {self.vector_bits}-bit vectors (widest {self.widest_vector_bits}), "
                f"{self.vector_registers} vector registers, fma={'yes' if self.fma else 'no'}, "
                f"rounding={'native' if self.native_rounding else 'emulated'}, "
                f"{'runs here' if self.runnable else 'not runnable here'}")

    # ---- LLVM objects ------------------------------------------------------------------
    def target_machine(self, opt: int = 3, jit: bool = True) -> "llvm.TargetMachine":
        """A new LLVM target machine (an MCJIT engine takes ownership of the one it gets)."""
        init()
        with _LOCK:
            return llvm.Target.from_triple(self.triple).create_target_machine(
                cpu=self.cpu, features=self.machine_features, opt=opt, reloc="default",
                codemodel="jitdefault", jit=jit)


# ------------------------------------------------------------------------- construction


@lru_cache(maxsize=None)
def host() -> Target:
    """The CPU this process runs on, with all its features."""
    init()
    return Target(llvm.get_process_triple(), llvm.get_host_cpu_name(),
                  llvm.get_host_cpu_features().flatten(), 0, is_host=True)


def _host_facts(triple: str, features: str) -> dict[str, object]:
    on, _ = _feature_set(features)
    if _arch(triple) == "x86_64":
        bits = 512 if "avx512f" in on else 256 if "avx" in on else 128
        return {"vector_bits": bits, "fma": "fma" in on or "avx512f" in on,
                "rounding": "sse4.1" in on, "scalable": False}
    return _probe_facts(triple, llvm.get_host_cpu_name(), features)


_PROBE = """
define <{n} x double> @wide(<{n} x double> %a, <{n} x double> %b) #0 {{
  %c = fadd <{n} x double> %a, %b
  ret <{n} x double> %c
}}
declare double @llvm.fma.f64(double, double, double)
define double @fused(double %a, double %b, double %c) #0 {{
  %d = call double @llvm.fma.f64(double %a, double %b, double %c)
  ret double %d
}}
declare double @llvm.floor.f64(double)
define double @rounded(double %a) #0 {{
  %d = call double @llvm.floor.f64(double %a)
  ret double %d
}}
define void @loop(ptr noalias %x, i64 %n) {{
entry:
  br label %body
body:
  %i = phi i64 [ 0, %entry ], [ %j, %body ]
  %p = getelementptr double, ptr %x, i64 %i
  %v = load double, ptr %p
  %w = fmul double %v, 3.0
  store double %w, ptr %p
  %j = add i64 %i, 1
  %c = icmp slt i64 %j, %n
  br i1 %c, label %body, label %done
done:
  ret void
}}
attributes #0 = {{ "min-legal-vector-width"="512" "prefer-vector-width"="512" }}
"""


@lru_cache(maxsize=None)
def _probe_facts(triple: str, cpu: str, features: str) -> dict[str, object]:
    """Ask LLVM what a CPU has: compile tiny functions for it and read the assembly."""
    init()
    with _LOCK:
        tm = llvm.Target.from_triple(triple).create_target_machine(
            cpu=cpu, features=features, opt=2, reloc="default", codemodel="default")
        mod = llvm.parse_assembly(_PROBE.format(n=8))
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        asm = tm.emit_assembly(mod)
        pto = llvm.create_pipeline_tuning_options(speed_level=2)
        pto.loop_vectorization = True
        run_pipeline(tm, pto, mod)
        scalable = "vscale" in str(mod)
    wide = _function_body(asm, "wide")
    libcall = r"\b(call|callq|jmp|b|bl)\s+{}\b"
    fma = re.search(libcall.format("fma"), _function_body(asm, "fused")) is None
    rounding = re.search(libcall.format("floor"), _function_body(asm, "rounded")) is None
    if _arch(triple) == "x86_64":
        bits = 512 if "zmm" in wide else 256 if "ymm" in wide else 128
    else:
        bits = 128
    return {"vector_bits": bits, "fma": fma, "rounding": rounding, "scalable": scalable}


def _function_body(asm: str, name: str) -> str:
    start = asm.index(f"\n{name}:")
    end = asm.find(".Lfunc_end", start)
    return asm[start:end if end > 0 else len(asm)]


def _llvm_warnings(fn) -> str:
    """Run ``fn`` and return what LLVM printed on the process's stderr meanwhile (LLVM
    reports an unknown CPU or feature there and carries on)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode(errors="replace")


_ARCHES = {"x86_64", "aarch64", "i386", "i686", "riscv32", "riscv64", "powerpc64",
           "powerpc64le", "ppc64le", "s390x", "arm", "armv7", "thumbv7", "wasm32", "wasm64",
           "loongarch64", "mips64", "mips64el"}


def _is_triple(text: str) -> bool:
    return "-" in text and _arch(text) in _ARCHES


def make(spec: "str | Target | None" = None, *, triple: str | None = None,
         cpu: str | None = None, features: str | None = None,
         vector_bits: int | None = None) -> Target:
    """A validated target.  ``spec``: a :class:`Target`, ``"host"``, a CPU name for this
    host's triple (``"x86-64-v3"``), or ``"triple[:cpu[:features]]"``, optionally ending in
    ``@bits`` (the vector width, e.g. ``"host@256"``; :attr:`Target.name` reads back);
    keywords override parts.  Unknown triples, CPUs and features raise :class:`TargetError`.

    >>> make("host") == host()
    True
    >>> make("x86_64-unknown-linux-gnu:no-such-cpu")
    Traceback (most recent call last):
    ...
    codegen.target.TargetError: LLVM does not know CPU 'no-such-cpu' for x86_64-unknown-linux-gnu
    """
    base = host()
    if isinstance(spec, Target):
        base, spec = spec, None
    if spec is not None:
        if not isinstance(spec, str):
            raise TypeError(f"target must be a str or a codegen.target.Target, got "
                            f"{type(spec).__name__}")
        if "@" in spec:
            spec, _, bits = spec.rpartition("@")
            if not bits.isdigit():
                raise TargetError(f"bad vector width {bits!r} in target {spec}@{bits}")
            vector_bits = vector_bits or int(bits)
        if spec != "host":
            head, *rest = spec.split(":")
            if _is_triple(head):
                triple = triple or head
                cpu = cpu or (rest[0] if rest and rest[0] else None)
                rest = rest[1:]
            else:
                cpu = cpu or head
            if rest and features is None:
                features = ":".join(rest)
    if triple is None and cpu is None and features is None and not vector_bits:
        return base
    triple = triple or base.triple
    same_machine = triple == base.triple and cpu in (None, base.cpu)
    cpu = cpu or (base.cpu if triple == base.triple else "generic")
    if features is None:
        features = base.features if same_machine else ""
    is_host = base.is_host and triple == base.triple and cpu == base.cpu and \
        features == base.features
    t = Target(triple, cpu, features, 0, is_host=is_host)
    _validate(t)
    if vector_bits:
        if vector_bits not in (128, 256, 512) or vector_bits > t.widest_vector_bits:
            raise TargetError(f"vector_bits={vector_bits}: target {t.name} has vectors of "
                              f"128 to {t.widest_vector_bits} bits")
        if vector_bits != t.widest_vector_bits:
            t = Target(triple, cpu, features, vector_bits, is_host=False)
    return t


@lru_cache(maxsize=None)
def _validate(t: Target) -> None:
    init()
    try:
        llvm_target = llvm.Target.from_triple(t.triple)
    except RuntimeError as e:
        raise TargetError(f"LLVM cannot generate code for triple {t.triple!r}: {e}") from None
    if t.is_host:
        return
    text = _llvm_warnings(lambda: llvm_target.create_target_machine(
        cpu=t.cpu, features=t.features, opt=0))
    if "is not a recognized processor" in text:
        raise TargetError(f"LLVM does not know CPU {t.cpu!r} for {t.triple}")
    if "is not a recognized feature" in text:
        bad = [line.split("'")[1] for line in text.splitlines() if "recognized feature" in line]
        raise TargetError(f"LLVM does not know feature(s) {', '.join(bad)} for {t.triple}")


@lru_cache(maxsize=None)
def default() -> Target:
    """The target compiled code is built for unless a compile names one: the host, or
    what ``SYMGRAD_TARGET_*`` (read by :mod:`symgrad.config`) ask for."""
    return make(triple=settings.target_triple or None, cpu=settings.target_cpu or None,
                features=settings.target_features or None,
                vector_bits=settings.target_vector_bits or None)


_CURRENT: contextvars.ContextVar[Target | None] = contextvars.ContextVar(
    "symgrad_target", default=None)


def current() -> Target:
    """The target code is being generated for (see :func:`use`), else :func:`default`."""
    t = _CURRENT.get()
    return t if t is not None else default()


@contextlib.contextmanager
def use(t: "Target | str | None") -> Iterator[Target]:
    """Generate code for ``t`` inside the block (None: :func:`default`)."""
    t = make(t) if t is not None else default()
    token = _CURRENT.set(t)
    try:
        yield t
    finally:
        _CURRENT.reset(token)


def threads() -> int:
    """Threads a loop may use: 2 when this process may run on two CPUs, else 1 (part of
    the cache key: generated code differs)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return 2 if cpus >= 2 else 1
