"""``torch.backends`` switches of a CPU build, ``use_deterministic_algorithms`` and
``set_float32_matmul_precision`` against PyTorch: defaults, what setting changes and
reads back, warnings and errors (the seed helpers of tutorials run unchanged)."""
from __future__ import annotations

import warnings

import pytest
import torch

import symgrad as sg


def _read(lib):
    b = lib.backends
    return (b.cudnn.is_available(), b.cudnn.enabled, b.cudnn.benchmark, b.cudnn.deterministic,
            b.cudnn.allow_tf32, b.cudnn.version(), b.mps.is_available(), b.mps.is_built(),
            b.cuda.is_built(), b.cuda.matmul.allow_tf32, b.mha.get_fastpath_enabled(),
            b.cuda.flash_sdp_enabled(), lib.are_deterministic_algorithms_enabled(),
            lib.is_deterministic_algorithms_warn_only_enabled(),
            lib.get_deterministic_debug_mode(), lib.get_float32_matmul_precision())


@pytest.fixture
def restore():
    yield
    for lib in (torch, sg):
        lib.use_deterministic_algorithms(False)
        lib.set_float32_matmul_precision("highest")
        lib.backends.cudnn.deterministic = False
        lib.backends.cudnn.benchmark = False


def test_defaults_equal_torch(restore):
    assert _read(sg) == _read(torch)


def test_a_seed_helper_runs_and_reads_back_as_torch(restore):
    def set_seed(lib, seed):
        lib.manual_seed(seed)
        lib.backends.cudnn.deterministic = True
        lib.backends.cudnn.benchmark = False
        lib.use_deterministic_algorithms(True, warn_only=True)
        lib.set_float32_matmul_precision("high")
        return lib.rand(3).tolist()
    assert set_seed(sg, 3) == set_seed(torch, 3)
    assert _read(sg) == _read(torch)
    for mode in ("error", 0, "warn", 2):
        torch.set_deterministic_debug_mode(mode)
        sg.set_deterministic_debug_mode(mode)
        assert _read(sg) == _read(torch)


def test_errors_and_warnings_as_torch(restore):
    for call in (lambda lib: lib.use_deterministic_algorithms(1),
                 lambda lib: lib.use_deterministic_algorithms(True, warn_only=1)):
        with pytest.raises(TypeError) as te:
            call(torch)
        with pytest.raises(TypeError) as se:
            call(sg)
        assert str(se.value).split(": ", 1)[1] == str(te.value).split(": ", 1)[1]
    with pytest.warns(UserWarning, match="low is not one of 'highest', 'high', or 'medium'"):
        sg.set_float32_matmul_precision("low")
    assert sg.get_float32_matmul_precision() == "highest"


def test_backends_modules_import():
    import symgrad.backends.cudnn as cudnn
    import symgrad.backends.mps as mps
    assert cudnn.is_available() is False and mps.is_available() is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sg.backends.mha.set_fastpath_enabled(False)
        assert sg.backends.mha.get_fastpath_enabled() is False
        sg.backends.mha.set_fastpath_enabled(True)
