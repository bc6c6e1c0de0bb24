"""KerasTuner's oracles derived from the ledger: each choice proposes inside the space with
nothing on disk, learns from every trial of its stratum (whoever proposed it, whichever
process), keeps Hyperband's brackets across processes and retries a lost proposal."""

from __future__ import annotations

from pathlib import Path

import pytest

from study.config.space import Stratum
from study.config.studyfile import load_study_file
from study.ledger import Ledger
from study.results import TrialResult, TrialState
from study.tuners.base import History
from study.tuners.optuna_backend import OptunaBackend
from study.tuners.points import LR_TOLERANCE

keras_tuner = pytest.importorskip("keras_tuner")
from study.tuners.keras_tuner_backend import (  # noqa: E402
    HYPERBAND,
    KT_TRIAL,
    KerasTunerBackend,
)

STUDY = """\
name: backends
workload: tabular
target: "val_accuracy>=0.9"
budget: {{max_steps: 100}}
trials_per_stratum: {trials}
search_space:
  batch_size: [32, 64]
  learning_rate: {{low: 1.0e-3, high: 1.0, scale: log}}
  momentum: {{low: 0.5, high: 0.99, scale: linear}}
  warmup_steps: {{choices: [0, 10]}}
tuner: {{sampler: random, oracle: {oracle}}}
"""


def config(tmp_path: Path, oracle: str = "bayesian", trials: int = 4):
    path = tmp_path / "s.yaml"
    path.write_text(STUDY.format(oracle=oracle, trials=trials))
    return load_study_file(path)


def run(ledger: Ledger, backends, stratum: Stratum, steps: float, budget: int = 30):
    """Claim a slot, let the first backend propose and record the trial as the engine does
    (the others adopt it); its objective is ``steps``. Returns the proposal."""
    slot = ledger.claim(stratum, budget=budget)
    assert slot is not None
    proposer, *others = backends
    proposal = proposer.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
    assert proposal is not None
    for other in others:
        other.adopt(slot, proposal)
    ledger.start(slot, tuner=proposal.tuner, origin=proposal.origin, extras=proposal.extras)
    result = TrialResult(state=TrialState.REACHED, steps_run=int(steps), steps_to_target=int(steps))
    ledger.finish(slot, result, steps)
    return proposal


def completed(backend: KerasTunerBackend, stratum: Stratum, number: int) -> dict[float, float]:
    """learning rate -> score of the completed trials of the oracle derived for a slot."""
    oracle = backend.derive(stratum, None, number).oracle
    return {
        t.hyperparameters.values["learning_rate"]: t.score
        for t in oracle.trials.values()
        if t.status == "COMPLETED"
    }


@pytest.mark.parametrize(
    ("oracle", "cls"),
    [
        ("random", keras_tuner.oracles.RandomSearchOracle),
        ("bayesian", keras_tuner.oracles.BayesianOptimizationOracle),
        ("hyperband", keras_tuner.oracles.HyperbandOracle),
    ],
)
def test_each_oracle_proposes_inside_the_space_and_writes_nothing(
    tmp_path, monkeypatch, oracle, cls
):
    cfg = config(tmp_path, oracle=oracle)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    backend = KerasTunerBackend(cfg, ledger)
    stratum = Stratum(64, "auto")
    slot = ledger.claim(stratum, budget=4)
    assert slot is not None
    proposal = backend.propose(slot, History(stratum))
    assert proposal is not None and proposal.tuner == "keras-tuner"
    assert isinstance(backend.derive(stratum, None, slot.number).oracle, cls)
    assert 1e-3 <= proposal.params["learning_rate"] <= 1.0
    assert 0.5 <= proposal.params["momentum"] <= 0.99
    assert proposal.params["warmup_steps"] in (0, 10)
    assert not any(k.startswith("tuner/") for k in proposal.params)
    assert proposal.extras[KT_TRIAL] == str(slot.number)
    if oracle == "hyperband":
        assert proposal.budget_fraction == pytest.approx(1 / 9)  # bracket 2 starts at 1 epoch
        assert proposal.extras[HYPERBAND] == {
            "iteration": 0,
            "bracket": 2,
            "round": 0,
            "past": None,
        }
    else:
        assert proposal.budget_fraction == 1.0
    assert list(work.iterdir()) == []  # no KerasTuner state (nor anything else) on disk


