"""The target matrix of the codegen tests, and its fixtures (a test module imports them:
``from machines import machine``).

Code generation depends on the machine (vector width, registers, FMA, rounding
instructions), so the codegen tests never assume the developer's CPU: each expectation
comes from the target under test (``codegen.target.current()`` inside the test).

* ``machine`` -- parametrised over the targets this host can *run*: the baseline x86-64
  (SSE2, no FMA), x86-64-v3 (AVX2 + FMA) and the host itself (on other architectures:
  the host).  Tests that run generated code use it, so every CI host runs all three.
* ``ir_gemm`` -- large products on symgrad's IR GEMMs whatever the host's calibration
  prefers (:mod:`codegen.gemm_choice`), for tests of those kernels; a child process
  gets the same from ``SYMGRAD_GEMM=ir`` (:data:`IR_GEMM_ENV`).
* ``foreign_machine`` -- targets this host cannot run (AMD Zen 4, Intel Ice Lake and
  Sapphire Rapids servers, Arm Neoverse N1 with NEON and V1 with SVE, and any of these
  that happens to be the host is still included): IR and assembly are generated and
  inspected, never executed.
"""
from __future__ import annotations

import pytest

from codegen import gemm_choice, target

X86 = "x86_64-unknown-linux-gnu"
ARM = "aarch64-unknown-linux-gnu"
IR_GEMM_ENV = {"SYMGRAD_GEMM": "ir"}
RUNNABLE_SPECS = ("x86-64", "x86-64-v3", "host") if target.host().arch == "x86_64" else ("host",)
FOREIGN_SPECS = (f"{X86}:znver4", f"{X86}:icelake-server", f"{X86}:sapphirerapids",
                 f"{ARM}:neoverse-n1", f"{ARM}:neoverse-v1")


def _runnable() -> list[target.Target]:
    out = []
    for spec in RUNNABLE_SPECS:
        t = target.make(spec)
        if t.runnable and t not in out:
            out.append(t)
    return out


RUNNABLE = _runnable()


def short_name(t: target.Target) -> str:
    return "host" if t.is_host else t.cpu


def target_env(t: target.Target) -> dict[str, str]:
    """Environment variables that make a child process build for ``t``."""
    env = {"SYMGRAD_TARGET_TRIPLE": t.triple, "SYMGRAD_TARGET_CPU": t.cpu,
           "SYMGRAD_TARGET_FEATURES": t.features,
           "SYMGRAD_TARGET_VECTOR_BITS": str(t.requested_vector_bits or "")}
    return env


@pytest.fixture(params=RUNNABLE, ids=short_name)
def machine(request) -> target.Target:
    """Generate code for each target this host can run, in turn."""
    with target.use(request.param) as t:
        yield t


@pytest.fixture(params=FOREIGN_SPECS, ids=lambda s: s.split(":")[1])
def foreign_machine(request) -> target.Target:
    """Generate (not run) code for another machine."""
    with target.use(target.make(request.param)) as t:
        yield t


@pytest.fixture
def ir_gemm() -> None:
    """Products compiled in the test run on the IR GEMMs, not BLAS."""
    with gemm_choice.forced("ir"):
        yield
