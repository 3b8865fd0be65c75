"""A compiled training step (forward, loss, ``backward()``, ``optimizer.step()``) called at
changing batch sizes -- the last, smaller batch of an epoch -- is shape-generic: one
kernel serves every size, each step's parameters, optimizer state and dropout masks as
PyTorch's."""
import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = [("float32", 1e-5), ("float64", 1e-12)]
SIZES = (16, 16, 16, 7, 16, 5, 9, 11, 16, 13, 2)


def _pair(dtype, dropout):
    torch.manual_seed(3)
    t = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
    s = sg.nn.Sequential(sg.nn.Linear(6, 12), sg.nn.ReLU(), sg.nn.Dropout(dropout),
                         sg.nn.Linear(12, 3))
    t = t.to(getattr(torch, dtype))
    s = s.to(getattr(sg, dtype))
    state = {k.replace("2.", "3."): sg.tensor(v.numpy()) for k, v in t.state_dict().items()}
    s.load_state_dict(state)
    return s, t


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_adam_step_at_changing_batch_sizes(dtype, tol):
    """MLP + cross-entropy + Adam: every step's loss and parameters as torch's; the sizes
    after the second compile no kernel of their own (verified traces only)."""
    s, t = _pair(dtype, 0.0)
    opt_s = sg.optim.Adam(s.parameters(), lr=1e-2)
    opt_t = torch.optim.Adam(t.parameters(), lr=1e-2)
    loss_s, loss_t = sg.nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()

    @sg.compile
    def step(x, y):
        opt_s.zero_grad()
        loss = loss_s(s(x), y)
        loss.backward()
        opt_s.step()
        return loss.detach()
    rng = np.random.default_rng(0)
    for b in SIZES:
        x = rng.normal(size=(b, 6)).astype(dtype)
        y = rng.integers(0, 3, b)
        ls = step(sg.tensor(x), sg.tensor(y))
        opt_t.zero_grad()
        lt = loss_t(t(torch.tensor(x)), torch.tensor(y))
        lt.backward()
        opt_t.step()
        np.testing.assert_allclose(ls.numpy(), lt.detach().numpy(), rtol=tol * 10)
        for ps, pt in zip(s.parameters(), t.parameters()):
            # (Adam divides by sqrt(v) + eps: a last-bit difference in a gradient moves a
            # parameter by a few ulps of lr)
            np.testing.assert_allclose(ps.detach().numpy(), pt.detach().numpy(),
                                       rtol=tol * 100, atol=tol * 10)
    # the first step (it creates Adam's state) runs once; 16 compiles; 7 makes the batch
    # size dynamic; every later size is served by that kernel
    assert step.cache_info().misses == 3


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_dropout_step_at_changing_batch_sizes_draws_torchs_masks(dtype, tol):
    """With dropout: at every size the mask is drawn at the call's shape from torch's
    stream (``torch.rand`` in float64, kept where >= p), the update torch's SGD with
    momentum on that mask."""
    p = 0.25
    s, t = _pair(dtype, p)
    opt_s = sg.optim.SGD(s.parameters(), lr=0.1, momentum=0.9)
    opt_t = torch.optim.SGD(t.parameters(), lr=0.1, momentum=0.9)

    @sg.compile
    def step(x, y):
        opt_s.zero_grad()
        loss = ((s(x) - y) ** 2).mean()
        loss.backward()
        opt_s.step()
        return loss.detach()
    rng = np.random.default_rng(1)
    sg.manual_seed(7)
    torch.manual_seed(7)
    for b in SIZES:
        x = rng.normal(size=(b, 6)).astype(dtype)
        y = rng.normal(size=(b, 3)).astype(dtype)
        ls = step(sg.tensor(x), sg.tensor(y))
        keep = torch.rand(b, 12, dtype=torch.float64) < 1 - p     # torch's bernoulli_(1 - p)
        opt_t.zero_grad()
        h = t[1](t[0](torch.tensor(x)))
        h = torch.where(keep, h / (1 - p), torch.zeros((), dtype=h.dtype))
        lt = ((t[2](h) - torch.tensor(y)) ** 2).mean()
        lt.backward()
        opt_t.step()
        np.testing.assert_allclose(ls.numpy(), lt.detach().numpy(), rtol=tol * 10)
        for ps, pt in zip(s.parameters(), t.parameters()):
            np.testing.assert_allclose(ps.detach().numpy(), pt.detach().numpy(),
                                       rtol=tol * 10, atol=tol)
    assert step.cache_info().misses == 3
    # the generator advanced as torch's did: one mask per step
    np.testing.assert_array_equal(sg.rand(5, dtype=sg.float64).numpy(),
                                  torch.rand(5, dtype=torch.float64).numpy())


