"""Who proposes which slot: the `--tuner` lineups and their alternation policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.errors import UsageError
from study.ledger import Ledger, Slot
from study.results import TrialResult, TrialState
from study.tuners.base import History
from study.tuners.keras_tuner_backend import KerasTunerBackend
from study.tuners.registry import TUNERS, Deferred, build_lineup

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


def test_keras_tuner_is_built_when_a_slot_first_falls_to_it(tmp_path: Path) -> None:
    config = parse_study(STUDY, "lineup.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "lineup")
    lineup = build_lineup("both", config, ledger)
    keras_tuner = lineup.rotation[1]
    assert isinstance(keras_tuner, Deferred) and keras_tuner.name == "keras-tuner"
    stratum = Stratum(32, "auto")

    proposers = []
    for _ in range(2):
        claimed = ledger.claim(stratum, budget=4)
        assert claimed is not None
        backend, proposal = lineup.propose(claimed, History(stratum, tuple(ledger.trials(stratum))))
        for other in lineup.backends:
            if other is not backend:
                other.adopt(claimed, proposal)  # as the engine does: not built by hearing it
        proposers.append((proposal.tuner, keras_tuner.built))
        ledger.finish(claimed, TrialResult(state=TrialState.NOT_REACHED), 100.0)

    assert proposers[0] == ("optuna", None)  # slot 0: Optuna's; KerasTuner not imported for it
    assert proposers[1][0] == "keras-tuner"
    assert isinstance(proposers[1][1], KerasTunerBackend)
    lineup.close()


def test_a_backend_that_never_proposed_is_never_built(tmp_path: Path) -> None:
    config = parse_study(STUDY, "lineup.yaml")
    lineup = build_lineup("keras-tuner", config, Ledger.open(str(tmp_path / "j.journal"), "x"))
    assert lineup.rotation[0].name == "keras-tuner"
    lineup.close()  # nothing was built, nothing to release
    assert lineup.rotation[0].built is None  # type: ignore[attr-defined]
