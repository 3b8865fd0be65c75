"""Ops a tutorial reaches for (issue 15, item 4), each against torch 2.13: values,
gradients and grad_fn names eagerly in float32 and float64, the compiled gradient, and
PyTorch's errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 4)) * 0.8
IDX = [[0, 2], [1, 1], [3, 0]]

OPS = {
    "sinh": lambda m, t: m.sinh(t), "cosh": lambda m, t: t.cosh(),
    "asin": lambda m, t: m.asin(t * 0.5), "acos": lambda m, t: m.acos(t * 0.5),
    "atan": lambda m, t: m.atan(t), "erfinv": lambda m, t: m.erfinv(t * 0.4),
    "atan2": lambda m, t: m.atan2(t, t * 0.5 + 1), "square": lambda m, t: m.square(t),
    "var": lambda m, t: m.var(t, 1), "var_all": lambda m, t: t.var(),
    "var_c0": lambda m, t: m.var(t, dim=(0, 1), correction=0, keepdim=True),
    "std": lambda m, t: t.std(dim=0, keepdim=True), "std_unbiased": lambda m, t: m.std(t, 1, False),
    "cumsum": lambda m, t: m.cumsum(t, 1), "cumsum_neg": lambda m, t: t.cumsum(-2),
    "masked_fill": lambda m, t: t.masked_fill(t > 0.3, -1.0),
    "tril": lambda m, t: m.tril(t, 1), "triu": lambda m, t: t.triu(-1),
    "gather": lambda m, t: m.gather(t, 1, m.tensor(IDX)),
    "gather_smaller": lambda m, t: m.gather(t, 0, m.tensor([[0, 2]])),
    "index_select": lambda m, t: m.index_select(t, 1, m.tensor([3, 0, 3])),
    "split": lambda m, t: m.split(t, 3, dim=1), "split_sizes": lambda m, t: t.split([1, 2], 0),
    "chunk": lambda m, t: m.chunk(t, 3, 1),
    "sort": lambda m, t: tuple(m.sort(t, 1)),
    "sort_descending": lambda m, t: tuple(t.sort(dim=0, descending=True)),
    "topk": lambda m, t: tuple(m.topk(t, 2, dim=1)),
    "topk_smallest": lambda m, t: tuple(t.topk(2, 0, largest=False)),
    "flip": lambda m, t: m.flip(t, [0, -1]), "flip_method": lambda m, t: t.flip(1),
    "flip_list": lambda m, t: t.flip([0]) * t, "flip_none": lambda m, t: m.flip(t, ()),
    "fliplr": lambda m, t: m.fliplr(t), "flipud": lambda m, t: t.flipud(),
}


def _run(lib, fn, x, requires_grad=True):
    t = lib.tensor(x, requires_grad=requires_grad)
    out = fn(lib, t)
    outs = out if isinstance(out, tuple) else (out,)
    return t, outs


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPS))
def test_values_gradients_and_names_match_torch(name, dtype):
    x = X.astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    a, ours = _run(sg, OPS[name], x)
    b, theirs = _run(torch, OPS[name], x)
    if name.startswith(("sort", "topk")):          # (values, indices): indices compared
        np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
        ours, theirs = ours[:1], theirs[:1]
    assert [o.grad_fn.name() for o in ours] == [o.grad_fn.name() for o in theirs]
    for o, t in zip(ours, theirs):
        assert o.dtype.name == str(t.dtype).replace("torch.", "")
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), **tol)
    sum((o * o).sum() for o in ours).backward()
    sum((t * t).sum() for t in theirs).backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)
    g = sg.grad(lambda v: sum((o * o).sum() for o in (lambda r: r if isinstance(r, tuple)
                                                        else (r,))(OPS[name](sg, v))))(x)
    np.testing.assert_allclose(g, b.grad.numpy(), **tol)


def test_in_place_variants():
    for name in ("sin_", "cos_", "sinh_", "atan_", "masked_fill_", "tril_"):
        args = {"masked_fill_": (sg.tensor(X) > 0, 0.0), "tril_": ()}.get(name, ())
        targs = {"masked_fill_": (torch.tensor(X) > 0, 0.0), "tril_": ()}.get(name, ())
        a, b = sg.tensor(X), torch.tensor(X)
        getattr(a, name)(*args)
        getattr(b, name)(*targs)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-15)


def test_errors_as_torch():
    t = sg.tensor(X)
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of "
                                           "dimensions as input tensor"):
        sg.gather(t, 1, sg.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="index 7 is out of bounds for dimension 1 with "
                                           "size 4"):
        sg.gather(t, 1, sg.tensor([[7]]))
    with pytest.raises(IndexError, match="index out of range in self"):
        sg.index_select(t, 0, sg.tensor([5]))
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        t.masked_fill(sg.tensor([1.0]), 0.0)
    with pytest.raises(RuntimeError, match="must have at least 2 dimensions"):
        sg.tril(sg.ones(3))
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum "
                                           "exactly to 3"):
        t.split([1, 1], 0)
    with pytest.raises(RuntimeError, match="std and var only support floating point and "
                                           "complex dtypes"):
        sg.var(sg.tensor([1, 2, 3]))


def test_sort_orders_nan_and_ties_as_torch():
    x = np.array([3.0, np.nan, -np.inf, np.inf, 1.0, 1.0, 0.5])
    for descending in (False, True):
        ours = sg.sort(sg.tensor(x), descending=descending, stable=True)
        theirs = torch.sort(torch.tensor(x), descending=descending, stable=True)
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(sg.argsort(sg.tensor(x), descending=descending).numpy(),
                                      theirs.indices.numpy())
    assert repr(sg.sort(sg.tensor([3.0, 1.0]))) == repr(torch.sort(torch.tensor([3.0, 1.0])))
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        sg.topk(sg.tensor(X), 9)


def test_flip_copies_as_torch():
    # torch.flip is not a view: writing into the result leaves the input alone, eagerly
    # and in a compiled function's result
    for lib in (sg, torch):
        x = lib.tensor(X.copy())
        y = x.flip(0)
        y[0, 0] = 5.0
        assert float(x[-1, 0]) == X[-1, 0] and y._base is None
    out = sg.compile(lambda v: v.flip(0))(X.copy())
    out[0, 0] = 5.0
    assert not np.shares_memory(out, X)
    assert float(sg.flip(sg.tensor(2.0), [0])) == 2.0        # a 0-d tensor flips to itself


@pytest.mark.parametrize("call", [
    lambda m, t: m.flip(t, 0), lambda m, t: t.flip(0, 0), lambda m, t: t.flip(2),
    lambda m, t: t.flip(0.5), lambda m, t: t.flip(), lambda m, t: m.fliplr(m.ones(3)),
    lambda m, t: m.flipud(m.tensor(1.0)), lambda m, t: m.flip(m.tensor(1.0), [1])])
def test_flip_errors_as_torch(call):
    def err(lib):
        try:
            call(lib, lib.tensor(X))
        except Exception as e:      # noqa: BLE001 -- compared below
            return type(e).__name__, str(e)
    assert err(sg) == err(torch)


# ---- index bounds: PyTorch does not wrap a negative index of gather / index_select /
# scatter (they wrapped silently, eager and compiled; compiled scatter wrote an index one
# past the end into the next row) -------------------------------------------------------
X43 = np.arange(12.0).reshape(4, 3)
BOUNDS = {
    "gather_neg_dim0": (lambda m, a, i: a.gather(0, i), [[0, -1, 2]]),
    "gather_neg_dim1": (lambda m, a, i: m.gather(a, 1, i), [[0, -1, 2]]),
    "gather_past_end": (lambda m, a, i: a.gather(1, i), [[0, 3, 2]]),
    "gather_below_minus_size": (lambda m, a, i: a.gather(1, i), [[0, -4, 2]]),
    "index_select_dim1": (lambda m, a, i: a.index_select(1, i), [-1]),
    "index_select_dim0": (lambda m, a, i: a.index_select(0, i), [0, -1]),
    "index_select_last": (lambda m, a, i: a.index_select(-1, i), [3]),
    "scatter": (lambda m, a, i: a.scatter(1, i, 5.0), [[-1]]),
    "scatter_past_end": (lambda m, a, i: a.scatter(1, i, 5.0), [[3]]),
    "scatter_add": (lambda m, a, i: a.scatter_add(1, i, m.ones(1, 1, dtype=a.dtype)), [[-1]]),
    "scatter_reduce": (lambda m, a, i: a.scatter_reduce(1, i, m.ones(1, 1, dtype=a.dtype),
                                                        "amax"), [[-1]]),
    "index_add": (lambda m, a, i: a.index_add(1, i, m.ones(4, 1, dtype=a.dtype)), [-1]),
}


def _outcome(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 -- compared with torch's
        return type(e).__name__, str(e)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_out_of_bounds_index_raises_as_torch_eager_and_compiled(name, dtype):
    f, index = BOUNDS[name]
    x, i = X43.astype(dtype), np.array(index)
    want = _outcome(lambda: f(torch, torch.tensor(x), torch.tensor(i)))
    assert isinstance(want, tuple), "torch raised nothing"
    assert _outcome(lambda: f(sg, sg.tensor(x), sg.tensor(i))) == want
    for backend in ("llvm", "numpy"):
        got = _outcome(lambda: sg.compile(lambda a, b: f(sg, a, b), backend=backend)(x, i))
        assert got == want, backend
        got = _outcome(lambda: sg.grad(lambda a, b: f(sg, a, b).sum(), backend=backend)(x, i))
        assert got == want, backend


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_out_of_bounds_index_on_a_later_call_raises_natively(name, dtype):
    """The bounds check is native code (the gradient stays off numpy: no hybrid plan,
    but for scatter_reduce's numpy kernel), checks every call -- a bad index after good
    ones raises torch's error, also where the gradient reads no index (index_add,
    scatter_add: the input's gradient is the cotangent) -- and lets the good calls'
    values through."""
    from codegen.plan import build_plan
    f, index = BOUNDS[name]
    x, bad = X43.astype(dtype), np.array(index)
    good = np.where((bad < 0) | (bad > 2), 1, bad)
    want = _outcome(lambda: f(torch, torch.tensor(x), torch.tensor(bad)))
    xt = torch.tensor(x, requires_grad=True)
    f(torch, xt, torch.tensor(good)).sum().backward()
    g = sg.grad(lambda a, b: f(sg, a, b).sum())
    assert build_plan(g.lower(x, good).optimized).hybrid == name.startswith("scatter_reduce")
    for _ in range(2):
        np.testing.assert_allclose(g(x, good), xt.grad.numpy())
        assert _outcome(lambda: g(x, bad)) == want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_in_bounds_runtime_indices_compiled_as_torch(dtype):
    """The compiled bounds check passes valid indices (int64 and int32) through: values
    and gradients against torch, and batched under vmap."""
    x = X43.astype(dtype)
    cases = [(lambda m, a, i: a.gather(1, i), np.array([[0, 2, 1], [2, 2, 0]])),
             (lambda m, a, i: a.index_select(1, i), np.array([2, 0], np.int32)),
             (lambda m, a, i: a.scatter_add(0, i, a * 2), np.array([[3, 0, 1]] * 4)),
             (lambda m, a, i: a.index_add(0, i, a[:2]), np.array([3, 3]))]
    for f, i in cases:
        xt = torch.tensor(x, requires_grad=True)
        y = f(torch, xt, torch.tensor(i))
        (y * y).sum().backward()
        for backend in ("llvm", "numpy"):
            v, g = sg.value_and_grad(lambda a, b: (f(sg, a, b) ** 2).sum(),
                                     backend=backend)(x, i)
            np.testing.assert_allclose(v, (y * y).sum().item(), rtol=1e-6)
            np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-6)
    idx = np.array([[[0, 1, 2]], [[2, 2, 2]]])
    got = sg.vmap(lambda b: sg.tensor(x).gather(1, b))(idx)
    want = torch.vmap(lambda b: torch.tensor(x).gather(1, b))(torch.tensor(idx))
    np.testing.assert_array_equal(np.asarray(got), want.numpy())
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with "
                                           "size 3"):
        sg.compile(sg.vmap(lambda b: sg.tensor(x).gather(1, b)))(-idx)


@pytest.mark.parametrize("snippet", [
    lambda m: m.ones(()).index_select(0, m.tensor([0, 0])),
    lambda m: m.zeros(4, 3).gather(1, m.tensor([[0]], dtype=m.int16)),
    lambda m: m.zeros(4, 3).index_select(1, m.tensor([0], dtype=m.uint8)),
    lambda m: m.zeros(4, 3).index_select(1, m.tensor([-1], dtype=m.int32)),
])
def test_index_select_and_gather_errors_as_torch(snippet):
    want = _outcome(lambda: snippet(torch))
    assert isinstance(want, tuple) and _outcome(lambda: snippet(sg)) == want


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("name", ["index_add_negative", "index_add_past_end", "list_index"])
def test_index_errors_are_torchs(name, compiled):
    """PyTorch's exception type and text for a bad index, eager and compiled (index_add:
    IndexError 'index out of range in self'; indexing by a list: '... for dimension d')."""
    fn = {"index_add_negative": lambda L, x, i: x.index_add(0, i, x[:2]),
          "index_add_past_end": lambda L, x, i: x.index_add(0, i, x[:2]),
          "list_index": lambda L, x, i: x[i]}[name]
    idx = {"index_add_negative": [0, -1], "index_add_past_end": [0, 4], "list_index": [0, 4]}[name]
    x = np.arange(4.0)
    with pytest.raises(Exception) as want:
        fn(torch, torch.tensor(x), torch.tensor(idx))
    f = sg.compile(lambda a, i: fn(sg, a, i)) if compiled else (lambda a, i: fn(sg, a, i))
    if compiled:
        f(sg.tensor(x), sg.tensor([0, 1]))              # compiled with good indices first
    with pytest.raises(Exception) as got:
        f(sg.tensor(x), sg.tensor(idx))
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
