"""A big module compiles in parts on two threads (codegen.split, codegen.jit): the parts
are valid modules, the object code does not depend on the thread count, the answers equal
PyTorch's, the packed objects reload from bytes (as from the disk cache), the optimised IR
and assembly stay inspectable, and a process forks after a threaded compile."""
import ctypes
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import symgrad as sg
from codegen import jit, split

TOL = {np.float64: dict(rtol=1e-10, atol=1e-12), np.float32: dict(rtol=2e-4, atol=1e-5)}


def _mlp(x, Ws):
    h = x
    for k in range(Ws.shape[0]):
        h = sg.tanh(h @ Ws[k])
    return (h * h).sum()


def _torch_mlp(x, Ws):
    h = x
    for k in range(Ws.shape[0]):
        h = torch.tanh(h @ Ws[k])
    return (h * h).sum()


def _inputs(dtype, layers=6, width=48):
    rng = np.random.default_rng(1)
    return (rng.normal(size=(16, width)).astype(dtype),
            (rng.normal(size=(layers, width, width)) / 7).astype(dtype))


def _ir(dtype=np.float64) -> str:
    return sg.value_and_grad(_mlp).lower(*_inputs(dtype)).as_text("llvm")


@pytest.fixture(autouse=True)
def _two_threads(monkeypatch):
    from symgrad.config import settings
    monkeypatch.setattr(settings, "split_compile", True)    # (SYMGRAD_SPLIT_COMPILE=0: off)
    jit.set_compile_threads(2)
    yield
    jit.set_compile_threads(2)


def test_a_big_program_splits_into_valid_modules():
    text = _ir()
    parts = split.split(text)
    assert len(parts) == 2
    for part in parts:
        jit.parse(part)                       # parses and verifies
    defined = [{line.split("@", 1)[1].split("(", 1)[0] for line in p.splitlines()
                if line.startswith("define") and "internal" not in line.split("@")[0]}
               for p in parts]
    assert not defined[0] & defined[1]        # no external symbol defined twice


def test_small_or_unknown_modules_stay_whole():
    small = 'define i64 @"f"(i64 %"x")\n{\nentry:\n  ret i64 %"x"\n}\n'
    assert split.split(small) == [small]
    text = _ir()
    for odd in ('@"alias" = alias i64, ptr @"f"', 'module asm "nop"'):
        assert split.split(f"{text}\n{odd}\n") == [f"{text}\n{odd}\n"]


def test_object_code_is_the_same_on_one_thread_and_on_two():
    text = _ir()
    jit.set_compile_threads(1)
    one = jit.compile_module(text, level=jit.OPT_LEVEL)
    jit.set_compile_threads(2)
    two = jit.compile_module(text, level=jit.OPT_LEVEL)
    assert len(jit.object_parts(one.object_code)) == 2
    assert one.object_code == two.object_code


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("threads", [1, 2])
def test_answers_equal_torchs(dtype, threads):
    jit.set_compile_threads(threads)
    x, Ws = _inputs(dtype)
    f = sg.value_and_grad(_mlp, argnums=(0, 1), backend="llvm")
    assert len(jit.object_parts(f.lower(x, Ws).compile().object_code)) == 2
    value, (gx, gW) = f(x, Ws)
    tx, tW = (torch.tensor(a, requires_grad=True) for a in (x, Ws))
    ref = _torch_mlp(tx, tW)
    ref.backward()
    np.testing.assert_allclose(value, ref.item(), **TOL[dtype])
    np.testing.assert_allclose(gx, tx.grad.numpy(), **TOL[dtype])
    np.testing.assert_allclose(gW, tW.grad.numpy(), **TOL[dtype])


def test_packed_objects_reload_from_bytes_and_name_their_symbols():
    compiled = jit.compile_module(_ir(), level=jit.OPT_LEVEL)
    blob = compiled.object_code
    parts = jit.object_parts(blob)
    assert jit.pack_objects(parts) == blob and jit.object_parts(parts[0]) == [parts[0]]
    defined, undefined = jit.elf_symbols(blob)
    assert not set(defined) & set(undefined)
    again = jit.load_object(blob)              # as from the disk cache: no LLVM work
    name = next(n for n in compiled.functions if n.endswith(".entry"))
    assert again.address(name) != 0
    with pytest.raises(ValueError, match="truncated"):
        jit.object_parts(blob[:-1])


def test_optimised_ir_and_assembly_of_a_split_module():
    exe = sg.value_and_grad(_mlp).lower(*_inputs(np.float64)).compile()
    opt = exe.as_text("llvm-opt")
    assert opt.startswith("; ---- part 1 of 2") and "; ---- part 2 of 2" in opt
    asm = exe.as_text("asm")
    assert "; ---- part 2 of 2" in asm and "ret" in asm


