"""PyTorch eager: the workload's torch-like loss, then ``loss.backward()``.

Two instances: one intra-op thread, and all cores.  Thread count is set before
every timed sample because the setting is process-global.
"""

from __future__ import annotations

from typing import Any

from bench.systems.base import Call, System, cores, import_error
from bench.workloads import Workload


def torch_inputs(torch: Any, workload: Workload) -> tuple[list[Any], list[Any]]:
    """Params as leaf tensors requiring grad, data as plain tensors (no copy)."""
    a = workload.arrays()
    params = [torch.from_numpy(a[k].copy()).requires_grad_(True) for k in workload.params]
    data = [torch.from_numpy(a[k]) for k in workload.data]
    return params, data


def backward_call(loss_fn: Any, params: list[Any], data: list[Any]) -> Call:
    """A call that clears grads, evaluates the loss and back-propagates."""

    def call() -> tuple[Any, list[Any]]:
        for p in params:
            p.grad = None
        loss = loss_fn(*params, *data)
        loss.backward()
        return loss, [p.grad for p in params]

    return call


class TorchEager(System):
    """``torch`` eager with a fixed number of intra-op threads."""

    def __init__(self, threads: int | None) -> None:
        self.n_threads = threads or cores()
        self.name = "torch-eager-1t" if threads == 1 else "torch-eager-all"
        self.threads = str(self.n_threads)
        self.note = "loss.backward()"

    def available(self) -> tuple[bool, str]:
        return import_error("torch")

    def before_sample(self) -> None:
        import torch

        torch.set_num_threads(self.n_threads)

    def build(self, workload: Workload) -> Call:
        import torch

        self.before_sample()
        params, data = torch_inputs(torch, workload)
        return backward_call(lambda *a: workload.loss(torch, *a), params, data)


SYSTEMS = [TorchEager(1), TorchEager(None)]