def test_draws_at_the_call_size_in_a_function():
    """``randn(n, d)`` and ``rand_like`` of a dynamic batch inside a compiled function:
    drawn per call at the call's size, the numbers torch's generator gives."""
    def f(x):
        return x + sg.randn(x.shape[0], 3, dtype=sg.float64) * sg.rand_like(x)
    cf = sg.compile(f)
    sg.manual_seed(5)
    torch.manual_seed(5)
    for n in (4, 4, 6, 9, 3, 12):
        x = np.ones((n, 3))
        got = cf(sg.tensor(x)).numpy()
        want = x + torch.randn(n, 3, dtype=torch.float64).numpy() * \
            torch.rand(n, 3, dtype=torch.float64).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-15)
    assert cf.cache_info().misses == 2


def test_a_draw_tied_to_its_shape_compiles_per_size():
    """``bernoulli`` of fixed probabilities (numbers of the traced shape) cannot be drawn
    at another size: that program compiles per size, each call right."""
    def f(x):
        return x * sg.bernoulli(sg.full((x.shape[0], 2), 0.5, dtype=sg.float64))
    cf = sg.compile(f)
    sg.manual_seed(2)
    torch.manual_seed(2)
    for n in (3, 5, 4):
        got = cf(sg.ones(n, 2, dtype=sg.float64)).numpy()
        want = (torch.rand(n, 2, dtype=torch.float64) < 0.5).double().numpy()
        np.testing.assert_array_equal(got, want)
    assert cf.cache_info().misses == 3


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_compiled_module_with_dropout_at_changing_batch_sizes(dtype, tol):
    """``compile(model)`` with dropout in training, its outputs joining autograd: at every
    size (one under no_grad first) the output and the gradients are torch's for the mask
    torch's generator draws; the batch size becomes dynamic."""
    p = 0.4
    s, t = _pair(dtype, p)
    cs = sg.compile(s)
    rng = np.random.default_rng(2)
    sg.manual_seed(9)
    torch.manual_seed(9)
    for b, grad in ((8, True), (8, True), (5, True), (11, False), (11, True), (3, False),
                    (3, True), (6, True)):
        x = rng.normal(size=(b, 6)).astype(dtype)
        keep = torch.rand(b, 12, dtype=torch.float64) < 1 - p     # torch's bernoulli_(1 - p)
        xt = torch.tensor(x, requires_grad=True)
        h = t[1](t[0](xt))
        yt = t[2](torch.where(keep, h / (1 - p), torch.zeros((), dtype=h.dtype)))
        if not grad:
            with sg.no_grad():            # (the generic kernel itself runs)
                ys = cs(sg.tensor(x, requires_grad=True))
            np.testing.assert_allclose(ys.numpy(), yt.detach().numpy(), rtol=tol * 10,
                                       atol=tol)
            continue
        xs = sg.tensor(x, requires_grad=True)
        ys = cs(xs)
        np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), rtol=tol * 10,
                                   atol=tol)
        s.zero_grad(), t.zero_grad()
        (ys ** 2).sum().backward()
        (yt ** 2).sum().backward()
        np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=tol * 10, atol=tol)
        for ps, pt in zip(s.parameters(), t.parameters()):
            np.testing.assert_allclose(ps.grad.numpy(), pt.grad.numpy(), rtol=tol * 10,
                                       atol=tol)
    assert cs._compiled.cache_info().misses == 2


def test_a_draw_of_the_batch_size_reduced_away_joins_autograd():
    """A draw shaped by the batch size whose result does not show that size (summed
    over it), outputs joining autograd: each call sums the call's own ``n`` draws."""
    def f(x):
        return (x * 2).sum(0) + sg.randn(x.shape[0], 3, dtype=sg.float64).sum(0)
    cf = sg.compile(f)
    sg.manual_seed(4)
    torch.manual_seed(4)
    for n in (4, 4, 6, 9, 2, 9):
        x = sg.ones(n, 3, dtype=sg.float64, requires_grad=True)
        y = cf(x)
        want = 2.0 * n + torch.randn(n, 3, dtype=torch.float64).sum(0).numpy()
        np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-14)
        y.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.full((n, 3), 2.0))


