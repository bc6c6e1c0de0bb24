"""The model of every trial fitted ahead: a decision uses the fit of the trials before the latest
one, made in the background while that trained, and never waits for the fit of the trial that
just finished; the decisions do not depend on when a fit is done."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.config.space import Stratum
from study.ext.allocation.rounds import RoundAllocator
from study.ledger import Ledger
from study.phases import PHASES, Phase
from study.results import TrialState
from study.tuners import design, fit_ahead
from study.tuners.design import BATCH_ANSWERS, DesignModel, design_model
from study.tuners.fit_ahead import behind, lagged_fit, lagged_frame, model_for, seen
from tests.ext.allocation.test_adaptive_allocation import new_ledger
from tests.ext.allocation.test_step_plan import steps_study
from tests.fakes import finished_trial, rising_curve
from tests.tuners.test_design import TARGET, steps

SIZES = (16, 32, 64, 128)


def finished(ledger: Ledger, stratum: Stratum, lr: float) -> None:
    """One trial of ``stratum`` at ``lr`` claimed, started and finished as the engine does."""
    slot = ledger.claim(stratum, budget=100)
    assert slot is not None
    ledger.start(slot, tuner="optuna", origin="sampler", extras={"learning_rate": lr})
    made = finished_trial(
        stratum,
        slot.number,
        lr,
        rising_curve(stratum.batch_size, steps(stratum.batch_size, lr)),
        TARGET,
    )
    assert made.result is not None
    ledger.finish(slot, made.result, float(made.result.steps_run), target=TARGET)


def study_with_trials(
    tmp_path: Path, total: int = 16, *, ahead: bool = True
) -> tuple[Ledger, RoundAllocator, list[str]]:
    """A study by steps whose 4 batch sizes ran 4 trials each (``tuner.fit_ahead``: ``ahead``)."""
    data = steps_study(100_000)
    data["search_space"] = {**data["search_space"], "learning_rate": {"low": 1e-3, "high": 1.0}}
    data["target"] = str(TARGET)
    data["budget"] = {"max_steps": 5000}
    data["tuner"] = {**data.get("tuner", {}), "fit_ahead": ahead}
    ledger, config = new_ledger(tmp_path, data)
    lines: list[str] = []
    allocator = RoundAllocator(config, ledger, total=total, say=lines.append)
    allocator.begin(pytest.fail)
    for b in SIZES:
        for factor in (0.5, 1.0, 2.0, 0.3):
            finished(ledger, Stratum(b, "default"), 0.01 * (b / 16) ** 0.7 * factor)
    return ledger, allocator, lines


@pytest.fixture(autouse=True)
def fresh_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    """No fit asked for or kept by another test (or another fake) is at hand."""
    forget_fits(monkeypatch)


def forget_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fit_ahead, "_futures", OrderedDict())
    monkeypatch.setattr(fit_ahead, "_deferred", [])
    monkeypatch.setattr(design, "_FITS", OrderedDict())


def all_trials(ledger: Ledger) -> list:
    return [t for b in SIZES for t in ledger.trials(Stratum(b, "default"))]


def test_the_trials_behind_leave_out_the_latest_finished_one_the_model_reads() -> None:
    stratum = Stratum(64, "default")
    made = finished_trial(stratum, 0, 0.1, rising_curve(64, 100), TARGET)
    trials = [replace(made, number=n, finished_at=at) for n, at in enumerate((1.0, 3.0, 2.0))]
    failed = replace(made, number=3, status=TrialState.FAILED, finished_at=4.0)
    running = replace(made, number=4, result=None, status=TrialState.RUNNING, finished_at=None)
    kept = behind([*trials, failed, running])
    assert [t.number for t in kept] == [0, 2, 3, 4]  # the latest the model reads: number 1
    assert behind([failed, running]) == [failed, running]  # none the model reads


@pytest.mark.extension("allocation")  # rounds by steps
def test_a_round_decides_with_the_fit_behind_while_the_latest_trials_fit_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, allocator, lines = study_with_trials(tmp_path)
    trials = all_trials(ledger)
    everything = len(lagged_frame(trials)) + 1
    began, go, asked = threading.Event(), threading.Event(), []

    def slow_fit(frame: pd.DataFrame, accelerators: int = 8) -> DesignModel | None:
        asked.append(len(frame))
        if len(frame) == everything:  # the fit of the trial that just finished: slow
            began.set()
            assert go.wait(30)
        return design_model(frame, accelerators)

    monkeypatch.setattr(fit_ahead, "design_model", slow_fit)
    started = time.perf_counter()
    budgets = allocator.next_round()
    took = time.perf_counter() - started
    assert asked == [everything - 1]  # the fit of all 16 waits for the trial to start
    fit_ahead.release()  # as the engine does when the trial decided starts training
    try:
        # Decided from the 15 trials before the latest; the fit of all 16 is still running.
        assert began.wait(30) and budgets is not None and allocator.round == 1
        assert asked == [everything - 1, everything]
        assert fit_ahead.ahead(lagged_frame(trials)).done()
        assert not fit_ahead.ahead(fit_ahead.ledger_frame(trials)).done()
        assert took < 30
        assert "a trial here narrows the answer's variance" in lines[-1]
    finally:
        go.set()
    # The same decision as a resumed run makes (the fit of those 15 trials made anew).
    assert fit_ahead.ahead(fit_ahead.ledger_frame(trials)).result(30) is not None
    again = RoundAllocator(allocator.config, ledger, total=16, say=lines.append)
    again.begin(pytest.fail)
    forget_fits(monkeypatch)
    decision, go = again._plan_step(1)
    assert go and decision.line() == lines[-1]


@pytest.mark.extension("allocation")  # rounds by steps
def test_a_decision_is_the_same_whether_its_fit_was_done_or_still_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, _, _ = study_with_trials(tmp_path)
    trials = all_trials(ledger)
    frame = lagged_frame(trials)
    quick = model_for(frame)  # fitted, then done when asked
    forget_fits(monkeypatch)

    def slow_fit(frame: pd.DataFrame, accelerators: int = 8) -> DesignModel | None:
        time.sleep(0.3)  # still running when the decision asks for it: waited for
        return design_model(frame, accelerators)

    monkeypatch.setattr(fit_ahead, "design_model", slow_fit)
    waited = PHASES.snapshot()["seconds"].get(Phase.FIT_WAIT.value, 0.0)
    slow = model_for(frame)
    assert PHASES.snapshot()["seconds"][Phase.FIT_WAIT.value] - waited >= 0.2
    assert quick is not None and slow is not None
    assert (slow.surrogate.theta == quick.surrogate.theta).all()
    assert slow is not quick and slow.recommended == quick.recommended
    assert math.isfinite(slow.recommended)


def rounds_of(tmp_path: Path, delays: list[float], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Six rounds of a study by steps, each trial finished as decided (a deterministic result at
    a rate set by its batch size and number), with every fit slowed by the next of ``delays``
    seconds: the decisions printed."""
    forget_fits(monkeypatch)
    ledger, allocator, lines = study_with_trials(tmp_path, total=32)
    pauses = iter(delays)

    def slowed(frame: pd.DataFrame, accelerators: int = 8) -> DesignModel | None:
        time.sleep(next(pauses, 0.0))
        return design_model(frame, accelerators)

    monkeypatch.setattr(fit_ahead, "design_model", slowed)
    for _ in range(6):
        before = dict(allocator.budgets)
        budgets = allocator.next_round()
        assert budgets is not None
        (grown,) = [s for s in budgets if budgets[s] > before.get(s, 0)]
        count = len(ledger.trials(grown))
        finished(ledger, grown, 0.01 * (grown.batch_size / 16) ** 0.7 * (0.6 + 0.2 * count))
    fit_ahead.ahead(fit_ahead.ledger_frame(all_trials(ledger))).result(30)
    return [line for line in lines if line.startswith("allocation round ") and " 0:" not in line]


