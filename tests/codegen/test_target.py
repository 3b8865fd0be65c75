"""Tests of codegen/target.py: host facts, optimiser, compile, symbols, object reload."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from codegen import target  # noqa: E402

TWICE = """
define double @twice(double %x) {
  %y = fmul double %x, 2.0
  ret double %y
}
"""


def axpy_module(name: str = "axpy") -> ir.Module:
    """void name(double* x, double* y, i64 n): y[i] += 3 * x[i]."""
    module = ir.Module()
    d, i64 = ir.DoubleType(), ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [d.as_pointer()] * 2 + [i64]), name)
    x, y, n = fn.args
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, i64(0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(i64(0), entry)
    py = b.gep(y, [i])
    b.store(b.fadd(b.load(py), b.fmul(d(3.0), b.load(b.gep(x, [i])))), py)
    nxt = b.add(i, i64(1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return module


def call_axpy(loaded: target.LoadedObject | target.CompiledModule, name: str = "axpy") -> None:
    x = np.arange(1003.0)
    y = np.ones(1003)
    fn = loaded.cfunc(name, None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    fn(x.ctypes.data, y.ctypes.data, x.size)
    np.testing.assert_array_equal(y, 1 + 3 * x)


# ----------------------------------------------------------------------- host


def test_init_is_idempotent() -> None:
    target.init()
    target.init()


def test_fingerprint_covers_cpu_features_and_versions() -> None:
    fp = target.host_fingerprint()
    version = ".".join(map(str, llvm.llvm_version_info))
    for part in (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten(),
                 llvmlite.__version__, version):
        assert part in fp
    assert fp == target.host_fingerprint()


def test_widest_vector_bits_follows_features() -> None:
    features = set(llvm.get_host_cpu_features().flatten().split(","))
    expected = 512 if "+avx512f" in features else 256 if "+avx" in features else 128
    assert target.widest_vector_bits() == expected
    assert target.vector_lanes(64) * 64 == expected == target.vector_lanes(32) * 32
    assert target.has_feature("64bit") and not target.has_feature("no-such-feature")


# ---------------------------------------------------------------- compilation


def test_compile_text_exposes_every_stage() -> None:
    cm = target.compile_module(TWICE)
    assert "fmul double %x, 2.0" in cm.ir
    assert "define double @twice" in cm.optimized_ir
    assert "twice:" in cm.asm
    assert cm.object_code[:4] == b"\x7fELF"
    assert cm.functions == ("twice",)
    assert cm.cfunc("twice", ctypes.c_double, ctypes.c_double)(21.0) == 42.0


def test_optimize_vectorises_to_host_width() -> None:
    cm = target.compile_module(axpy_module())
    lanes = target.vector_lanes(64)
    assert f"<{lanes} x double>" in cm.optimized_ir
    assert f"<{lanes} x double>" not in cm.ir
    call_axpy(cm)


def test_optimize_level_zero_keeps_scalar_loop() -> None:
    ref = target.parse(axpy_module())
    target.optimize(ref, level=0)
    assert "x double>" not in str(ref)


def test_missing_function_raises_key_error() -> None:
    cm = target.compile_module(TWICE)
    with pytest.raises(KeyError):
        cm.address("thrice")


def test_same_symbol_in_two_modules() -> None:
    """Each module has its own engine: equal names do not clash."""
    a = target.compile_module(TWICE)
    b = target.compile_module(TWICE.replace("2.0", "5.0"))
    sig = (ctypes.c_double, ctypes.c_double)
    assert a.cfunc("twice", *sig)(1.0) == 2.0 and b.cfunc("twice", *sig)(1.0) == 5.0


def test_concurrent_compiles() -> None:
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for j in range(3):
                call_axpy(target.compile_module(axpy_module(f"axpy_{k}_{j}")), f"axpy_{k}_{j}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# -------------------------------------------------------------------- symbols


EXTERNAL = """
declare double @{name}(double)
define double @use_it(double %x) {{
  %y = call double @{name}(double %x)
  ret double %y
}}
"""


def test_unresolved_symbol_is_an_error_not_a_crash() -> None:
    with pytest.raises(target.UnresolvedSymbolError, match="symgrad_test_nowhere"):
        target.compile_module(EXTERNAL.format(name="symgrad_test_nowhere"))


def test_add_symbol_resolves_by_name() -> None:
    callback = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(lambda v: v + 100.0)
    target.add_symbol("symgrad_test_plus100", ctypes.cast(callback, ctypes.c_void_p).value)
    cm = target.compile_module(EXTERNAL.format(name="symgrad_test_plus100"))
    assert cm.cfunc("use_it", ctypes.c_double, ctypes.c_double)(1.5) == 101.5
    assert target.symbol_address("symgrad_test_plus100")


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
    target.add_symbol("ddot_", get_pointer(capsule, get_name(capsule)))
    cm = target.compile_module("""
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
    cm = target.compile_module(EXTERNAL.format(name="cos"))
    defined, undefined = target._elf_symbols(cm.object_code)
    assert defined == ["use_it"] and undefined == ["cos"]
    assert target._elf_symbols(b"not an object") == ([], [])


# ------------------------------------------------------------------- reload


def test_load_object_in_process() -> None:
    cm = target.compile_module(axpy_module())
    again = target.load_object(cm.object_code)
    assert again.functions == ("axpy",)
    call_axpy(again)


def test_load_object_in_new_process(tmp_path: Path) -> None:
    """A cached object runs in a fresh interpreter without optimiser or codegen."""
    cm = target.compile_module(axpy_module())
    obj = tmp_path / "axpy.o"
    obj.write_bytes(cm.object_code)
    script = textwrap.dedent(f"""
        import ctypes, sys, time
        sys.path.insert(0, {str(REPO)!r})
        import numpy as np
        from codegen import target
        target.init()
        data = open({str(obj)!r}, "rb").read()
        t0 = time.perf_counter()
        loaded = target.load_object(data)
        dt = time.perf_counter() - t0
        x, y = np.arange(1003.0), np.ones(1003)
        fn = loaded.cfunc("axpy", None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
        fn(x.ctypes.data, y.ctypes.data, x.size)
        assert (y == 1 + 3 * x).all()
        assert target.host_fingerprint() == {target.host_fingerprint()!r}
        print(f"reload {{dt * 1e3:.2f}} ms")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("reload ")
