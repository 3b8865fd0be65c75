"""nn.functional.pad and the padding layers against PyTorch: values and gradients of every
mode (constant with a value, reflect, replicate, circular) over 1, 2 and 3 padded dims,
negative pads, batched and unbatched inputs, float32 and float64, integer and bool
inputs; eager and compiled (``value_and_grad`` on the LLVM and numpy backends, and over
``functional_call`` of a module holding a padding layer); grad_fn names; reprs; PyTorch's
errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import DTYPES, close, module_compiled_matches, pair, same_error

rng = np.random.default_rng(3)

# (input shape, pad, mode, value)
CASES = [
    ((2, 3, 5), (1, 2), "constant", None),
    ((2, 3, 5), (2, 1, 1, 0), "constant", 1.5),
    ((2, 3, 5), (-1, 2, 3, -2), "constant", -0.5),
    ((4, 5), (0, 0), "constant", None),
    ((2, 3, 4, 5), (1, 1, 2, 0, 1, 3), "constant", 2.0),
    ((5,), (-4, 0), "constant", None),
    ((2, 3, 5), (2, 3), "reflect", None),
    ((3, 5), (4, 0), "reflect", 0.0),
    ((2, 3, 5), (-1, 2), "reflect", None),
    ((2, 3, 5), (-2, 3), "reflect", None),
    ((2, 3, 4, 5), (1, 2, 3, 1), "reflect", None),
    ((3, 4, 5), (-1, 1, 2, -3), "reflect", None),
    ((2, 3, 4, 5, 6), (1, 2, 3, 1, 2, 0), "reflect", None),
    ((3, 4, 5, 6), (2, 1, 0, 1, 1, 1), "reflect", None),
    ((2, 3, 5), (3, 4), "replicate", None),
    ((2, 3, 5), (-6, 2), "replicate", None),
    ((2, 3, 4, 5), (2, 0, 1, 3), "replicate", None),
    ((1, 2, 3, 4, 5), (1, 1, 2, 0, 0, 3), "replicate", None),
    ((2, 3, 5), (2, 5), "circular", None),
    ((2, 3, 5), (-1, 3), "circular", None),
    ((3, 4, 5), (2, 1, 3, 4), "circular", None),
    ((2, 3, 4, 5), (-1, 2, 1, -2), "circular", None),
    ((2, 1, 3, 4, 5), (1, 1, 2, 0, 3, 2), "circular", None),
    ((3, 4), (1, 1), "circular", None),
]


def _run(lib, x, p, mode, value):
    return lib.nn.functional.pad(x, p, mode=mode, value=value)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, p, mode, value", CASES)
def test_eager_values_gradients_and_grad_fn_equal_torch(shape, p, mode, value, dtype):
    x = rng.normal(size=shape).astype(dtype)
    sx, tx = pair(x)
    s_out, t_out = _run(sg, sx, p, mode, value), _run(torch, tx, p, mode, value)
    close(s_out, t_out, dtype, "output", factor=0)
    g = rng.normal(size=tuple(t_out.shape)).astype(dtype)
    s_out.backward(sg.tensor(g))
    t_out.backward(torch.tensor(g))
    close(sx.grad, tx.grad, dtype, "grad input")
    want = t_out.grad_fn.name().removeprefix("torch::autograd::")
    assert type(s_out.grad_fn).__name__ == want


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, p, mode, value", [CASES[i] for i in (2, 4, 9, 11, 12, 15,
                                                                      17, 21, 22)])
def test_compiled_gradients_equal_torch(shape, p, mode, value, dtype, backend):
    x = rng.normal(size=shape).astype(dtype)
    tx = torch.tensor(x, requires_grad=True)
    t_out = _run(torch, tx, p, mode, value)
    c = rng.normal(size=tuple(t_out.shape)).astype(dtype)
    t_loss = (torch.sin(t_out) * torch.tensor(c)).sum()
    t_loss.backward()
    value_, grad = sg.value_and_grad(
        lambda v: (sg.sin(_run(sg, v, p, mode, value)) * sg.tensor(c)).sum(),
        backend=backend)(x)
    terms = float((torch.sin(t_out) * torch.tensor(c)).abs().sum())   # the loss may cancel
    close(np.asarray(value_), t_loss, dtype, "loss", factor=10, scale=terms)
    close(np.asarray(grad), tx.grad, dtype, "grad input", factor=10)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_second_derivative_equals_torch(mode):
    x = rng.normal(size=(2, 3, 4, 5))
    (sx, tx) = pair(x)
    res = {}
    for lib, xv in ((torch, tx), (sg, sx)):
        out = lib.nn.functional.pad(xv, (2, 1, 1, 3), mode=mode)
        gx, = lib.autograd.grad((out ** 3).sum(), xv, create_graph=True)
        res[lib], = lib.autograd.grad((gx * lib.tensor(x)).sum(), xv)
    close(res[sg], res[torch], np.float64, "d2/dx2")


@pytest.mark.parametrize("mode, p", [("constant", (1, 2, -1, 1)), ("reflect", (1, 1)),
                                     ("replicate", (2, 1, 0, 1)), ("circular", (1, 2))])
def test_integer_inputs_equal_torch(mode, p):
    x = rng.integers(-9, 9, size=(2, 3, 4))
    got = sg.nn.functional.pad(sg.tensor(x), p, mode)
    want = torch.nn.functional.pad(torch.tensor(x), p, mode)
    assert got.dtype == sg.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("value", [2.7, -2.7, 1, 0])
def test_constant_value_is_cast_as_torch_casts_it(value):
    for dt in (np.int64, np.int32, np.bool_):
        x = rng.integers(0, 3, size=(2, 3)).astype(dt)
        got = sg.nn.functional.pad(sg.tensor(x), (1, 2, 1, 0), value=value)
        want = torch.nn.functional.pad(torch.tensor(x), (1, 2, 1, 0), value=value)
        assert got.numpy().dtype == want.numpy().dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


# ---- modules ---------------------------------------------------------------------------------
MODULES = [
    lambda m: m.nn.ZeroPad1d(2),
    lambda m: m.nn.ZeroPad2d(2),
    lambda m: m.nn.ZeroPad2d((1, 1, 2, 0)),
    lambda m: m.nn.ZeroPad3d((1, 0, 2, 1, 0, 1)),
    lambda m: m.nn.ConstantPad1d(2, 3.5),
    lambda m: m.nn.ConstantPad1d((1, 2), 3),
    lambda m: m.nn.ConstantPad2d((1, 2, 0, 1), -1.0),
    lambda m: m.nn.ConstantPad3d(1, 0.5),
    lambda m: m.nn.ReflectionPad1d(2),
    lambda m: m.nn.ReflectionPad1d([1, 3]),
    lambda m: m.nn.ReflectionPad2d((1, 0, 2, 1)),
    lambda m: m.nn.ReflectionPad3d(1),
    lambda m: m.nn.ReplicationPad1d((3, 1)),
    lambda m: m.nn.ReplicationPad2d(1),
    lambda m: m.nn.ReplicationPad3d((2, 1, 0, 1, 1, 0)),
    lambda m: m.nn.CircularPad1d(1),
    lambda m: m.nn.CircularPad2d((1, 2, 3, 0)),
    lambda m: m.nn.CircularPad3d(1),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("build", MODULES)
def test_module_repr_padding_forward_and_backward_equal_torch(build, dtype):
    s, t = build(sg), build(torch)
    assert repr(s) == repr(t)
    assert s.padding == t.padding and type(s.padding) is type(t.padding)
    rank = len(t.padding) // 2
    for shape in ((2, 3, 4, 5, 6)[:rank + 2], (3, 4, 5, 6)[:rank + 1]):
        x = rng.normal(size=shape).astype(dtype)
        sx, tx = pair(x)
        s_out, t_out = s(sx), t(tx)
        close(s_out, t_out, dtype, "output", factor=0)
        g = rng.normal(size=tuple(t_out.shape)).astype(dtype)
        s_out.backward(sg.tensor(g))
        t_out.backward(torch.tensor(g))
        close(sx.grad, tx.grad, dtype, "grad input")


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_module_with_padding_layers_equals_torch(dtype):
    """value_and_grad over functional_call of Conv2d + ReflectionPad2d + ReplicationPad2d."""
    def build(m):
        return m.nn.Sequential(m.nn.ReflectionPad2d((1, 2, 2, 1)), m.nn.Conv2d(2, 3, 3),
                               m.nn.ReplicationPad2d(1), m.nn.ZeroPad2d((0, 1, 1, 0)),
                               m.nn.Tanh())
    module_compiled_matches(build, rng.normal(size=(2, 2, 5, 6)).astype(dtype), dtype)


# ---- errors ----------------------------------------------------------------------------------
def _F(m):
    return m.nn.functional


ERRORS = [
    lambda m: _F(m).pad(m.ones(2, 3), (1,)),
    lambda m: _F(m).pad(m.ones(2, 3), (1,), mode="foo"),
    lambda m: _F(m).pad(m.ones(2, 3), (1, 1), mode="zeros"),
    lambda m: _F(m).pad(m.ones(2, 3), (1, 1, 1, 1, 1, 1)),
    lambda m: _F(m).pad(m.ones(2, 3), (1.5, 1)),
    lambda m: _F(m).pad(m.ones(2, 3), (True, 1)),
    lambda m: _F(m).pad(m.ones(2, 3), 1),
    lambda m: _F(m).pad(m.ones(2, 3), (1, 1), None),
    lambda m: _F(m).pad(m.ones(2, 3), (1, 1), "constant", "a"),
    lambda m: _F(m).pad(m.ones(2, 3), (1, 1), "reflect", 1.0),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (-6, 0)),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (1, 1, 0, -5)),
    lambda m: _F(m).pad(m.ones(4), (1, 1), "reflect"),
    lambda m: _F(m).pad(m.ones(4, 5), (1, 1, 1, 1), "reflect"),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (1, 1, 1, 1, 1, 1), "replicate"),
    lambda m: _F(m).pad(m.ones(2, 3, 4, 5, 6), (1, 1, 1, 1), "circular"),
    lambda m: _F(m).pad(m.ones(2, 3, 4, 5, 6, 7), (1, 1), "reflect"),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (), "reflect"),
    lambda m: _F(m).pad(m.ones(1, 2, 3), (3, 3), "reflect"),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (5, 0, 0, 0), "reflect"),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (0, 0, 0, 4), "reflect"),
    lambda m: _F(m).pad(m.ones(2, 3, 4, 5), (0, 0, 0, 0, 3, 0), "reflect"),
    lambda m: _F(m).pad(m.ones(1, 3, 4), (-2, -2), "reflect"),
    lambda m: _F(m).pad(m.ones(1, 3, 4), (-4, 0), "replicate"),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (-6, 0), "replicate"),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (-3, -3, -2, -2), "reflect"),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (-3, -3, -2, -2), "replicate"),
    lambda m: _F(m).pad(m.ones(2, 0, 4), (1, 1), "reflect"),
    lambda m: _F(m).pad(m.ones(2, 3, 0), (1, 1), "replicate"),
    lambda m: _F(m).pad(m.ones(3, 0, 5), (1, 1, 1, 1), "reflect"),
    lambda m: _F(m).pad(m.ones(2, 3, 0, 5, 4), (1, 1, 1, 1, 1, 1), "replicate"),
    lambda m: _F(m).pad(m.ones(2, 3).bool(), (1, 1), "reflect"),
    lambda m: _F(m).pad(m.ones(2, 3, 4).bool(), (1, 1, 1, 1), "replicate"),
    lambda m: _F(m).pad(m.ones(1, 2, 3), (4, 4), "circular"),
    lambda m: _F(m).pad(m.ones(2, 3, 0), (1, 1), "circular"),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (-6, 0), "circular"),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (0, 0, 5, 0), "circular"),
    lambda m: _F(m).pad(m.ones(3, 4, 5), (0, 0, -6, 0), "circular"),
    lambda m: m.nn.ConstantPad1d(1),
    lambda m: m.nn.ReflectionPad2d(1)(m.ones(4, 5)),
    lambda m: m.nn.ZeroPad2d(1)(m.ones(4)),
    lambda m: m.nn.CircularPad1d(1)(m.ones(4)),
    lambda m: m.nn.CircularPad2d(1)(m.ones(2, 3, 4, 5, 6)),
    lambda m: m.nn.CircularPad3d(1)(m.ones(3, 4, 5)),
    lambda m: m.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")(m.ones(2, 3, 0, 8)),
]


@pytest.mark.parametrize("build", ERRORS)
def test_bad_input_raises_pytorchs_error(build):
    same_error(build)
