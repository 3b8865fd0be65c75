"""``F.scaled_dot_product_attention``, ``nn.MultiheadAttention`` and the Transformer
modules against PyTorch: default initialisation from the same seed, reprs, state-dict
keys, outputs and gradients in both dtypes for every option and mask kind, PyTorch's
errors and warnings, the inference fast path's zeros at padded positions, and a
compiled training step equal to torch's eager one."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import DTYPES, close, outputs_and_grads_match, same_error

rng = np.random.default_rng(18)
TDT = {np.float32: torch.float32, np.float64: torch.float64}
SDT = {np.float32: sg.float32, np.float64: sg.float64}


def _both(build, dtype, seed=4):
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = build(torch.nn, TDT[dtype])
        sg.manual_seed(seed)
        sm = build(sg.nn, SDT[dtype])
    return tm, sm


def _same_parameters(sm, tm):
    assert list(sm.state_dict()) == list(tm.state_dict())
    for (k, s), (_, t) in zip(sm.named_parameters(), tm.named_parameters()):
        np.testing.assert_array_equal(s.detach().numpy(), t.detach().numpy(), err_msg=k)


def _lift(lib, a, grad=True):
    if a is None or isinstance(a, (bool, int, float)):
        return a
    if a.dtype == np.bool_:
        return lib.tensor(a)
    return lib.tensor(a, requires_grad=grad)


def _check(run, arrays, dtype, modules=None, factor=8.0, kwargs=None):
    """``run(lib, *tensors)`` (a tensor or tuple, None entries skipped) in both: values,
    and gradients of the float arrays and of the modules' parameters."""
    kwargs = kwargs or {}
    ts = [_lift(torch, a) for a in arrays]
    ss = [_lift(sg, a) for a in arrays]
    t_out, s_out = run(torch, *ts, **kwargs), run(sg, *ss, **kwargs)
    t_out = t_out if isinstance(t_out, tuple) else (t_out,)
    s_out = s_out if isinstance(s_out, tuple) else (s_out,)
    outputs_and_grads_match(s_out, t_out, ss, ts, dtype, rng, modules, factor)


# ---- scaled_dot_product_attention ------------------------------------------------------------
def _sdpa(lib, q, k, v, mask=None, **kw):
    return lib.nn.functional.scaled_dot_product_attention(q, k, v, mask, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["plain", "bool", "float", "causal", "scale", "dead_row",
                                  "gqa", "2d"])
def test_scaled_dot_product_attention(case, dtype):
    shape_q, shape_k, shape_v = (2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 7)
    kw, mask = {}, None
    if case == "bool":
        mask = rng.random((4, 6)) > 0.3
        mask[:, 0] = True
    elif case == "float":
        mask = rng.normal(size=(2, 1, 4, 6)).astype(dtype)
    elif case == "causal":
        shape_k, shape_v = (2, 3, 4, 5), (2, 3, 4, 7)
        kw = dict(is_causal=True)
    elif case == "scale":
        kw = dict(scale=0.3)
    elif case == "dead_row":
        mask = np.ones((4, 6), bool)
        mask[1] = False
    elif case == "gqa":
        shape_q = (2, 6, 4, 5)
        kw = dict(enable_gqa=True)
    elif case == "2d":
        shape_q, shape_k, shape_v = (4, 5), (6, 5), (6, 3)
    arrays = [rng.normal(size=s).astype(dtype) for s in (shape_q, shape_k, shape_v)] + [mask]
    _check(_sdpa, arrays, dtype, kwargs=kw)