def test_fork_after_a_threaded_compile():
    code = textwrap.dedent("""
        import os, numpy as np, symgrad as sg
        from codegen import jit
        from tests.codegen.test_split_compile import _mlp, _inputs
        x, Ws = _inputs(np.float64)
        f = sg.value_and_grad(_mlp, backend="llvm")
        v, g = f(x, Ws)
        assert len(jit.object_parts(f.lower(x, Ws).compile().object_code)) == 2
        pid = os.fork()
        if pid == 0:
            x2, Ws2 = _inputs(np.float64, layers=7)
            v2, _ = sg.value_and_grad(_mlp, backend="llvm")(x2, Ws2)  # a new threaded compile
            v3, _ = f(x, Ws)
            os._exit(0 if np.isfinite(v2) and v3 == v else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, SYMGRAD_DISK_CACHE="0", SYMGRAD_SPLIT_COMPILE="1",
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=env, cwd=root)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[-1] == "0"


def test_big_constants_and_noinline_helpers_are_defined_once():
    big = "[" + ", ".join(f"double {k}.0" for k in range(200)) + "]"
    text = "\n".join([
        f'@"table" = internal constant [200 x double] {big}',
        '@"note" = internal constant [10 x i8] c"internal  "',
        'define internal double @"helper"(i64 %"i") noinline',
        "{", "entry:",
        '  %"p" = getelementptr [200 x double], ptr @"table", i64 0, i64 %"i"',
        '  %"v" = load double, ptr %"p"', '  ret double %"v"', "}"]
        + [line for k in range(2) for line in (
            f'define internal double @"step{k}"(i64 %"i") noinline', "{", "entry:",
            '  %"c" = load i8, ptr @"note"', '  %"t" = load double, ptr @"table"',
            *[f'  %"v{j}" = call double @"helper"(i64 %"i")' for j in range(30)],
            '  ret double %"v0"', "}")]
        + ['define double @"k"(i64 %"i")', "{", "entry:",
           '  %"a" = call double @"step0"(i64 %"i")', '  %"b" = call double @"step1"(i64 %"i")',
           '  %"c" = fadd double %"a", %"b"', '  ret double %"c"', "}"]) + "\n"
    parts = split.split(text, min_lines=0)
    assert len(parts) == 2
    def defines(part, name):
        return any(line.startswith("define") and f'@"{name}"(' in line or
                   line.startswith(f'@"{name}" = ') and "external" not in line
                   for line in part.splitlines())

    for name in ("table", "helper"):
        assert sum(defines(p, name) for p in parts) == 1
    assert sum(defines(p, "note") for p in parts) == 2  # small: a copy in each part
    assert all('c"internal  "' in p for p in parts)     # a small constant is copied, intact
    blob = jit._compile_parts(parts, jit.OPT_LEVEL, jit.targets.current(), False, print)
    assert len(jit.object_parts(blob)) == 2
    k = jit.load_object(blob).cfunc("k", ctypes.c_double, ctypes.c_int64)
    assert k(7) == 14.0                                  # table[7] from each step


@pytest.mark.parametrize("library", [False, True], ids=["helpers-in-module", "library"])
def test_trig_loops_are_vectorised_in_every_part(library, monkeypatch):
    # A loop calling sin / cos vectorises only when the trig helper's vector variants are
    # in its module (named by an attribute of the helper, kept by @llvm.compiler.used).
    # A part without them ran its loops scalar: the variants were declared in part 0
    # only (library) or neither declared nor named in the other part (helpers in module).
    from symgrad.config import settings
    from codegen import library as libs, target as targets

    def chain(x):
        for _ in range(16):
            x = sg.sin(x) * 0.9 + 0.1
        return x.sum()

    x = np.linspace(-1.0, 1.0, 100)
    monkeypatch.setattr(settings, "disk_cache", False)
    if library:
        libs.ensure(targets.current(), ["f64"])
    else:                            # (as for a target this process cannot run)
        monkeypatch.setattr(libs, "active", lambda fmt: None)
    text = sg.value_and_grad(chain).lower(x).compile().as_text("llvm")
    assert ('declare double @"symgrad_vm_trig_huge' in text) == library
    parts = split.split(text)
    assert len(parts) == 2
    vector = re.compile(r'call <\d+ x double> @"?symgrad_vm_trig_huge')
    for part in parts:
        optimised = jit.optimized_text(part, jit.OPT_LEVEL)
        assert vector.search(optimised), optimised[:300]    # each part has a sin / cos loop
    xt = torch.tensor(x, requires_grad=True)
    value, grad = sg.value_and_grad(chain)(x)
    h = xt
    for _ in range(16):
        h = torch.sin(h) * 0.9 + 0.1
    h.sum().backward()
    np.testing.assert_allclose(value, h.sum().item(), **TOL[np.float64])
    np.testing.assert_allclose(grad, xt.grad.numpy(), **TOL[np.float64])
