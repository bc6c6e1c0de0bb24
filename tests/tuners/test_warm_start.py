from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from study.config.space import Stratum
from study.config.study import StudyConfig, WarmStart
from study.config.studyfile import parse_study
from study.config.target import Target
from study.errors import UsageError
from study.ledger import Ledger, StudyRecord
from study.tuners.base import History
from study.tuners.registry import build_lineup
from study.tuners.warm_start import WARM, WarmPoint, WarmStarter, read_points, warm_params
from tests.fakes import finished_trial, rising_curve, write_ledger

TARGET = Target.parse("val_accuracy>=0.6")
UNREACHED = Target.parse("val_accuracy>=1.5")


def study(name: str = "d8000", **tuner: Any) -> dict[str, Any]:
    return {
        "name": name,
        "workload": "tabular",
        "target": str(TARGET),
        "budget": {"max_steps": 5000},
        "trials_per_stratum": 4,
        "search_space": {
            "batch_size": [32, 64, 128, 256],
            "learning_rate": {"low": 1.0e-3, "high": 1.0},
            "strategy": ["default"],
        },
        "tuner": {"warm_start": "d4000", **tuner},
    }


def trial(batch: int, number: int, lr: float, steps: float | None, strategy: str = "default"):
    curve = rising_curve(batch, steps or 400)
    target = TARGET if steps is not None else UNREACHED
    return finished_trial(Stratum(batch, strategy), number, lr, curve, target)


def earlier(tmp_path: Path, trials: list | None = None) -> str:
    """A finished study ``d4000`` in a journal under ``tmp_path``; its URL."""
    url = str(tmp_path / "j.journal")
    trials = trials or [
        trial(64, 0, 0.02, 300),
        trial(64, 1, 0.05, 180),  # the best at 64
        trial(64, 2, 0.5, None),
        trial(256, 0, 0.2, 60),  # the best at 256
        trial(256, 1, 0.01, 400),
    ]
    record = StudyRecord(name="d4000", config_text="name: d4000")
    write_ledger(Ledger.open(url, "d4000"), record, trials)
    return url


def config_of(**tuner: Any) -> StudyConfig:
    return parse_study(study(**tuner), "d8000.yaml")


def test_the_file_takes_a_name_or_a_mapping():
    assert config_of().tuner.warm_start == WarmStart("d4000")
    mapped = config_of(warm_start={"study": "d4000", "storage": "sqlite:///other.db"})
    assert mapped.tuner.warm_start == WarmStart("d4000", "sqlite:///other.db")
    assert parse_study({**study(), "tuner": {}}, "d8000.yaml").tuner.warm_start is None


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("", "tuner.warm_start.study"),
        ({"storage": "x.journal"}, "'study'"),
        ({"study": "d4000", "storage": 3}, "tuner.warm_start.storage"),
        ({"study": "d4000", "where": "x"}, "'where'"),
    ],
)
def test_a_bad_warm_start_names_its_key(value: Any, named: str):
    with pytest.raises(UsageError, match=named) as err:
        config_of(warm_start=value)
    assert "d8000.yaml" in str(err.value)


def test_the_points_are_each_batch_sizes_best_trial(tmp_path: Path):
    url = earlier(tmp_path)
    ledger = Ledger.open(url, "d8000")
    points = read_points(WarmStart("d4000"), ledger, "default")
    assert [(p.batch_size, p.learning_rate, p.steps) for p in points] == [
        (64, 0.05, pytest.approx(180, rel=0.1)),
        (256, 0.2, pytest.approx(60, rel=0.1)),
    ]


def test_the_points_keep_to_the_strategy_where_the_earlier_study_ran_it(tmp_path: Path):
    url = earlier(
        tmp_path,
        [
            trial(64, 0, 0.05, 180),
            trial(64, 0, 0.3, 100, strategy="mirrored:2"),
        ],
    )
    ledger = Ledger.open(url, "d8000")
    assert [p.learning_rate for p in read_points(WarmStart("d4000"), ledger, "default")] == [0.05]
    mirrored = read_points(WarmStart("d4000"), ledger, "mirrored:2")
    assert [p.learning_rate for p in mirrored] == [0.3]
    # a strategy the earlier study never ran: the best of any at each batch size
    assert [p.learning_rate for p in read_points(WarmStart("d4000"), ledger, "one_device")] == [0.3]


