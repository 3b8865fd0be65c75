"""The numpy backend: a program becomes a flat list of steps (primitive numpy rule,
argument slots) executed in order — the reference semantics, and a fallback."""
from __future__ import annotations

import numpy as np

from ...graph.interpret import run_node
from ...graph.program import Program
from ...graph.fpstate import quiet

__all__ = ["compile_program", "NumpyExecutable"]


class NumpyExecutable:
    """Runs a program's steps on numpy arrays."""

    backend = "numpy"

    def __init__(self, program: Program):
        self.program = program
        slots: dict[int, int] = {}
        self.consts: list[tuple[int, np.ndarray]] = []
        for i, n in enumerate(program.inputs):
            slots[id(n)] = i
        nslot = len(program.inputs)
        self.steps = []
        for n in program.nodes():
            if id(n) in slots:
                continue
            if n.op == "input":
                raise ValueError(f"program uses input {n.attr('name')!r} that is not an argument")
            slots[id(n)] = nslot
            if n.op == "const":
                self.consts.append((nslot, n.attr("value").value))
            else:
                self.steps.append((nslot, n, tuple(slots[id(a)] for a in n.args)))
            nslot += 1
        # a number exponent (x ** 0.5 traced) is given to pow as the Python number it
        # was, as eager pow takes it: PyTorch's kernels for those (formula.torch_pow)
        for k, (slot, n, args) in enumerate(self.steps):
            if n.op == "pow" and n.args[1].op == "const" and not n.args[1].shape:
                self.consts.append((nslot, n.args[1].attr("value").value.item()))
                self.steps[k] = (slot, n, (args[0], nslot))
                nslot += 1
        self.nslot = nslot
        self.out_slots = [slots[id(o)] for o in program.outputs]

    def __call__(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        env = list(arrays) + [None] * (self.nslot - len(arrays))
        for slot, value in self.consts:
            env[slot] = value
        with quiet():
            for slot, node, args in self.steps:
                env[slot] = run_node(node, [env[a] for a in args])
        return [env[s] for s in self.out_slots]

    def as_text(self, kind: str = "program") -> str:
        if kind != "program":
            raise ValueError(f"the numpy backend has no {kind!r} text; it has 'program'")
        return self.program.as_text()


def compile_program(program: Program, target=None, on_stage=None) -> NumpyExecutable:
    return NumpyExecutable(program)
