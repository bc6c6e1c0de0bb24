"""Designed proposals: once the model of every trial can be fitted, every other trial of a stratum
goes to the learning rate whose outcome narrows the answer most."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.analysis.answers import scaling_answers
from study.analysis.surrogate import fit_surrogate
from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.config.target import Target
from study.ledger import Ledger, StudyRecord
from study.tuners.base import History
from study.tuners.design import (
    BATCH_ANSWERS,
    BRACKET,
    DESIGN,
    GAIN,
    PROBE,
    RATE_ANSWERS,
    answer_gradients,
    bracket_rate,
    design_rate,
    designed,
    information_gain,
)
from study.tuners.designer import Designer
from study.tuners.registry import build_lineup
from study.tuners.trial_frame import ledger_frame
from tests.fakes import finished_trial, rising_curve, write_ledger

TARGET = Target.parse("val_accuracy>=0.6")
SIZES = (16, 32, 64, 128, 256)
STUDY = {
    "name": "design",
    "workload": "tabular",
    "target": str(TARGET),
    "budget": {"max_steps": 5000},
    "trials_per_stratum": 8,
    "search_space": {
        "batch_size": list(SIZES),
        "learning_rate": {"low": 1.0e-3, "high": 1.0},
        "strategy": ["default"],
    },
}


def steps(batch: int, lr: float) -> float:
    """S(B) = 60 (1 + 100 / B) at lr* = 0.01 (B / 16) ** 0.7, 0.5 log-steps per ln(lr/lr*)**2."""
    best = 0.01 * (batch / 16) ** 0.7
    return 60 * (1 + 100 / batch) * math.exp(0.5 * math.log(lr / best) ** 2)


def ledger_with(tmp_path: Path, sizes=SIZES, per=3) -> Ledger:
    ledger = Ledger.open(str(tmp_path / "j.journal"), "design")
    trials = []
    for b in sizes:
        best = 0.01 * (b / 16) ** 0.7
        for n, factor in enumerate((0.5, 1.0, 2.0, 0.3, 3.0)[:per]):
            lr = best * factor * (1.0 + 0.03 * n)
            trials.append(
                finished_trial(Stratum(b, "default"), n, lr, rising_curve(b, steps(b, lr)), TARGET)
            )
    write_ledger(ledger, StudyRecord(name="design"), trials)
    return ledger


def test_which_trials_are_designed():
    assert [n for n in range(12) if designed(n)] == [2, 3, 6, 7, 10, 11]


def test_the_designer_proposes_its_trials_at_an_informative_rate(tmp_path):
    config = parse_study(STUDY, "design.yaml")
    ledger = ledger_with(tmp_path)
    designer = Designer(config, ledger)
    stratum = Stratum(64, "default")

    slot = ledger.claim(stratum, budget=8)  # number 3: the designer's
    assert slot.number == 3
    proposal = designer.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
    assert proposal is not None and proposal.origin == DESIGN
    lr = proposal.params["learning_rate"]
    best = 0.01 * (64 / 16) ** 0.7
    assert best / 8 <= lr <= best * 4 and proposal.extras[GAIN] > 0
    ledger.start(slot, tuner="optuna", origin=DESIGN, extras=proposal.extras)

    slot = ledger.claim(stratum, budget=8)  # number 4: the sampler's
    assert slot.number == 4
    assert designer.propose(slot, History(stratum, tuple(ledger.trials(stratum)))) is None


def test_a_designed_trial_first_brackets_the_best_rate():
    bounds = (1e-3, 3.0)
    assert bracket_rate(0.5, [0.3, 0.5, 0.9], bounds) is None  # bracketed on both sides
    assert bracket_rate(0.5, [0.3, 0.5, 3.0], bounds) == pytest.approx(math.sqrt(1.5))
    assert bracket_rate(0.5, [0.5, 0.9], bounds) == pytest.approx(math.sqrt(5e-4))  # range's end
    assert bracket_rate(2.0, [0.6, 2.0], bounds) is None  # within BRACKET of the range's end
    # No best to trust (none reached, or slower than the other batch sizes allow): the middle
    # of the widest gap, until no gap spans BRACKET ** 2.
    tried = [0.0012, 0.0013, 0.0027, 0.0059, 0.026, 2.04]
    assert bracket_rate(None, tried, bounds) == pytest.approx(math.sqrt(0.026 * 2.04))
    dense = list(np.geomspace(1e-3, 3.0, 8))
    assert bracket_rate(None, dense, bounds) is None
    assert BRACKET == 4.0


def test_the_designer_probes_past_a_best_slower_than_the_other_batch_sizes_allow(tmp_path):
    config = parse_study(STUDY, "design.yaml")
    ledger = ledger_with(tmp_path)
    stratum = Stratum(256, "default")
    slot = ledger.claim(stratum, budget=8)
    slow = [  # only rates far below the best were tried at 256: its best is slow
        finished_trial(stratum, n, lr, rising_curve(256, steps(256, lr)), TARGET)
        for n, lr in enumerate((0.0012, 0.003))
    ]
    history = History(stratum, tuple(slow), neighbour_steps=((128, steps(128, 0.063)),))
    proposal = Designer(config, ledger).propose(slot, history)
    assert proposal is not None and proposal.origin == DESIGN and proposal.extras[PROBE] == "gap"
    assert proposal.params["learning_rate"] == pytest.approx(math.sqrt(0.003 * 1.0))


def test_no_design_without_three_batch_sizes_or_when_switched_off(tmp_path):
    stratum = Stratum(64, "default")
    few = ledger_with(tmp_path / "few", sizes=(32, 64))
    slot = few.claim(stratum, budget=8)
    config = parse_study(STUDY, "design.yaml")
    assert Designer(config, few).propose(slot, History(stratum, ())) is None

    off = parse_study({**STUDY, "tuner": {"design": False}}, "design.yaml")
    assert not off.tuner.design and build_lineup("optuna", off, few).designer is None
    ledger = ledger_with(tmp_path / "off")
    slot = ledger.claim(stratum, budget=8)
    assert Designer(off, ledger).propose(slot, History(stratum, ())) is None


def test_no_design_before_any_trial_finished(tmp_path):
    # Three workers at once: the designer's slot #2 is claimed while #0 and #1 still run.
    config = parse_study(STUDY, "design.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "design")
    write_ledger(ledger, StudyRecord(name="design"), [])
    stratum = Stratum(64, "default")
    slots = [ledger.claim(stratum, budget=8) for _ in range(3)]
    assert slots[2].number == 2 and designed(2)
    assert ledger_frame(ledger.trials(stratum))["steps_to_target"].dtype == float
    assert Designer(config, ledger).propose(slots[2], History(stratum, ())) is None


def test_the_lineup_records_a_designed_trial_under_the_backend_whose_turn_it_is(tmp_path):
    config = parse_study(STUDY, "design.yaml")
    ledger = ledger_with(tmp_path)
    lineup = build_lineup("optuna", config, ledger)
    stratum = Stratum(128, "default")
    slot = ledger.claim(stratum, budget=8)
    backend, proposal = lineup.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
    assert backend is lineup.designer and proposal.tuner == "optuna"


def test_information_gain_prefers_rates_that_reach_the_target_cheaply(tmp_path):
    ledger = ledger_with(tmp_path, per=5)
    frame = ledger_frame([t for b in SIZES for t in ledger.trials(Stratum(b, "default"))])
    surrogate = fit_surrogate(frame)
    assert surrogate.ok
    best = float(surrogate.best_lr(128)[0])
    rates = np.geomspace(best / 8, best * 4, 48)
    gain, median, reach = information_gain(surrogate, 128, rates, budget=5000, recommended=128)
    assert np.all(gain >= 0) and np.all((reach >= 0) & (reach <= 1))
    assert median.min() == pytest.approx(surrogate.steps(128)[0], rel=0.05)
    # A rate whose trial would not reach the target within a tiny budget tells nothing.
    tiny, _, tiny_reach = information_gain(surrogate, 128, rates, budget=1.0, recommended=128)
    assert tiny.max() < gain.max() * 1e-3 and tiny_reach.max() < 1e-3
    chosen = design_rate(frame, 128, (1e-3, 1.0), budget=5000)
    assert chosen is not None and chosen.learning_rate == pytest.approx(
        rates[int(np.argmax(gain))], rel=0.2
    )


def test_the_answers_gradients_read_alpha_as_the_report_does(tmp_path):
    ledger = ledger_with(tmp_path, per=5)
    frame = ledger_frame([t for b in SIZES for t in ledger.trials(Stratum(b, "default"))])
    surrogate = fit_surrogate(frame)
    assert surrogate.ok
    rows = answer_gradients(surrogate, 128, BATCH_ANSWERS)
    theta = surrogate.theta
    # Each answer is linear in the parameters: its gradient times theta (less the part not
    # multiplied by a parameter) is the answer. alpha is the report's slope over the batch sizes.
    assert rows[2] @ theta == pytest.approx(scaling_answers(surrogate).alpha.estimate, abs=1e-9)
    assert rows[0] @ theta == pytest.approx(math.log(surrogate.b_noise), rel=1e-9)
    assert rows[1] @ theta == pytest.approx(math.log(surrogate.best_lr(128)[0]), rel=1e-9)
    with pytest.raises(ValueError, match="unknown answer 'gamma'"):
        answer_gradients(surrogate, 128, ("gamma",))
    # Narrowing alpha too adds to what a trial teaches, never takes from it.
    rates = np.geomspace(1e-3, 1.0, 24)
    two, _, _ = information_gain(surrogate, 16, rates, budget=5000, recommended=128)
    three, _, _ = information_gain(
        surrogate, 16, rates, budget=5000, recommended=128, answers=BATCH_ANSWERS
    )
    assert BATCH_ANSWERS[:2] == RATE_ANSWERS and np.all(three >= two) and three.max() > two.max()


def test_a_fit_to_the_same_trials_in_any_order_is_not_made_again(tmp_path):
    from study.phases import PHASES, Phase
    from study.tuners.design import design_model

    ledger = ledger_with(tmp_path)
    trials = [t for b in SIZES for t in ledger.trials(Stratum(b, "default"))]
    frame = ledger_frame(trials)
    model = design_model(frame)  # fitted, or kept from an earlier test of the same trials
    assert model is not None
    kept = PHASES.snapshot()["counts"].get(Phase.FITS_KEPT.value, 0)
    assert design_model(ledger_frame(trials)) is model
    assert PHASES.snapshot()["counts"][Phase.FITS_KEPT.value] == kept + 1
    # another order (the allocation's round and the designer list the strata differently)
    assert design_model(ledger_frame(trials[::-1])) is model
    assert PHASES.snapshot()["counts"][Phase.FITS_KEPT.value] == kept + 2
    other = design_model(ledger_frame(trials[1:]))  # one trial fewer: fitted anew
    assert other is not None and other is not model


def test_a_kept_fit_serves_new_trials_as_seen_until_enough_of_them_or_a_surprise(
    tmp_path, monkeypatch
):
    from study.tuners import design

    monkeypatch.setattr(design, "REFIT_ALL_BELOW", 5)
    monkeypatch.setattr(design, "REFIT_SHARE", 0.1)
    monkeypatch.setattr(design, "SURPRISE_SHARE", 0.05)
    ledger = ledger_with(tmp_path)
    trials = [t for b in SIZES for t in ledger.trials(Stratum(b, "default"))]
    frame = ledger_frame(trials)
    model = design.design_model(frame)
    assert model is not None

    def at_median(lr: float) -> pd.DataFrame:
        steps = float(model.surrogate.predict(64.0, lr))
        row = {**frame.iloc[0].to_dict(), "batch_size": 64.0, "learning_rate": lr}
        return pd.DataFrame([{**row, "steps_to_target": steps, "last_step": 2 * steps}])

    # One new trial (under 10% of 15), where the model expects it: the fit serves, and its
    # covariance counts the new trial as seen (the same parameters, narrower at batch 64).
    usual = pd.concat([frame, at_median(0.02)], ignore_index=True)
    assert not design._surprises(model, usual.iloc[-1:])
    served = design.design_model(usual)
    assert served is not None and served.surrogate.trials == model.surrogate.trials == 15
    assert np.array_equal(served.surrogate.theta, model.surrogate.theta)
    before, after = model.surrogate.covariance, served.surrogate.covariance
    assert np.all(np.diag(after) <= np.diag(before) + 1e-12)
    assert np.trace(after) < np.trace(before)
    # Two new ones (over 10%): fitted anew, from the kept fit's parameters among the starts.
    refit = design.design_model(pd.concat([usual, at_median(0.03)], ignore_index=True))
    assert refit is not None and refit is not model and refit.surrogate.trials == 17
    # An outcome 10 sigma off the fit's median, or at a batch size it never saw, surprises it.
    odd = usual.iloc[-1:].copy()
    odd["steps_to_target"] = odd["steps_to_target"] * math.exp(10 * model.surrogate.sigma)
    assert design._surprises(model, odd)
    assert design._surprises(model, odd.assign(batch_size=2048.0, steps_to_target=math.inf))
    # A trial that did not reach the target surprises it only when it ran past the interval's
    # top (the model was sure it would have reached by then), not when it was stopped early.
    median = float(usual["steps_to_target"].iloc[-1])
    missed = usual.iloc[-1:].assign(steps_to_target=math.inf, last_step=0.9 * median)
    assert not design._surprises(model, missed)
    assert design._surprises(
        model, missed.assign(last_step=median * math.exp(10 * model.surrogate.sigma))
    )


def test_a_start_given_to_the_fit_can_only_make_it_better(tmp_path):
    ledger = ledger_with(tmp_path)
    trials = [t for b in SIZES for t in ledger.trials(Stratum(b, "default"))]
    frame = ledger_frame(trials)
    plain = fit_surrogate(frame, misfit_test=False)
    far = plain.theta + 0.5
    started = fit_surrogate(frame, misfit_test=False, start=far)
    assert started.log_likelihood >= plain.log_likelihood - 1e-9