def test_a_study_that_is_not_there_is_bad_input(tmp_path: Path):
    url = earlier(tmp_path)
    ledger = Ledger.open(url, "d8000")
    with pytest.raises(UsageError, match=r"tuner.warm_start: no study named 'd2000'.*study ls"):
        read_points(WarmStart("d2000"), ledger, "default")
    with pytest.raises(UsageError, match="names this study itself"):
        read_points(WarmStart("d8000"), ledger, "default")


def test_the_rate_is_the_best_there_else_interpolated_in_log_log():
    config = config_of()
    points = (
        WarmPoint(64, {"learning_rate": 0.05}, 180),
        WarmPoint(256, {"learning_rate": 0.2}, 60),
    )
    assert warm_params(points, 64, config) == {"learning_rate": 0.05}
    assert warm_params(points, 128, config)["learning_rate"] == pytest.approx(0.1)
    # beyond the points: the slope between them (1 here), clipped to the study's range
    assert warm_params(points, 32, config)["learning_rate"] == pytest.approx(0.025)
    assert warm_params(points, 2048, config)["learning_rate"] == 1.0
    assert warm_params((), 64, config) is None


def test_other_tuned_values_come_from_the_nearest_batch_size_or_not_at_all():
    data = study()
    data["search_space"]["momentum"] = {"low": 0.8, "high": 0.99, "scale": "linear"}
    config = parse_study(data, "d8000.yaml")
    points = (
        WarmPoint(64, {"learning_rate": 0.05, "momentum": 0.9}, 180),
        WarmPoint(256, {"learning_rate": 0.2, "momentum": 0.95}, 60),
    )
    assert warm_params(points, 128, config)["momentum"] == 0.9  # 64 and 256 tie: the first
    assert warm_params(points, 256, config)["momentum"] == 0.95
    outside = (WarmPoint(64, {"learning_rate": 0.05, "momentum": 0.5}, 180),)
    assert warm_params(outside, 64, config) is None  # the earlier value is outside this range
    missing = (WarmPoint(64, {"learning_rate": 0.05}, 180),)
    assert warm_params(missing, 64, config) is None


def test_the_warm_starter_proposes_each_strata_first_trial_only(tmp_path: Path):
    url = earlier(tmp_path)
    config = config_of()
    ledger = Ledger.open(url, "d8000")
    ledger.create(StudyRecord(name="d8000", config_text="name: d8000"))
    warm = WarmStarter(config, ledger)
    stratum = Stratum(128, "default")

    slot = ledger.claim(stratum, budget=4)
    proposal = warm.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
    assert proposal is not None
    assert proposal.origin == WARM
    assert proposal.params["learning_rate"] == pytest.approx(0.1)
    assert proposal.extras == {"warm_start": "d4000"}
    ledger.start(slot, tuner="optuna", origin=proposal.origin, extras=proposal.extras)

    # its first trial runs: the next slot is the search's, in this process or another
    slot = ledger.claim(stratum, budget=4)
    assert warm.propose(slot, History(stratum, tuple(ledger.trials(stratum)))) is None


def test_the_lineup_asks_the_warm_starter_first_and_records_the_turns_name(tmp_path: Path):
    url = earlier(tmp_path)
    config = config_of()
    ledger = Ledger.open(url, "d8000")
    ledger.create(StudyRecord(name="d8000", config_text="name: d8000"))
    lineup = build_lineup("optuna", config, ledger)
    assert isinstance(lineup.warm_starter, WarmStarter)
    stratum = Stratum(32, "default")
    slot = ledger.claim(stratum, budget=4)
    backend, proposal = lineup.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
    assert backend is lineup.warm_starter
    assert (proposal.tuner, proposal.origin) == ("optuna", WARM)
    assert proposal.params["learning_rate"] == pytest.approx(0.025)
    assert not math.isnan(proposal.params["learning_rate"])

    plain = build_lineup("optuna", parse_study({**study(), "tuner": {}}, "d8000.yaml"), ledger)
    assert plain.warm_starter is None


def test_a_wrong_name_stops_the_lineup_before_anything_trains(tmp_path: Path):
    url = earlier(tmp_path)
    ledger = Ledger.open(url, "d8000")
    with pytest.raises(UsageError, match="no study named 'nope'"):
        build_lineup("optuna", config_of(warm_start="nope"), ledger)


def test_a_storage_that_cannot_be_opened_names_the_key(tmp_path: Path):
    ledger = Ledger.open(earlier(tmp_path), "d8000")
    unreachable = WarmStart("d4000", "postgresql://study@127.0.0.1:1/nowhere")
    with pytest.raises(UsageError, match=r"^tuner.warm_start.storage: .*cannot open"):
        read_points(unreachable, ledger, "default")