@pytest.mark.slow
@pytest.mark.extension("allocation")  # rounds by steps
def test_the_decisions_do_not_depend_on_how_long_the_fits_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick = rounds_of(tmp_path / "quick", [], monkeypatch)
    slow = rounds_of(tmp_path / "slow", [0.0, 0.5, 0.0, 0.4, 0.3, 0.0, 0.6, 0.2], monkeypatch)
    assert len(quick) == 6 and all("narrows the answer's variance" in line for line in quick)
    assert slow == quick


@pytest.mark.extension("allocation")  # rounds by steps
def test_the_model_behind_counts_the_latest_reached_trial_as_seen(tmp_path: Path) -> None:
    ledger, _, _ = study_with_trials(tmp_path)
    trials = all_trials(ledger)
    latest = max(trials, key=lambda t: t.finished_at or 0.0)
    assert latest.steps_to_target is not None and latest.stratum.batch_size == 128
    model = model_for(lagged_frame(trials))
    assert model is not None
    narrowed = lagged_fit(trials)(lagged_frame(trials), 8)
    assert narrowed is not None and narrowed is not model
    assert (narrowed.surrogate.theta == model.surrogate.theta).all()  # its outcome is not known
    # What a next trial where the latest one ran would teach shrinks (for every answer, the
    # relative variance a second look at the same point removes is less than the first's);
    # the covariance shrinks. Elsewhere it need not: the narrowing moves the answers' variance.
    args = {"budget": 5000.0, "recommended": model.recommended, "answers": BATCH_ANSWERS}
    there = np.array([latest.learning_rate])
    before, _, _ = design.information_gain(model.surrogate, 128, there, **args)
    after, _, _ = design.information_gain(narrowed.surrogate, 128, there, **args)
    assert 0 < after[0] < before[0]
    shrink = np.linalg.eigvalsh(model.surrogate.covariance - narrowed.surrogate.covariance)
    assert shrink.min() > -1e-9 and shrink.max() > 0
    missed = replace(latest, status=TrialState.PRUNED)  # a trial that did not reach: no change
    assert seen(model, missed) is model and seen(None, latest) is None


@pytest.mark.extension("allocation")  # rounds by steps
def test_without_fit_ahead_a_round_fits_every_finished_trial_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, allocator, lines = study_with_trials(tmp_path, ahead=False)
    assert not allocator.config.tuner.fit_ahead
    asked: list[int] = []

    def counted(frame: pd.DataFrame, accelerators: int = 8) -> DesignModel | None:
        asked.append(len(frame))
        return design_model(frame, accelerators)

    monkeypatch.setattr(fit_ahead, "design_model", counted)
    assert allocator.next_round() is not None
    fit_ahead.release()
    assert asked == [len(all_trials(ledger))] and not fit_ahead._futures  # on the spot, no lag
    assert "a trial here narrows the answer's variance" in lines[-1]
