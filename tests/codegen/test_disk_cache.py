"""The persistent disk cache of the LLVM backend: reload in a new process without LLVM,
corrupted / truncated / stale entries rebuilt, atomic writes, disabling, keys."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import symgrad
from symgrad.config import settings
from codegen import backend, cache

_ROOT = str(Path(__file__).resolve().parents[2])

_CHILD = textwrap.dedent("""
    import sys, numpy as np
    import codegen.jit as jit
    calls = {"optimize": 0, "compile_module": 0, "grad_graph": 0, "partial": 0, "fuse": 0}

    def counting(module, name, counter=None):
        real = getattr(module, name)
        def wrapper(*a, **k):
            calls[counter or name] += 1
            return real(*a, **k)
        setattr(module, name, wrapper)
    counting(jit, "optimize")
    counting(jit, "compile_module")
    import symgrad, codegen.backend as B
    from symgrad.compiler import stages, transforms
    from symgrad.graph import primitives as registry
    counting(transforms, "grad_graph")              # symbolic differentiation
    counting(registry.Formula, "partial")           # sympy derivatives of formulas
    counting(stages, "fuse")
    vg = symgrad.value_and_grad(lambda x, w: ((x @ w).tanh() ** 2).mean() + (x * 3).exp().sum(),
                                argnums=(0, 1), backend="llvm")
    x, w = np.linspace(-1, 1, 12).reshape(3, 4), np.linspace(0, 1, 8).reshape(4, 2)
    value, (gx, gw) = vg(x, w)
    imported = sorted(m for m in ("codegen.plan", "codegen.module", "codegen.vecmath")
                      if m in sys.modules)
    print(calls["optimize"], calls["compile_module"], B.stats["from_cache"],
          calls["grad_graph"] + calls["partial"] + calls["fuse"], ",".join(imported) or "-",
          repr(float(value)), repr(float(gx.sum())), repr(float(gw.sum())))
""")


def _child(cache_dir, enabled="1"):
    """(optimiser runs, compiles, disk loads, symbolic stage calls, IR modules imported,
    results) of a fresh process computing a value and gradient."""
    env = dict(os.environ, SYMGRAD_CACHE_DIR=str(cache_dir), SYMGRAD_DISK_CACHE=enabled,
               PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                       timeout=180, cwd=_ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    optimize, compile_module, hits, stages, imported, *values = r.stdout.split()
    return int(optimize), int(compile_module), int(hits), int(stages), imported, values


def _entries(cache_dir):
    return sorted(Path(cache_dir).rglob("*.obj"))


def _sections(path):
    return set(cache.decode(path.read_bytes(), path.stem))


def test_second_process_loads_from_disk_without_llvm(tmp_path):
    cold = _child(tmp_path)
    assert cold[0] >= 1 and cold[1] == 1 and cold[2] == 0        # compiled once (the
    # optimiser runs once per part of the module: codegen.split)
    assert cold[3] > 0 and "codegen.plan" in cold[4]
    # the object, and the entry finding it from the traced program
    assert sorted(map(_sections, _entries(tmp_path)), key=len) == [
        {"meta"}, {"object", "llvm"}]       # (the optimised IR: made again on demand)
    warm = _child(tmp_path)
    assert warm[:3] == (0, 0, 1)                                  # no optimiser, no codegen
    assert warm[3] == 0                        # no differentiation, no sympy, no fusion
    assert warm[4] == "-"                      # no schedule or IR builders imported
    assert warm[5] == cold[5]                                     # same results, bit for bit


_THREADED_CHILD = textwrap.dedent("""
    import math, numpy as np
    import codegen.jit as jit
    from codegen.lower import parallel
    calls = []
    real = jit.compile_module
    jit.compile_module = lambda *a, **k: calls.append(1) or real(*a, **k)
    import symgrad
    f = symgrad.value_and_grad(lambda x: (x.sin() * x).sum(), backend="llvm")
    x = np.linspace(-1, 1, 1 << 20)
    value, grad = f(x)
    assert "symgrad_rt_post" in f.lower(x).compile().as_text("llvm")       # two threads
    assert abs(float(value) - math.fsum(np.sin(x) * x)) <= 1e-12 * x.size
    print(len(calls), parallel.threads())
