"""A compiled call updating state tensors that share memory without being the same
storage -- two parameters over one buffer, one an offset, strided or partial view of the
other (review9 A4): each update sees the other's, as memory does in PyTorch's eager
step. Values of the state after several steps against PyTorch, both dtypes."""
import numpy as np
import pytest
import torch

import symgrad as sg

LAYOUTS = {
    "offset": lambda b: (b, b[1:3]),
    "offset_first": lambda b: (b[1:3], b),
    "partial": lambda b: (b[0:3], b[2:5]),
    "strided": lambda b: (b, b[::2]),
    "disjoint_halves": lambda b: (b[:3], b[3:]),
    "matrix_column": lambda b: (b.reshape(2, 3), b.reshape(2, 3)[:, 1]),
    "three": lambda b: (b, b[1:4], b[3:]),
}
OPTIMIZERS = {
    "sgd": lambda L, ps: L.optim.SGD(ps, lr=0.1),
    "sgd_momentum": lambda L, ps: L.optim.SGD(ps, lr=0.1, momentum=0.9),
    "adam": lambda L, ps: L.optim.Adam(ps, lr=0.05),
}


def _run(L, layout, opt_name, dtype, compiled):
    base = L.arange(1., 7., dtype=getattr(L, dtype))
    params = [v.detach().requires_grad_() for v in LAYOUTS[layout](base)]
    opt = OPTIMIZERS[opt_name](L, params)

    def step():
        opt.zero_grad()
        loss = sum(((k + 1) * p ** (k + 2)).sum() for k, p in enumerate(params))
        loss.backward()
        opt.step()
        return loss.detach()

    if compiled:
        step = sg.compile(step)
    losses = [float(step()) for _ in range(4)]
    return losses, base.tolist()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_training_step_over_overlapping_parameters(layout, opt_name, dtype):
    want_losses, want = _run(torch, layout, opt_name, dtype, False)
    got_losses, got = _run(sg, layout, opt_name, dtype, True)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol)
    np.testing.assert_allclose(got_losses, want_losses, rtol=rtol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_read_after_write_of_overlapping_buffer(dtype):
    """A buffer read after another buffer over its memory was written in the call."""
    def make(L):
        base = L.arange(1., 7., dtype=getattr(L, dtype))
        a, b = base.detach(), base[2:5].detach()

        def f(x):
            a.mul_(x)
            out = b * 1          # read after a's write: sees it
            b.add_(1)
            return out, a * 1    # a read after b's write: sees it
        return base, f

    tb, tf = make(torch)
    sb, sf = make(sg)
    sf = sg.compile(sf)
    for k in range(3):
        x = 1.5 + k
        want = tf(torch.tensor(x, dtype=getattr(torch, dtype)))
        got = sf(sg.tensor(x, dtype=getattr(sg, dtype)))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)
        np.testing.assert_allclose(sb.numpy(), tb.numpy(), rtol=1e-6)
