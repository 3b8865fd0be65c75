"""The differential tester's CI slice: a fixed set of random programs (and every saved
regression case) run eagerly, compiled on numpy and on LLVM, against PyTorch (see
:mod:`tests.fuzz.programs`; ``python -m tests.fuzz.programs --seconds N`` runs more)."""
import pytest

from .programs import check, generate, load_cases

SLICE = range(0, 300)          # ~40 s on one core
CHUNK = 25


@pytest.mark.parametrize("start", list(SLICE)[::CHUNK])
def test_random_programs_agree_with_pytorch(start):
    failures = []
    for seed in range(start, min(start + CHUNK, SLICE.stop)):
        why = check(generate(seed))
        if why:
            failures.append(f"seed {seed}: {why}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name,prog", load_cases() or [pytest.param("none", None, marks=pytest.mark.skip(reason="no saved cases"))])
def test_saved_regression_case(name, prog):
    assert check(prog) is None


def test_generated_programs_cover_the_op_set():
    from .programs import OPS
    seen = {st["op"] for s in range(600) for st in generate(s)["steps"]}
    assert seen == set(OPS), set(OPS) - seen
