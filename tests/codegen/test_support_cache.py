"""The support-object cache (codegen/support.py): objects every process needs (trig
library, helper thread, loop driver) kept on disk with the program cache off; corrupt
entries rebuilt, concurrent writers, one entry per target, disabling, trimming."""
from __future__ import annotations

import ctypes
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from symgrad.config import settings  # noqa: E402
from codegen import cache, support, target  # noqa: E402

from irsamples import TWICE  # noqa: E402
from machines import RUNNABLE, FOREIGN_SPECS  # noqa: E402


@pytest.fixture
def support_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(settings, "cache_dir", str(tmp_path))
    monkeypatch.setattr(settings, "support_cache", True)
    monkeypatch.setattr(settings, "disk_cache", False)       # independent of it
    return tmp_path / "support"


class _IR:
    """``make_ir`` that counts its calls."""

    def __init__(self, text: str = TWICE):
        self.text, self.calls = text, 0

    def __call__(self) -> str:
        self.calls += 1
        return self.text


def _twice(loaded) -> float:
    return ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(loaded.address("twice"))(21.5)


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"*{support.SUFFIX}")) if folder.exists() else []


def test_second_load_reads_the_object_from_disk(support_dir):
    t = target.host()
    make = _IR()
    first = support.load_or_compile("test-twice", make, t)
    second = support.load_or_compile("test-twice", make, t)
    assert make.calls == 1                      # built once, then loaded
    assert _twice(first) == _twice(second) == 21.5 * 2
    (entry,) = _entries(support_dir)
    assert entry.name == support.key("test-twice", t) + support.SUFFIX


