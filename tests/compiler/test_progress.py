"""Stage times of a compile: recorded on the Lowered, logged at INFO; a progress line
on stderr for long compiles when stderr is a terminal (symgrad/compiler/progress.py)."""
import logging
import time

import numpy as np
import pytest

import symgrad as sg
from symgrad.compiler import progress


def _loss(x, W):
    for _ in range(3):
        x = sg.tanh(x @ W)
    return x.sum()


def test_stage_times_are_logged_at_info(caplog, monkeypatch):
    monkeypatch.setattr(sg.config.settings, "disk_cache", False)   # every stage runs
    f = sg.value_and_grad(_loss)
    with caplog.at_level(logging.INFO, logger="symgrad.compile"):
        f(np.ones((3, 5)), np.eye(5))
    (record,) = [r for r in caplog.records if r.name == "symgrad.compile"]
    text = record.getMessage()
    for stage in ("trace", "autodiff", "rewrite", "fuse", "plan", "lower", "llvm-opt",
                  "machine-code"):
        assert f"{stage} " in text


def test_stats_carry_the_times_of_the_stages_run():
    times = sg.value_and_grad(_loss).lower(np.ones((3, 5)), np.eye(5)).stats["times"]
    assert set(times) == {"autodiff", "rewrite", "fuse"}
    assert all(t >= 0 for t in times.values())


def test_a_long_compile_shows_progress_on_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(progress, "_wants_progress", lambda: True)
    monkeypatch.setattr(progress, "PROGRESS_AFTER", 0.05)
    with progress.StageClock("_loss") as clock:
        with clock.stage("llvm-opt"):
            time.sleep(0.4)
    err = capsys.readouterr().err
    assert "symgrad: compiling _loss: llvm-opt" in err
    assert "symgrad: compiled _loss in" in err


def test_a_short_compile_prints_nothing(monkeypatch, capsys):
    monkeypatch.setattr(progress, "_wants_progress", lambda: True)
    sg.value_and_grad(_loss, backend="numpy")(np.ones((3, 5)), np.eye(5) * 0.5)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value", ["0", "off"])
def test_progress_is_off_by_environment(monkeypatch, value):
    monkeypatch.setenv("SYMGRAD_PROGRESS", value)
    assert not progress._wants_progress()
