"""What the layer tests share: the same arrays as torch and symgrad tensors, a comparison
scaled to the reference's magnitude (sums of many products are compared as numerical
analysis bounds them: relative to the largest element, per dtype), and error
comparisons (type and text)."""
from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = (np.float32, np.float64)
# relative to the largest element of the reference; never loosened to make a test pass
SCALED = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}


def close(got, want, dtype=None, what="value", factor: float = 1.0,
          scale: float | None = None) -> None:
    """``got`` (symgrad tensor / array) equals ``want`` (torch tensor / array) elementwise
    within ``factor * SCALED[dtype] * max|want|`` (plus the same relative to each
    element).  ``scale``: the magnitude to use instead of ``max|want|`` -- for a sum, the
    sum of its terms' magnitudes (a sum that cancels is only as exact as its terms)."""
    a = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    b = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    dt = np.dtype(dtype or b.dtype)
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} != {b.dtype}"
    if dt not in SCALED:                              # integers: exact
        np.testing.assert_array_equal(a, b, err_msg=what)
        return
    eps = SCALED[dt] * factor
    if scale is None:
        scale = float(np.abs(b).max()) if b.size else 0.0
    np.testing.assert_allclose(a, b, rtol=eps, atol=eps * max(scale, 1e-30), err_msg=what)


def pair(arr: np.ndarray, requires_grad: bool = True):
    """(symgrad tensor, torch tensor) of one array."""
    return (sg.tensor(arr.copy(), requires_grad=requires_grad),
            torch.tensor(arr.copy(), requires_grad=requires_grad))


def _sets_sorted(text: str) -> str:
    """``text`` with the items of every printed set ``{'a', 'b'}`` sorted: a set's print
    order depends on the string hashes of the process and on how the set was built
    (PyTorch builds {"zeros", "reflect", ...} from a constant its own .pyc stored), so
    only the items are PyTorch's to match."""
    return re.sub(r"\{('[^{}]*')\}",
                  lambda m: "{" + ", ".join(sorted(m.group(1).split(", "))) + "}", text)


def same_error(build) -> None:
    """``build(torch)`` and ``build(symgrad)`` raise the same exception type and text."""
    with pytest.raises(Exception) as te:
        build(torch)
    with pytest.raises(Exception) as se:
        build(sg)
    assert type(se.value) is type(te.value), (type(se.value), se.value, type(te.value), te.value)
    got, want = _sets_sorted(str(se.value)), _sets_sorted(str(te.value))
    assert got == want, f"symgrad: {got!r}\ntorch:   {want!r}"


def copy_weights(src: torch.nn.Module, dst: sg.nn.Module) -> None:
    """dst's parameters and buffers := src's (by state-dict key)."""
    dst.load_state_dict(OrderedDict((k, sg.tensor(v.detach().numpy().copy()))
                                    for k, v in src.state_dict().items()))


def twin(build, dtype, seed: int = 0):
    """The same module in both libraries, torch's weights (drawn from ``seed``, so a test
    sees the same weights whatever ran before it) copied into symgrad's."""
    torch.manual_seed(seed)
    tm, sm = build(torch), build(sg)
    if dtype == np.float64:
        tm, sm = tm.double(), sm.double()
    copy_weights(tm, sm)
    return tm, sm


def eager_matches(run, arrays, dtype, rng, names=("input", "weight", "bias")) -> None:
    """``run(lib, *tensors)`` on the same arrays in both libraries (None stays None): the
    outputs, each array's gradient under a random cotangent, and the grad_fn names equal
    torch's."""
    both = [pair(a) if a is not None else (None, None) for a in arrays]
    s_out, t_out = run(sg, *(s for s, _ in both)), run(torch, *(t for _, t in both))
    close(s_out, t_out, dtype, "output")
    g = rng.normal(size=tuple(t_out.shape)).astype(dtype)
    s_out.backward(sg.tensor(g))
    t_out.backward(torch.tensor(g))
    for (s, t), what in zip(both, names):
        if s is not None:
            close(s.grad, t.grad, dtype, f"grad {what}")
    assert type(s_out.grad_fn).__name__ == type(t_out.grad_fn).__name__


