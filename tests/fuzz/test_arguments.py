"""The bad-argument fuzzer's CI slice (see :mod:`tests.fuzz.arguments`): every mutation
of every argument of every target, on both backends, once."""
import pytest

from .arguments import all_calls, check_call, targets


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("name", sorted(targets()))
def test_bad_arguments_give_the_right_answer_or_a_clean_error(name, backend):
    failures = []
    for target, be, i, mutation, replacement in all_calls(seed=0):
        if (target, be) != (name, backend):
            continue
        why = check_call(target, be, i, mutation, replacement)
        if why:
            failures.append(f"arg {i} {mutation}: {why}")
    assert not failures, "\n".join(failures)
