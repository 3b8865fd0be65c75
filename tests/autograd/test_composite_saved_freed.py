"""Composite backward nodes (a node built from several primitives: MaxBackward0 of max
with dim, SoftmaxBackward0, StdBackward0, NativeLayerNormBackward0 ...) free their saved
tensors after a backward without retain_graph, as PyTorch's nodes do: reading
``grad_fn._saved_*`` and a second backward raise PyTorch's error, and the tensors they
saved are no longer kept alive."""
import gc
import weakref

import numpy as np
import pytest
import torch

import symgrad as sg

X = np.random.default_rng(3).normal(size=(3, 4))

COMPOSITES = {
    "max_dim": (lambda L, h: L.max(h, 1).values, "_saved_indices"),
    "min_dim": (lambda L, h: L.min(h, 1)[0], "_saved_indices"),
    "sort": (lambda L, h: L.sort(h, 1)[0], "_saved_indices"),
    "topk": (lambda L, h: L.topk(h, 2)[0], "_saved_indices"),
    "softmax": (lambda L, h: L.softmax(h, 1), "_saved_result"),
    "log_softmax": (lambda L, h: L.log_softmax(h, 1), "_saved_result"),
    "vector_norm": (lambda L, h: L.linalg.vector_norm(h, dim=1), "_saved_self"),
    "std": (lambda L, h: L.std(h, 1), "_saved_self"),
    "var": (lambda L, h: L.var(h, 1), "_saved_self"),
    "logsumexp": (lambda L, h: L.logsumexp(h, 1), "_saved_self"),
    "gelu": (lambda L, h: L.nn.functional.gelu(h), "_saved_self"),
    "silu": (lambda L, h: L.nn.functional.silu(h), "_saved_self"),
    "elu": (lambda L, h: L.nn.functional.elu(h), "_saved_self"),
    "leaky_relu": (lambda L, h: L.nn.functional.leaky_relu(h, 0.1), "_saved_self"),
    "hardtanh": (lambda L, h: L.nn.functional.hardtanh(h), "_saved_self"),
    "softplus_beta": (lambda L, h: L.nn.functional.softplus(h, beta=2), "_saved_self"),
    "mse_loss": (lambda L, h: L.nn.functional.mse_loss(h, h.detach() * 0.5), "_saved_target"),
    "binary_cross_entropy": (lambda L, h: L.nn.functional.binary_cross_entropy(
        L.sigmoid(h), L.ones(3, 4, dtype=h.dtype)), "_saved_self"),
    "linear": (lambda L, h: L.nn.functional.linear(h, L.ones(2, 4, dtype=h.dtype),
                                                   L.ones(2, dtype=h.dtype)), "_saved_mat2"),
    "clamp_tensor": (lambda L, h: L.clamp(h, L.zeros(4, dtype=h.dtype)), "_saved_min"),
    "batch_norm": (lambda L, h: L.nn.functional.batch_norm(h, None, None, training=True),
                   "_saved_input"),
    "layer_norm": (lambda L, h: L.nn.functional.layer_norm(h, (4,)), "_saved_input"),
    "conv1d": (lambda L, h: L.nn.functional.conv1d(h[None], L.ones(2, 3, 2, dtype=h.dtype)),
               "_saved_weight"),
}


def _error(fn):
    try:
        fn()
    except Exception as e:           # noqa: BLE001 -- compared with torch's below
        return type(e), str(e)
    return None


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_saved_tensors_freed_after_backward_as_torch(name):
    f, attr = COMPOSITES[name]
    errors = {}
    for L in (torch, sg):
        x = L.tensor(X, requires_grad=True)
        y = f(L, x * 2)
        fn = y.grad_fn
        assert _error(lambda: getattr(fn, attr)) is None, L.__name__     # saved before
        y.sum().backward()
        errors[L.__name__] = (_error(lambda: getattr(fn, attr)),
                              _error(lambda: y.sum().backward()))
    assert errors["torch"][0] is not None and errors["torch"][1] is not None
    assert errors["symgrad"] == errors["torch"]


@pytest.mark.parametrize("name", ["max_dim", "softmax", "std", "gelu", "layer_norm",
                                  "batch_norm", "binary_cross_entropy"])
def test_saved_intermediate_is_released(name):
    """The intermediate a composite saved is not kept alive by the graph after backward."""
    f, _ = COMPOSITES[name]
    x = sg.tensor(X, requires_grad=True)
    h = x * 2
    y = f(sg, h)
    ref = weakref.ref(h)
    del h
    y.sum().backward()
    gc.collect()
    assert ref() is None


def test_retain_graph_keeps_them():
    grads = []
    for L in (torch, sg):
        x = L.tensor(X, requires_grad=True)
        y = L.std(x * 2, 1)
        y.sum().backward(retain_graph=True)
        assert y.grad_fn._saved_self is not None
        y.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)
