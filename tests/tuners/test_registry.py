"""Who proposes which slot: the `--tuner` lineups and their alternation policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.errors import UsageError
from study.ledger import Ledger, Slot
from study.tuners.registry import TUNERS, build_lineup

STUDY = {
    "name": "lineup",
    "workload": "tabular",
    "target": "val_accuracy>=0.9",
    "budget": {"max_steps": 100},
    "trials_per_stratum": 4,
    "search_space": {"batch_size": [32], "learning_rate": {"low": 0.01, "high": 1.0}},
}


def slot(number: int) -> Slot:
    return Slot(Stratum(32, "auto"), number, "host:1:1", trial=None)


@pytest.mark.parametrize(
    ("choice", "turns"),
    [
        ("optuna", ["optuna"] * 4),
        ("keras-tuner", ["keras-tuner"] * 4),
        ("both", ["optuna", "keras-tuner", "optuna", "keras-tuner"]),
    ],
)
def test_lineups_take_turns_by_trial_number(tmp_path: Path, choice: str, turns: list[str]):
    config = parse_study(STUDY, "lineup.yaml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STUDY_HOME", str(tmp_path))
        lineup = build_lineup(choice, config, Ledger.open(str(tmp_path / "j.journal"), "lineup"))
    assert [lineup.for_slot(slot(n)).name for n in range(4)] == turns
    assert lineup.fallback.name == "optuna"  # stands in when a backend has nothing to propose
    assert {b.name for b in lineup.backends} == {"optuna", "design", *turns}  # design: on
    lineup.close()


def test_unknown_tuner_is_bad_input(tmp_path: Path) -> None:
    config = parse_study(STUDY, "lineup.yaml")
    with pytest.raises(UsageError, match=r"^tuner: unknown tuner 'nope'; choose from optuna"):
        build_lineup("nope", config, Ledger.open(str(tmp_path / "j.journal"), "lineup"))
    assert TUNERS == ("optuna", "keras-tuner", "both")
