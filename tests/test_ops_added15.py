"""signbit, logical_xor, randint_like, rrelu (+ nn.RReLU) and max_unpool2d (+
nn.MaxUnpool2d) against torch: values (bit for bit where torch's are exact), dtypes,
PyTorch's random numbers after manual_seed, gradients and node names, eager and
compiled, both float dtypes; errors as torch's."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from oracle import assert_close, check

FLOATS = ["float32", "float64"]
SPECIAL = [1.0, -1.0, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40, 3.5]


def _errors(fs, ft):
    """fs (symgrad) and ft (torch) raise the same exception type and text."""
    with pytest.raises(Exception) as want:
        ft()
    with pytest.raises(type(want.value)) as got:
        fs()
    assert str(got.value) == str(want.value)


# ---- signbit ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + ["int64", "int32", "uint8", "bool"])
def test_signbit(dtype):
    if dtype in FLOATS:
        x0 = np.array(SPECIAL, dtype=dtype)
        x0[7] = -np.abs(x0[7])                          # a NaN with its sign bit set
        x0 = np.copysign(np.abs(x0), np.array([1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1], dtype))
    else:
        x0 = np.array([1, 0, 3, 1] if dtype in ("uint8", "bool") else [1, -3, 0, 7, -1],
                      dtype=dtype)
    want = torch.signbit(torch.tensor(x0)).numpy()
    for got in (sg.signbit(sg.tensor(x0)), sg.tensor(x0).signbit(),
                sg.compile(lambda a: sg.signbit(a))(sg.tensor(x0))):
        assert got.dtype is sg.bool
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("dtype", FLOATS)
def test_signbit_of_computed_values_compiled(dtype):
    """Signs made inside compiled code (-x, x * 0 with its signed zeros) are read there.
    (The sign of a NaN the compiled code makes is not kept: its rewrites may move a
    negation into a constant.)"""
    x0 = np.array([1.0, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan], dtype=dtype)

    def f(m, a):
        return m.signbit(-a), m.signbit(a * 0), m.signbit(-(a - 1))
    want = f(torch, torch.tensor(x0))
    for got in (f(sg, sg.tensor(x0)), sg.compile(lambda a: f(sg, a))(sg.tensor(x0))):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_signbit_no_gradient_and_errors():
    x = sg.tensor([-1.0, 2.0], requires_grad=True)
    assert not sg.signbit(x).requires_grad and sg.signbit(x).grad_fn is None
    _errors(lambda: sg.signbit(1.0), lambda: torch.signbit(1.0))


# ---- logical_xor ------------------------------------------------------------------------
@pytest.mark.parametrize("dta,dtb", [("float32", "float32"), ("float64", "int64"),
                                     ("bool", "float32"), ("int32", "bool")])
def test_logical_xor(dta, dtb):
    a0 = np.array([[1, 0, 2, 0], [0, 3, 0, -1]], dtype=dta) if dta != "bool" else \
        np.array([[True, False, True, False], [False, True, False, True]])
    b0 = np.array([0, 0, 5, 1], dtype=dtb) if dtb != "bool" else np.array([True, False, True, False])
    if dta in FLOATS:
        a0[1, 0] = np.nan                               # NaN counts as True
    want = torch.logical_xor(torch.tensor(a0), torch.tensor(b0)).numpy()
    for got in (sg.logical_xor(sg.tensor(a0), sg.tensor(b0)),
                sg.tensor(a0).logical_xor(sg.tensor(b0)),
                sg.compile(lambda u, v: sg.logical_xor(u, v))(sg.tensor(a0), sg.tensor(b0))):
        assert got.dtype is sg.bool
        np.testing.assert_array_equal(got.numpy(), want)


def test_logical_xor_errors():
    for fs in [(lambda m: m.logical_xor(m.ones(2), 1)), (lambda m: m.ones(2).logical_xor(1)),
               (lambda m: m.logical_xor(1, m.ones(2))),
               (lambda m: m.logical_xor(m.ones(2), m.ones(3)))]:
        _errors(lambda: fs(sg), lambda: fs(torch))


# ---- randint_like -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + ["int64", "int32", "uint8"])
@pytest.mark.parametrize("args", [(10,), (-3, 7), (3, 2 ** 28 + 3), (0, 2 ** 40)])
def test_randint_like_is_torchs(dtype, args):
    if dtype == "uint8" and (args[-1] > 256 or args[0] < 0) or dtype == "int32" and args[-1] > 2 ** 31:
        return
    res = []
    for m in (sg, torch):
        m.manual_seed(7)
        like = m.zeros(3, 5, dtype=getattr(m, dtype))
        res.append((m.randint_like(like, *args), m.randint_like(like, *args, dtype=m.float64),
                    m.rand(2)))
    for a, b in zip(*res):
        assert str(a.dtype) == str(b.dtype) and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_randint_like_keywords_generator_and_compiled():
    for m in (sg, torch):
        m.manual_seed(1)
    x = np.zeros((4,), np.float32)
    assert_close(sg.randint_like(sg.tensor(x), high=4), torch.randint_like(torch.tensor(x), high=4))
    assert_close(sg.randint_like(sg.tensor(x), low=2, high=9),
                 torch.randint_like(torch.tensor(x), low=2, high=9))
    g = sg.Generator().manual_seed(3)
    assert_close(sg.randint_like(sg.tensor(x), 100, generator=g),
                 torch.randint_like(torch.tensor(x), 100, generator=torch.Generator().manual_seed(3)))
    f = sg.compile(lambda a: a + sg.randint_like(a, 5))     # drawn at each call
    sg.manual_seed(2)
    torch.manual_seed(2)
    for _ in range(2):
        assert_close(f(sg.tensor(x)), torch.tensor(x) + torch.randint_like(torch.tensor(x), 5))
    r = sg.randint_like(sg.tensor(x), 3, requires_grad=True)
    assert r.requires_grad and r.dtype is sg.float32


@pytest.mark.parametrize("dtype,args,kw", [("float32", (5, 2), {}), ("float32", (0, 300), {"dtype": "uint8"}),
                                           ("float32", (-1, 3), {"dtype": "uint8"}),
                                           ("float32", (0, 200), {"dtype": "int8"}),
                                           ("float32", (0, 2 ** 33), {"dtype": "int32"}),
                                           ("float32", (0, 3), {"dtype": "bool"}),
                                           ("float32", (0, 2 ** 16), {"dtype": "int16"}),
                                           ("float32", (3,), {"dtype": "int64", "requires_grad": True}),
                                           ("float32", (3.5,), {})])
def test_randint_like_errors(dtype, args, kw):
    def run(m):
        k = dict(kw)
        if "dtype" in k:
            k["dtype"] = getattr(m, k["dtype"])
        return m.randint_like(m.zeros(2, dtype=getattr(m, dtype)), *args, **k)
    if args == (3.5,):          # (torch lists its overloads; the type and the start agree)
        with pytest.raises(TypeError, match=r"randint_like\(\) received an invalid combination"):
            run(sg)
        with pytest.raises(TypeError, match=r"randint_like\(\) received an invalid combination"):
            run(torch)
        return
    _errors(lambda: run(sg), lambda: run(torch))


def test_randint_like_float_precision_warning():
    for m in (sg, torch):
        with pytest.warns(UserWarning, match=r"to - 1 is out of bounds \[-\(2\^24\), 2\^24\]"):
            m.randint_like(m.zeros(2), 0, 2 ** 25)


# ---- rrelu ------------------------------------------------------------------------------
def _signed(dtype, seed=0):
    x = np.random.default_rng(seed).normal(size=(3, 7)).astype(dtype)
    x[0, :4] = [0.0, -0.0, np.nan, -np.inf]
    return x


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bounds", [(1 / 8, 1 / 3), (0.1, 0.3), (0.2, 0.2), (-0.5, 0.25)])
def test_rrelu_training_is_torchs(dtype, bounds):
    """The slopes drawn per element x <= 0 (PyTorch's numbers and consumption: a draw
    after it agrees), the output, the gradient (the noise), the node name."""
    res = []
    for m in (sg, torch):
        m.manual_seed(5)
        x = m.tensor(_signed(dtype), requires_grad=True)
        y = m.nn.functional.rrelu(x * 1, *bounds, training=True)
        u = m.tensor(np.random.default_rng(1).normal(size=(3, 7)).astype(dtype))
        (g,) = m.autograd.grad((y * u).sum(), x)
        res.append((y, g, m.rand(3, dtype=getattr(m, dtype)), type(y.grad_fn).__name__))
    for a, b in zip(res[0][:3], res[1][:3]):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert res[0][3] == res[1][3] == "RreluWithNoiseBackward0"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bounds", [(1 / 8, 1 / 3), (0.1, 0.3)])
def test_rrelu_eval_values_gradients(dtype, bounds):
    check(lambda m, x: m.nn.functional.rrelu(x, *bounds), _signed(dtype)[1:])
    s, t = sg.rrelu(sg.tensor(_signed(dtype))), torch.rrelu(torch.tensor(_signed(dtype)))
    np.testing.assert_array_equal(s.numpy(), t.numpy())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("training", [False, True])
def test_rrelu_in_place_and_module(dtype, training):
    res = []
    for m in (sg, torch):
        m.manual_seed(11)
        x = m.tensor(_signed(dtype), requires_grad=True)
        z = x * 1
        out = m.nn.functional.rrelu(z, training=training, inplace=True)
        assert out is z
        z.sum().backward()
        layer = m.nn.RReLU(0.1, 0.4, inplace=False)
        layer.train(training)
        y = layer(m.tensor(_signed(dtype, 2)))
        w = m.rrelu_(m.tensor(_signed(dtype, 3)), 0.05, 0.2, training)
        res.append((z, x.grad, y, w, type(z.grad_fn).__name__, repr(layer),
                    repr(m.nn.RReLU(inplace=True))))
    for a, b in zip(res[0][:4], res[1][:4]):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert res[0][4:] == res[1][4:]


@pytest.mark.parametrize("dtype", FLOATS)
def test_rrelu_compiled(dtype):
    """Evaluation: torch's values and gradients. Training: the distribution (slopes in
    [lower, upper) where x <= 0, x elsewhere, the gradient the slope), drawn anew per call."""
    x0 = _signed(dtype)[1:]
    f = sg.compile(lambda a: sg.nn.functional.rrelu(a, 0.1, 0.3))
    assert_close(f(sg.tensor(x0)), torch.nn.functional.rrelu(torch.tensor(x0), 0.1, 0.3))
    g = sg.compile(sg.func.grad(lambda a: sg.nn.functional.rrelu(a, 0.1, 0.3).sum()))
    tx = torch.tensor(x0, requires_grad=True)
    torch.nn.functional.rrelu(tx, 0.1, 0.3).sum().backward()
    assert_close(g(sg.tensor(x0)), tx.grad)
    h = sg.compile(lambda a: sg.nn.functional.rrelu(a, 0.1, 0.3, training=True))
    y1, y2 = h(sg.tensor(x0)).numpy(), h(sg.tensor(x0)).numpy()
    neg = x0 <= 0
    np.testing.assert_array_equal(y1[~neg], x0[~neg])
    r = y1[neg] / x0[neg]
    assert np.all((r >= 0.1 - 1e-6) & (r <= 0.3 + 1e-6))
    assert not np.array_equal(y1, y2)


def test_rrelu_errors():
    x = np.array([1.0, -2.0], np.float32)
    for kw in [dict(lower=0.5, upper=0.1, training=True), dict(lower=0.5, upper=0.1)]:
        _errors(lambda: sg.nn.functional.rrelu(sg.tensor(x), **kw),
                lambda: torch.nn.functional.rrelu(torch.tensor(x), **kw))
    for training in (False, True):
        _errors(lambda: sg.nn.functional.rrelu(sg.tensor([1, -2]), training=training),
                lambda: torch.nn.functional.rrelu(torch.tensor([1, -2]), training=training))


# ---- max_unpool2d -----------------------------------------------------------------------
def _pooled(m, dtype, shape=(2, 3, 6, 8), k=2, s=None, p=0, seed=0):
    a = np.random.default_rng(seed).normal(size=shape).astype(dtype)
    return m.nn.functional.max_pool2d(m.tensor(a), k, s, p, return_indices=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,k,s,p,size", [((2, 3, 6, 8), 2, None, 0, None),
                                              ((3, 5, 5), 3, 2, 1, None),
                                              ((1, 2, 7, 7), 3, 2, 0, (8, 8)),
                                              ((1, 2, 7, 7), 3, 2, 0, (1, 2, 7, 8)),
                                              ((2, 1, 6, 5), (2, 3), (1, 2), (1, 0), None)])
def test_max_unpool2d(dtype, shape, k, s, p, size):
    ys, is_ = _pooled(sg, dtype, shape, k, s, p)
    yt, it = _pooled(torch, dtype, shape, k, s, p)

    def f(m, y, i):
        return m.nn.functional.max_unpool2d(y, i, k, s, p, size)
    check(lambda m, y: f(m, y, is_ if m is sg else it), ys.numpy())
    module = sg.nn.MaxUnpool2d(k, s, p)
    assert repr(module) == repr(torch.nn.MaxUnpool2d(k, s, p))
    assert_close(module(ys, is_, size), torch.nn.MaxUnpool2d(k, s, p)(yt, it, size))
    fc = sg.compile(lambda y, i: f(sg, y, i))
    assert_close(fc(ys, is_), f(torch, yt, it))
    gc = sg.compile(sg.func.grad(lambda y, i: (f(sg, y, i) ** 2).sum()))
    ty = yt.clone().requires_grad_()
    (f(torch, ty, it) ** 2).sum().backward()
    assert_close(gc(ys, is_), ty.grad)


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_unpool2d_duplicates_saved_indices_double_backward(dtype):
    """Repeated indices: the later value wins, every input gets the gradient at its index;
    _saved_indices; a second derivative through the node."""
    y0 = np.random.default_rng(3).normal(size=(1, 1, 2, 2)).astype(dtype)
    i0 = np.array([[[[0, 0], [5, 5]]]], np.int64)
    res = []
    for m in (sg, torch):
        y = m.tensor(y0, requires_grad=True)
        o = m.nn.functional.max_unpool2d(y, m.tensor(i0), 2)
        saved = o.grad_fn._saved_indices
        (g,) = m.autograd.grad((o ** 3).sum(), y, create_graph=True)
        (h,) = m.autograd.grad(g.sum(), y)
        res.append((o, g, h, saved, type(o.grad_fn).__name__))
    for a, b in zip(res[0][:4], res[1][:4]):
        assert_close(a, b)
    assert res[0][4] == res[1][4]


def test_max_unpool2d_errors():
    cases = [lambda m, y, i: m.nn.functional.max_unpool2d(y, i.int(), 2),
             lambda m, y, i: m.nn.functional.max_unpool2d(y, i[..., :1], 2),
             lambda m, y, i: m.nn.functional.max_unpool2d(y, i + 100, 2),
             lambda m, y, i: m.nn.functional.max_unpool2d(y, i - 100, 2),
             lambda m, y, i: m.nn.functional.max_unpool2d(y[0, 0], i[0, 0], 2),
             lambda m, y, i: m.nn.functional.max_unpool2d(y, i, 2, output_size=(9, 9)),
             lambda m, y, i: m.nn.functional.max_unpool2d(y, i, 2, output_size=(1, 2, 3)),
             lambda m, y, i: m.nn.functional.max_unpool2d(y.long(), i, 2),
             lambda m, y, i: m.nn.functional.max_unpool2d(y[:, :, :0], i[:, :, :0], 2)]
    for k, case in enumerate(cases):
        ys, is_ = _pooled(sg, "float32", (1, 1, 4, 4))
        yt, it = _pooled(torch, "float32", (1, 1, 4, 4))
        if k in (2, 3):         # (torch's threads race to report one of the invalid indices)
            shifted = (it + (100 if k == 2 else -100)).flatten().tolist()
            for m, y, i in ((sg, ys, is_), (torch, yt, it)):
                with pytest.raises(RuntimeError) as e:
                    case(m, y, i)
                text = str(e.value)
                assert text.startswith("Found an invalid max index: ")
                assert text.endswith(" (output volumes are of size 4x4)")
                assert int(text.split(": ")[1].split(" ")[0]) in shifted
            continue
        _errors(lambda: case(sg, ys, is_), lambda: case(torch, yt, it))
