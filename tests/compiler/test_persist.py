"""The disk cache keyed by the traced program (symgrad/compiler/persist.py): a hit runs
no stage after tracing, and programs that differ only in what those stages do —
transform, argnums, dtypes, a user formula registered under the same name — never
share a key."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import symgrad
from symgrad.compiler import persist, stages, transforms
from symgrad.compiler.api import Compiled
from symgrad.config import settings
from symgrad.graph.node import structural_key
from codegen import backend, cache

_ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture
def disk(monkeypatch, tmp_path):
    monkeypatch.setattr(settings, "cache_dir", str(tmp_path))
    monkeypatch.setattr(settings, "disk_cache", True)
    return tmp_path


@pytest.fixture
def stage_calls(monkeypatch):
    """Counts calls of the stages a disk hit must skip."""
    calls = {"grad_graph": 0, "fuse": 0, "compile_program": 0}

    def count(module, name):
        real = getattr(module, name)

        def wrapper(*a, **k):
            calls[name] += 1
            return real(*a, **k)
        monkeypatch.setattr(module, name, wrapper)
    count(transforms, "grad_graph")
    count(stages, "fuse")
    count(backend, "compile_program")
    return calls


def _trace_key(c: Compiled, *args):
    key, _, names = c._signature(args)
    tr = c._trace(args, key, names)
    return persist.trace_key(tr, key, c.transform), structural_key(
        list(tr.out_nodes) + tr.input_nodes)


def _entries(folder, section):
    out = []
    for path in Path(folder).rglob("*.obj"):
        sections = cache.decode(path.read_bytes(), path.stem)
        if sections is not None and section in sections:
            out.append(path)
    return out


def _fn(x, y):
    return ((x * y).sin() + x * 3).sum()


X = np.linspace(-1, 1, 6).reshape(2, 3)
Y = np.linspace(0.5, 2, 6).reshape(2, 3)


def _variants():
    """Compiled functions over one forward graph (the same traced program) that must
    compile to different code."""
    return {
        "compile": (symgrad.compile(_fn), (X, Y)),
        "grad": (symgrad.grad(_fn), (X, Y)),
        "grad argnums=1": (symgrad.grad(_fn, argnums=1), (X, Y)),
        "grad argnums=(0,)": (symgrad.grad(_fn, argnums=(0,)), (X, Y)),
        "grad argnums=(0, 1)": (symgrad.grad(_fn, argnums=(0, 1)), (X, Y)),
        "grad argnums=(1, 0)": (symgrad.grad(_fn, argnums=(1, 0)), (X, Y)),
        "value_and_grad": (symgrad.value_and_grad(_fn), (X, Y)),
        "value_and_grad argnums=1": (symgrad.value_and_grad(_fn, argnums=1), (X, Y)),
        "jacobian": (symgrad.jacobian(_fn), (X, Y)),
        "hessian": (symgrad.hessian(_fn), (X, Y)),
        "hessian argnums=1": (symgrad.hessian(_fn, argnums=1), (X, Y)),
    }


def test_same_forward_graph_different_transform_or_argnums_never_share_a_key(disk):
    keys, graphs = {}, set()
    for name, (c, args) in _variants().items():
        k, graph = _trace_key(c, *args)
        assert k is not None, name
        keys[name] = k
        graphs.add(graph)
    assert len(graphs) == 1                       # the premise: one traced program
    assert len(set(keys.values())) == len(keys)
    # ... nor do dtypes, shapes or a different function body
    more = {_trace_key(symgrad.grad(_fn), X.astype(np.float32), Y.astype(np.float32))[0],
            _trace_key(symgrad.grad(_fn), X.astype(np.float32), Y)[0],
            _trace_key(symgrad.grad(_fn), X.ravel(), Y.ravel())[0],
            _trace_key(symgrad.grad(lambda x, y: ((x * y).cos() + x * 3).sum()), X, Y)[0],
            _trace_key(symgrad.grad(lambda x, y: ((x * y).sin() + x * 2).sum()), X, Y)[0]}
    assert None not in more and not more & set(keys.values()) and len(more) == 5


def test_jvp_and_vjp_of_one_forward_graph_never_share_a_key(disk):
    f = lambda x, y: x * y.exp()                               # noqa: E731
    keys = {_trace_key(Compiled(f, transform=t), X, Y)[0]
            for t in (transforms.Identity(), transforms.Jvp(1), transforms.Vjp(1),
                      transforms.Jacobian(0), transforms.Jacobian(1))}
    assert None not in keys and len(keys) == 5


def test_every_variant_is_right_when_answered_from_disk(disk, stage_calls):
    """Each variant twice, the second time by a new compiled function in the same
    process: answered from the disk cache (nothing after tracing runs), same results as
    the numpy backend."""
    for name, (c, args) in _variants().items():
        want = Compiled(c.fn, transform=c.transform, backend="numpy")(*args)
        cold = c(*args)
        before = dict(stage_calls)
        warm = Compiled(c.fn, transform=c.transform, backend="llvm")(*args)
        assert stage_calls == before, name
        for a, b, w in zip(_leaves(cold), _leaves(warm), _leaves(want)):
            np.testing.assert_array_equal(a, b, err_msg=name)
            np.testing.assert_allclose(a, w, rtol=1e-12, atol=1e-12, err_msg=name)


def _leaves(tree):
    return symgrad.graph.pytree.flatten(tree)[0]


def test_a_hit_runs_no_stage_and_inspection_still_works(disk, stage_calls):
    loss = lambda x: (3 * (x + 2) ** 2).mean()                  # noqa: E731
    x = np.ones((2, 2))
    first = symgrad.value_and_grad(loss)
    value, grad = first(x)
    text = first.lower(x).as_text()
    calls = dict(stage_calls)
    f = symgrad.value_and_grad(loss)
    v2, g2 = f(x)
    assert stage_calls == calls                    # no differentiation, fusion or codegen
    assert float(v2) == float(value) == 27.0 and g2.tolist() == grad.tolist()
    (entry,) = f._cache.values()
    assert entry.exe.from_cache and callable(entry.exe._plan)    # no schedule made yet
    # the stages run on demand, giving what a cold compile gives
    assert entry.lowered.as_text() == text == f.lower(x).as_text()
    assert stage_calls["grad_graph"] == calls["grad_graph"] + 2
    assert set(map(str, entry.lowered.formulas().values())) == {"a0 + 2", "3*a0**2",
                                                                     "1.5*a0"}
    assert "(0.75 * (2 * a0))" in entry.lowered.as_text()      # the order it runs in
    assert "fully native" in entry.exe.as_text("program")          # schedule checked
    assert "define" in entry.exe.as_text("llvm")
    # derivatives the hit skipped are made when eager mode needs them
    t = symgrad.tensor(x, requires_grad=True)
    loss(t).backward()
    assert t.grad.tolist() == [[4.5, 4.5], [4.5, 4.5]]
    assert f.cache_info().misses == 1 and f(x)[1].tolist() == grad.tolist()


def test_closures_constants_and_nesting(disk, stage_calls):
    w = symgrad.tensor([1.0, 2.0, 3.0])
    f = lambda p: {"loss": (p["a"] * w).sum() + (2.0 * p["b"]).sum()}      # noqa: E731
    params = {"a": np.ones(3), "b": np.full(2, 0.5)}
    g = symgrad.grad(lambda p: f(p)["loss"])
    want = g(params)
    calls = dict(stage_calls)
    again = symgrad.grad(lambda p: f(p)["loss"])
    got = again(params)
    assert stage_calls == calls                                   # answered from disk
    assert got["a"].tolist() == want["a"].tolist() == [1.0, 2.0, 3.0]
    assert got["b"].tolist() == [2.0, 2.0]
    w.data.mul_(2)                           # a closed-over tensor is an input, not a constant
    assert again(params)["a"].tolist() == [2.0, 4.0, 6.0]
    keys = [_trace_key(symgrad.grad(lambda x: (x * c).sum()), np.ones(3))[0]
            for c in (2.0, 3.0, np.arange(3.0), np.arange(3.0) + 1)]
    # numbers are constants of the program; a float array it reaches is an input read at
    # each call (as torch.compile reads it), so two such arrays share one program
    assert None not in keys and len(set(keys[:3])) == 3 and keys[2] == keys[3]
    for c in (np.arange(3.0), np.arange(3.0) + 1):
        assert symgrad.grad(lambda x: (x * x * c).sum())(np.ones(3)).tolist() == \
            (2 * c).tolist()
    other = symgrad.tensor([1.0, 2.0, 3.0, 4.0])
    assert _trace_key(symgrad.grad(lambda x: (x * w).sum()), np.ones(3))[0] != \
        _trace_key(symgrad.grad(lambda x: (x * other[:3]).sum()), np.ones(3))[0]


def test_programs_a_key_cannot_describe_are_not_stored(disk):
    class Key:
        def __repr__(self):
            return "'a'"
    key = Key()
    k, _ = _trace_key(symgrad.grad(lambda d: d[key].sum()), {key: np.ones(2)})
    assert k is None
    op = symgrad.elementwise("persist_test_np", lambda x: x * 2, numpy=lambda x: x * 2)
    g = symgrad.grad(lambda x: symgrad.apply(op, x).sum())
    assert _trace_key(g, np.ones(2))[0] is None
    assert g(np.ones(2)).tolist() == [2.0, 2.0]
    assert not _entries(disk, "meta") and len(_entries(disk, "object")) == 1

    class MyGrad(transforms.Grad):
        pass
    assert _trace_key(Compiled(_fn, transform=MyGrad()), X, Y)[0] is None


def test_user_formula_redefined_in_process_changes_key_and_gradient(disk):
    op = symgrad.elementwise("persist_test_sq", lambda x: x ** 2)
    g = symgrad.grad(lambda x: symgrad.apply(op, x).sum())
    k1, _ = _trace_key(g, np.array([3.0]))
    assert g(np.array([3.0])).tolist() == [6.0]
    op = symgrad.elementwise("persist_test_sq", lambda x: x ** 3)
    g = symgrad.grad(lambda x: symgrad.apply(op, x).sum())
    k2, _ = _trace_key(g, np.array([3.0]))
    assert k1 != k2
    assert g(np.array([3.0])).tolist() == [27.0]              # not the old derivative
    x = symgrad.tensor([3.0], requires_grad=True)
    symgrad.apply(op, x).sum().backward()
    assert x.grad.tolist() == [27.0]


_USER_OP_CHILD = textwrap.dedent("""
    import sys, numpy as np, sympy, symgrad, codegen.backend as B
    power = int(sys.argv[1])
    op = symgrad.elementwise("persist_test_op", lambda x: x ** power + sympy.sin(x))
    g = symgrad.value_and_grad(lambda x: symgrad.apply(op, x).sum())
    value, grad = g(np.array([3.0]))
    print(repr(float(value)), repr(float(grad[0])), B.stats["compiled"])