@pytest.mark.parametrize("name", ["randint", "uniform_", "normal", "dropout"])
def test_draw_parameters_from_the_batch_size(name):
    """A draw whose parameters (not only its shape) come from the batch size -- a
    ``randint`` bound, ``uniform_``'s range, ``normal``'s mean, dropout's ``p`` -- is
    drawn with this call's parameters at every size (review9 A2: the traced size's)."""
    draws = {
        "randint": lambda L, x: L.randint(0, x.shape[0], (4,)).double(),
        "uniform_": lambda L, x: L.empty(3, dtype=L.float64).uniform_(0, x.shape[0]),
        "normal": lambda L, x: L.normal(float(x.shape[0]), 1.0, (3,), dtype=L.float64),
        "dropout": lambda L, x: L.nn.functional.dropout(x, 1.0 / x.shape[0]),
    }[name]
    cf = sg.compile(lambda x: draws(sg, x) + 0 * x.sum())
    for b in (64, 64, 50, 3, 7):
        x = np.arange(b * 2.0).reshape(b, 2)
        torch.manual_seed(0)
        want = draws(torch, torch.tensor(x)).numpy()
        sg.manual_seed(0)
        np.testing.assert_allclose(cf(sg.tensor(x)).numpy(), want, rtol=1e-15)


def test_a_generic_kernel_that_cannot_be_lowered_compiles_per_size():
    """``randperm`` of the batch size as an index, outputs joining autograd: the program
    has an index kernel without a runtime-size lowering, so each size compiles its own
    (review9 B1: the deferred generic kernel's NotGeneric leaked to the caller)."""
    torch.manual_seed(0)
    wt = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    w = sg.tensor(wt.detach().numpy(), requires_grad=True)
    f = sg.compile(lambda x: ((x @ w)[sg.randperm(x.shape[0])] ** 2).sum())
    rng = np.random.default_rng(3)
    for b in (16, 16, 7, 9):
        x = rng.normal(size=(b, 5))
        sg.manual_seed(b)
        torch.manual_seed(b)
        got = f(sg.tensor(x, requires_grad=True))
        want = ((torch.tensor(x) @ wt)[torch.randperm(b)] ** 2).sum()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
        g, = sg.autograd.grad(got, w)
        gt, = torch.autograd.grad(want, wt)
        np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-12)
    with sg.no_grad():                     # (a no_grad call runs the program itself)
        x = rng.normal(size=(11, 5))
        sg.manual_seed(1)
        torch.manual_seed(1)
        np.testing.assert_allclose(f(sg.tensor(x)).item(),
                                   ((torch.tensor(x) @ wt)[torch.randperm(11)] ** 2).sum().item(),
                                   rtol=1e-12)


def test_a_deferred_generic_kernel_that_cannot_be_lowered_runs_under_no_grad():
    """A shape-generic entry joining autograd compiles its own kernel only when a call
    runs it (no_grad): an index kernel it cannot lower then makes that size compile its
    own program (the NotGeneric error escaped to the caller)."""
    wt = torch.ones(5, 4, dtype=torch.float64, requires_grad=True)
    w = sg.tensor(wt.detach().numpy(), requires_grad=True)
    f = sg.compile(lambda x, i: ((x @ w)[i] ** 2).sum())
    rng = np.random.default_rng(0)
    for b, grad in ((6, True), (7, True), (9, True), (11, False), (12, True)):
        x, i = rng.normal(size=(b, 5)), rng.permutation(b)
        want = ((torch.tensor(x) @ wt)[torch.tensor(i)] ** 2).sum()
        xs = sg.tensor(x, requires_grad=True)
        if grad:
            got = f(xs, sg.tensor(i))
            g, = sg.autograd.grad(got, w)
            np.testing.assert_allclose(g.numpy(), torch.autograd.grad(want, wt)[0].numpy(),
                                       rtol=1e-12)
        else:
            with sg.no_grad():
                got = f(xs, sg.tensor(i))
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
