"""The in-place division-like operators (review 4 finding 13): ``%=``, ``//=``, ``&=``,
``|=`` update the tensor in place (views and aliases see it), with PyTorch's dtype rules
and errors; ``remainder_``, ``floor_divide_``, ``true_divide_``; ``div`` / ``div_`` with
``rounding_mode``; ``&`` / ``|`` refuse what is not bool rather than answer logically.
Every value, gradient and error against PyTorch, both float dtypes, eager and compiled."""
import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = ("float32", "float64")


def _both(fn):
    """fn(lib) for torch and symgrad: (result or exception) of each."""
    out = []
    for lib in (torch, sg):
        try:
            out.append(fn(lib))
        except Exception as e:          # noqa: BLE001  (compared: type and text)
            out.append(e)
    return out


def _same(fn):
    want, got = _both(fn)
    if isinstance(want, Exception):
        assert type(got) is type(want) and str(got) == str(want), (got, want)
        return
    assert not isinstance(got, Exception), got
    for w, g in zip(want if isinstance(want, tuple) else (want,),
                    got if isinstance(got, tuple) else (got,)):
        w, g = w.numpy(), g.numpy()
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["%=", "//="])
def test_augmented_division_updates_views_and_aliases(op, dtype):
    def f(lib):
        x = lib.tensor([[370.0, -10.0], [-725.0, 5.5]], dtype=getattr(lib, dtype))
        col, alias = x[:, 0], x
        ns = {"col": col}
        exec(f"col {op} 360", ns)
        ns2 = {"a": alias}
        exec(f"a {op} 4", ns2)
        return x, col, ns["col"], ns2["a"]
    _same(f)


@pytest.mark.parametrize("op", ["%=", "//="])
def test_augmented_division_of_integers(op):
    def f(lib):
        c = lib.tensor([7, -9, 10]); alias = c
        ns = {"a": alias}
        exec(f"a {op} 4", ns)
        return c, ns["a"]
    _same(f)

    def mixed(lib):                     # int64 %= 2.5: the float result cannot be stored
        ns = {"a": lib.tensor([5, -5])}
        exec(f"a {op} 2.5", ns)
        return ns["a"]
    _same(mixed)


def test_augmented_logic_on_bool_updates_aliases():
    def f(lib):
        m = lib.tensor([True, True, False]); alias = m
        alias &= lib.tensor([True, False, True])
        n = lib.tensor([False, True, False]); al2 = n
        al2 |= lib.tensor([True, False, False])
        return m, n
    _same(f)


@pytest.mark.parametrize("op", ["&", "|"])
def test_logic_operators_refuse_floats(op):
    for a, b in (([1.0], [1.0]), ([True], 1.5)):
        _same(lambda lib: eval(f"x {op} y", {"x": lib.tensor(a), "y": b if not isinstance(
            b, list) else lib.tensor(b)}))
    _same(lambda lib: eval(f"x {op} y", {"x": lib.tensor([6, 5]), "y": lib.tensor([3, 1])}))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["remainder_", "floor_divide_", "true_divide_"])
def test_named_in_place_division(name, dtype):
    def f(lib):
        x = lib.tensor([[7.5, -7.5], [3.0, -0.5]], dtype=getattr(lib, dtype))
        row = x[1]
        r = getattr(row, name)(2)
        return x, r, row
    _same(f)
    _same(lambda lib: getattr(lib.tensor([7, -7]), name)(2))
    _same(lambda lib: getattr(lib.tensor([7, -7]), name)(2.5))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div_rounding_mode(mode, dtype):
    vals = [7.5, -7.5, 3.0, -0.5, 0.0, np.inf, np.nan, 1e30]
    _same(lambda lib: lib.div(lib.tensor(vals, dtype=getattr(lib, dtype)), 2,
                              rounding_mode=mode))
    _same(lambda lib: lib.tensor(vals, dtype=getattr(lib, dtype)).div(
        lib.tensor([-2.0], dtype=getattr(lib, dtype)), rounding_mode=mode))
    _same(lambda lib: lib.div(lib.tensor([7, -7, 9, -9, 0]), lib.tensor([2, 2, -4, -4, 3]),
                              rounding_mode=mode))
    _same(lambda lib: lib.div(lib.tensor([7, -7]), 2.5, rounding_mode=mode))

    def inplace(lib):
        x = lib.tensor([[7.5, -7.5], [3.0, -0.5]], dtype=getattr(lib, dtype))
        x[0].div_(2, rounding_mode=mode)
        return x
    _same(inplace)

    def ints_inplace(lib):
        x = lib.tensor([7, -7])
        x.div_(2, rounding_mode=mode)
        return x
    _same(ints_inplace)


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_mode_gradient_and_name(mode):
    names, grads = [], []
    for lib in (torch, sg):
        a = lib.tensor([5.0, -5.0], requires_grad=True)
        b = lib.tensor([2.0, 3.0], requires_grad=True)
        out = lib.div(a, b, rounding_mode=mode)
        names.append(type(out.grad_fn).__name__)
        out.sum().backward()
        grads.append((a.grad.numpy(), b.grad.numpy()))
    assert names[0] == names[1]
    for w, g in zip(*grads):
        np.testing.assert_array_equal(g, w)


def test_div_rounding_mode_errors():
    _same(lambda lib: lib.div(lib.tensor([1.0]), 2, rounding_mode="round"))
    _same(lambda lib: lib.tensor([1, 2]).div_(2))


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_div_rounding_mode_compiled(backend, dtype):
    x = np.array([7.5, -7.5, 3.0, -0.5, 0.0, 1e30], dtype)
    for mode in ("trunc", "floor"):
        f = sg.compile(lambda v: sg.div(v, 2.0, rounding_mode=mode) + v % 3, backend=backend)
        want = torch.div(torch.tensor(x), 2.0, rounding_mode=mode) + torch.tensor(x) % 3
        np.testing.assert_array_equal(np.asarray(f(sg.tensor(x)).numpy()), want.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_augmented_remainder_gradient(dtype):
    grads = []
    for lib in (torch, sg):
        w = lib.tensor([370.0, -10.0, 725.0], dtype=getattr(lib, dtype), requires_grad=True)
        y = w * 2
        y %= 360
        y.sum().backward()
        grads.append(w.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])