@pytest.mark.parametrize("call", [
    lambda lib: _sdpa(lib, lib.ones(2, 3, 4), lib.ones(2, 5, 4), lib.ones(2, 5, 6),
                      lib.ones(3, 5, dtype=lib.bool), is_causal=True),
    lambda lib: _sdpa(lib, lib.ones(2, 3, 4), lib.ones(2, 5, 4),
                      lib.ones(2, 5, 6, dtype=lib.float64)),
    lambda lib: _sdpa(lib, lib.ones(2, 3, 4), lib.ones(2, 5, 3), lib.ones(2, 5, 6)),
    lambda lib: _sdpa(lib, lib.ones(4), lib.ones(4), lib.ones(4)),
    lambda lib: _sdpa(lib, lib.ones(2, 3, 4), lib.ones(2, 5, 4), lib.ones(2, 5, 6),
                      lib.ones(3, 5, dtype=lib.int64)),
    lambda lib: _sdpa(lib, lib.ones(2, 3, 4), lib.ones(2, 5, 4), lib.ones(2, 4, 6)),
])
def test_sdpa_errors(call):
    same_error(call)


def test_sdpa_dropout_keeps_the_expectation():
    """Dropout on the weights (PyTorch's generator differs from ours for dropout masks,
    so the mean over many draws is compared with the undropped result)."""
    q, k, v = (sg.tensor(rng.normal(size=(1, 1, 2, 3))) for _ in range(3))
    want = _sdpa(sg, q, k, v).numpy()
    sg.manual_seed(0)
    got = np.mean([_sdpa(sg, q, k, v, dropout_p=0.5).numpy() for _ in range(4000)], axis=0)
    # the mean of 4,000 draws of a kept-or-zeroed value scaled by 2: its standard error is
    # |value| / sqrt(4000) ~ 0.016 |value|; the outputs (averages of standard-normal
    # rows of v) are of order 1, so 0.1 is several standard errors
    np.testing.assert_allclose(got, want, atol=0.1)
    assert not np.allclose(_sdpa(sg, q, k, v, dropout_p=0.5).numpy(), want)


# ---- MultiheadAttention -----------------------------------------------------------------------
MHA = [
    dict(),
    dict(batch_first=True),
    dict(kdim=3, vdim=5),
    dict(bias=False),
    dict(add_bias_kv=True),
    dict(add_zero_attn=True, batch_first=True),
    dict(add_bias_kv=True, add_zero_attn=True, kdim=3, vdim=3),
]


def _mha_inputs(kw, dtype, batched=True, self_attn=False):
    L, S, N, E = 4, 5, 2, 8
    lead_q = ((N, L) if kw.get("batch_first") else (L, N)) if batched else (L,)
    lead_k = ((N, S) if kw.get("batch_first") else (S, N)) if batched else (S,)
    q = rng.normal(size=lead_q + (E,)).astype(dtype)
    if self_attn:
        return q, None, None
    k = rng.normal(size=lead_k + (kw.get("kdim", E),)).astype(dtype)
    v = rng.normal(size=lead_k + (kw.get("vdim", E),)).astype(dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", MHA)
@pytest.mark.parametrize("masks", ["none", "key_padding_bool", "attn_float", "both_bool",
                                   "attn_3d"])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False),
                                                  (False, True)])
def test_multihead_attention(kw, dtype, masks, need_weights, average):
    tm, sm = _both(lambda nn, dt: nn.MultiheadAttention(8, 2, dtype=dt, **kw), dtype)
    assert repr(sm) == repr(tm)
    _same_parameters(sm, tm)
    q, k, v = _mha_inputs(kw, dtype)
    kpm = am = None
    S = 5
    if masks in ("key_padding_bool", "both_bool"):
        kpm = np.zeros((2, S), bool)
        kpm[0, 3:] = True
    if masks == "attn_float":
        am = rng.normal(size=(4, S)).astype(dtype)
    if masks == "both_bool":
        am = np.zeros((4, S), bool)
        am[1, 2] = True
    if masks == "attn_3d":
        am = rng.normal(size=(2 * 2, 4, S)).astype(dtype)

    def run(lib, q, k, v, kpm, am):
        m = sm if lib is sg else tm
        return m(q, k, v, key_padding_mask=kpm, need_weights=need_weights, attn_mask=am,
                 average_attn_weights=average)
    _check(run, [q, k, v, kpm, am], dtype, (tm, sm))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("batched", [True, False])