def compiled_matches(run, arrays, dtype, rng, backend, names=("input", "weight", "bias")):
    """``sg.value_and_grad`` (on ``backend``) of <tanh(run(lib, *arrays)), c> for a random
    c, w.r.t. every array, equals torch's eager loss and gradients; returns (torch's
    tensors after backward, the cotangent's loss function of symgrad)."""
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    t_out = run(torch, *ts)
    cot = rng.normal(size=tuple(t_out.shape)).astype(dtype)
    t_loss = (torch.tanh(t_out) * torch.tensor(cot)).sum()
    t_loss.backward()

    def loss(*vs):
        return (sg.tanh(run(sg, *vs)) * sg.tensor(cot)).sum()
    value, grads = sg.value_and_grad(loss, argnums=tuple(range(len(arrays))),
                                     backend=backend)(*arrays)
    close(np.asarray(value), t_loss, dtype, "loss", factor=10)
    for got, t, what in zip(grads, ts, names):
        close(np.asarray(got), t.grad, dtype, f"grad {what}", factor=10)
    return ts, loss


def module_compiled_matches(build, x, dtype) -> None:
    """``sg.value_and_grad`` of sum(module(x)**2) over ``functional_call`` of the module
    ``build`` makes (torch's weights) equals torch's loss and parameter gradients."""
    tm, sm = twin(build, dtype)
    params = {k: v.detach().numpy().copy() for k, v in tm.named_parameters()}
    loss = (tm(torch.tensor(x)) ** 2).sum()
    loss.backward()
    value, grads = sg.value_and_grad(
        lambda p, xb: (sg.func.functional_call(sm, p, (xb,)) ** 2).sum())(params, x)
    close(np.asarray(value), loss, dtype, "loss", factor=10)
    for k, v in tm.named_parameters():
        close(np.asarray(grads[k]), v.grad, dtype, k, factor=10)


def second_derivatives_match(run, x, w, rng) -> None:
    """d/d(x, w) of <grad_x(<run(lib, x, w)^2, c>), v> for random c, v equals torch's (the
    gradient is differentiable); float64 arrays."""
    (sx, tx), (sw, tw) = pair(x), pair(w)
    c = v = None
    res = {}
    for lib, xv, wv in ((torch, tx, tw), (sg, sx, sw)):
        out = run(lib, xv, wv)
        if c is None:
            c, v = rng.normal(size=tuple(out.shape)), rng.normal(size=x.shape)
        gx, = lib.autograd.grad((out * out * lib.tensor(c)).sum(), xv, create_graph=True)
        res[lib] = lib.autograd.grad((gx * lib.tensor(v)).sum(), (xv, wv))
    close(res[sg][0], res[torch][0], np.float64, "d2/dx2")
    close(res[sg][1], res[torch][1], np.float64, "d2/dxdw")


def kaiming_default_holds(m, fan_in: int, spread: float) -> None:
    """``m``'s weight and bias look drawn as PyTorch's default (kaiming_uniform_(a=sqrt(5)),
    bias uniform): inside ±1/sqrt(fan_in), the weight's std and mean those of a uniform
    within ``spread`` of the bound, the bias reaching past half the bound."""
    bound = 1 / np.sqrt(fan_in)
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / np.sqrt(3)) < spread * bound
    assert abs(w.mean()) < spread * bound
    assert np.abs(b).max() > 0.5 * bound


def module_eager_matches(tm, sm, x, dtype, **kwargs) -> None:
    """The twin modules on ``x`` (``kwargs`` passed to both forwards): outputs, and after
    ``sum().backward()`` the input's and every parameter's gradient, equal torch's."""
    sx, tx = pair(x)
    s_out, t_out = sm(sx, **kwargs), tm(tx, **kwargs)
    close(s_out, t_out, dtype, "output")
    s_out.sum().backward()
    t_out.sum().backward()
    close(sx.grad, tx.grad, dtype, "grad input")
    for (k, sp), (_, tp) in zip(sm.named_parameters(), tm.named_parameters()):
        close(sp.grad, tp.grad, dtype, f"grad {k}")


