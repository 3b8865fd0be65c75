"""Issue 13, review9 C2-C4 and the version checks of compiled code: PyTorch's errors
(type and text), grad_fn names and values where it gives them."""
import numpy as np
import pytest
import torch

import symgrad as sg


def _err(fn):
    try:
        out = fn()
    except Exception as e:                      # noqa: BLE001 -- the type is compared
        return type(e).__name__, str(e)
    return out


# ------------------------- C3: training BatchNorm saves running_mean / running_var

@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("which", ["running_mean", "running_var"])
@pytest.mark.parametrize("change", ["mul_", "add_", "none"])
@pytest.mark.parametrize("affine", [True, False])
def test_training_batchnorm_running_stats_changed_before_backward(which, change, affine, dt):
    def run(L):
        m = L.nn.BatchNorm1d(3, affine=affine).to(getattr(L, dt)).train()
        x = (L.arange(12.0, dtype=getattr(L, dt)).reshape(4, 3) ** 1.5).requires_grad_()
        y = (m(x) * L.arange(12.0, dtype=getattr(L, dt)).reshape(4, 3)).sum()
        with L.no_grad():
            if change != "none":
                getattr(getattr(m, which), change)(2)
        return _err(lambda: (y.backward(), np.round(x.grad.numpy(), 4).tolist())[1])
    assert run(sg) == run(torch)


# ------------- compiled: a closed-over tensor saved for backward, then updated in place

@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_compiled_saved_state_updated_before_backward(dt):
    def run(L, compiled):
        w = L.ones(3, dtype=getattr(L, dt)) * 2

        def step(x):
            y = (w * x).sum()
            with L.no_grad():
                w.add_(1)
            y.backward()
            return x.grad * 1
        if compiled:
            step = sg.compile(step)
        x = L.arange(3.0, dtype=getattr(L, dt)).requires_grad_()
        return _err(lambda: step(x).tolist()), w.tolist()
    want = run(torch, False)
    assert run(sg, False) == want
    assert run(sg, True) == want


# ------------- C4: empty outputs of qr(mode='r') and lstsq carry the function's grad_fn

EMPTY_OUTPUTS = {
    "qr_r": lambda L, d, g: L.linalg.qr(L.eye(3, 2, dtype=d, requires_grad=g), mode="r")[0],
    "lstsq_gelsy_a": lambda L, d, g: L.linalg.lstsq(
        L.ones(3, 2, dtype=d, requires_grad=g) + L.eye(3, 2, dtype=d), L.ones(3, 1, dtype=d)
    ).residuals,
    "lstsq_gelsy_b": lambda L, d, g: L.linalg.lstsq(
        L.ones(3, 2, dtype=d) + L.eye(3, 2, dtype=d), L.ones(3, 1, dtype=d, requires_grad=g)
    ).residuals,
    "lstsq_wide_gelsd": lambda L, d, g: L.linalg.lstsq(
        L.ones(2, 3, dtype=d, requires_grad=g) + L.eye(2, 3, dtype=d), L.ones(2, 1, dtype=d),
        driver="gelsd").residuals,
    "lstsq_batched": lambda L, d, g: L.linalg.lstsq(
        L.ones(2, 3, 2, dtype=d, requires_grad=g) + L.eye(3, 2, dtype=d),
        L.ones(2, 3, 1, dtype=d)).residuals,
}


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("case", list(EMPTY_OUTPUTS))
def test_empty_outputs_grad_fn(case, requires_grad, dt):
    def run(L):
        r = EMPTY_OUTPUTS[case](L, getattr(L, dt), requires_grad)
        fn = None if r.grad_fn is None else type(r.grad_fn).__name__
        return fn, tuple(r.shape), r.requires_grad, str(r.dtype).split(".")[-1]
    assert run(sg) == run(torch)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("with_r", [True, False])
def test_backward_through_qr_r_mode_q_raises_as_torch(with_r, dt):
    def run(L):
        a = L.eye(3, 2, dtype=getattr(L, dt), requires_grad=True)
        q, r = L.linalg.qr(a, mode="r")
        return _err(lambda: ((q.sum() + r.sum()) if with_r else q.sum()).backward())
    assert run(sg) == run(torch)


# --------- C2: a split / chunk / unbind piece, or a view made in no_grad mode, used after
# its base or a sibling changed in place: PyTorch's CreationMeta error (its text)

def _base_add(L, x):
    a = x.exp(); p = a.split(2); a.add_(1); return (p[0] * 2).sum()


def _sibling_no_grad(L, x):
    a = x.exp(); p = a.split(2)
    with L.no_grad():
        p[1].mul_(2)
    return (p[0] * p[2]).sum()


def _same_piece_no_grad(L, x):
    a = x.exp(); p = a.chunk(3)
    with L.no_grad():
        p[1].mul_(2)
    return (p[1] * 3).sum()


def _base_add_in_no_grad(L, x):
    a = x.exp(); p = a.split(2)
    with L.no_grad():
        a.add_(1)
    return (p[0] * 2).sum()


def _no_grad_view(L, x):
    a = x.exp()
    with L.no_grad():
        v = a[:2]
    a.add_(1)
    return (v * 2).sum()


def _unbind(L, x):
    a = x.exp().reshape(3, 2); p = a.unbind(); a.add_(1); return (p[2] * 2).sum()


def _view_of_piece(L, x):
    a = x.exp(); p = a.split(2); q = p[0][:1]; a.add_(1); return (q * 2).sum()


def _used_before_change(L, x):
    a = x.exp(); p = a.chunk(3); y = (p[0] * p[1]).sum(); a.add_(1); return y


def _setitem(L, x):
    a = x * 1; p = a.split(2); a[0] = 5.0; return (p[1] * 2).sum()


def _no_base_grad(L, x):       # nothing requires grad: no error, the new values
    a = x.detach().exp(); p = a.split(2); a.add_(1); return (p[0] * 2).sum() + x.sum()


STALE = [_base_add, _sibling_no_grad, _same_piece_no_grad, _base_add_in_no_grad,
         _no_grad_view, _unbind, _view_of_piece, _used_before_change, _setitem,
         _no_base_grad]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("case", STALE, ids=lambda f: f.__name__)
def test_stale_multi_output_and_no_grad_views(case, compiled, dt):
    def run(L, comp):
        def step(x):
            case(L, x).backward()
            return x.grad * 1
        if comp:
            step = sg.compile(step)
        x = L.arange(6.0, dtype=getattr(L, dt)).div(4).requires_grad_()
        got = _err(lambda: step(x))
        return got if isinstance(got, tuple) else np.round(got.numpy(), 4).tolist()
    assert run(sg, compiled) == run(torch, False)


# ------ torch.func.vmap over a dim other than the first: view() must fit the layout of
# the argument with its batch dim moved to the front (torch's physical view)

VMAP_VIEWS = [(1, (-1,)), (1, (8,)), (2, (6,)), (2, (3, 2)), (0, (12,)), (1, (2, 4)),
              (0, (4, 3))]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("in_dims,shape", VMAP_VIEWS)
def test_vmap_view_over_a_non_leading_dim(in_dims, shape, compiled, dt):
    def run(L, comp):
        x = L.arange(24.0, dtype=getattr(L, dt)).reshape(2, 3, 4)
        f = L.func.vmap(lambda v: v.view(*shape) * 2, in_dims=in_dims)
        if comp:
            f = sg.compile(f)
        got = _err(lambda: f(x))
        return got if isinstance(got, tuple) else (tuple(got.shape), got.reshape(-1).tolist())
    assert run(sg, compiled) == run(torch, False)
