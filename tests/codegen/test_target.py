"""Tests of codegen/target.py: the target object, its facts, validation and selection.

Expectations come from LLVM's own view of each target (its host feature string, or the
assembly it generates), never from the machine the tests happen to run on."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm
import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from codegen import target  # noqa: E402

from machines import FOREIGN_SPECS, RUNNABLE  # noqa: E402


def host_features() -> set[str]:
    return set(llvm.get_host_cpu_features().flatten().split(","))


# ----------------------------------------------------------------------- host


def test_init_is_idempotent() -> None:
    target.init()
    target.init()


def test_host_is_what_llvm_reports() -> None:
    h = target.host()
    assert h.is_host and h.runnable and h.not_runnable_reason is None
    assert h.triple == llvm.get_process_triple() and h.cpu == llvm.get_host_cpu_name()
    assert h.features == llvm.get_host_cpu_features().flatten()


def test_host_vector_width_follows_its_features() -> None:
    h, feats = target.host(), host_features()
    if h.arch == "x86_64":
        expected = 512 if "+avx512f" in feats else 256 if "+avx" in feats else 128
        assert h.fma == ("+fma" in feats or "+avx512f" in feats)
        assert h.native_rounding == ("+sse4.1" in feats)
        assert h.vector_registers == (32 if expected == 512 else 16)
    else:
        expected = 128
    assert h.widest_vector_bits == h.vector_bits == expected
    assert h.lanes(64) * 64 == expected == h.lanes(32) * 32


def test_fingerprint_covers_everything_that_changes_code() -> None:
    h = target.host()
    fp = h.fingerprint()
    version = ".".join(map(str, llvm.llvm_version_info))
    for part in (h.triple, h.cpu, h.features, llvmlite.__version__, version,
                 f"vector_bits={h.vector_bits}"):
        assert part in fp
    prints = {t.fingerprint() for t in RUNNABLE} | {target.make(s).fingerprint() for s in FOREIGN_SPECS}
    assert len(prints) == len(set(RUNNABLE)) + len(FOREIGN_SPECS)


# ------------------------------------------------------------ facts from LLVM


@pytest.mark.parametrize("spec, bits, fma, rounding", [
    ("x86_64-unknown-linux-gnu:x86-64", 128, False, False),
    ("x86_64-unknown-linux-gnu:x86-64-v2", 128, False, True),
    ("x86_64-unknown-linux-gnu:x86-64-v3", 256, True, True),
    ("x86_64-unknown-linux-gnu:x86-64-v4", 512, True, True),
    ("x86_64-unknown-linux-gnu:znver4", 512, True, True),
    ("x86_64-unknown-linux-gnu:znver2", 256, True, True),
    ("x86_64-unknown-linux-gnu:sapphirerapids", 512, True, True),
    ("aarch64-unknown-linux-gnu:neoverse-n1", 128, True, True),
])
def test_facts_of_named_cpus(spec: str, bits: int, fma: bool, rounding: bool) -> None:
    """The psABI levels and these CPUs are documented; LLVM's answers must agree."""
    t = target.make(spec)
    assert (t.widest_vector_bits, t.fma, t.native_rounding) == (bits, fma, rounding)


def test_explicit_features_change_the_facts() -> None:
    t = target.make("x86_64-unknown-linux-gnu:x86-64-v3:-avx,-avx2,-fma")
    assert t.widest_vector_bits == 128 and not t.fma


def test_scalable_vectors_only_with_sve() -> None:
    assert target.make("aarch64-unknown-linux-gnu:neoverse-v1").scalable_vectors
    assert not target.make("aarch64-unknown-linux-gnu:neoverse-n1").scalable_vectors
    assert target.make("aarch64-unknown-linux-gnu:neoverse-v1").loop_vector_type("double", 64) \
        == "<vscale x 2 x double>"


def test_vector_width_can_be_narrowed_not_widened() -> None:
    v3 = target.make("x86-64-v3")
    assert target.make("x86-64-v3@128").vector_bits == 128
    assert "+prefer-128-bit" in target.make("x86-64-v3@128").machine_features
    with pytest.raises(target.TargetError, match="128 to 256"):
        target.make("x86-64-v3", vector_bits=512)
    assert v3.vector_bits == 256


def test_wide_vectors_are_requested_from_llvm_for_avx512_targets() -> None:
    """LLVM's tuning for Intel's AVX-512 servers prefers 256-bit vectors; symgrad asks for
    the widest in the target machine itself, so every function gets them."""
    t = target.make("x86_64-unknown-linux-gnu:sapphirerapids")
    assert "-prefer-256-bit" in t.machine_features
    assert "+prefer-256-bit" in target.make(f"{t.name}@256").machine_features


