"""Issue 13's defects left open after the first rounds (review5 #4, review6 #10, review7
#4/#5, split/chunk views, svdvals, compiled view errors, generators in a failing compiled
step): each against PyTorch / JAX -- values, gradients, error types and texts."""
import numpy as np
import pytest
import torch

import symgrad as sg

X0 = np.random.default_rng(0).normal(size=(4, 3))


def _err(fn):
    try:
        fn()
    except Exception as e:                      # noqa: BLE001 -- the type is compared
        return type(e), str(e)
    return None


# ------------------------------------------------ review7 #4: eval BatchNorm's saved stats

@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("change", ["var_mul", "mean_add", "reset", "none", "train_between"])
@pytest.mark.parametrize("affine", [True, False])
def test_eval_batchnorm_running_stats_changed_before_backward(change, affine, dt):
    def run(L):
        bn = L.nn.BatchNorm1d(3, affine=affine).to(getattr(L, dt)).eval()
        x = L.tensor(X0, dtype=getattr(L, dt), requires_grad=True)
        y = bn(x)
        with L.no_grad():
            if change == "var_mul":
                bn.running_var.mul_(2)
            elif change == "mean_add":
                bn.running_mean.add_(1)
            elif change == "reset":
                bn.reset_running_stats()
        if change == "train_between":           # a training forward: no version bump
            bn.train()
            bn(x * 2)
        w = L.arange(12.0, dtype=getattr(L, dt)).reshape(4, 3)
        e = _err(lambda: (y * w).sum().backward())
        return e, None if e else x.grad.numpy()
    (te, tg), (se, sgr) = run(torch), run(sg)
    assert te == se
    if tg is not None:
        np.testing.assert_allclose(sgr, tg, rtol=1e-6 if dt == "float32" else 1e-13)


# ------------------------------ review7 #5: compiled, two leaves sharing one storage

def _shared_leaves(L, compiled, mode, dt):
    p = L.tensor([1.0, 2.0, 3.0], dtype=getattr(L, dt), requires_grad=True)
    q = p.detach().requires_grad_()
    x = L.tensor([1.0, 10.0, 100.0], dtype=getattr(L, dt))
    if mode == "sum":
        def f(x):
            return (q * x * 3).sum() + (p * x * 2).sum()
    elif mode == "mixed":
        def f(x):
            return (p * x * 2).sum() + (q.sin() * x).sum() + (p * q).sum()
    else:                                   # a training step: backward and updates inside
        def f(x):
            loss = (p * x).sum() + (q * q * x).sum()
            loss.backward()
            with L.no_grad():
                p.sub_(0.1 * p.grad)
                q.sub_(0.01 * q.grad)
                p.grad = None
                q.grad = None
            return (p * x).sum() + q.sum()
    if compiled:
        f = sg.compile(f)
    out = []
    for _ in range(3):                      # the trace, then the cached program
        loss = f(x)
        if mode != "step":
            loss.backward()
        out.append([loss.item(), p.detach().numpy().copy()]
                   + [None if t.grad is None else t.grad.numpy().copy() for t in (p, q)])
    return out


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["sum", "mixed", "step"])
def test_compiled_leaves_sharing_storage_get_their_gradients(mode, dt):
    want = _shared_leaves(torch, False, mode, dt)
    got = _shared_leaves(sg, True, mode, dt)
    tol = 1e-6 if dt == "float32" else 1e-13
    for w_row, g_row in zip(want, got):
        for w, g in zip(w_row, g_row):
            assert (w is None) == (g is None)
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


# ------------------------------------- split / chunk / unbind pieces: views of their input

PIECES = {
    "split": lambda t: t.split(2)[1],
    "split_sizes": lambda t: t.split([1, 3])[1],
    "chunk": lambda t: t.chunk(2)[0],
    "split_dim1": lambda t: t.split(1, dim=1)[1],
    "unbind": lambda t: t.unbind(0)[2],
    "narrow": lambda t: t.narrow(0, 1, 2),
}


@pytest.mark.parametrize("name", sorted(PIECES))
def test_pieces_share_version_and_base(name):
    def run(L):
        a = L.tensor(np.arange(8.0).reshape(4, 2))
        p = PIECES[name](a)
        with L.no_grad():
            p.add_(1)
        return a.numpy().copy(), a._version, p._version, p._base is a
    got, want = run(sg), run(torch)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1:] == want[1:]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(PIECES))
def test_piece_changed_in_no_grad_before_backward(name, dt):
    """A saved tensor changed through a piece: PyTorch's version error, not a gradient
    computed with the changed value."""
    def run(L):
        x = L.tensor(np.arange(8.0).reshape(4, 2), dtype=getattr(L, dt), requires_grad=True)
        w = L.tensor(np.arange(8.0).reshape(4, 2), dtype=getattr(L, dt), requires_grad=True)
        y = x * 1
        z = (w * y).sum()
        with L.no_grad():
            PIECES[name](y).mul_(10)
        return _err(lambda: z.backward())
    assert run(sg) == run(torch)


