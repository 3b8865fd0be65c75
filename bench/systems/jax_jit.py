"""JAX: ``jax.jit(jax.value_and_grad(loss, argnums=params))`` on CPU.

float64 is enabled (``jax_enable_x64``); float32 workloads stay float32 because
inputs are float32 and literals are weakly typed.  XLA picks its own CPU
threading (all cores).  The timed call blocks until the result is ready.
"""

from __future__ import annotations

from typing import Any, Callable

from bench.systems.base import Call, System, cores, import_error
from bench.workloads import ATTENTION_HEADS, CHAIN_STEPS, Workload


def _losses(jnp: Any, jax: Any) -> dict[str, Callable[..., Any]]:
    def seed(x: Any) -> Any:
        return jnp.mean(3 * (x + 2) ** 2)

    def rosenbrock(x: Any) -> Any:
        return jnp.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    def logreg(w: Any, b: Any, X: Any, y: Any) -> Any:
        z = X @ w + b
        return jnp.mean(jnp.logaddexp(0, z) - y * z)

    def mlp(W1: Any, b1: Any, W2: Any, b2: Any, X: Any, labels: Any) -> Any:
        logits = jnp.tanh(X @ W1 + b1) @ W2 + b2
        logp = jax.nn.log_softmax(logits, axis=1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    def chain(x: Any) -> Any:
        y = x
        for _ in range(CHAIN_STEPS):
            y = jnp.tanh(y) * 0.5 + jnp.sin(y) * y - jnp.exp(-y * y)
        return jnp.sum(y)

    def matmul_tanh(A: Any, B: Any) -> Any:
        return jnp.sum(jnp.tanh(A @ B))

    def attention(x: Any, Wq: Any, Wk: Any, Wv: Any, Wo: Any, future: Any) -> Any:
        t, d = x.shape
        dh = d // ATTENTION_HEADS

        def heads(z: Any) -> Any:
            return z.reshape(t, ATTENTION_HEADS, dh).transpose(1, 0, 2)

        q, k, v = heads(x @ Wq), heads(x @ Wk), heads(x @ Wv)
        s = jnp.where(future, -jnp.inf, (q @ k.transpose(0, 2, 1)) * (1.0 / dh ** 0.5))
        y = (jax.nn.softmax(s, axis=-1) @ v).transpose(1, 0, 2).reshape(t, d) @ Wo
        return jnp.mean(y * y)

    def rnn(Wx: Any, Wh: Any, b: Any, xs: Any) -> Any:
        h = jnp.tanh(xs[0] @ Wx + b)
        for t in range(1, xs.shape[0]):
            h = jnp.tanh(xs[t] @ Wx + h @ Wh + b)
        return jnp.mean(h * h)

    return {"seed": seed, "rosenbrock": rosenbrock, "logreg": logreg,
            "mlp": mlp, "chain": chain, "matmul-tanh": matmul_tanh,
            "attention": attention, "rnn": rnn}


class JaxJit(System):
    name = "jax-jit"
    note = "jit(value_and_grad), x64 enabled"

    def __init__(self) -> None:
        self.threads = f"{cores()} (XLA)"

    def available(self) -> tuple[bool, str]:
        ok, why = import_error("jax")
        if ok:
            import jax

            jax.config.update("jax_enable_x64", True)
            jax.config.update("jax_platforms", "cpu")
        return ok, why

    def build(self, workload: Workload) -> Call:
        import jax
        import jax.numpy as jnp

        loss = _losses(jnp, jax)[workload.family]
        argnums = tuple(range(len(workload.params)))
        step = jax.jit(jax.value_and_grad(loss, argnums=argnums))
        args = [jax.device_put(a) for a in workload.ordered()]

        def call() -> tuple[Any, list[Any]]:
            value, grads = jax.block_until_ready(step(*args))
            return value, list(grads)

        return call


SYSTEMS = [JaxJit()]
