"""torch.compile (Inductor, C++ codegen via gcc) of the workload's loss.

The loss is compiled with ``dynamic=False``; ``loss.backward()`` runs the
backward graph AOTAutograd compiled with it.  Dynamo is reset and Inductor's
on-disk caches are disabled at build time, so the first-call latency is a cold
compile.  Runs with one intra-op thread (set before every sample).
"""

from __future__ import annotations

import shutil

from bench.systems.base import Call, System, import_error
from bench.systems.torch_eager import backward_call, torch_inputs
from bench.workloads import Workload


class TorchCompile(System):
    name = "torch-compile"
    threads = "1"
    note = "inductor, dynamic=False, caches off"

    def available(self) -> tuple[bool, str]:
        ok, why = import_error("torch")
        if not ok:
            return ok, why
        if shutil.which("gcc") is None and shutil.which("cc") is None:
            return False, "no C compiler (gcc/cc) on PATH for Inductor"
        return True, ""

    def before_sample(self) -> None:
        import torch

        torch.set_num_threads(1)

    def build(self, workload: Workload) -> Call:
        import torch
        import torch._dynamo
        import torch._inductor.config as inductor_config

        self.before_sample()
        inductor_config.fx_graph_cache = False
        inductor_config.autotune_local_cache = False
        torch._dynamo.reset()

        def loss(*args: object) -> object:
            return workload.loss(torch, *args)

        compiled = torch.compile(loss, dynamic=False)
        params, data = torch_inputs(torch, workload)
        return backward_call(compiled, params, data)


SYSTEMS = [TorchCompile()]
