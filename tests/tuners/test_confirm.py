"""Confirmation trials: once a stratum's search is spent, its best points run under other seeds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.config.target import Target
from study.ledger import Ledger, StudyRecord
from study.tuners.base import History, clean_params
from study.tuners.confirm import CAP, CONFIRM, Confirmer, search_budget, top_points
from study.tuners.points import point_of
from tests.fakes import finished_trial, rising_curve, write_ledger

TARGET = Target.parse("val_accuracy>=0.6")
S = Stratum(64, "default")
STUDY = {
    "name": "confirm",
    "workload": "tabular",
    "target": str(TARGET),
    "budget": {"max_steps": 5000},
    "seed": 10,
    "trials_per_stratum": 4,
    "search_space": {
        "batch_size": [64],
        "learning_rate": {"low": 1.0e-3, "high": 1.0},
        "strategy": ["default"],
    },
    "tuner": {"confirm": {"top": 2, "seeds": 2}},
}


def trial(number: int, lr: float, steps: float | None, seed: int | None = None, tuner="optuna"):
    target = TARGET if steps is not None else Target.parse("val_accuracy>=1.5")
    t = finished_trial(S, number, lr, rising_curve(64, steps or 400), target, tuner=tuner)
    return dataclasses.replace(t, extras={"seed": seed} if seed is not None else {})


def test_cost_is_top_times_seeds_trials_per_stratum():
    config = parse_study(STUDY, "confirm.yaml")
    assert config.tuner.confirm.trials == 4
    assert config.total_trials == 4 + 4
    assert config.tuner.confirm.seed_values(config.settings.seed) == (11, 12)
    assert search_budget(8, config.tuner.confirm) == 4


def test_top_points_are_the_fastest_distinct_points_at_the_studys_seed():
    trials = [
        trial(0, 0.1, 300),
        trial(1, 0.2, 200),
        trial(2, 0.2002, 150),  # the same point as #1 (0.1% apart): #2 stands for it
        trial(3, 0.05, None),
        trial(4, 0.3, 100, seed=11),  # a confirmation: not a candidate
    ]
    assert [t.number for t in top_points(trials, 2)] == [2, 0]


def test_the_confirmer_waits_for_the_search_then_takes_each_pair_once(tmp_path: Path):
    config = parse_study(STUDY, "confirm.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "confirm")
    searched = [
        trial(0, 0.1, 300),
        trial(1, 0.2, 200, tuner="keras-tuner"),
        trial(2, 0.4, None),
    ]
    write_ledger(ledger, StudyRecord(name="confirm"), searched)
    confirmer = Confirmer(config, ledger)

    slot = ledger.claim(S, budget=8)
    history = History(S, tuple(ledger.trials(S)), budget=8)
    assert confirmer.propose(slot, history) is None  # 3 of 4 search trials so far
    ledger.fail(slot, "stand-in for the fourth search trial")  # failed trials count too

    proposals = []
    for _ in range(5):
        slot = ledger.claim(S, budget=9)  # one claim more than the 8 the confirmer fills
        proposal = confirmer.propose(slot, History(S, tuple(ledger.trials(S)), budget=8))
        if proposal is None:
            break
        assert proposal.origin == CONFIRM
        ledger.start(slot, tuner=proposal.tuner, origin=proposal.origin, extras=proposal.extras)
        proposals.append(proposal)
    # the two best points, each under seeds 11 and 12, the best first; then nothing is left
    assert [(p.params["learning_rate"], p.seed) for p in proposals] == [
        (0.2, 11),
        (0.2, 12),
        (0.1, 11),
        (0.1, 12),
    ]
    assert [p.tuner for p in proposals] == ["keras-tuner"] * 2 + ["optuna"] * 2
    assert all(p.extras["seed"] == p.seed for p in proposals)
    assert proposals[0].extras["confirms"] == 1
    # capped at CAP times the point's own steps (its first evaluation at or after 200)
    steps = ledger.trial(S, 1).steps_to_target
    assert proposals[0].budget_fraction == pytest.approx(round(CAP * steps) / 5000)
    reserved = [point for _, point in ledger.tuning.points(S)][-4:]
    assert reserved == [point_of(p.params, p.seed) for p in proposals]


def test_a_new_best_after_the_confirmations_gets_none_of_its_own(tmp_path: Path):
    # Another process's last search trial finished after this stratum's confirmations were
    # handed out, and its point is now among the best two: the budget is still top x seeds.
    config = parse_study(STUDY, "confirm.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "confirm")
    trials = [
        trial(0, 0.1, 300),
        trial(1, 0.2, 200),
        trial(2, 0.4, None),
        *(
            trial(3 + k, lr, 250, seed=seed)
            for k, (lr, seed) in enumerate([(0.2, 11), (0.2, 12), (0.1, 11), (0.1, 12)])
        ),
        trial(7, 0.05, 100),  # the late search trial: now the best point
    ]
    write_ledger(ledger, StudyRecord(name="confirm"), trials)
    confirmer = Confirmer(config, ledger)
    slot = ledger.claim(S, budget=9)  # a claim past the 8 of the budget (4 searched, 4 confirmed)
    history = History(S, tuple(ledger.trials(S)), budget=8)
    assert [t.number for t in top_points(history.trials, 2)] == [7, 1]  # (0.05, 11) is free
    assert confirmer.propose(slot, history) is None


def test_without_confirm_the_confirmer_never_proposes(tmp_path: Path):
    config = parse_study({**STUDY, "tuner": {}}, "confirm.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "confirm")
    write_ledger(
        ledger, StudyRecord(name="confirm"), [trial(n, 0.1 * (n + 1), 100) for n in range(5)]
    )
    slot = ledger.claim(S, budget=8)
    assert (
        Confirmer(config, ledger).propose(slot, History(S, tuple(ledger.trials(S)), budget=8))
        is None
    )


def test_two_slots_that_reserved_one_pair_at_once_pick_different_ones_next(tmp_path: Path):
    """Two processes that reserve the same pair at the same moment both see the clash; on the
    next attempt each picks the pair at its own slot's place, not the same first one again."""
    config = parse_study(STUDY, "confirm.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "confirm")
    searched = [trial(0, 0.1, 300), trial(1, 0.2, 200), trial(2, 0.4, 250), trial(3, 0.3, 350)]
    write_ledger(ledger, StudyRecord(name="confirm"), searched)
    confirmer = Confirmer(config, ledger)
    best = top_points(ledger.trials(S), 2)
    first, second = ledger.claim(S, budget=8), ledger.claim(S, budget=8)
    settings = config.tuner.confirm
    one = confirmer._free_pair(first, best, settings)
    assert one == confirmer._free_pair(second, best, settings)  # the same first choice
    trial_, seed = one
    for slot in (first, second):  # both reserve it: each now sees the other's
        ledger.tuning.reserve(slot, point_of(clean_params(trial_.params), seed))
    again = [confirmer._free_pair(slot, best, settings, attempt=1) for slot in (first, second)]
    assert again[0] is not None and again[1] is not None
    assert again[0] != again[1]
    assert one not in again  # the clashing pair is taken by the other slot for each of them


def test_a_slot_claimed_after_the_last_search_slot_does_not_make_it_a_confirmation(
    tmp_path: Path,
):
    """Two processes claim the last search slot (3) and the first confirmation slot (4) at
    once, each proposing before the other's proposal is recorded: slot 3 stays a search trial
    and slot 4 confirms, whichever proposes first (the race a two-process study met)."""
    config = parse_study(STUDY, "confirm.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "confirm")
    searched = [trial(0, 0.1, 300), trial(1, 0.2, 200), trial(2, 0.4, None)]
    write_ledger(ledger, StudyRecord(name="confirm"), searched)
    confirmer = Confirmer(config, ledger)
    last_search, first_confirm = ledger.claim(S, budget=8), ledger.claim(S, budget=8)
    assert (last_search.number, first_confirm.number) == (3, 4)
    pending = {t.number: t for t in ledger.trials(S)}
    assert pending[4].open and pending[4].origin is None  # claimed, its proposal not recorded

    history = History(S, tuple(ledger.trials(S)), budget=8)
    assert confirmer.propose(last_search, history) is None  # slot 4 is decided after it
    proposal = confirmer.propose(first_confirm, history)  # slot 3, undecided, is searched
    assert proposal is not None and proposal.origin == CONFIRM