def _view_cases(L):
    def mk(split=True):
        x = L.zeros(4, 3, requires_grad=True)
        y = x * 1
        return y, (y.split(2)[1] if split else y)
    cases = {}

    def case(f):
        cases[f.__name__] = f
        return f

    @case
    def inplace_on_piece():
        mk()[1].mul_(2)

    @case
    def copy_on_piece():
        mk()[1].copy_(L.ones(2, 3))

    @case
    def view_of_piece():
        mk()[1].view(6).add_(1)

    @case
    def unbind_piece():
        mk(False)[0].unbind(1)[2].zero_()

    @case
    def piece_of_plain_tensor_rg_operand():
        L.zeros(4).split(2)[0].mul_(L.ones(2, requires_grad=True))

    @case
    def no_grad_view_then_grad_inplace():
        y = mk(False)[0]
        with L.no_grad():
            v = y[0:2]
        v.mul_(2)

    @case
    def view_of_no_grad_view():
        y = mk(False)[0]
        with L.no_grad():
            v = y[0:2]
        v[0:1].mul_(2)

    @case
    def no_grad_view_of_plain_tensor():
        x = L.zeros(3)
        with L.no_grad():
            v = x[0:2]
        v.mul_(L.ones(2, requires_grad=True))

    @case
    def no_grad_inplace_on_piece_is_fine():
        y, p = mk()
        with L.no_grad():
            p.mul_(2)
        return y._version

    @case
    def no_grad_view_backward_goes_nowhere():
        x = L.ones(3, requires_grad=True)
        with L.no_grad():
            v = x[0:2]
        (v * 2).sum().backward()
        return v.requires_grad, v.is_leaf, v.grad, x.grad

    for key in ["0", ":", "1:", "0:2", "None", "..., 0", "0, 1:", "[0, 1]", ":, [0]", "0, :"]:
        def setitem(key=key):
            exec(f"p[{key}] = 5.", {"p": mk()[1]})
        cases[f"setitem[{key}]"] = setitem
    return cases


@pytest.mark.parametrize("name", sorted(_view_cases(torch)))
def test_inplace_on_multi_output_and_no_grad_views_as_torch(name):
    def run(L):
        f = _view_cases(L)[name]
        e = _err(f)
        return e if e else f()
    assert run(sg) == run(torch)


# --------------------------------------------- one element per norm; 0-d dims out of range

@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("v", [5e-324, 1e-42, -2e-170, 0.0, 3.5])
@pytest.mark.parametrize("shape,kw", [((), {}), ((1,), {}), ((3, 1), {"dim": 1}),
                                      ((1, 2), {"dim": 0, "keepdim": True})])
@pytest.mark.parametrize("p", [2, 1, 0.5, float("inf")])
def test_norm_of_single_elements_as_torch(p, shape, kw, v, dt):
    def run(L):
        x = L.full(shape, v, dtype=getattr(L, dt), requires_grad=True)
        y = x.norm(p=p, **kw)
        y.sum().backward()
        return y.detach().numpy(), x.grad.numpy()
    for g, w in zip(run(sg), run(torch)):
        np.testing.assert_array_equal(g, w)


def test_zero_dim_reduction_dims_checked():
    for f in (lambda L, x: x.norm(dim=1), lambda L, x: x.sum(dim=1), lambda L, x: x.mean(-2),
              lambda L, x: L.linalg.vector_norm(x, dim=1), lambda L, x: x.amax(2)):
        assert _err(lambda: f(sg, sg.tensor(3.0))) == _err(lambda: f(torch, torch.tensor(3.0)))
    assert float(sg.tensor(3.0).sum(-1)) == 3.0


# ------------------------- svdvals: no version error (PyTorch saves U, S, Vᵀ, not A)

SVD_FUNCS = {
    "svdvals": lambda L, y: L.linalg.svdvals(y),
    "nuc": lambda L, y: L.linalg.matrix_norm(y, "nuc"),
    "spectral": lambda L, y: L.linalg.matrix_norm(y, 2),
    "neg2": lambda L, y: L.linalg.norm(y, ord=-2),
}


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(SVD_FUNCS))
def test_svd_values_input_changed_before_backward(name, dt):
    a = np.random.default_rng(1).normal(size=(3, 4))

    def run(L):
        x = L.tensor(a, dtype=getattr(L, dt), requires_grad=True)
        y = x * 1
        s = SVD_FUNCS[name](L, y)
        y.add_(1)
        e = _err(lambda: s.sum().backward())
        return e, None if e else x.grad.numpy()
    (te, tg), (se, sgr) = run(torch), run(sg)
    assert te == se
    np.testing.assert_allclose(sgr, tg, rtol=1e-4 if dt == "float32" else 1e-10, atol=1e-6)


