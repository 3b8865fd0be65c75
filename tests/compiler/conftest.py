"""Compile tests run on every backend: the native LLVM one and the numpy reference."""
import pytest

from symgrad.compiler.backends import BACKENDS, get_backend


@pytest.fixture(params=BACKENDS)
def backend(request):
    get_backend(request.param)        # a missing backend is a failure, never a silent skip
    return request.param
