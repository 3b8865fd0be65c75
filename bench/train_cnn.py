"""Training workload ``cnn-sgd`` of ``python -m bench train``: a small CNN on 28x28
single-channel images, batch 64, float32 --
Conv2d(1, 16, 3, padding=1) - BatchNorm2d - ReLU - MaxPool2d(2) - Conv2d(16, 32, 3,
padding=1) - BatchNorm2d - ReLU - MaxPool2d(2) - Flatten - Linear(32*7*7, 10) --,
softmax cross-entropy, SGD (lr 0.01, momentum 0.9): the program as a PyTorch user writes
it, run unchanged by ``import symgrad as torch``; and the same step under jax.jit
(``lax.conv_general_dilated``, ``reduce_window``, a hand-written momentum SGD; the running
statistics, which do not change the loss, are not kept). Each system starts from the
same weights and data."""
from __future__ import annotations

from typing import Callable

import numpy as np

from bench.train_common import torch_step, torch_style_systems

B, C1, C2, K = 64, 16, 32, 10

__all__ = ["TITLE", "SYSTEMS"]

TITLE = (f"CNN conv({C1})-BN-ReLU-maxpool-conv({C2})-BN-ReLU-maxpool-linear on 28x28, "
         f"cross-entropy, SGD momentum, batch {B}, float32")


def _uniform(rng, shape, fan_in):
    return (rng.uniform(-1, 1, size=shape) / np.sqrt(fan_in)).astype(np.float32)


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, K, size=B)
    init = {"0.weight": _uniform(rng, (C1, 1, 3, 3), 9), "0.bias": _uniform(rng, C1, 9),
            "4.weight": _uniform(rng, (C2, C1, 3, 3), C1 * 9),
            "4.bias": _uniform(rng, C2, C1 * 9),
            "9.weight": _uniform(rng, (K, C2 * 49), C2 * 49), "9.bias": _uniform(rng, K, C2 * 49)}
    for i, c in ((1, C1), (5, C2)):
        init[f"{i}.weight"] = init[f"{i}.running_var"] = np.ones(c, np.float32)
        init[f"{i}.bias"] = init[f"{i}.running_mean"] = np.zeros(c, np.float32)
        init[f"{i}.num_batches_tracked"] = np.array(0)
    return x, y, init


def _torch_like(T, wrap=None) -> Callable[[], float]:
    """The training step as PyTorch code, over the module ``T`` (torch or symgrad), the
    model passed through ``wrap`` (``T.compile``) if given."""
    x_np, y_np, init = _data()
    nn = T.nn
    model = nn.Sequential(nn.Conv2d(1, C1, 3, padding=1), nn.BatchNorm2d(C1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(C1, C2, 3, padding=1), nn.BatchNorm2d(C2),
                          nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(C2 * 49, K))
    model.load_state_dict({k: T.tensor(v) for k, v in init.items()})
    opt = T.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x, y = T.tensor(x_np), T.tensor(y_np)
    return torch_step(wrap(model) if wrap else model, opt, loss_fn, x, y)


def _jax():
    import jax
    import jax.numpy as jnp
    x_np, y_np, init = _data()
    names = ("0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias", "5.weight",
             "5.bias", "9.weight", "9.bias")
    params = [jnp.asarray(init[k]) for k in names]       # running statistics unused
    x, y = jnp.asarray(x_np), jnp.asarray(y_np)

    def block(h, w, b, g, beta):
        h = jax.lax.conv_general_dilated(h, w, (1, 1), ((1, 1), (1, 1)),
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
        h = h + b[None, :, None, None]
        mean = h.mean(axis=(0, 2, 3), keepdims=True)
        var = ((h - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True)
        h = (h - mean) / jnp.sqrt(var + 1e-5) * g[None, :, None, None] + beta[None, :, None, None]
        h = jnp.maximum(h, 0)
        return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def loss_fn(p):
        h = block(x, *p[0:4])
        h = block(h, *p[4:8])
        logits = h.reshape(B, -1) @ p[8].T + p[9]
        logp = logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    @jax.jit
    def train_step(p, buf, first):
        loss, g = jax.value_and_grad(loss_fn)(p)
        buf = [jnp.where(first, gi, 0.9 * bi + gi) for bi, gi in zip(buf, g)]
        return [pi - 0.01 * bi for pi, bi in zip(p, buf)], buf, loss

    state = [params, [jnp.zeros_like(a) for a in params], True]

    def step():
        p, buf, loss = train_step(*state)
        state[:] = [p, buf, False]
        return loss.block_until_ready()
    return step


SYSTEMS: dict[str, Callable[[], Callable[[], float]]] = {
    **torch_style_systems(_torch_like),
    "jax-jit": _jax,
}
