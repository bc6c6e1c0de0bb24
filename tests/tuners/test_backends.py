"""Each sampler and oracle choice builds the right search object and proposes inside the space."""

from __future__ import annotations

import json
import math
from pathlib import Path

import optuna
import pytest

from study.config.space import Stratum
from study.config.studyfile import load_study_file
from study.ledger import Ledger
from study.results import TrialResult, TrialState
from study.tuners.base import History, Outcome
from study.tuners.optuna_backend import OptunaBackend
from study.tuners.points import LR_TOLERANCE, clashes, point_of

keras_tuner = pytest.importorskip("keras_tuner")
from study.tuners.keras_tuner_backend import FED_FILE, KT_TRIAL, KerasTunerBackend  # noqa: E402

STUDY = """\
name: backends
workload: tabular
target: "val_accuracy>=0.9"
budget: {{max_steps: 100}}
trials_per_stratum: 4
search_space:
  batch_size: [32, 64]
  learning_rate: {{low: 1.0e-3, high: 1.0, scale: log}}
  momentum: {{low: 0.5, high: 0.99, scale: linear}}
  warmup_steps: {{choices: [0, 10]}}
tuner: {{sampler: {sampler}, oracle: {oracle}}}
"""


def config(tmp_path: Path, sampler: str = "tpe", oracle: str = "bayesian"):
    path = tmp_path / "s.yaml"
    path.write_text(STUDY.format(sampler=sampler, oracle=oracle))
    return load_study_file(path)


@pytest.mark.parametrize(
    ("sampler", "cls"),
    [
        ("tpe", optuna.samplers.TPESampler),
        ("random", optuna.samplers.RandomSampler),
        ("qmc", optuna.samplers.QMCSampler),
        ("grid", optuna.samplers.GridSampler),
    ],
)
def test_optuna_sampler_choice_proposes_inside_the_space(tmp_path, sampler, cls):
    cfg = config(tmp_path, sampler=sampler)
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    backend = OptunaBackend(cfg, ledger)
    stratum = Stratum(32, "auto")
    assert isinstance(backend.sampler(stratum), cls)
    for _ in range(3):
        slot = ledger.claim(stratum, budget=4)
        assert slot is not None
        proposal = backend.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
        assert proposal.tuner == "optuna"
        assert 1e-3 <= proposal.params["learning_rate"] <= 1.0
        assert 0.5 <= proposal.params["momentum"] <= 0.99
        assert proposal.params["warmup_steps"] in (0, 10)
        ledger.finish(slot, TrialResult(state=TrialState.NOT_REACHED), 100.0)


def test_grid_points_cover_each_range(tmp_path):
    cfg = config(tmp_path, sampler="grid")
    grid = OptunaBackend(cfg, Ledger.open(str(tmp_path / "j.journal"), cfg.name)).grid()
    assert grid["learning_rate"][0] == pytest.approx(1e-3)
    assert grid["learning_rate"][-1] == pytest.approx(1.0)
    assert len(grid["learning_rate"]) == 4
    assert grid["warmup_steps"] == [0, 10]


@pytest.mark.parametrize(
    ("oracle", "cls"),
    [
        ("random", keras_tuner.oracles.RandomSearchOracle),
        ("bayesian", keras_tuner.oracles.BayesianOptimizationOracle),
        ("hyperband", keras_tuner.oracles.HyperbandOracle),
    ],
)
def test_keras_tuner_oracle_choice_proposes_and_saves_state(tmp_path, oracle, cls):
    cfg = config(tmp_path, oracle=oracle)
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    backend = KerasTunerBackend(cfg, ledger, root=tmp_path / "mlruns")
    stratum = Stratum(64, "auto")
    slot = ledger.claim(stratum, budget=4)
    assert slot is not None
    proposal = backend.propose(slot, History(stratum))
    assert proposal is not None and proposal.tuner == "keras-tuner"
    assert isinstance(backend._tuners[stratum].oracle, cls)
    assert 1e-3 <= proposal.params["learning_rate"] <= 1.0
    assert not any(k.startswith("tuner/") for k in proposal.params)
    assert 0 < proposal.budget_fraction <= 1.0
    if oracle == "hyperband":
        assert proposal.budget_fraction < 1.0  # Hyperband starts with short trials
    saved = tmp_path / "mlruns" / "keras_tuner" / "backends" / "b64-auto" / "oracle.json"
    assert saved.exists()
    assert KT_TRIAL in proposal.extras


