"""Caching (keys, LRU bound, explained misses) and the errors users get for bad input."""
import logging

import numpy as np
import pytest

import symgrad
from symgrad.config import settings
from symgrad.errors import TracerBoolError


def test_cache_hits_and_misses(backend):
    f = symgrad.compile(lambda x: (x * 2).sum(), backend=backend)
    f(np.ones(8))
    f(np.ones(8) * 3)
    f(np.ones(16))
    info = f.cache_info()
    assert (info.hits, info.misses, info.entries) == (1, 2, 2)
    # (llvm: the size is dynamic from now on, which the reason goes on to say)
    assert f.last_miss_reason.startswith("x: shape (8,) → (16,)")


def test_hits_count_calls_native_code_hands_back(backend):
    """Strided arguments go through the checked path (the native entry refuses them):
    still hits, never subtracted from the count."""
    f = symgrad.compile(lambda x: x * 2, backend=backend)
    x = np.ones((4, 4))
    for _ in range(5):
        f(x.T[::2])
    for _ in range(5):
        f(np.ones((2, 4)))
    g = symgrad.compile(lambda t: t.sum() * 2, backend=backend)
    t = symgrad.ones(4, 4)
    for _ in range(5):
        g(t.t())
        g(t)
    assert f.cache_info().hits == g.cache_info().hits == 9


def test_new_shape_never_reuses_code(backend):
    f = symgrad.compile(lambda x: x.sum(), backend=backend)
    assert float(f(np.ones(3))) == 3.0
    assert float(f(np.ones(5))) == 5.0
    assert float(f(np.ones((2, 5)))) == 10.0


def test_dtype_and_requires_grad_are_part_of_the_key(backend):
    f = symgrad.compile(lambda x: x * 2, backend=backend)
    f(np.ones(2, dtype=np.float32))
    f(np.ones(2, dtype=np.float64))
    assert f.last_miss_reason == "x: dtype float32 → float64"
    f(symgrad.ones(2, dtype=symgrad.float64))
    assert "ndarray → tensor" in f.last_miss_reason


def test_static_argnums(backend):
    f = symgrad.compile(lambda x, n: x ** n, static_argnums=(1,), backend=backend)
    np.testing.assert_allclose(f(np.array([2.0]), 3), [8.0])
    np.testing.assert_allclose(f(np.array([2.0]), 2), [4.0])
    assert f.last_miss_reason == "static arguments changed: (3,) → (2,)"
    with pytest.raises(TypeError, match="hashable"):
        f(np.array([2.0]), [1])


def test_lru_bound(backend):
    f = symgrad.compiler.Compiled(lambda x: x + 1, backend=backend, maxsize=2)
    for n in range(1, 5):
        f(np.ones(n))
    assert f.cache_info().entries == 2


def test_recompile_log(backend, caplog):
    f = symgrad.compile(lambda x: x - 1, backend=backend)
    settings.log.add("recompiles")
    try:
        with caplog.at_level(logging.WARNING, logger="symgrad.recompiles"):
            f(np.ones(2))
            f(np.ones(3))
    finally:
        settings.log.discard("recompiles")
    assert any("x: shape (2,) → (3,)" in r.getMessage() for r in caplog.records)


def test_numpy_in_numpy_out_tensor_in_tensor_out(backend):
    f = symgrad.value_and_grad(lambda x: (x ** 2).sum(), backend=backend)
    v, g = f(np.arange(3.0))
    assert isinstance(g, np.ndarray) and np.asarray(v).shape == ()
    v, g = f(symgrad.arange(3.0))
    assert isinstance(v, symgrad.Tensor) and isinstance(g, symgrad.Tensor)


def test_python_control_flow_on_traced_value_names_the_line(backend):
    def f(x):
        if x.sum() > 0:          # the line the error must name
            return x
        return -x

    with pytest.raises(TracerBoolError) as e:    # (by default the call runs uncompiled,
        symgrad.compile(f, backend=backend, fullgraph=True)(np.ones(3))  # as torch.compile's)
    msg = str(e.value)
    assert __file__ in msg and "if x.sum() > 0:" in msg
    assert "symgrad.where" in msg and "static_argnums" in msg
    assert isinstance(e.value, TypeError)


def test_bad_arguments(backend):
    f = symgrad.grad(lambda x: (x * x).sum(), backend=backend)
    with pytest.raises(TypeError, match="argument x: expected a Tensor, numpy array or Python "
                                        "number, got str"):
        f("abc")
    with pytest.raises(TypeError, match="argument 'x'.*int64.*floating-point"):
        f(np.array([1, 2]))
    with pytest.raises(TypeError, match=r"scalar-output functions\. Output had shape: \(3,\)"):
        symgrad.grad(lambda x: x * 2, backend=backend)(np.ones(3))
    with pytest.raises(TypeError):
        symgrad.compile(lambda x: x, backend=backend)(np.ones(2), np.ones(2))
    assert symgrad.compile(lambda x: x * 2, backend=backend)(x=np.ones(2)).tolist() == [2, 2]
    with pytest.raises(TypeError, match="unexpected keyword argument 'y'"):
        symgrad.compile(lambda x: x, backend=backend)(np.ones(2), y=np.ones(2))
    with pytest.raises(TypeError, match="callable"):
        symgrad.compile(3)


def test_decorator_forms(backend):
    @symgrad.compile
    def a(x):
        return x + 1

    @symgrad.compile(backend=backend)
    def b(x):
        return x + 2

    assert float(a(np.float64(1.0))) == 2.0 and float(b(np.float64(1.0))) == 3.0