# --------------------------------- compiled view(): PyTorch's error where eager raises it

VIEWS = [
    lambda x: x.t().view(-1), lambda x: x.t().view(12), lambda x: x.t().view(2, 2, 3),
    lambda x: x.t().contiguous().view(-1), lambda x: x[:, ::2].view(-1),
    lambda x: x.unsqueeze(0).expand(2, 3, 4).view(24), lambda x: x.t().view(4, 3),
    lambda x: x.t().unsqueeze(0).view(1, 4, 3), lambda x: x.t()[1:].view(-1),
    lambda x: x.mT.mT.view(-1), lambda x: x[1].view(2, 2), lambda x: x[:, 1].view(-1),
    lambda x: x.t().reshape(2, 6).view(-1), lambda x: x.flip(0).view(-1),
]


@pytest.mark.parametrize("k", range(len(VIEWS)))
def test_compiled_view_refuses_what_eager_refuses(k):
    a = np.arange(12.0).reshape(3, 4)

    def run(f):
        try:
            return np.asarray(f()).tolist()
        except RuntimeError as e:
            return str(e)
    want = run(lambda: VIEWS[k](torch.tensor(a)).numpy())
    assert run(lambda: VIEWS[k](sg.tensor(a)).numpy()) == want
    assert run(lambda: sg.compile(VIEWS[k])(sg.tensor(a)).numpy()) == want


# ------------- generators drawn in a failing compiled step: advanced once, as eagerly

def _failing_steps(L, compiled, backend, bridged):
    g = L.Generator().manual_seed(3)
    L.manual_seed(5)
    buf = L.zeros(3)
    w = L.ones(3, requires_grad=bridged)

    def step(x, idx):
        noise = L.randn(3, generator=g)
        buf.add_(noise + L.rand(3))
        return ((x + noise) * w).gather(0, idx).sum()
    f = sg.compile(step, backend=backend) if compiled else step
    out = []
    for idx in ([0, 1], [0, 7], [2, 1], [9, 0], [1, 1]):
        try:
            r = f(L.ones(3), L.tensor(idx))
            if bridged:
                r.backward()
            out.append(r.item())
        except RuntimeError as e:
            out.append(str(e))
        out.append(buf.numpy().copy())
    out += [L.randn(2, generator=g).numpy(), L.randn(2).numpy()]
    if bridged:
        out.append(w.grad.numpy())
    return out


@pytest.mark.parametrize("bridged", [False, True])
@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_generators_in_failing_compiled_step_advance_once(backend, bridged):
    want = _failing_steps(torch, False, None, bridged)
    got = _failing_steps(sg, True, backend, bridged)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, str):
            assert g == w
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


# ------------------ sort / argsort / topk: ties in PyTorch's CPU order (review5 #4)

_TIE_SHAPES = [((3, 40), 1), ((40, 3), 0), ((2, 5, 33), 1), ((100,), 0), ((7,), 0),
               ((4, 17), -1), ((2, 300), 1), ((5,), 0)]


@pytest.mark.parametrize("dt", ["float32", "float64", "int64", "int32", "uint8"])
@pytest.mark.parametrize("shape,dim", _TIE_SHAPES)
def test_tie_order_of_sort_argsort_topk_as_torch(shape, dim, dt):
    rng = np.random.default_rng(abs(hash((shape, dt))) % 1000)
    for trial in range(3):
        x = rng.integers(0, 3, size=shape).astype(dt)
        if dt.startswith("float") and trial:
            x[rng.random(shape) < 0.2] = np.nan
        T, S = torch.tensor(x), sg.tensor(x)
        for desc in (False, True):
            for stable in (False, True):
                np.testing.assert_array_equal(
                    sg.sort(S, dim=dim, descending=desc, stable=stable).indices.numpy(),
                    torch.sort(T, dim=dim, descending=desc, stable=stable).indices.numpy())
                np.testing.assert_array_equal(
                    sg.argsort(S, dim=dim, descending=desc, stable=stable).numpy(),
                    torch.argsort(T, dim=dim, descending=desc, stable=stable).numpy())
            n = shape[dim]
            for k in sorted({1, 2, 3, n // 2, n}):
                for srt in (True, False):
                    want = torch.topk(T, k, dim=dim, largest=desc, sorted=srt)
                    got = sg.topk(S, k, dim=dim, largest=desc, sorted=srt)
                    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())


def test_topk_tie_gradient_and_compiled_as_torch():
    x = np.array([[3.0, 3.0, 3.0, 3.0, 3.0], [1.0, 2.0, 2.0, 0.0, 1.0]], dtype=np.float32)
    w = np.arange(1.0, 3.0, dtype=np.float32)
    grads = []
    for L in (torch, sg):
        t = L.tensor(x, requires_grad=True)
        (L.topk(t, 2).values.sum(1) * L.tensor(w)).sum().backward()
        grads.append(t.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])
    a = np.random.default_rng(0).integers(0, 3, size=(3, 40)).astype(np.float32)
    f = sg.compile(lambda v: (sg.topk(v, 5).indices, sg.sort(v).indices,
                              sg.argsort(v, descending=True)))
    T = torch.tensor(a)
    for g, w in zip(f(sg.tensor(a)), (torch.topk(T, 5).indices, torch.sort(T).indices,
                                      torch.argsort(T, descending=True))):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_topk_of_bool_refused_as_torch():
    for v in ([True, False], True):
        assert _err(lambda: sg.topk(sg.tensor(v), 1)) == _err(lambda: torch.topk(torch.tensor(v), 1))


