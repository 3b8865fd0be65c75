"""The margin, embedding, likelihood and CTC losses (functional and module forms) against
PyTorch: values and input gradients in float32 and float64 for every reduction, module
reprs, PyTorch's errors, and the same losses inside ``symgrad.compile``."""
import numpy as np
import pytest
import torch

import symgrad as sg
from tests.nn.helpers import DTYPES, close, same_error

REDUCTIONS = ("mean", "sum", "none")
rng = np.random.default_rng(0)


def _data(dtype):
    """Named arrays the cases draw from (fixed per dtype)."""
    r = np.random.default_rng(1)
    d = {k: r.normal(size=(5, 4)).astype(dtype) for k in ("a", "b", "c")}
    d["v1"] = r.normal(size=5).astype(dtype)
    d["v2"] = r.normal(size=5).astype(dtype)
    d["pm1"] = np.where(r.random(5) < 0.5, -1.0, 1.0).astype(dtype)
    d["pm1_54"] = np.where(r.random((5, 4)) < 0.5, -1.0, 1.0).astype(dtype)
    d["bin"] = (r.random((5, 4)) < 0.5).astype(dtype)
    d["counts"] = r.poisson(2.0, size=(5, 4)).astype(dtype)
    d["pos"] = r.uniform(0.1, 2.0, size=(5, 4)).astype(dtype)
    d["var4"] = r.uniform(0.5, 2.0, size=(5, 4)).astype(dtype)
    d["var_short"] = r.uniform(0.5, 2.0, size=(5,)).astype(dtype)
    d["w4"] = r.uniform(0.5, 2.0, size=4).astype(dtype)
    return d


# (name, call(F, tensors, ints), float inputs, differentiable inputs)
CASES = {
    "margin_ranking": (lambda F, t, i, red: F.margin_ranking_loss(t["v1"], t["v2"], t["pm1"],
                                                                  margin=0.3, reduction=red),
                       ("v1", "v2", "pm1"), ("v1", "v2")),
    "hinge_embedding": (lambda F, t, i, red: F.hinge_embedding_loss(t["a"], t["pm1_54"],
                                                                    margin=0.7, reduction=red),
                        ("a", "pm1_54"), ("a",)),
    "cosine_embedding": (lambda F, t, i, red: F.cosine_embedding_loss(t["a"], t["b"], t["pm1"],
                                                                      margin=0.1, reduction=red),
                         ("a", "b", "pm1"), ("a", "b")),
    "triplet": (lambda F, t, i, red: F.triplet_margin_loss(t["a"], t["b"], t["c"], margin=2.0,
                                                           reduction=red),
                ("a", "b", "c"), ("a", "b", "c")),
    "triplet_swap_p1": (lambda F, t, i, red: F.triplet_margin_loss(
        t["a"], t["b"], t["c"], margin=1.5, p=1, swap=True, reduction=red),
        ("a", "b", "c"), ("a", "b", "c")),
    "triplet_distance": (lambda F, t, i, red: F.triplet_margin_with_distance_loss(
        t["a"], t["b"], t["c"], distance_function=lambda x, y: ((x - y) ** 2).sum(-1),
        margin=3.0, swap=True, reduction=red), ("a", "b", "c"), ("a", "b", "c")),
    "soft_margin": (lambda F, t, i, red: F.soft_margin_loss(t["a"], t["pm1_54"], reduction=red),
                    ("a", "pm1_54"), ("a",)),
    "multilabel_soft_margin": (lambda F, t, i, red: F.multilabel_soft_margin_loss(
        t["a"], t["bin"], weight=t["w4"], reduction=red), ("a", "bin", "w4"), ("a",)),
    "multilabel_margin": (lambda F, t, i, red: F.multilabel_margin_loss(t["a"], i["ml"],
                                                                        reduction=red),
                          ("a",), ("a",)),
    "multi_margin": (lambda F, t, i, red: F.multi_margin_loss(t["a"], i["y"], reduction=red),
                     ("a",), ("a",)),
    "multi_margin_p2_w": (lambda F, t, i, red: F.multi_margin_loss(
        t["a"], i["y"], p=2, margin=0.6, weight=t["w4"], reduction=red), ("a", "w4"), ("a",)),
    "poisson_log": (lambda F, t, i, red: F.poisson_nll_loss(t["a"], t["counts"], full=True,
                                                            reduction=red),
                    ("a", "counts"), ("a",)),
    "poisson_rate": (lambda F, t, i, red: F.poisson_nll_loss(t["pos"], t["counts"],
                                                             log_input=False, reduction=red),
                     ("pos", "counts"), ("pos",)),
    "gaussian": (lambda F, t, i, red: F.gaussian_nll_loss(t["a"], t["b"], t["var4"], full=True,
                                                          reduction=red),
                 ("a", "b", "var4"), ("a", "b", "var4")),
    "gaussian_homoscedastic": (lambda F, t, i, red: F.gaussian_nll_loss(
        t["a"], t["b"], t["var_short"], reduction=red), ("a", "b", "var_short"),
        ("a", "var_short")),
    "gaussian_float_var": (lambda F, t, i, red: F.gaussian_nll_loss(t["a"], t["b"], 0.5,
                                                                    reduction=red),
                           ("a", "b"), ("a",)),
}


