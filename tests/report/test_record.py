"""The report's record (`study.report.record`): the names `StudyFacts` gives a study, from its
study file or from an imported study's record."""

from __future__ import annotations

import yaml

from study.config.studyfile import parse_study
from study.report.record import StudyFacts
from tests.report.conftest import STUDY_YAML, study_facts


def test_a_study_file_names_its_workload_model_optimizer_and_schedule() -> None:
    facts = study_facts()

    assert facts.workload_name == "mnist1d" and facts.model_name == "mlp"
    assert facts.optimizer_name == "nesterov" and facts.schedule_name == "constant"


def test_a_searched_optimizer_is_named_by_its_choices() -> None:
    text = STUDY_YAML.replace("optimizer: nesterov\n", "").replace(
        "  momentum: {choices: [0.9]}\n", "  optimizer: {choices: [adam, sgd, nesterov]}\n"
    )
    config = parse_study(yaml.safe_load(text), "synthetic.yaml", text=text)

    assert StudyFacts(config=config).optimizer_name == "adam, sgd or nesterov"


def test_an_imported_study_names_what_it_says_it_trained() -> None:
    facts = StudyFacts(dataset="imagenet", model="resnet50", optimizer="momentum")

    assert (facts.workload_name, facts.model_name, facts.optimizer_name) == (
        "imagenet",
        "resnet50",
        "momentum",
    )
    assert facts.schedule_name == ""
