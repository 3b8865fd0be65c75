"""symgrad eager mode: the workload's torch-like loss with ``T = symgrad``.

Exactly the torch-eager code path (``import symgrad as torch``): leaf tensors
with ``requires_grad``, ``loss.backward()``, ``.grad``.  Values are numpy arrays
computed op by op; BLAS is limited to one thread, so it runs single-threaded.
"""

from __future__ import annotations

from typing import Any

from bench.systems.base import Call, System, single_thread_label
from bench.workloads import Workload

REQUIRED = ("tensor", "nn")


def import_symgrad(*attrs: str) -> tuple[Any, str]:
    """(module, "") if symgrad imports and has ``attrs``, else (None, reason)."""
    try:
        import symgrad
    except Exception as exc:
        return None, f"symgrad not importable ({type(exc).__name__}: {exc})"
    missing = [a for a in attrs if not hasattr(symgrad, a)]
    if missing:
        names = ", ".join(f"symgrad.{a}" for a in missing)
        return None, f"{names} not available (not implemented yet)"
    return symgrad, ""


class SymgradEager(System):
    name = "symgrad-eager"
    is_symgrad = True
    note = "torch-like eager API"

    blas_threads = 1

    def __init__(self) -> None:
        self.threads = single_thread_label()

    def available(self) -> tuple[bool, str]:
        sg, why = import_symgrad(*REQUIRED)
        if sg is None:
            return False, why
        try:
            sg.nn.functional
        except AttributeError as exc:
            return False, f"symgrad.nn.functional not available ({exc})"
        return True, ""

    def build(self, workload: Workload) -> Call:
        import symgrad as sg

        a = workload.arrays()
        params = [sg.tensor(a[k].copy(), requires_grad=True) for k in workload.params]
        data = [sg.tensor(a[k]) for k in workload.data]

        def call() -> tuple[Any, list[Any]]:
            for p in params:
                p.grad = None
            loss = workload.loss(sg, *params, *data)
            loss.backward()
            return loss, [p.grad for p in params]

        return call


SYSTEMS = [SymgradEager()]