def test_self_attention_and_unbatched(dtype, need_weights, batched):
    """One tensor as query, key and value (the packed projection's shortcut)."""
    tm, sm = _both(lambda nn, dt: nn.MultiheadAttention(8, 4, dtype=dt, batch_first=True),
                   dtype)
    q, _, _ = _mha_inputs(dict(batch_first=True), dtype, batched, self_attn=True)

    def run(lib, x):
        m = sm if lib is sg else tm
        return m(x, x, x, need_weights=need_weights)
    _check(run, [q], dtype, (tm, sm))


@pytest.mark.parametrize("dtype", DTYPES)
def test_causal_hint_without_weights(dtype):
    tm, sm = _both(lambda nn, dt: nn.MultiheadAttention(8, 2, dtype=dt), dtype)
    q, k, v = _mha_inputs({}, dtype)
    k, v = k[:4], v[:4]
    mask = torch.nn.Transformer.generate_square_subsequent_mask(4).numpy().astype(dtype)

    def run(lib, q, k, v, m):
        mod = sm if lib is sg else tm
        return mod(q, k, v, attn_mask=m, need_weights=False, is_causal=True)
    _check(run, [q, k, v, mask], dtype, (tm, sm))


@pytest.mark.parametrize("call", [
    lambda lib, m: m(lib.ones(4, 2, 8), lib.ones(5, 2, 8), lib.ones(5, 2)),
    lambda lib, m: m(lib.ones(4, 8), lib.ones(5, 2, 8), lib.ones(5, 2, 8)),
    lambda lib, m: m(lib.ones(4), lib.ones(4), lib.ones(4)),
    lambda lib, m: m(lib.ones(4, 2, 8), lib.ones(5, 2, 8), lib.ones(5, 2, 8),
                     key_padding_mask=lib.ones(2, 5, 1, dtype=lib.bool)),
    lambda lib, m: m(lib.ones(4, 2, 8), lib.ones(5, 2, 8), lib.ones(5, 2, 8),
                     key_padding_mask=lib.ones(2, 4, dtype=lib.bool)),
    lambda lib, m: m(lib.ones(4, 2, 8), lib.ones(5, 2, 8), lib.ones(5, 2, 8),
                     key_padding_mask=lib.ones(3, 5, dtype=lib.bool)),
    lambda lib, m: m(lib.ones(4, 2, 8), lib.ones(5, 2, 8), lib.ones(5, 2, 8),
                     attn_mask=lib.ones(4, 4)),
    lambda lib, m: m(lib.ones(4, 2, 8), lib.ones(5, 2, 8), lib.ones(5, 2, 8),
                     attn_mask=lib.ones(3, 4, 5)),
    lambda lib, m: m(lib.ones(4, 2, 8), lib.ones(5, 2, 8), lib.ones(5, 2, 8),
                     attn_mask=lib.ones(4, 5, dtype=lib.int64)),
    lambda lib, m: m(lib.ones(4, 2, 8), lib.ones(5, 2, 8), lib.ones(5, 2, 8),
                     attn_mask=lib.ones(1, 4, 4, 5)),
    lambda lib, m: m(lib.ones(4, 2, 6), lib.ones(5, 2, 6), lib.ones(5, 2, 6)),
    lambda lib, m: m(lib.ones(4, 2, 8), lib.ones(5, 2, 8), lib.ones(6, 2, 8)),
    lambda lib, m: m(lib.ones(4, 2, 8), lib.ones(5, 2, 8), lib.ones(5, 2, 8),
                     is_causal=True),
    lambda lib, m: m(lib.ones(4, 8), lib.ones(5, 8), lib.ones(5, 8),
                     attn_mask=lib.ones(2, 4, 4)),
])
def test_multihead_attention_errors(call):
    same_error(lambda lib: call(lib, lib.nn.MultiheadAttention(8, 2)))


@pytest.mark.parametrize("build", [
    lambda nn: nn.MultiheadAttention(8, 3),
    lambda nn: nn.MultiheadAttention(0, 2),
    lambda nn: nn.MultiheadAttention(8, -1),
])
def test_multihead_attention_constructor_errors(build):
    same_error(lambda lib: build(lib.nn))