def _ints():
    ml = np.array([[3, 0, -1, 1], [1, 2, 3, -1], [0, 0, -1, 2], [-1, 1, 2, 3], [2, 1, 0, 3]])
    return {"ml": ml, "y": np.array([0, 3, 1, 2, 3])}


@pytest.mark.parametrize("red", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_value_and_gradient_equal_torch(name, dtype, red):
    fn, floats, diff = CASES[name]
    d = _data(dtype)
    ints = _ints()
    ts = {k: torch.tensor(d[k], requires_grad=k in diff) for k in floats}
    ss = {k: sg.tensor(d[k], requires_grad=k in diff) for k in floats}
    want = fn(torch.nn.functional, ts, {k: torch.tensor(v) for k, v in ints.items()}, red)
    got = fn(sg.nn.functional, ss, {k: sg.tensor(v) for k, v in ints.items()}, red)
    close(got, want, dtype, "value")
    g = rng.normal(size=tuple(want.shape)).astype(dtype)
    want.backward(torch.tensor(g))
    got.backward(sg.tensor(g))
    for k in diff:
        close(ss[k].grad, ts[k].grad, dtype, f"grad of {k}", factor=4)


def test_kink_gradients_are_torchs():
    """At a hinge's kink (margin - x exactly 0) clamp_min passes no gradient, as ATen."""
    for F_t, F_s in ((torch.nn.functional, sg.nn.functional),):
        xt = torch.tensor([1.0, 0.5, 2.0], requires_grad=True)
        xs = sg.tensor([1.0, 0.5, 2.0], requires_grad=True)
        F_t.hinge_embedding_loss(xt, torch.tensor([-1.0, -1.0, 1.0])).backward()
        F_s.hinge_embedding_loss(xs, sg.tensor([-1.0, -1.0, 1.0])).backward()
        close(xs.grad, xt.grad)


def _ctc_inputs(dtype, concat):
    r = np.random.default_rng(5)
    T, N, C, S = 9, 4, 6, 4
    lp = np.log(r.dirichlet(np.ones(C), size=(T, N))).astype(dtype)
    tl = np.array([4, 1, 3, 2])
    il = np.array([9, 4, 7, 8])
    tg = r.integers(1, C, size=(N, S))
    tg[2, 1] = tg[2, 0]                           # a repeated label (no skip transition)
    if concat:
        tg = np.concatenate([tg[i, :tl[i]] for i in range(N)])
    return lp, tg, il, tl


@pytest.mark.parametrize("concat", (False, True))
@pytest.mark.parametrize("red", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_ctc_loss_value_and_gradient_equal_torch(dtype, red, concat):
    lp, tg, il, tl = _ctc_inputs(dtype, concat)
    a, b = torch.tensor(lp, requires_grad=True), sg.tensor(lp, requires_grad=True)
    want = torch.nn.CTCLoss(reduction=red)(a, torch.tensor(tg), torch.tensor(il), torch.tensor(tl))
    got = sg.nn.CTCLoss(reduction=red)(b, sg.tensor(tg), sg.tensor(il), sg.tensor(tl))
    close(got, want, dtype, "value")
    g = np.random.default_rng(2).normal(size=tuple(want.shape)).astype(dtype)
    want.backward(torch.tensor(g))
    got.backward(sg.tensor(g))
    close(b.grad, a.grad, dtype, "gradient", factor=8)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ctc_unnormalised_inputs_lists_blank_and_zero_infinity(dtype):
    """Gradient w.r.t. raw (not normalised) log-probs as torch's (its exp(lp) term), length
    lists, another blank, an impossible alignment zeroed by zero_infinity, unbatched."""
    r = np.random.default_rng(3)
    T, N, C = 6, 3, 5
    lp = r.normal(size=(T, N, C)).astype(dtype)
    tg = np.array([[1, 2, 2], [3, 3, 3], [0, 1, 0]])
    il, tl = [6, 4, 5], [3, 3, 2]          # sample 1: "333" needs 5 steps, has 4
    for kw in ({"blank": 4, "zero_infinity": True, "reduction": "sum"},
               {"blank": 4, "zero_infinity": True, "reduction": "mean"}):
        a, b = torch.tensor(lp, requires_grad=True), sg.tensor(lp, requires_grad=True)
        want = torch.nn.functional.ctc_loss(a, torch.tensor(tg), il, tl, **kw)
        got = sg.nn.functional.ctc_loss(b, sg.tensor(tg), il, tl, **kw)
        close(got, want, dtype)
        want.backward()
        got.backward()
        close(b.grad, a.grad, dtype, "gradient", factor=8)
    a, b = torch.tensor(lp[:, 0], requires_grad=True), sg.tensor(lp[:, 0], requires_grad=True)
    want = torch.nn.functional.ctc_loss(a, torch.tensor(tg[0]), torch.tensor(6), torch.tensor(3),
                                        reduction="none")
    got = sg.nn.functional.ctc_loss(b, sg.tensor(tg[0]), sg.tensor(6), sg.tensor(3),
                                    reduction="none")
    assert tuple(got.shape) == tuple(want.shape) == ()
    close(got, want, dtype)
    want.backward()
    got.backward()
    close(b.grad, a.grad, dtype, "gradient", factor=8)


def test_ctc_errors_are_torchs():
    lp = np.log(np.full((5, 2, 4), 0.25, np.float32))
    tg = np.array([[1, 2], [1, 1]])
    for args in (([6, 5], [2, 2], 0), ([5, 5], [2, 3], 0), ([5, 5], [2, 2], 4)):
        il, tl, blank = args
        same_error(lambda m: m.nn.functional.ctc_loss(m.tensor(lp), m.tensor(tg), m.tensor(il),
                                                      m.tensor(tl), blank=blank))


MODULES = [
    lambda m: m.nn.CosineEmbeddingLoss(margin=0.2), lambda m: m.nn.MarginRankingLoss(),
    lambda m: m.nn.TripletMarginLoss(p=1.0, swap=True),
    lambda m: m.nn.TripletMarginWithDistanceLoss(),
    lambda m: m.nn.TripletMarginWithDistanceLoss(distance_function=m.nn.PairwiseDistance(p=1)),
    lambda m: m.nn.MultiLabelSoftMarginLoss(weight=m.ones(3)), lambda m: m.nn.MultiLabelMarginLoss(),
    lambda m: m.nn.PoissonNLLLoss(log_input=False, full=True), lambda m: m.nn.GaussianNLLLoss(),
    lambda m: m.nn.SoftMarginLoss(reduction="sum"), lambda m: m.nn.HingeEmbeddingLoss(),
    lambda m: m.nn.MultiMarginLoss(p=2, weight=m.ones(3)), lambda m: m.nn.CTCLoss(blank=2),
]


@pytest.mark.parametrize("build", MODULES)
def test_module_repr_attributes_and_state_dict_are_torchs(build):
    t, s = build(torch), build(sg)
    assert repr(s) == repr(t)
    assert list(s.state_dict()) == list(t.state_dict())
    for k, v in vars(t).items():
        if not k.startswith("_") and not callable(v) and k != "training":
            assert getattr(s, k) == v, k


@pytest.mark.parametrize("build", [
    lambda m: m.nn.MultiMarginLoss(p=3), lambda m: m.nn.TripletMarginLoss(margin=0),
    lambda m: m.nn.TripletMarginWithDistanceLoss(margin=-1.0),
    lambda m: m.nn.MultiMarginLoss(weight=m.ones(2, 2)),
    lambda m: m.nn.functional.margin_ranking_loss(m.ones(3), m.ones(3, 1), m.ones(3)),
    lambda m: m.nn.functional.cosine_embedding_loss(m.ones(3, 2), m.ones(3, 2), m.ones(3, 1)),
    lambda m: m.nn.functional.cosine_embedding_loss(m.ones(3), m.ones(3), m.ones(3)),
    lambda m: m.nn.functional.triplet_margin_loss(m.ones(3), m.ones(3, 2), m.ones(3)),
    lambda m: m.nn.functional.gaussian_nll_loss(m.ones(3, 2), m.ones(3, 2), m.ones(4)),
    lambda m: m.nn.functional.gaussian_nll_loss(m.ones(3, 2), m.ones(3, 2), -m.ones(3, 2)),
    lambda m: m.nn.functional.multi_margin_loss(m.ones(3, 2), m.zeros(2).long()),
    lambda m: m.nn.functional.multilabel_margin_loss(m.ones(3, 2), m.zeros(3, 3).long()),
    lambda m: m.nn.functional.poisson_nll_loss(m.ones(3), m.ones(3), reduction="max"),
])
def test_errors_are_torchs(build):
    same_error(build)


@pytest.mark.parametrize("dtype", DTYPES)
def test_losses_compile_equal_eager(dtype):
    """A compiled step (loss + backward) of a few losses: values and gradients as torch's."""
    d = _data(dtype)
    lp, tg, il, tl = _ctc_inputs(dtype, False)

    def run(m, compile_):
        x = m.tensor(d["a"], requires_grad=True)
        z = m.tensor(lp, requires_grad=True)

        def step(x, z, y, b, pm):
            loss = (m.nn.functional.multi_margin_loss(x, y)
                    + m.nn.functional.cosine_embedding_loss(x, b, pm)
                    + m.nn.functional.triplet_margin_loss(x, b, b.flip(0))
                    + m.nn.functional.ctc_loss(z, m.tensor(tg), m.tensor(il), m.tensor(tl))
                    + m.nn.functional.multilabel_margin_loss(x, m.tensor(_ints()["ml"])))
            return m.autograd.grad(loss, (x, z)) + (loss.detach(),)
        f = sg.compile(step) if compile_ else step
        return f(x, z, m.tensor(_ints()["y"]), m.tensor(d["b"]), m.tensor(d["pm1"]))
    want = run(torch, False)
    got = run(sg, True)
    for g, w in zip(got, want):
        close(g, w, dtype, factor=8)


@pytest.mark.parametrize("build", [
    lambda m: m.nn.functional.multi_margin_loss(m.ones(3, 2), m.zeros(3).long(), weight=m.ones(3)),
    lambda m: m.nn.functional.multi_margin_loss(m.ones(3, 2), m.tensor([0, 1, 5])),
    lambda m: m.nn.functional.multi_margin_loss(m.ones(3, 2, 2), m.zeros(3).long()),
    lambda m: m.nn.functional.multilabel_margin_loss(m.ones(3, 2), m.tensor([[0, 5], [0, 0], [0, 0]])),
    lambda m: m.nn.functional.soft_margin_loss(m.ones(3, 2), m.zeros(3, 3)),
    lambda m: m.nn.functional.hinge_embedding_loss(m.ones(3, 2), m.zeros(3, 3)),
])
def test_shape_and_range_errors_are_torchs(build):
    same_error(build)
