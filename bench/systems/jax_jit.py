"""JAX: ``jax.jit(jax.value_and_grad(loss, argnums=params))`` on CPU.

float64 is enabled (``jax_enable_x64``); float32 workloads stay float32 because
inputs are float32 and literals are weakly typed.  XLA picks its own CPU
threading (all cores).  The timed call blocks until the result is ready.
"""

from __future__ import annotations

from typing import Any, Callable

from bench.systems.base import Call, System, cores, import_error
from bench.workloads import CHAIN_STEPS, Workload


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

    return {"seed": seed, "rosenbrock": rosenbrock, "logreg": logreg,
            "mlp": mlp, "chain": chain}


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
