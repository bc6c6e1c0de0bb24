"""The fit helper (`study.runner.fit_helper`): half of a fit's descents in a process of its own
while one trial trains at a time, the same results bit for bit, and a helper that dies leaves
the fits to the process that fits."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from study.analysis import descents
from study.analysis.likelihood import Trials
from study.analysis.surrogate import _bounds, _Options, _starts, fit_surrogate
from study.runner import fit_helper
from tests.analysis.test_descents import same, trials_frame
from tests.waiting import wait_until


def test_the_helper_gives_the_descents_made_here_and_survives_its_death() -> None:
    data = Trials.of(trials_frame())
    bounds = _bounds(data, _Options(bend=False, knee=True, heavy_tails=False))
    starts = _starts(data)
    here = descents.descend(data, bounds, starts)
    helper = fit_helper.FitHelper()
    try:
        assert same(helper(data, bounds, starts), here)  # here, or helped once it started
        wait_until(helper.ready, 60, "the helper to start")
        assert same(helper(data, bounds, starts), here) and not helper.broken
        assert helper.pid is not None
        os.kill(helper.pid, signal.SIGKILL)
        wait_until(lambda: not helper._process.is_alive(), 10, "the helper to die")
        assert same(helper(data, bounds, starts), here)  # its half made here instead
        assert helper.broken
        assert same(helper(data, bounds, starts), here)
    finally:
        helper.close()


def test_a_run_installs_a_helper_only_with_one_worker_and_a_core_to_spare(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.delenv(fit_helper.ENV, raising=False)
    assert fit_helper.wanted(1) and not fit_helper.wanted(2)
    for off in ("0", "false", "No", " off "):
        monkeypatch.setenv(fit_helper.ENV, off)
        assert not fit_helper.wanted(1)
    monkeypatch.setenv(fit_helper.ENV, "1")
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert not fit_helper.wanted(1)


def test_installed_helps_the_fits_of_the_run_and_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.delenv(fit_helper.ENV, raising=False)
    frame = trials_frame(2)
    plain = fit_surrogate(frame)
    before = descents.install(None)
    try:
        with fit_helper.installed(1) as helper:
            assert helper is not None and descents._installed is helper
            wait_until(helper.ready, 60, "the helper to start")
            helped = fit_surrogate(frame)
            pid = helper.pid
        assert descents._installed is None
        assert not helper._process.is_alive()
        assert pid is not None
    finally:
        descents.install(before)
    assert np.array_equal(helped.theta, plain.theta) and helped.b_noise == plain.b_noise