def test_proposals_depend_on_the_ledger_not_on_the_process(tmp_path):
    """Two processes (two backends) deriving the oracle for the same slot propose the same."""
    cfg = config(tmp_path, oracle="bayesian", trials=8)
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    stratum = Stratum(32, "auto")
    first = KerasTunerBackend(cfg, ledger)
    for steps in (300.0, 120.0, 200.0, 90.0):
        run(ledger, [first], stratum, steps)
    slot = ledger.claim(stratum, budget=8)
    history = History(stratum, tuple(ledger.trials(stratum)))
    one = first.derive(stratum, None, slot.number).oracle.create_trial("a")
    two = KerasTunerBackend(cfg, ledger).derive(stratum, None, slot.number).oracle.create_trial("b")
    assert one.hyperparameters.values == two.hyperparameters.values
    assert KerasTunerBackend(cfg, ledger).propose(slot, history) is not None


def test_the_window_sets_the_oracles_learning_rate_range(tmp_path):
    """A stratum centred by transfer: the oracle samples inside the window."""
    cfg = config(tmp_path, oracle="random")
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    backend = KerasTunerBackend(cfg, ledger)
    stratum = Stratum(32, "auto")
    window = (0.05, 0.5)
    for _ in range(4):
        slot = ledger.claim(stratum, budget=4)
        assert slot is not None
        proposal = backend.propose(slot, History(stratum, window=window))
        assert proposal is not None
        assert window[0] <= proposal.params["learning_rate"] <= window[1]
        assert proposal.extras["lr_window"] == list(window)
    hp = backend.derive(stratum, window, 9).oracle.hyperparameters
    (lr,) = [p for p in hp.space if p.name == "learning_rate"]
    assert (lr.min_value, lr.max_value, lr.sampling) == (0.05, 0.5, "log")


def test_the_oracle_learns_from_every_trial_of_its_stratum(tmp_path):
    """Both backends share a stratum: the oracle any process derives holds every finished
    trial (Optuna's and its own) with its objective, once."""
    cfg = config(tmp_path, oracle="bayesian", trials=8)
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    optuna_backend = OptunaBackend(cfg, ledger)
    kt = KerasTunerBackend(cfg, ledger)
    stratum = Stratum(32, "auto")
    scores = {}
    for steps in (300.0, 120.0, 200.0):
        proposal = run(ledger, [optuna_backend, kt], stratum, steps)
        scores[proposal.params["learning_rate"]] = steps
    assert completed(kt, stratum, 3) == scores

    mine = run(ledger, [kt, optuna_backend], stratum, 150.0)
    assert mine.params["learning_rate"] not in scores
    scores[mine.params["learning_rate"]] = 150.0
    other = KerasTunerBackend(cfg, ledger)  # another process, another host
    assert completed(other, stratum, 4) == scores


def test_a_running_trial_is_ongoing_in_the_derived_oracle(tmp_path):
    cfg = config(tmp_path, oracle="random")
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    kt = KerasTunerBackend(cfg, ledger)
    stratum = Stratum(32, "auto")
    slot = ledger.claim(stratum, budget=4)
    proposal = kt.propose(slot, History(stratum))
    ledger.start(slot, tuner=proposal.tuner, origin=proposal.origin, extras=proposal.extras)
    oracle = kt.derive(stratum, None, 1).oracle
    (ongoing,) = oracle.ongoing_trials.values()
    assert ongoing.hyperparameters.values["learning_rate"] == proposal.params["learning_rate"]


