"""Tests of codegen/jit.py: optimiser, compile, symbols, object reload -- on every target
this host can run, and for targets it cannot (generated, never executed)."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from codegen import jit, target  # noqa: E402

from irsamples import EXTERNAL, TWICE, axpy_module, call_axpy  # noqa: E402
from machines import machine, foreign_machine  # noqa: E402,F401  (fixtures)


# ---------------------------------------------------------------- compilation


def test_compile_text_exposes_every_stage(machine: target.Target) -> None:
    cm = jit.compile_module(TWICE)
    assert cm.target == machine
    assert "fmul double %x, 2.0" in cm.ir
    assert "define double @twice" in cm.optimized_ir
    assert "twice:" in cm.asm
    assert cm.object_code[:4] == b"\x7fELF"
    assert cm.functions == ("twice",)
    assert cm.cfunc("twice", ctypes.c_double, ctypes.c_double)(21.0) == 42.0


def vector_registers_in(asm: str, t: target.Target) -> set[int]:
    """Widths (bits) of the vector registers an x86 assembly text uses."""
    return {bits for reg, bits in (("xmm", 128), ("ymm", 256), ("zmm", 512)) if reg in asm}


def test_loops_vectorise_at_the_targets_width(machine: target.Target) -> None:
    """Any function compiled for a target -- generated kernels and this hand-built loop
    alike -- gets the target's vector width (LLVM's tuning would give some AVX-512 CPUs
    256-bit vectors)."""
    cm = jit.compile_module(axpy_module())
    vector = machine.loop_vector_type("double", 64)
    assert vector in cm.optimized_ir and vector not in cm.ir
    assert f"<{machine.lanes(64) * 2} x double>" not in cm.optimized_ir
    if machine.arch == "x86_64":
        assert max(vector_registers_in(cm.asm, machine)) == machine.vector_bits
    call_axpy(cm)


def test_foreign_targets_are_generated_not_run(foreign_machine: target.Target) -> None:
    cm = jit.compile_module(axpy_module())
    assert cm.target == foreign_machine and cm.loaded is None
    assert foreign_machine.loop_vector_type("double", 64) in cm.optimized_ir
    if foreign_machine.arch == "x86_64":
        assert max(vector_registers_in(cm.asm, foreign_machine)) == foreign_machine.vector_bits
    else:
        assert foreign_machine.arch == "aarch64" and "xmm" not in cm.asm
        assert ("z0.d" if foreign_machine.scalable_vectors else "v0.2d") in cm.asm
    with pytest.raises(target.TargetError, match="cannot run in this process"):
        cm.address("axpy")
    with pytest.raises(target.TargetError):
        jit.load_object(cm.object_code, foreign_machine)


def test_a_narrower_vector_width_is_honoured() -> None:
    host = target.host()
    if host.widest_vector_bits < 256:
        pytest.skip("this host has no vectors wider than 128 bits to narrow")
    narrow = target.make(f"host@{host.widest_vector_bits // 2}")
    cm = jit.compile_module(axpy_module(), target=narrow)
    assert f"<{narrow.lanes(64)} x double>" in cm.optimized_ir
    assert f"<{host.lanes(64)} x double>" not in cm.optimized_ir
    call_axpy(cm)


def test_optimize_level_zero_keeps_scalar_loop() -> None:
    ref = jit.parse(axpy_module())
    jit.optimize(ref, level=0)
    assert "x double>" not in str(ref)


def test_missing_function_raises_key_error() -> None:
    cm = jit.compile_module(TWICE)
    with pytest.raises(KeyError):
        cm.address("thrice")


def test_same_symbol_in_two_modules() -> None:
    """Each module has its own engine: equal names do not clash."""
    a = jit.compile_module(TWICE)
    b = jit.compile_module(TWICE.replace("2.0", "5.0"))
    sig = (ctypes.c_double, ctypes.c_double)
    assert a.cfunc("twice", *sig)(1.0) == 2.0 and b.cfunc("twice", *sig)(1.0) == 5.0


def test_concurrent_compiles() -> None:
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for j in range(3):
                call_axpy(jit.compile_module(axpy_module(f"axpy_{k}_{j}")), f"axpy_{k}_{j}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors



@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident "
                    "size from /proc/self/statm (Linux)")
def test_compiles_release_their_optimiser() -> None:
    """Memory stays flat over many compiles: each pipeline's pass manager is freed (llvmlite
    leaves it alive, ~70 KB of grown pass tables per compile of a loop).  Fresh process;
    the resident size after 30 warm-up modules and after 120 more, compiled and dropped."""
    script = textwrap.dedent(f"""
        import gc, os, sys
        sys.path.insert(0, {str(REPO)!r})
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from codegen import jit
        from irsamples import axpy_module
        def rss():
            with open("/proc/self/statm") as fh:
                return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        for k in range(150):
            jit.compile_module(axpy_module(f"axpy_{{k}}"))
            if k == 29:
                gc.collect()
                before = rss()
        gc.collect()
        print(rss() - before)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) < 3 << 20   # 120 leaked pipelines: ~9 MB

