"""Each sampler choice builds the right search object and proposes inside the space (the
KerasTuner oracles: tests/tuners/test_keras_tuner_backend.py)."""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pytest

from study.config.space import Stratum
from study.config.studyfile import load_study_file
from study.ledger import Ledger
from study.results import TrialResult, TrialState
from study.tuners.base import History
from study.tuners.optuna_backend import OptunaBackend
from study.tuners.points import LR_TOLERANCE, clashes, point_of
from study.tuners.transfer import BestRate

keras_tuner = pytest.importorskip("keras_tuner")
from study.tuners.keras_tuner_backend import KerasTunerBackend  # noqa: E402

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
    history = History(
        stratum, window=window, neighbours=(BestRate(32, 0.02, 3, 0.01, 0.04),), centre=0.02
    )
    proposal = backend.propose(slot, history)
    assert (proposal.origin, proposal.params["learning_rate"]) == ("transfer", 0.02)
    assert proposal.extras["lr_window"] == list(window)
    assert ledger.tuning.window(stratum) == pytest.approx(window)
    assert ledger.trial(stratum, slot.number).params["learning_rate"] == 0.02
    # the next trial is the sampler's, inside the window
    ledger.finish(slot, TrialResult(state=TrialState.NOT_REACHED), 100.0)
    slot = ledger.claim(stratum, budget=4)
    history = History(stratum, tuple(ledger.trials(stratum)), window, centre=0.02)
    proposal = backend.propose(slot, history)
    assert proposal.origin == "sampler"
    assert window[0] <= proposal.params["learning_rate"] <= window[1]


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
    backend = optuna_backend if tuner == "optuna" else KerasTunerBackend(cfg, ledger)
    stratum = Stratum(32, "auto")
    running = ledger.claim(stratum, budget=8)
    ledger.tuning.reserve(running, point_of({"learning_rate": 0.1}))
    window = (0.0999, 0.1001)
    moved = 0
    for _ in range(3):
        slot = ledger.claim(stratum, budget=8)
        proposal = backend.propose(slot, History(stratum, window=window, centre=0.1))
        point = point_of(proposal.params)
        others = [p for n, p in ledger.tuning.points(stratum) if n != slot.number]
        assert not clashes(point, others)
        moved += abs(math.log(proposal.params["learning_rate"] / 0.1)) > LR_TOLERANCE
    assert moved == 3
