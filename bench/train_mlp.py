"""Training workload ``mlp-adam`` of ``python -m bench train``: an MLP 784-256-10 with
ReLU, softmax cross-entropy, Adam (lr 1e-3), batch 64, float32 -- the program as a
PyTorch user writes it, run unchanged by ``import symgrad as torch`` -- and jax.jit with a
hand-written Adam. Each system starts from the same weights and data."""
from __future__ import annotations

from typing import Callable

import numpy as np

from bench.train_common import torch_step, torch_style_systems

D, H, C, B = 784, 256, 10, 64

__all__ = ["TITLE", "SYSTEMS"]

TITLE = f"MLP {D}-{H}-{C} ReLU, cross-entropy, Adam, batch {B}, float32"


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, D)).astype(np.float32)
    y = rng.integers(0, C, size=B)
    w1 = (rng.uniform(-1, 1, size=(H, D)) / np.sqrt(D)).astype(np.float32)
    b1 = (rng.uniform(-1, 1, size=H) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.uniform(-1, 1, size=(C, H)) / np.sqrt(H)).astype(np.float32)
    b2 = (rng.uniform(-1, 1, size=C) / np.sqrt(H)).astype(np.float32)
    return x, y, {"0.weight": w1, "0.bias": b1, "2.weight": w2, "2.bias": b2}


def _torch_like(T, wrap=None) -> Callable[[], float]:
    """The training step as PyTorch code, over the module ``T`` (torch or symgrad), the
    model passed through ``wrap`` (``T.compile``) if given."""
    x_np, y_np, init = _data()
    model = T.nn.Sequential(T.nn.Linear(D, H), T.nn.ReLU(), T.nn.Linear(H, C))
    model.load_state_dict({k: T.tensor(v) for k, v in init.items()})
    opt = T.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = T.nn.CrossEntropyLoss()
    x, y = T.tensor(x_np), T.tensor(y_np)
    return torch_step(wrap(model) if wrap else model, opt, loss_fn, x, y)


def _jax():
    import jax
    import jax.numpy as jnp
    x_np, y_np, init = _data()
    params = [jnp.asarray(init[k]) for k in ("0.weight", "0.bias", "2.weight", "2.bias")]
    x, y = jnp.asarray(x_np), jnp.asarray(y_np)

    def loss_fn(p):
        w1, b1, w2, b2 = p
        logits = jnp.maximum(x @ w1.T + b1, 0) @ w2.T + b2
        logp = logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    @jax.jit
    def train_step(p, m, v, t):
        loss, g = jax.value_and_grad(loss_fn)(p)
        t = t + 1
        m = [0.9 * mi + 0.1 * gi for mi, gi in zip(m, g)]
        v = [0.999 * vi + 0.001 * gi * gi for vi, gi in zip(v, g)]
        bc1, bc2 = 1 - 0.9 ** t, 1 - 0.999 ** t
        p = [pi - 1e-3 / bc1 * mi / (jnp.sqrt(vi) / jnp.sqrt(bc2) + 1e-8)
             for pi, mi, vi in zip(p, m, v)]
        return p, m, v, t, loss

    state = [params, [jnp.zeros_like(a) for a in params], [jnp.zeros_like(a) for a in params],
             jnp.float32(0)]

    def step():
        p, m, v, t, loss = train_step(*state)
        state[:] = [p, m, v, t]
        return loss.block_until_ready()
    return step


SYSTEMS: dict[str, Callable[[], Callable[[], float]]] = {
    **torch_style_systems(_torch_like),
    "jax-jit": _jax,
}