# ------------------------------ forward mode through while_loop (review6 #10), vs JAX

def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax, jax.numpy


def _while_cases(L, lax_, np_, dt="float64"):
    w = np.array([0.5, -1.5, 2.0], dtype=dt)

    def counted(h):
        return lax_.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * np_.sin(c[1])),
                               (L(0), h))[1]

    def until(h):             # data-dependent trip count; two float carries
        def body(c):
            return c[0] * 1.5 + 0.1, c[1] + c[0] * c[0], c[2] + 1
        return lax_.while_loop(lambda c: np_.sum(c[0] * c[0]) < 30.0, body,
                               (h, h * 0.0, L(0)))[1]

    def closure(h):           # the body closes over a value computed from the input
        k = np_.cos(h) * w
        return lax_.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * k + h),
                               (L(0), h))[1]

    def nested(h):
        def inner(c):
            return lax_.while_loop(lambda d: d[0] < 2, lambda d: (d[0] + 1, np_.tanh(d[1]) * 1.1),
                                   (L(0), c))[1]
        return lax_.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, inner(c[1]) + c[1]),
                               (L(0), h))[1]

    def fori(h):
        return lax_.fori_loop(0, 3, lambda i, c: c * np_.sin(c) + i, h)
    return {"counted": counted, "until": until, "closure": closure, "nested": nested,
            "fori": fori}


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name", ["counted", "until", "closure", "nested", "fori"])
def test_jvp_and_jacfwd_through_while_loop_as_jax(name, dt):
    jax, jnp = _jax()
    h = np.array([0.3, -0.2, 0.5], dtype=dt)
    t = np.array([1.0, -2.0, 0.5], dtype=dt)
    jf = _while_cases(lambda v: v, jax.lax, jnp, dt)[name]
    sf = _while_cases(sg.tensor, sg.lax, sg, dt)[name]
    want_v, want_t = jax.jvp(jf, (h,), (t,))
    got_v, got_t = sg.jvp(sf, (h,), (t,))
    tol = 2e-5 if dt == "float32" else 1e-12
    np.testing.assert_allclose(np.asarray(got_v), np.asarray(want_v), rtol=tol, atol=tol)
    np.testing.assert_allclose(np.asarray(got_t), np.asarray(want_t), rtol=tol, atol=tol)
    np.testing.assert_allclose(sg.func.jacfwd(sf)(sg.tensor(h)).numpy(),
                               np.asarray(jax.jacfwd(jf)(h)), rtol=tol, atol=tol)


def test_reverse_mode_through_while_loop_keeps_jax_error():
    jax, jnp = _jax()
    jf = _while_cases(lambda v: v, jax.lax, jnp)["until"]
    sf = _while_cases(sg.tensor, sg.lax, sg)["until"]
    h = np.array([0.3, -0.2, 0.5])
    want = _err(lambda: jax.grad(lambda v: jf(v).sum())(h))
    got = _err(lambda: sg.grad(lambda v: sf(v).sum())(h))
    assert got[0] is want[0] and got[1].startswith("Reverse-mode differentiation does not work")


@pytest.mark.parametrize("v", [float("inf"), -float("inf"), float("nan")])
def test_norm_of_one_non_finite_element_as_torch(v):
    def run(L):
        x = L.tensor([v], dtype=L.float64, requires_grad=True)
        y = x.norm()
        y.backward()
        return y.item(), x.grad.numpy()
    (gv, gg), (tv, tg) = run(sg), run(torch)
    np.testing.assert_array_equal(np.array([gv]), np.array([tv]))
    np.testing.assert_array_equal(gg, tg)
