"""``symgrad.compile(fn)`` whose output is back-propagated eagerly (the
``model = torch.compile(model)`` pattern): a closed-over parameter read straight by a named
composite op (embedding, index_select, take, norm, var/std, layer_norm, gelu, mse_loss,
softmax, log_softmax, logsumexp) gets torch's gradient -- review6 #1, where it got None
(the composite ran on a detached stand-in, or the program's input was the max-shift's
``p.detach()`` alias instead of ``p``)."""
import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = [(np.float32, 2e-5), (np.float64, 1e-12)]

# name -> op(lib, W, x) with W (4, 3) the parameter and x (5, 4) a traced argument
OPS = {
    "embedding": lambda L, W, x: L.nn.functional.embedding(L.tensor([[1, 2], [3, 1]]), W).sum()
    + (x @ W).sum() * 0.5,
    "index_select": lambda L, W, x: (W.index_select(0, L.tensor([2, 0, 2])) ** 2).sum(),
    "take": lambda L, W, x: (L.take(W, L.tensor([0, 5, 11, 5])) * 3).sum(),
    "norm": lambda L, W, x: W.norm() + (x @ W).sum(),
    "norm_dim": lambda L, W, x: W.norm(dim=1).sum(),
    "var": lambda L, W, x: (x @ W.var(1)).sum(),
    "std": lambda L, W, x: W.std(0).sum(),
    "layer_norm": lambda L, W, x: (x @ L.nn.functional.layer_norm(W, (3,)) ** 2).sum(),
    "gelu": lambda L, W, x: (x @ L.nn.functional.gelu(W)).sum(),
    "mse_loss": lambda L, W, x: L.nn.functional.mse_loss(W, L.ones(4, 3, dtype=W.dtype)),
    "softmax": lambda L, W, x: (x @ L.softmax(W, 0) ** 2).sum(),
    "log_softmax": lambda L, W, x: (x @ L.log_softmax(W, 1)).sum(),
    "logsumexp": lambda L, W, x: (x @ L.logsumexp(W, 1)).sum(),
    "detach_alias": lambda L, W, x: ((W - W.detach().amax(0)) ** 2 * x[:4, :3]).sum(),
}


@pytest.mark.parametrize("dt,tol", DTYPES)
@pytest.mark.parametrize("name", sorted(OPS))
def test_closed_over_parameter_through_composite(name, dt, tol):
    op = OPS[name]
    rng = np.random.default_rng(1)
    w0, x0 = rng.normal(size=(4, 3)).astype(dt), rng.normal(size=(5, 4)).astype(dt)
    Wt = torch.tensor(w0, requires_grad=True)
    ref = op(torch, Wt, torch.tensor(x0))
    ref.backward()
    W = sg.tensor(w0, requires_grad=True)
    f = sg.compile(lambda x: op(sg, W, x))
    for _ in range(2):                          # the tracing call, then the cached one
        W.grad = None
        out = f(sg.tensor(x0))
        assert out.grad_fn is not None
        out.backward()
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=tol,
                                   atol=tol)
        assert W.grad is not None, name
        np.testing.assert_allclose(W.grad.numpy(), Wt.grad.numpy(), rtol=tol, atol=tol)


class _Net:
    """A tied-embedding language model and a penalised, gated layer, for both libraries."""

    @staticmethod
    def make(L):
        class LM(L.nn.Module):
            def __init__(s):
                super().__init__()
                s.emb = L.nn.Embedding(6, 4)
                s.norm = L.nn.LayerNorm(4)
                s.gate = L.nn.Parameter(L.zeros(4))
                s.head = L.nn.Linear(4, 6, bias=False)
                s.head.weight = s.emb.weight                       # weight tying

            def forward(s, i):
                h = s.norm(L.tanh(s.emb(i))) * L.softmax(s.gate, 0)
                return s.head(L.nn.functional.gelu(h)), s.emb.weight.norm()
        return LM()


@pytest.mark.parametrize("dt,tol", DTYPES)
def test_compiled_model_training_equals_torch(dt, tol):
    torch.manual_seed(0)
    tm = _Net.make(torch).to(torch.float64 if dt is np.float64 else torch.float32)
    sm = _Net.make(sg).to(sg.float64 if dt is np.float64 else sg.float32)
    sm.load_state_dict({k: sg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    cm = sg.compile(sm)
    topt = torch.optim.SGD(tm.parameters(), lr=0.3)
    sopt = sg.optim.SGD(sm.parameters(), lr=0.3)
    idx, tgt = [[1, 2, 3], [4, 0, 2]], [2, 3, 4, 5, 1, 0]
    for _ in range(4):
        for L, m, opt in ((torch, tm, topt), (sg, cm, sopt)):
            opt.zero_grad()
            logits, pen = m(L.tensor(idx))
            loss = L.nn.functional.cross_entropy(logits.reshape(-1, 6), L.tensor(tgt)) \
                + 0.1 * pen
            loss.backward()
            opt.step()
        for (k, tp), (_, sp) in zip(tm.named_parameters(), sm.named_parameters()):
            assert sp.grad is not None, k
            np.testing.assert_allclose(sp.grad.numpy(), tp.grad.numpy(), rtol=tol * 10,
                                       atol=tol * 10, err_msg=k)
            np.testing.assert_allclose(sp.detach().numpy(), tp.detach().numpy(),
                                       rtol=tol * 10, atol=tol * 10, err_msg=k)