def test_keras_tuner_searches_the_stratum_window(tmp_path):
    """A stratum centred by transfer: the oracle production builds samples inside the window."""
    cfg = config(tmp_path, oracle="random")
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    backend = KerasTunerBackend(cfg, ledger, root=tmp_path / "mlruns")
    stratum = Stratum(32, "auto")
    window = (0.05, 0.5)
    for _ in range(4):
        slot = ledger.claim(stratum, budget=4)
        assert slot is not None
        proposal = backend.propose(slot, History(stratum, window=window))
        assert proposal is not None
        assert window[0] <= proposal.params["learning_rate"] <= window[1]
    hp = backend._tuners[stratum].oracle.hyperparameters
    (lr,) = [p for p in hp.space if p.name == "learning_rate"]
    assert (lr.min_value, lr.max_value, lr.sampling) == (0.05, 0.5, "log")


def test_optuna_searches_the_stratum_window(tmp_path):
    cfg = config(tmp_path, sampler="random")
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    backend = OptunaBackend(cfg, ledger)
    stratum = Stratum(32, "auto")
    for _ in range(4):
        slot = ledger.claim(stratum, budget=4)
        assert slot is not None
        proposal = backend.propose(slot, History(stratum, window=(0.05, 0.5)))
        assert 0.05 <= proposal.params["learning_rate"] <= 0.5


def test_first_trial_of_a_stratum_takes_the_predicted_rate(tmp_path):
    cfg = config(tmp_path)
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    backend = OptunaBackend(cfg, ledger)
    stratum = Stratum(64, "auto")
    slot = ledger.claim(stratum, budget=4)
    assert slot is not None
    window = (0.005, 0.08)
    history = History(stratum, window=window, neighbours=((32, 0.02),), centre=0.02)
    proposal = backend.propose(slot, history)
    assert (proposal.origin, proposal.params["learning_rate"]) == ("transfer", 0.02)
    assert proposal.extras["lr_window"] == list(window)
    assert ledger.window(stratum) == pytest.approx(window)
    assert ledger.trial(stratum, slot.number).params["learning_rate"] == 0.02
    # the next trial is the sampler's, inside the window
    ledger.finish(slot, TrialResult(state=TrialState.NOT_REACHED), 100.0)
    slot = ledger.claim(stratum, budget=4)
    history = History(stratum, tuple(ledger.trials(stratum)), window, centre=0.02)
    proposal = backend.propose(slot, history)
    assert proposal.origin == "sampler"
    assert window[0] <= proposal.params["learning_rate"] <= window[1]


def finish(ledger: Ledger, slot, backend, proposal, steps: float) -> None:
    """Record a trial as the engine does: others adopt the proposal, the ledger keeps it."""
    for other in backend:
        other.adopt(slot, proposal)
    ledger.start(slot, tuner=proposal.tuner, origin=proposal.origin, extras=proposal.extras)
    result = TrialResult(state=TrialState.REACHED, steps_run=int(steps), steps_to_target=int(steps))
    ledger.finish(slot, result, steps)


