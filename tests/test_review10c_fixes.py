"""Regression tests for review10's findings #1, #5, #9 and #20 (each against torch 2.13,
eager or ``torch.compile(backend="eager")``, and jax.jit where torch has no answer)."""
import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = [(sg.float32, torch.float32), (sg.float64, torch.float64)]

_OPERANDS = {
    "int64": lambda L: L.arange(3),
    "int32": lambda L: L.tensor([1, 2, 3], dtype=L.int32),
    "bool": lambda L: L.tensor([True, False]),
    "float16": lambda L: L.ones(2, dtype=L.float16),
    "float32": lambda L: L.ones(2),
    "float64": lambda L: L.ones(2, dtype=L.float64),
    "int32_0d": lambda L: L.tensor(3, dtype=L.int32),
}


@pytest.mark.parametrize("value,operand,reflected", [
    (2.5, "int64", False), (2.5, "int32_0d", True), (2.5, "bool", False),
    (2.5, "float16", True), (2.5, "float64", False), (2, "int32", True), (True, "int64", False),
    (np.float32(2.5), "int64", True), (np.float64(2.5), "float32", False),
    (np.float64(2.5), "int32", False), (np.int32(2), "bool", True)], ids=repr)
def test_compiled_number_argument_promotes_as_torch_compile(value, operand, reflected):
    """#1, #9a: a Python number argument of a compiled function promotes as a Python
    scalar (int tensor + 2.5: float32); a numpy scalar as a 0-d tensor of its dtype."""
    def f(x, y):
        return y + x if reflected else x + y

    torch._dynamo.reset()
    want = torch.compile(f, backend="eager", dynamic=False)(_OPERANDS[operand](torch), value)
    got = sg.compile(f)(_OPERANDS[operand](sg), value)
    assert str(got.dtype) == str(want.dtype)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("sdt,tdt", DTYPES)
def test_compiled_float_argument_mixed_ops(sdt, tdt):
    """#1: where/clamp/mul with a float argument and an integer tensor: torch's dtype."""
    def f(x, y, lib):
        return lib.where(x > 1, x * y, lib.clamp(x, max=y)) + (x > 0) * y

    torch.set_default_dtype(tdt)
    try:
        want = f(torch.arange(4), 1.5, torch)
    finally:
        torch.set_default_dtype(torch.float32)
    sg.set_default_dtype(sdt)
    try:
        got = sg.compile(lambda x, y: f(x, y, sg))(sg.arange(4), 1.5)
    finally:
        sg.set_default_dtype(sg.float32)
    assert str(got.dtype) == str(want.dtype)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_numpy_float32_scalar_argument_is_float32_as_jax_jit():
    """#9a: jax.jit(lambda x: x * 2)(np.float32(3)) is float32; so is symgrad's."""
    jax = pytest.importorskip("jax")
    want = jax.jit(lambda x: x * 2)(np.float32(3))
    got = sg.jit(lambda x: x * 2)(np.float32(3))
    assert np.asarray(got).dtype == np.float32 and want.dtype == np.float32
    assert got.item() == float(want)


_NON_NUMBERS = ["x == None", "x != None", "x == 'a'", "x != 'a'", "x in [None, 'a']",
                "None == x", "x == [1, 2]", "x == object()", "x < None", "x >= 'a'",
                "x in [x]"]


@pytest.mark.parametrize("expr", _NON_NUMBERS)
def test_comparison_with_a_non_number_falls_back_to_python(expr):
    """#5: ``t == None`` is False and ``t != None`` True (Python's fallback), ``t < None``
    Python's TypeError, as PyTorch's."""
    def run(L):
        try:
            return eval(expr, {}, {"x": L.ones(2)})
        except TypeError as e:
            return ("TypeError", str(e))
    want, got = run(torch), run(sg)
    assert got == want


_BOOL_PRODUCTS = ["T(1,2)@T(2,1)", "T(2)@T(2)", "T(2,2)@T(2)", "T(2,3,4)@T(4)",
                  "T(2,3,4)@T(4,2)", "T(2,3)@T(2,3,4)", "T(3)@T(2,3,4)", "T(2,3,4)@T(2,4,5)",
                  "T(1,2)@T(3,1)", "T(0)@T(0)", "T(2,0)@T(0)", "T(0,3)@T(3)",
                  "T(2,3,0)@T(2,0,4)", "L.bmm(T(2,3,4),T(2,4,5))", "L.mm(T(2,0),T(0,2))",
                  "L.dot(T(2),T(2))", "L.mv(T(2,2),T(2))", "T(2,3).mT@T(2,3)"]


@pytest.mark.parametrize("expr", _BOOL_PRODUCTS)
def test_bool_matrix_products_raise_torchs_error(expr):
    """#9b: ``bool @ bool`` raises PyTorch's NotImplementedError naming its kernel
    ("addmm_impl_cpu_", "addmv_impl_cpu", "dot", "bmm"); empty products still run."""
    def run(L):
        def T(*shape):
            return L.ones(*shape, dtype=L.bool)
        try:
            r = eval(expr, {"T": T, "L": L})
        except (NotImplementedError, RuntimeError) as e:
            return (type(e).__name__, str(e))
        return (tuple(r.shape), str(r.dtype), r.numpy().tolist())
    assert run(sg) == run(torch)


@pytest.mark.parametrize("reset", ["compiler", "_dynamo"])
def test_reset_makes_compiled_functions_trace_again(reset):
    """#20: ``torch.compiler.reset()`` / ``torch._dynamo.reset()``: every compiled
    function (and a compiled module) traces again at its next call, as torch.compile's
    frames are compiled again (counted by torch's own backend calls)."""
    def count(L, reset_fn):
        """(programs made, values) over call, call, reset, call."""
        traces = []
        if L is torch:
            def backend(gm, inputs):
                traces.append(1)
                return gm.forward
            torch._dynamo.reset()
            g = torch.compile(lambda x: (x * 2).sum(), backend=backend)
        else:
            g = sg.compile(lambda x: (x * 2).sum())
        x = L.ones(3)
        vals = [g(x).item(), g(x).item()]
        if L is sg:
            traces.append(g.cache_info().misses)
        reset_fn()
        if L is sg:
            assert g.cache_info().entries == 0
        vals.append(g(x).item())
        if L is sg:
            traces.append(g.cache_info().misses)
        return sum(traces), vals

    torch_reset = {"compiler": torch.compiler.reset, "_dynamo": torch._dynamo.reset}[reset]
    sg_reset = {"compiler": sg.compiler.reset, "_dynamo": sg._dynamo.reset}[reset]
    assert count(sg, sg_reset) == count(torch, torch_reset) == (2, [6.0, 6.0, 6.0])

    m = sg.nn.Linear(2, 1)
    m.compile()
    m(sg.ones(1, 2))
    compiled = vars(m)["_compiled_call_impl"]
    assert compiled.cache_info().entries == 1
    sg_reset()
    assert compiled.cache_info().entries == 0