# ------------------------------------------------------------------ selection


def test_make_parses_every_spelling() -> None:
    h = target.host()
    assert target.make() is h and target.make("host") is h and target.make(h) is h
    assert target.make("x86-64-v3").triple == h.triple
    arm = target.make("aarch64-unknown-linux-gnu:neoverse-n1")
    assert (arm.triple, arm.cpu, arm.features) == ("aarch64-unknown-linux-gnu", "neoverse-n1", "")
    assert target.make("aarch64-unknown-linux-gnu").cpu == "generic"
    with_features = target.make("x86_64-unknown-linux-gnu:x86-64-v3:-fma")
    assert with_features.features == "-fma" and not with_features.fma
    for t in (arm, with_features, target.make("x86-64-v3@128"), target.make("host@128")):
        assert target.make(t.name) == t


@pytest.mark.parametrize("spec, message", [
    ("x86_64-unknown-linux-gnu:no-such-cpu", "does not know CPU 'no-such-cpu'"),
    ("x86_64-unknown-linux-gnu:x86-64:+no-such-feature", "does not know feature"),
    ("nosucharch-unknown-linux-gnu", None),
    ("sparc9-unknown-linux-gnu", None),
    ("x86-64-v3@100", "128 to 256"),
    ("x86-64-v3@big", "bad vector width"),
])
def test_bad_targets_are_clear_errors(spec: str, message: str | None) -> None:
    with pytest.raises(target.TargetError, match=message):
        target.make(spec)


def test_a_target_of_the_wrong_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="target must be"):
        target.make(3)  # type: ignore[arg-type]


def test_use_sets_the_current_target() -> None:
    assert target.current() == target.default()
    with target.use("x86-64-v3") as t:
        assert target.current() is t and t.cpu == "x86-64-v3"
        with target.use(None):
            assert target.current() == target.default()
        assert target.current() is t
    assert target.current() == target.default()


# ------------------------------------------------------------------- running


def test_runnable_matrix_runs_here() -> None:
    assert target.host() in RUNNABLE
    for t in RUNNABLE:
        assert t.runnable, t.not_runnable_reason


@pytest.mark.parametrize("spec", FOREIGN_SPECS)
def test_other_machines_are_never_run(spec: str) -> None:
    t = target.make(spec)
    if t.cpu == target.host().cpu and t.triple == target.host().triple:
        pytest.skip("this host is that machine")   # e.g. CI on a Zen 4 runs znver4 code
    assert not t.runnable
    with pytest.raises(target.TargetError, match="cannot run in this process"):
        t.check_runnable()


def test_a_level_the_host_lacks_is_not_runnable() -> None:
    feats = {f[1:] for f in host_features() if f.startswith("+")}
    for level, needs in target.X86_LEVELS.items():
        if target.host().arch != "x86_64":
            break
        t = target.make(level)
        assert t.runnable == (needs <= feats), (level, needs - feats)


ENV_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {repo!r})
    from codegen import target
    t = target.default()
    print(t.cpu, t.vector_bits, t.runnable)
""")


def run_with_env(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", ENV_SCRIPT.format(repo=str(REPO))],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})


def test_environment_chooses_the_default_target() -> None:
    out = run_with_env(SYMGRAD_TARGET_CPU="x86-64-v3", SYMGRAD_TARGET_VECTOR_BITS="128") \
        if target.host().arch == "x86_64" else run_with_env(SYMGRAD_TARGET_VECTOR_BITS="128")
    assert out.returncode == 0, out.stderr
    cpu, bits, _ = out.stdout.split()
    assert bits == "128" and (cpu == "x86-64-v3" or target.host().arch != "x86_64")
    out = run_with_env(SYMGRAD_TARGET_TRIPLE="aarch64-unknown-linux-gnu",
                       SYMGRAD_TARGET_CPU="neoverse-n1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["neoverse-n1", "128",
                                  str(target.host().triple.startswith("aarch64")
                                      and target.host().cpu == "neoverse-n1")]


def test_a_bad_environment_is_a_clear_error() -> None:
    out = run_with_env(SYMGRAD_TARGET_CPU="no-such-cpu")
    assert out.returncode != 0
    assert "TargetError: LLVM does not know CPU 'no-such-cpu'" in out.stderr