def test_mismatched_mask_types_warn():
    m = sg.nn.MultiheadAttention(4, 2)
    x = sg.ones(3, 1, 4)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and "
                                         "attn_mask is deprecated"):
        m(x, x, x, key_padding_mask=sg.zeros(1, 3, dtype=sg.bool), attn_mask=sg.zeros(3, 3))


# ---- Transformer ----------------------------------------------------------------------------
def test_generate_square_subsequent_mask():
    for dt in (None, "float64"):
        t = torch.nn.Transformer.generate_square_subsequent_mask(
            4, dtype=None if dt is None else getattr(torch, dt))
        s = sg.nn.Transformer.generate_square_subsequent_mask(
            4, dtype=None if dt is None else getattr(sg, dt))
        assert repr(s) == repr(t)


ENC = [dict(), dict(norm_first=True, activation="gelu"),
       dict(batch_first=True, activation=lambda x: x.tanh()), dict(bias=False),
       dict(batch_first=True, norm_first=True)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", ENC)
@pytest.mark.parametrize("masks", ["none", "causal", "padding"])
def test_encoder(kw, dtype, masks):
    def build(nn, dt):
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=dt, **kw)
        return nn.TransformerEncoder(layer, 2, nn.LayerNorm(8, dtype=dt))
    tm, sm = _both(build, dtype)
    assert repr(sm) == repr(tm)
    _same_parameters(sm, tm)
    bf = kw.get("batch_first", False)
    x = rng.normal(size=(3, 5, 8) if bf else (5, 3, 8)).astype(dtype)
    mask = kpm = None
    if masks == "causal":
        mask = torch.nn.Transformer.generate_square_subsequent_mask(5).numpy().astype(dtype)
    if masks == "padding":
        kpm = np.zeros((3, 5), bool)
        kpm[1, 3:] = True

    def run(lib, x, mask, kpm):
        return (sm if lib is sg else tm)(x, mask=mask, src_key_padding_mask=kpm)
    _check(run, [x, mask, kpm], dtype, (tm, sm))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", ENC[:3])
def test_decoder(kw, dtype):
    def build(nn, dt):
        layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, dtype=dt, **kw)
        return nn.TransformerDecoder(layer, 2, nn.LayerNorm(8, dtype=dt))
    tm, sm = _both(build, dtype)
    assert repr(sm) == repr(tm)
    _same_parameters(sm, tm)
    bf = kw.get("batch_first", False)
    tgt = rng.normal(size=(3, 4, 8) if bf else (4, 3, 8)).astype(dtype)
    mem = rng.normal(size=(3, 6, 8) if bf else (6, 3, 8)).astype(dtype)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4).numpy().astype(dtype)
    mkpm = np.zeros((3, 6), bool)
    mkpm[2, 4:] = True

    def run(lib, tgt, mem, tmask, mkpm):
        return (sm if lib is sg else tm)(tgt, mem, tgt_mask=tmask,
                                         memory_key_padding_mask=mkpm)
    _check(run, [tgt, mem, tmask, mkpm], dtype, (tm, sm))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [dict(), dict(batch_first=True, norm_first=True),
                                dict(activation="gelu", bias=False)])
def test_transformer(kw, dtype):
    def build(nn, dt):
        return nn.Transformer(8, 2, 2, 1, 16, dropout=0.0, dtype=dt, **kw)
    tm, sm = _both(build, dtype)
    assert repr(sm) == repr(tm)
    _same_parameters(sm, tm)
    bf = kw.get("batch_first", False)
    src = rng.normal(size=(2, 5, 8) if bf else (5, 2, 8)).astype(dtype)
    tgt = rng.normal(size=(2, 4, 8) if bf else (4, 2, 8)).astype(dtype)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4).numpy().astype(dtype)
    skpm = np.zeros((2, 5), bool)
    skpm[0, 4:] = True

    def run(lib, src, tgt, tmask, skpm):
        return (sm if lib is sg else tm)(src, tgt, tgt_mask=tmask, src_key_padding_mask=skpm,
                                         memory_key_padding_mask=skpm)
    _check(run, [src, tgt, tmask, skpm], dtype, (tm, sm))