def test_keras_tuner_oracle_learns_from_the_trials_optuna_proposed(tmp_path):
    """Both backends share a stratum: the KerasTuner oracle (and a second process's) holds
    every Optuna trial with its objective before it proposes, each fed once."""
    cfg = config(tmp_path, sampler="random", oracle="bayesian")
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    optuna_backend = OptunaBackend(cfg, ledger)
    kt = KerasTunerBackend(cfg, ledger, root=tmp_path / "mlruns")
    stratum = Stratum(32, "auto")
    scores = {}
    for steps in (300.0, 120.0, 200.0):
        slot = ledger.claim(stratum, budget=8)
        proposal = optuna_backend.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
        finish(ledger, slot, [kt], proposal, steps)
        scores[proposal.params["learning_rate"]] = steps

    slot = ledger.claim(stratum, budget=8)
    proposal = kt.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
    assert proposal is not None and proposal.tuner == "keras-tuner"
    oracle = kt._tuners[stratum].oracle
    fed = {
        t.hyperparameters.values["learning_rate"]: t.score
        for t in oracle.trials.values()
        if t.status == "COMPLETED"
    }
    assert fed == scores
    assert proposal.params["learning_rate"] not in scores
    kt.report(proposal, Outcome(TrialResult(state=TrialState.REACHED), 150.0))
    finish(ledger, slot, [optuna_backend], proposal, 150.0)

    # another process (a fresh backend on the same state) feeds nothing twice
    other = KerasTunerBackend(cfg, ledger, root=tmp_path / "mlruns")
    slot = ledger.claim(stratum, budget=8)
    assert other.propose(slot, History(stratum, tuple(ledger.trials(stratum)))) is not None
    completed = [
        t for t in other._tuners[stratum].oracle.trials.values() if t.status == "COMPLETED"
    ]
    assert sorted(t.score for t in completed) == [120.0, 150.0, 200.0, 300.0]
    saved = json.loads(
        (tmp_path / "mlruns" / "keras_tuner" / "backends" / "b32-auto" / FED_FILE).read_text()
    )
    assert sorted(int(n) for n in saved) == [0, 1, 2]


@pytest.mark.parametrize("tuner", ["optuna", "keras-tuner"])
def test_a_proposal_repeating_a_running_point_is_moved(tmp_path, tuner):
    """Every rate of the window is within 0.5% of a trial already running: the proposal
    leaves the window rather than repeat it."""
    path = tmp_path / "lr.yaml"
    text = STUDY.format(sampler="random", oracle="random")
    extra = ("  momentum:", "  warmup_steps:")
    path.write_text("".join(line for line in text.splitlines(True) if not line.startswith(extra)))
    cfg = load_study_file(path)
    assert cfg.space.param_names == ("learning_rate",)
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    optuna_backend = OptunaBackend(cfg, ledger)
    backend = (
        optuna_backend
        if tuner == "optuna"
        else KerasTunerBackend(cfg, ledger, root=tmp_path / "mlruns")
    )
    stratum = Stratum(32, "auto")
    running = ledger.claim(stratum, budget=8)
    ledger.reserve(running, point_of({"learning_rate": 0.1}))
    window = (0.0999, 0.1001)
    moved = 0
    for _ in range(3):
        slot = ledger.claim(stratum, budget=8)
        proposal = backend.propose(slot, History(stratum, window=window, centre=0.1))
        point = point_of(proposal.params)
        others = [p for n, p in ledger.points(stratum) if n != slot.number]
        assert not clashes(point, others)
        moved += abs(math.log(proposal.params["learning_rate"] / 0.1)) > LR_TOLERANCE
    assert moved == 3


def test_a_proposal_lost_with_its_process_is_retried_after_feeding(tmp_path):
    """A process died while running KerasTuner's proposal: the next process feeds its oracle
    the trials Optuna finished meanwhile and still retries the lost proposal itself."""
    cfg = config(tmp_path, sampler="random", oracle="random")
    ledger = Ledger.open(str(tmp_path / "j.journal"), cfg.name)
    optuna_backend = OptunaBackend(cfg, ledger)
    stratum = Stratum(32, "auto")
    dead = KerasTunerBackend(cfg, ledger, root=tmp_path / "mlruns")
    lost_slot = ledger.claim(stratum, budget=8)
    lost = dead.propose(lost_slot, History(stratum))
    ledger.start(lost_slot, tuner=lost.tuner, origin=lost.origin, extras=lost.extras)
    ledger.interrupt(lost_slot)  # as `recover_stale` marks the dead process's trial
    slot = ledger.claim(stratum, budget=8)
    proposal = optuna_backend.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
    finish(ledger, slot, [], proposal, 250.0)

    again = KerasTunerBackend(cfg, ledger, root=tmp_path / "mlruns")
    slot = ledger.claim(stratum, budget=8)
    retry = again.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
    assert retry is not None
    assert retry.origin == "retry" and retry.params == lost.params
    assert retry.extras[KT_TRIAL] == lost.extras[KT_TRIAL]
    fed = [t for t in again._tuners[stratum].oracle.trials.values() if t.status == "COMPLETED"]
    assert [t.score for t in fed] == [250.0]
    assert fed[0].hyperparameters.values["learning_rate"] == proposal.params["learning_rate"]