""")


def test_user_formulas_under_one_name_in_two_processes(tmp_path):
    env = dict(os.environ, SYMGRAD_CACHE_DIR=str(tmp_path), SYMGRAD_DISK_CACHE="1",
               PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def run(power):
        r = subprocess.run([sys.executable, "-c", _USER_OP_CHILD, str(power)], env=env,
                           capture_output=True, text=True, timeout=180, cwd=_ROOT)
        assert r.returncode == 0, r.stderr[-3000:]
        value, grad, compiled = r.stdout.split()
        return float(value), float(grad), int(compiled)

    for power in (2, 3, 2, 3):                     # the second round: from the disk cache
        value, grad, compiled = run(power)
        assert value == pytest.approx(3.0 ** power + np.sin(3.0), rel=1e-14)
        assert grad == pytest.approx(power * 3.0 ** (power - 1) + np.cos(3.0), rel=1e-14)
    assert compiled == 0
    assert len(_entries(tmp_path, "meta")) == 2 and len(_entries(tmp_path, "object")) == 2


def test_corrupt_stale_or_dangling_entries_are_rebuilt(disk, stage_calls):
    loss = lambda x: (x.exp() * 2).sum()                          # noqa: E731
    x = np.linspace(0, 1, 5)
    want = symgrad.grad(loss)(x)
    (meta_path,) = _entries(disk, "meta")
    good = meta_path.read_bytes()
    meta = json.loads(cache.decode(good, meta_path.stem)["meta"])
    wrong_shape = dict(meta, interface=dict(meta["interface"],
                                            inputs=[["x", "float64", [6]]]))
    bad_entries = {
        "truncated": good[:-7],
        "garbage": b"garbage",
        "bad json": cache.encode(meta_path.stem, {"meta": b"{not json"}),
        "missing fields": cache.encode(meta_path.stem, {"meta": b"{}"}),
        "dangling": cache.encode(meta_path.stem, {"meta": json.dumps(
            dict(meta, program="0" * 48)).encode()}),
        "other interface": cache.encode(meta_path.stem, {"meta": json.dumps(
            wrong_shape).encode()}),
    }
    for what, data in bad_entries.items():
        meta_path.write_bytes(data)
        before = stage_calls["grad_graph"]
        got = symgrad.grad(loss)(x)
        assert stage_calls["grad_graph"] == before + 1, what      # rebuilt ...
        np.testing.assert_array_equal(got, want, err_msg=what)
        assert cache.decode(meta_path.read_bytes(), meta_path.stem) is not None, what
        assert json.loads(cache.decode(meta_path.read_bytes(), meta_path.stem)["meta"]) == meta
        before = stage_calls["grad_graph"]
        symgrad.grad(loss)(x)
        assert stage_calls["grad_graph"] == before, what           # ... and valid again


def test_hybrid_program_from_disk_makes_its_schedule_when_called(disk, stage_calls):
    """A program with numpy steps needs its schedule to run: a hit makes it then (the
    stages run, LLVM does not), and checks it against the cached code's interface."""
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    f = lambda x: x.prod(1).sum()                                # noqa: E731
    value, grad = symgrad.value_and_grad(f)(x)
    calls = dict(stage_calls)
    warm = symgrad.value_and_grad(f)
    v2, g2 = warm(x)
    assert stage_calls["compile_program"] == calls["compile_program"]
    (entry,) = warm._cache.values()
    assert entry.exe.from_cache and entry.exe.interface.hybrid
    assert "runs through numpy: prod_others" in entry.exe.as_text("program")
    assert float(v2) == float(value)
    np.testing.assert_array_equal(g2, grad)
    np.testing.assert_allclose(g2, [[np.prod(np.delete(r, j)) for j in range(4)] for r in x])
