"""The parent run's params (`study_params`): what the study searches, and how steps to target
are read (the hold rule) and trials seeded."""

from __future__ import annotations

import copy

from study.config.studyfile import parse_study
from study.tracking.study_tracker import study_params
from tests.config.test_studyfile import BASE


def params_of(**changes: object) -> dict:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return study_params(parse_study(data, "x.yaml"), tuner="both", trials_total=8, strata=2)


def test_the_parent_run_names_the_hold_rule_and_the_seeding() -> None:
    plain = params_of(seed=3)
    assert (plain["target_hold"], plain["training_seeds"], plain["seed"]) == (
        "5%,5",
        "per_trial",
        3,
    )
    other = params_of(target_hold={"fraction": 0.1, "min_steps": 20}, training_seeds="pinned")
    assert (other["target_hold"], other["training_seeds"]) == ("10%,20", "pinned")
    assert params_of(target_hold="off")["target_hold"] == "off"