# -------------------------------------------------------------------- symbols


def test_unresolved_symbol_is_an_error_not_a_crash() -> None:
    with pytest.raises(jit.UnresolvedSymbolError, match="symgrad_test_nowhere"):
        jit.compile_module(EXTERNAL.format(name="symgrad_test_nowhere"))


def test_add_symbol_resolves_by_name() -> None:
    callback = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(lambda v: v + 100.0)
    jit.add_symbol("symgrad_test_plus100", ctypes.cast(callback, ctypes.c_void_p).value)
    cm = jit.compile_module(EXTERNAL.format(name="symgrad_test_plus100"))
    assert cm.cfunc("use_it", ctypes.c_double, ctypes.c_double)(1.5) == 101.5
    assert jit.symbol_address("symgrad_test_plus100")


def test_blas_via_add_symbol() -> None:
    """ddot_ from scipy's cython_blas capsule, linked by name."""
    from scipy.linalg import cython_blas

    capsule = cython_blas.__pyx_capi__["ddot"]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    jit.add_symbol("ddot_", get_pointer(capsule, get_name(capsule)))
    cm = jit.compile_module("""
        declare double @ddot_(ptr, ptr, ptr, ptr, ptr)
        define double @dot(ptr %n, ptr %x, ptr %y) {
          %inc = alloca i32
          store i32 1, ptr %inc
          %r = call double @ddot_(ptr %n, ptr %x, ptr %inc, ptr %y, ptr %inc)
          ret double %r
        }""")
    x, y = np.arange(5.0), np.arange(5.0) + 1
    n = ctypes.c_int(5)
    dot = cm.cfunc("dot", ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    assert dot(ctypes.addressof(n), x.ctypes.data, y.ctypes.data) == float(x @ y)


def test_elf_symbol_reader() -> None:
    cm = jit.compile_module(EXTERNAL.format(name="cos"))
    defined, undefined = jit.elf_symbols(cm.object_code)
    assert defined == ["use_it"] and undefined == ["cos"]
    assert jit.elf_symbols(b"not an object") == ([], [])


# ------------------------------------------------------------------- reload


def test_load_object_in_process(machine: target.Target) -> None:
    cm = jit.compile_module(axpy_module())
    again = jit.load_object(cm.object_code)
    assert again.functions == ("axpy",)
    call_axpy(again)


def test_load_object_in_new_process(tmp_path: Path) -> None:
    """A cached object runs in a fresh interpreter without optimiser or codegen."""
    cm = jit.compile_module(axpy_module())
    obj = tmp_path / "axpy.o"
    obj.write_bytes(cm.object_code)
    script = textwrap.dedent(f"""
        import ctypes, sys, time
        sys.path.insert(0, {str(REPO)!r})
        import numpy as np
        from codegen import jit, target
        data = open({str(obj)!r}, "rb").read()
        t0 = time.perf_counter()
        loaded = jit.load_object(data)
        dt = time.perf_counter() - t0
        x, y = np.arange(1003.0), np.ones(1003)
        fn = loaded.cfunc("axpy", None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
        fn(x.ctypes.data, y.ctypes.data, x.size)
        assert (y == 1 + 3 * x).all()
        assert target.default().fingerprint() == {target.default().fingerprint()!r}
        print(f"reload {{dt * 1e3:.2f}} ms")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("reload ")