def test_a_proposal_lost_with_its_process_is_retried_after_feeding(tmp_path):
    """A process died while running KerasTuner's proposal: the next process (fresh backend)
    feeds its oracle the trials Optuna finished meanwhile and retries the lost proposal."""
    cfg = config(tmp_path, oracle="random", trials=8)
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    optuna_backend = OptunaBackend(cfg, ledger)
    stratum = Stratum(32, "auto")
    dead = KerasTunerBackend(cfg, ledger)
    lost_slot = ledger.claim(stratum, budget=8)
    lost = dead.propose(lost_slot, History(stratum))
    optuna_backend.adopt(lost_slot, lost)  # the engine's fallback records its params
    ledger.start(lost_slot, tuner=lost.tuner, origin=lost.origin, extras=lost.extras)
    ledger.interrupt(lost_slot)  # as `recover_stale` marks the dead process's trial
    optuna_trial = run(ledger, [optuna_backend], stratum, 250.0)

    again = KerasTunerBackend(cfg, ledger)
    slot = ledger.claim(stratum, budget=8)
    retry = again.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
    assert retry is not None
    assert retry.origin == "retry" and retry.params == lost.params
    assert retry.extras[KT_TRIAL] == lost.extras[KT_TRIAL]
    ledger.start(slot, tuner=retry.tuner, origin=retry.origin, extras=retry.extras)
    assert completed(again, stratum, 3) == {optuna_trial.params["learning_rate"]: 250.0}
    # the retry runs: the next proposal is a new one
    ledger.finish(slot, TrialResult(state=TrialState.NOT_REACHED, steps_run=100), 400.0)
    slot = ledger.claim(stratum, budget=8)
    fresh = again.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
    assert fresh.origin == "sampler" and fresh.extras[KT_TRIAL] == str(slot.number)


def test_hyperband_brackets_continue_across_processes(tmp_path):
    """Each proposal comes from a fresh backend (a new process): Hyperband still fills bracket
    2 with 9 one-epoch trials, promotes the best 3 to 3 epochs and the best of those to 9."""
    cfg = config(tmp_path, oracle="hyperband", trials=20)
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    stratum = Stratum(32, "auto")
    steps = [500.0, 80.0, 400.0, 90.0, 300.0, 70.0, 600.0, 200.0, 100.0, 60.0, 95.0, 85.0, 50.0]
    proposals = [run(ledger, [KerasTunerBackend(cfg, ledger)], stratum, s) for s in steps]
    places = [(p.extras[HYPERBAND]["bracket"], p.extras[HYPERBAND]["round"]) for p in proposals]
    assert places == [(2, 0)] * 9 + [(2, 1)] * 3 + [(2, 2)]
    assert [p.budget_fraction for p in proposals] == pytest.approx([1 / 9] * 9 + [1 / 3] * 3 + [1])
    by_id = {p.extras[KT_TRIAL]: (p, s) for p, s in zip(proposals, steps)}
    promoted = [by_id[p.extras[HYPERBAND]["past"]] for p in proposals[9:12]]
    assert sorted(s for _, s in promoted) == [70.0, 80.0, 90.0]  # the best three of round 0
    for p, (past, _) in zip(proposals[9:12], promoted):
        ratio = p.params["learning_rate"] / past.params["learning_rate"]
        assert abs(ratio - 1) < 10 * LR_TOLERANCE  # the same point (nudged off the finished one)
    assert by_id[proposals[12].extras[HYPERBAND]["past"]][1] == 60.0  # best of round 1
    nxt = run(ledger, [KerasTunerBackend(cfg, ledger)], stratum, 100.0)
    assert (nxt.extras[HYPERBAND]["bracket"], nxt.extras[HYPERBAND]["round"]) == (1, 0)


def test_a_proposal_not_yet_started_holds_its_hyperband_place(tmp_path):
    """Two threads of one process: the second derivation counts the first proposal (not yet
    started in the ledger) as ongoing in its bracket place; once started, the ledger says so."""
    cfg = config(tmp_path, oracle="hyperband", trials=20)
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    optuna_backend = OptunaBackend(cfg, ledger)
    stratum = Stratum(32, "auto")
    kt = KerasTunerBackend(cfg, ledger)
    first = ledger.claim(stratum, budget=20)
    proposal = kt.propose(first, History(stratum))
    second = ledger.claim(stratum, budget=20)
    oracle = kt.derive(stratum, None, second.number).oracle
    (ongoing,) = oracle.ongoing_trials.values()
    assert ongoing.hyperparameters.values["learning_rate"] == proposal.params["learning_rate"]
    assert [len(r) for r in oracle._brackets[-1]["rounds"]] == [1, 0, 0]
    assert (
        KerasTunerBackend(cfg, ledger).derive(stratum, None, 2).oracle._brackets[-1]["rounds"][0]
        == []
    )  # another process does not know it yet
    optuna_backend.adopt(first, proposal)
    ledger.start(first, tuner=proposal.tuner, origin=proposal.origin, extras=proposal.extras)
    other = KerasTunerBackend(cfg, ledger).derive(stratum, None, 2).oracle
    assert [len(r) for r in other._brackets[-1]["rounds"]] == [1, 0, 0]