def pooling_compiled_matches(name: str, x, kw: dict, c, backend: str) -> None:
    """symgrad.value_and_grad of sum(out^2 * c) for ``nn.functional.<name>(x, **kw)`` on
    ``backend`` against torch's eager loss and gradient."""
    dtype = x.dtype
    tx = torch.tensor(x, requires_grad=True)
    t_loss = (getattr(torch.nn.functional, name)(tx, **kw) ** 2 * torch.tensor(c)).sum()
    t_loss.backward()

    def loss(v):
        return (getattr(sg.nn.functional, name)(v, **kw) ** 2 * sg.tensor(c)).sum()
    value, grad = sg.value_and_grad(loss, backend=backend)(x)
    close(np.asarray(value), t_loss, dtype, "loss", factor=10)
    close(np.asarray(grad), tx.grad, dtype, "grad input", factor=10)


def pooling_second_derivatives_match(name: str, x, kw: dict, c, v) -> None:
    """d/dx <v, d/dx sum(out^2 * c)> of ``nn.functional.<name>`` as torch's."""
    res = {}
    for lib in (torch, sg):
        xv = lib.tensor(x, requires_grad=True)
        out = getattr(lib.nn.functional, name)(xv, **kw)
        gx, = lib.autograd.grad((out * out * lib.tensor(c)).sum(), xv, create_graph=True)
        res[lib], = lib.autograd.grad((gx * lib.tensor(v)).sum(), xv)
    close(res[sg], res[torch], np.float64, "second derivative")


def pooling_eager_matches(name: str, x, kw: dict, g) -> None:
    """``nn.functional.<name>(x, **kw)``: output, input gradient for the cotangent ``g``
    and grad_fn name as torch's."""
    sx, tx = pair(x)
    s_out = getattr(sg.nn.functional, name)(sx, **kw)
    t_out = getattr(torch.nn.functional, name)(tx, **kw)
    close(s_out, t_out, x.dtype, "output")
    s_out.backward(sg.tensor(g))
    t_out.backward(torch.tensor(g))
    close(sx.grad, tx.grad, x.dtype, "grad input")
    assert s_out.grad_fn.name() == t_out.grad_fn.name()


def pooling_indices_match(name: str, x, kw: dict) -> None:
    """``return_indices=True``: the values and the int64 indices as torch's."""
    s_out, s_idx = getattr(sg.nn.functional, name)(sg.tensor(x), return_indices=True, **kw)
    t_out, t_idx = getattr(torch.nn.functional, name)(torch.tensor(x), return_indices=True, **kw)
    close(s_out, t_out)
    assert s_idx.dtype == sg.int64
    np.testing.assert_array_equal(s_idx.numpy(), t_idx.numpy())


def outputs_and_grads_match(s_outs, t_outs, s_ins, t_ins, dtype, rng, modules=None,
                            factor: float = 1.0) -> None:
    """Outputs ``s_outs`` (symgrad) equal ``t_outs`` (torch; None entries must match),
    and after one backward of <outputs, random cotangents> so do the gradients of the
    inputs (leaves of either library; None / non-tensors skipped) and, for
    ``modules=(torch module, symgrad module)``, of every parameter."""
    t_loss = s_loss = 0
    for k, (s, t) in enumerate(zip(s_outs, t_outs)):
        assert (s is None) == (t is None), f"output {k}"
        if t is None:
            continue
        close(s, t, dtype, f"output {k}", factor)
        c = rng.normal(size=tuple(t.shape)).astype(dtype)
        t_loss = t_loss + (t * torch.tensor(c)).sum()
        s_loss = s_loss + (s * sg.tensor(c)).sum()
    t_loss.backward()
    s_loss.backward()
    pairs = [(f"argument {k}", s, t) for k, (s, t) in enumerate(zip(s_ins, t_ins))
             if isinstance(t, torch.Tensor) and t.requires_grad]
    if modules is not None:
        pairs += [(name, s, t) for (name, s), (_, t) in zip(modules[1].named_parameters(),
                                                            modules[0].named_parameters())]
    for what, s, t in pairs:
        assert (s.grad is None) == (t.grad is None), what
        if t.grad is not None:
            close(s.grad, t.grad, dtype, f"grad of {what}", factor)