""")


def test_second_process_loads_the_helper_thread_module_from_disk(tmp_path):
    """A kernel split between two threads needs the process's helper-thread module: a
    second process loads it from the disk cache too (no LLVM at all)."""
    env = dict(os.environ, SYMGRAD_CACHE_DIR=str(tmp_path), SYMGRAD_DISK_CACHE="1",
               PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", _THREADED_CHILD], env=env, capture_output=True,
                           text=True, timeout=180, cwd=_ROOT)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(tuple(map(int, r.stdout.split())))
    (cold, threads), (warm, _) = runs
    if threads < 2:
        pytest.skip("one CPU: kernels are not split, no helper thread is compiled")
    # kernel, helper module and the float64 trig library (codegen.library), then none
    assert cold == 3 and warm == 0


def test_corrupted_truncated_and_foreign_entries_are_rebuilt(monkeypatch, tmp_path):
    monkeypatch.setattr(settings, "cache_dir", str(tmp_path))
    monkeypatch.setattr(settings, "disk_cache", True)
    program = symgrad.compile(lambda x: (x.exp() - x).sum(), backend="llvm").lower(np.ones(9)).optimized
    x = np.linspace(-1, 1, 9)
    want = backend.compile_program(program)([x])[0]
    (path,) = _entries(tmp_path)
    good = path.read_bytes()
    for bad in (good[: len(good) // 2],                           # truncated
                good[:-20] + bytes(20),                           # corrupted payload
                b"garbage",                                       # not a cache file
                cache.encode("0" * 48, cache.decode(good, path.stem))):   # another key's file
        path.write_bytes(bad)
        before = backend.stats["compiled"]
        exe = backend.compile_program(program)
        assert backend.stats["compiled"] == before + 1 and not exe.from_cache
        np.testing.assert_array_equal(exe([x])[0], want)
        assert cache.decode(path.read_bytes(), path.stem) is not None     # rewritten, valid
    assert not list(Path(tmp_path).rglob(".tmp-*"))               # no temporary files left


def test_disabled_cache_writes_nothing(tmp_path):
    for _ in range(2):                  # compiled each time (optimised once per part)
        optimized, compiled, hits = _child(tmp_path, enabled="0")[:3]
        assert optimized >= 1 and (compiled, hits) == (1, 0)
        assert not _entries(tmp_path)


def test_concurrent_processes_leave_one_valid_entry(tmp_path):
    env = dict(os.environ, SYMGRAD_CACHE_DIR=str(tmp_path), SYMGRAD_DISK_CACHE="1",
               PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD], env=env, cwd=_ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    assert len({tuple(o[0].split()[5:]) for o in outs}) == 1
    paths = _entries(tmp_path)
    assert len(paths) == 2                      # the object and the traced program's entry
    assert all(cache.decode(path.read_bytes(), path.stem) is not None for path in paths)


def test_key_covers_shapes_dtypes_and_structure(monkeypatch, tmp_path):
    monkeypatch.setattr(settings, "cache_dir", str(tmp_path))
    monkeypatch.setattr(settings, "disk_cache", True)
    keys = set()
    for fn, x in [(lambda x: (x * 2).sum(), np.ones(3)), (lambda x: (x * 2).sum(), np.ones(4)),
                  (lambda x: (x * 2).sum(), np.ones(3, np.float32)), (lambda x: (x * 3).sum(), np.ones(3)),
                  (lambda x: (x * 2).mean(), np.ones(3))]:
        keys.add(cache.cache_key(symgrad.compile(fn, backend="llvm").lower(x).optimized))
    assert len(keys) == 5


def test_key_covers_the_formula_behind_a_primitive_name(monkeypatch, tmp_path):
    """A node names its primitive; the formula under that name may differ (a user may
    redefine it, or define another one in another process): the key holds the formula."""
    monkeypatch.setattr(settings, "cache_dir", str(tmp_path))
    monkeypatch.setattr(settings, "disk_cache", True)
    keys, results = [], []
    for power in (2, 3):
        op = symgrad.elementwise("disk_cache_test_op", lambda x: x ** power)
        c = symgrad.compile(lambda x: symgrad.apply(op, x), backend="llvm")
        program = c.lower(np.ones(3)).optimized
        assert [n.op for n in program.nodes()][-1] == "disk_cache_test_op"     # not fused
        keys.append(cache.cache_key(program))
        results.append(backend.compile_program(program)([np.full(3, 2.0)])[0].tolist())
    assert keys[0] != keys[1]
    assert results == [[4.0] * 3, [8.0] * 3]


def test_key_covers_the_source_of_the_graph_package(tmp_path):
    """The code generator lowers with symgrad.graph's modules (the order of divisions,
    programs, dtypes): editing one of them changes every key, so no entry built by the
    old source is loaded."""
    import shutil
    copy = tmp_path / "graph"
    shutil.copytree(cache._GRAPH_SOURCE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    digest = cache.source_digest.__wrapped__        # (cached per process)
    before = digest(str(copy))
    division = copy / "division.py"
    division.write_text(division.read_text() + "\n# edited\n")
    assert digest(str(copy)) != before
    from symgrad.graph import division
    assert Path(cache._GRAPH_SOURCE) == Path(division.__file__).parent
    assert f"graph={cache.source_digest(cache._GRAPH_SOURCE)}" in cache.environment()


def test_in_process_reload_uses_the_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(settings, "cache_dir", str(tmp_path))
    monkeypatch.setattr(settings, "disk_cache", True)
    program = symgrad.compile(lambda x: (x.sin() * 2).sum(), backend="llvm").lower(np.ones(7)).optimized
    before = dict(backend.stats)
    first = backend.compile_program(program)
    second = backend.compile_program(program)
    assert backend.stats["compiled"] == before["compiled"] + 1
    assert backend.stats["from_cache"] == before["from_cache"] + 1
    assert second.from_cache and not first.from_cache
    x = np.linspace(0, 1, 7)
    np.testing.assert_array_equal(first([x])[0], second([x])[0])
    assert second.as_text("llvm") == first.as_text("llvm")
    assert "ret" in second.as_text("asm")                          # regenerated on demand


def test_eviction_keeps_recently_used_entries(monkeypatch, tmp_path):
    monkeypatch.setattr(settings, "cache_dir", str(tmp_path))
    monkeypatch.setattr(settings, "disk_cache", True)
    keys = [f"{k:02d}" + "ab" * 23 for k in range(8)]
    for age, key in enumerate(keys):
        cache.store(key, {"object": bytes(1000)})
        os.utime(cache.cache_path(key), (1_000_000 + age, 1_000_000 + age))
    assert cache.load(keys[0]) is not None          # used again: now the most recent
    deleted = cache.evict(limit=5000)
    assert deleted >= 3
    assert cache.load(keys[0]) is not None and cache.load(keys[1]) is None


def test_special_files_in_place_of_an_entry_are_never_opened(monkeypatch, tmp_path):
    """A FIFO (opening it would block forever), a symlink to one, a directory, or a symlink
    to a valid entry in place of a cache file: ignored, rebuilt, replaced by a regular
    file -- never a hang (an alarm turns one into a failure) or a crash."""
    import signal
    monkeypatch.setattr(settings, "cache_dir", str(tmp_path))
    monkeypatch.setattr(settings, "disk_cache", True)
    program = symgrad.compile(lambda x: (x.cos() * x).sum(), backend="llvm").lower(np.ones(7)).optimized
    x = np.linspace(-1, 1, 7)
    want = np.sum(np.cos(x) * x)
    # (the terms cancel in pairs: the sum's last bit follows the order LLVM adds them in)
    np.testing.assert_allclose(backend.compile_program(program)([x])[0], want, rtol=1e-13,
                               atol=1e-15)
    path = cache.cache_path(cache.cache_key(program))    # (beside it: the trig library's)
    good = path.read_bytes()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "good.obj").write_bytes(good)
    os.mkfifo(elsewhere / "fifo")

    def fifo(p):
        os.mkfifo(p)

    def dir_(p):
        p.mkdir()

    makers = {"fifo": fifo, "symlink to fifo": lambda p: p.symlink_to(elsewhere / "fifo"),
              "symlink to entry": lambda p: p.symlink_to(elsewhere / "good.obj"),
              "directory": dir_}

    def timeout(*_):        # not an OSError, which the cache would swallow
        pytest.fail("the disk cache blocked")
    old = signal.signal(signal.SIGALRM, timeout)
    try:
        for what, make in makers.items():
            path.unlink()
            make(path)
            signal.alarm(30)
            exe = backend.compile_program(program)
            signal.alarm(0)
            assert not exe.from_cache, what
            np.testing.assert_allclose(exe([x])[0], want, rtol=1e-13, atol=1e-15,
                                       err_msg=what)
            if what != "directory":              # replaced by a valid regular file
                assert path.is_file() and not path.is_symlink(), what
                assert cache.decode(path.read_bytes(), path.stem) is not None, what
            else:
                os.rmdir(path)
                path.write_bytes(good)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_unwritable_cache_directory_runs_without_the_cache(monkeypatch, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_bytes(b"x")                    # the cache dir is a regular file
    monkeypatch.setattr(settings, "cache_dir", str(blocker))
    monkeypatch.setattr(settings, "disk_cache", True)
    f = symgrad.grad(lambda x: (x.exp() * x).sum(), backend="llvm")
    x = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(f(x), np.exp(x) * (1 + x), rtol=1e-13)