def test_unbatched_transformer():
    tm, sm = _both(lambda nn, dt: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, dtype=dt),
                   np.float64)
    src, tgt = rng.normal(size=(5, 8)), rng.normal(size=(3, 8))
    _check(lambda lib, s, t: (sm if lib is sg else tm)(s, t), [src, tgt], np.float64, (tm, sm))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("aligned", [True, False])
def test_encoder_inference_fast_path_zeroes_padding(dtype, aligned):
    """Eval mode, no gradient, batch-first, a key padding mask: PyTorch runs nested
    tensors (padded positions come out as the final norm of zeros) when the mask is
    left-aligned."""
    def build(nn, dt):
        layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, dtype=dt)
        return nn.TransformerEncoder(layer, 2, nn.LayerNorm(8, dtype=dt))
    tm, sm = _both(build, dtype)
    tm.eval()
    sm.eval()
    x = rng.normal(size=(3, 5, 8)).astype(dtype)
    kpm = np.zeros((3, 5), bool)
    kpm[0, 3:] = True
    if not aligned:
        kpm[1, 1] = True
    with torch.no_grad():
        want = tm(torch.tensor(x), src_key_padding_mask=torch.tensor(kpm))
    with sg.no_grad():
        got = sm(sg.tensor(x), src_key_padding_mask=sg.tensor(kpm))
    close(got, want, dtype, factor=8)


def test_warnings_and_errors():
    with pytest.warns(UserWarning, match="enable_nested_tensor is True, but "
                                         "self.use_nested_tensor is False because "
                                         "encoder_layer.norm_first was True"):
        sg.nn.TransformerEncoder(sg.nn.TransformerEncoderLayer(8, 2, norm_first=True,
                                                               batch_first=True), 1)
    same_error(lambda lib: lib.nn.TransformerEncoderLayer(8, 2, activation="tanh"))
    same_error(lambda lib: lib.nn.Transformer(8, 2, 1, 1, 16)(lib.ones(5, 2, 8),
                                                              lib.ones(4, 3, 8)))
    same_error(lambda lib: lib.nn.Transformer(8, 2, 1, 1, 16)(lib.ones(5, 2, 8),
                                                              lib.ones(4, 2, 6)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_training_step_equals_eager_torch(dtype):
    def build(nn, dt):
        torch_like = nn

        class Net(torch_like.Module):
            def __init__(self):
                super().__init__()
                layer = torch_like.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                           batch_first=True, dtype=dt)
                self.enc = torch_like.TransformerEncoder(layer, 2)
                self.head = torch_like.Linear(8, 3, dtype=dt)

            def forward(self, x, mask):
                return self.head(self.enc(x, mask=mask))
        return Net()
    tm, sm = _both(build, dtype)
    _same_parameters(sm, tm)
    # (SGD: the key projection's bias has a zero gradient up to rounding -- softmax does
    # not see it -- and Adam would scale that rounding noise to full steps)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    sopt = sg.optim.SGD(sm.parameters(), lr=0.1, momentum=0.9)
    mask = np.triu(np.full((5, 5), -np.inf), 1).astype(dtype)

    @sg.compile(fullgraph=True)
    def step(x, y, m):
        sopt.zero_grad()
        loss = sg.nn.functional.cross_entropy(sm(x, m).reshape(-1, 3), y.reshape(-1))
        loss.backward()
        sopt.step()
        return loss
    for _ in range(3):
        x = rng.normal(size=(2, 5, 8)).astype(dtype)
        y = rng.integers(0, 3, size=(2, 5))
        topt.zero_grad()
        t_loss = torch.nn.functional.cross_entropy(
            tm(torch.tensor(x), torch.tensor(mask)).reshape(-1, 3), torch.tensor(y).reshape(-1))
        t_loss.backward()
        topt.step()
        s_loss = step(sg.tensor(x), sg.tensor(y), sg.tensor(mask))
        close(s_loss.detach(), t_loss.detach(), dtype, "loss", factor=20)
    for (k, s), (_, t) in zip(sm.named_parameters(), tm.named_parameters()):
        close(s, t, dtype, k, factor=50)