@pytest.mark.parametrize("damage", ["truncated", "payload", "garbage", "other-key", "empty"])
def test_a_corrupt_entry_is_rebuilt_and_rewritten(support_dir, damage):
    t = target.host()
    make = _IR()
    support.load_or_compile("test-twice", make, t)
    (entry,) = _entries(support_dir)
    good = entry.read_bytes()
    k = support.key("test-twice", t)
    entry.write_bytes({"truncated": good[: len(good) // 2],
                       "payload": good[:-16] + bytes(16),
                       "garbage": b"not an object at all",
                       "other-key": cache.encode("0" * 48, cache.decode(good, k)),
                       "empty": b""}[damage])
    again = support.load_or_compile("test-twice", make, t)
    assert make.calls == 2 and _twice(again) == 43.0
    assert cache.decode(entry.read_bytes(), k) is not None          # rewritten, valid
    assert not list(support_dir.glob(".tmp-*"))


def test_each_target_has_its_own_entry(support_dir):
    """An object built for one CPU is never loaded for another: each target of the
    matrix this host runs builds (and keeps) its own; a target it cannot run stores
    nothing (there is nothing to load)."""
    made = {}
    for t in RUNNABLE:
        make = _IR()
        loaded = support.load_or_compile("test-twice", make, t)
        assert make.calls == 1, t              # not another target's entry
        assert _twice(loaded) == 43.0
        made[t] = loaded
    assert len({support.key("test-twice", t) for t in RUNNABLE}) == len(RUNNABLE)
    assert len(_entries(support_dir)) == len(RUNNABLE)
    for t in RUNNABLE:                          # each finds its own again
        make = _IR()
        support.load_or_compile("test-twice", make, t)
        assert make.calls == 0
    foreign = next((target.make(s) for s in FOREIGN_SPECS if not target.make(s).runnable), None)
    if foreign is not None:
        assert support.load_or_compile("test-twice", _IR(), foreign) is None
        assert len(_entries(support_dir)) == len(RUNNABLE)


def test_disabled_cache_writes_nothing(support_dir, monkeypatch):
    monkeypatch.setattr(settings, "support_cache", False)
    make = _IR()
    for _ in range(2):
        assert _twice(support.load_or_compile("test-twice", make, target.host())) == 43.0
    assert make.calls == 2 and not support_dir.exists()


def test_only_the_most_recently_used_entries_are_kept(support_dir, monkeypatch):
    monkeypatch.setattr(support, "MAX_ENTRIES", 2)
    t = target.host()
    for i in range(4):
        support.load_or_compile(f"test-twice-{i}", _IR(), t)
        os.utime(support_dir / (support.key(f"test-twice-{i}", t) + support.SUFFIX),
                 ns=(i * 10**9, i * 10**9))     # distinct mtimes on coarse file systems
    kept = {p.name for p in _entries(support_dir)}
    assert kept == {support.key(f"test-twice-{i}", t) + support.SUFFIX for i in (2, 3)}


_WRITER = textwrap.dedent("""
    import ctypes, sys
    from codegen import support, target
    from irsamples import TWICE
    loaded = support.load_or_compile("test-twice", lambda: TWICE, target.host())
    print(ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(loaded.address("twice"))(4.25))
""")


def test_concurrent_writers_leave_one_valid_entry(tmp_path):
    env = dict(os.environ, SYMGRAD_CACHE_DIR=str(tmp_path), SYMGRAD_DISK_CACHE="0",
               SYMGRAD_SUPPORT_CACHE="1",
               PYTHONPATH=os.pathsep.join([str(REPO), str(Path(__file__).parent),
                                           os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER], env=env, cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-800:] for o in outs]
    assert {float(o[0]) for o in outs} == {8.5}
    (entry,) = _entries(tmp_path / "support")
    assert cache.decode(entry.read_bytes(), entry.name[:-len(support.SUFFIX)]) is not None
    assert not list((tmp_path / "support").glob(".tmp-*"))


_PROGRAMS = textwrap.dedent("""
    import json, numpy as np
    import codegen.jit as jit
    from codegen import support
    compiles = []
    real = jit.compile_module
    jit.compile_module = lambda *a, **k: compiles.append(1) or real(*a, **k)
    import symgrad
    x = np.linspace(-3.0, 3.0, 301)
    value, grad = symgrad.value_and_grad(lambda x: (x.sin() * x).sum())(x)
    def step(c, xi):
        return c * 0.5 + xi.cos(), None
    carry, _ = symgrad.compile(lambda x: symgrad.scan(step, x[0] * 0, x))(x)
    print(json.dumps({"compiles": len(compiles), "stats": support.stats, "value": float(value),
                      "grad": grad.tolist(), "carry": float(carry)}))
""")


def test_a_new_process_loads_the_support_objects_with_the_program_cache_off(tmp_path):
    """With ``SYMGRAD_DISK_CACHE=0`` every program compiles again in a new process, the
    trig library and the loop driver do not; the answers match numpy's."""
    import json
    import numpy as np
    env = dict(os.environ, SYMGRAD_CACHE_DIR=str(tmp_path), SYMGRAD_DISK_CACHE="0",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", _PROGRAMS], env=env, capture_output=True,
                           text=True, timeout=300, cwd=REPO)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["stats"]["compiled"] >= 1 and cold["stats"]["loaded"] == 0
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["loaded"] == cold["stats"]["compiled"]
    assert warm["compiles"] == cold["compiles"] - cold["stats"]["compiled"] >= 1   # programs
    x = np.linspace(-3.0, 3.0, 301)
    for run in runs:
        assert math.isclose(run["value"], math.fsum(np.sin(x) * x), rel_tol=1e-12, abs_tol=1e-12)
        np.testing.assert_allclose(run["grad"], np.cos(x) * x + np.sin(x), rtol=1e-12, atol=1e-12)
        c = 0.0
        for xi in x:
            c = c * 0.5 + math.cos(xi)
        assert math.isclose(run["carry"], c, rel_tol=1e-12)


def test_an_unusable_cache_directory_only_costs_a_compile(monkeypatch, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"a file where the cache directory should be")
    monkeypatch.setattr(settings, "cache_dir", str(blocker))
    monkeypatch.setattr(settings, "support_cache", True)
    make = _IR()
    for _ in range(2):
        assert _twice(support.load_or_compile("test-twice", make, target.host())) == 43.0
    assert make.calls == 2 and blocker.read_bytes().startswith(b"a file")
