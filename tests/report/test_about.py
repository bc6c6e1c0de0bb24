"""What the study is about, at the top of every report: facts from the study file or an
imported study's record, trial counts, package versions; numbers at three significant digits."""

from __future__ import annotations

import dataclasses
import html
import json
import re

import pytest

from study.analysis.table import ORIGIN
from study.config.study import WarmStart
from study.report.about import about_dict, about_rows, headline, trial_states
from study.report.html import render_html
from study.report.json import render_json
from study.report.markdown import render_markdown
from study.report.prose import answer
from study.report.record import StudyFacts
from study.report.tables import report_tables
from tests.report.conftest import study_facts


def test_a_study_file_says_what_was_trained_and_searched(facts_report) -> None:
    rows = dict(about_rows(facts_report))

    assert list(rows)[:6] == [
        "workload",
        "model",
        "optimizer",
        "learning-rate schedule",
        "target",
        "budget per trial",
    ]
    assert rows["workload"] == "mnist1d (samples=4000)"
    assert rows["model"] == "mlp" and rows["optimizer"] == "nesterov"
    assert rows["learning-rate schedule"] == "constant"
    assert rows["target"] == "val_accuracy>=0.6"
    assert rows["budget per trial"] == "2000 steps or 1,000,000 examples, whichever comes first"
    assert rows["batch sizes"] == "8, 16, 32, 64, 128, 256, 512, 1024"
    assert rows["learning rates searched"] == "0.001 to 1, log scale"
    assert rows["also searched"] == "momentum 0.9"
    assert rows["strategies"] == "default, mirrored:2"
    assert rows["tuners"] == "optuna (tpe sampler); pruning at 1.5x each batch size's best steps"
    assert rows["trials"] == "48 of 48 planned: 48 reached the target"
    assert rows["seed"] == "3" and rows["study file"] == "search_spaces/synthetic.yaml"
    assert rows["trials ran with"] == "tensorflow 2.21.0, keras 3.15.1"
    assert rows["packages"] == "study 0.1.0, tensorflow 2.21.0, keras 3.15.1, python 3.11.7"
    assert headline(facts_report) == "mnist1d · mlp · nesterov"


def test_a_warm_start_names_its_study_and_how_many_first_trials_it_gave(make_report, table) -> None:
    config = study_facts().config
    tuner = dataclasses.replace(config.tuner, warm_start=WarmStart("d4000"))
    facts = study_facts(config=dataclasses.replace(config, tuner=tuner))
    table = table.copy()
    table[ORIGIN] = "sampler"
    table.loc[table.index[:3], ORIGIN] = "warm"

    rows = dict(about_rows(make_report(table, facts=facts)))
    assert rows["tuners"] == (
        "optuna (tpe sampler); pruning at 1.5x each batch size's best steps; warm start from "
        "study 'd4000' (3 first trials at its best rates)"
    )


def test_the_workloads_default_model_is_named(make_report, table) -> None:
    config = study_facts().config
    facts = study_facts(config=config.__class__(**{**config.__dict__, "model": None}))

    rows = dict(about_rows(make_report(table, facts=facts)))
    assert "model" not in rows  # unknown: the command could not resolve the workload
    default = StudyFacts(**{**facts.__dict__, "default_model": "mlp"})
    report = make_report(table, facts=default)
    assert dict(about_rows(report))["model"] == "mlp (the workload's default)"
    assert headline(report) == "mnist1d · mlp · nesterov"


def test_an_imported_study_names_its_dataset_model_and_optimizer(make_report, table) -> None:
    facts = StudyFacts(
        dataset="imagenet", model="resnet50", optimizer="momentum", imported_from="shallue_2018"
    )

    report = make_report(table.assign(tuner="imported"), facts=facts)

    rows = dict(about_rows(report))
    assert rows["workload"] == "imagenet" and rows["model"] == "resnet50"
    assert rows["optimizer"] == "momentum" and rows["imported from"] == "shallue_2018"
    assert rows["batch sizes"] == "8, 16, 32, 64, 128, 256, 512, 1024"  # from the measurements
    assert rows["strategies"] == "default, mirrored:2" and rows["tuners"] == "imported"
    assert "learning-rate schedule" not in rows and "budget per trial" not in rows
    assert headline(report) == "imagenet · resnet50 · momentum"
    assert answer(report).startswith(
        "How many training steps does it take to reach val_accuracy>=0.6, training resnet50 on "
        "imagenet with momentum, as the global batch size grows"
    )


def test_without_facts_the_report_shows_what_the_measurements_hold(report) -> None:
    rows = dict(about_rows(report))

    assert list(rows) == ["target", "batch sizes", "strategies", "tuners", "trials"]
    assert rows["trials"] == "48: 48 reached the target"
    assert headline(report) == ""


def test_trial_counts_follow_the_reports_target(make_report, make_table) -> None:
    df = make_table(batch_sizes=(8, 16, 32), ratio=1.15)
    df.loc[df["trial"] == 0, "state"] = "pruned"
    df.loc[df["trial"] == 1, "state"] = "diverged"
    df.loc[df["batch_size"] == 32, "val_accuracy"] = 0.2

    report = make_report(df, facts=study_facts(trials_planned=24))

    assert trial_states(report) == {"reached": 10, "not_reached": 6, "pruned": 1, "diverged": 1}
    assert dict(about_rows(report))["trials"] == (
        "18 of 24 planned: 10 reached the target, 6 not reached, 1 pruned, 1 diverged"
    )


def test_every_format_opens_with_the_workload(facts_report, tmp_path) -> None:
    page = render_html(facts_report, pngs={})
    markdown = render_markdown(facts_report)
    data = json.loads(render_json(facts_report))

    assert "<title>Scaling report: synthetic (mnist1d · mlp · nesterov)</title>" in page
    assert '<p class="lead">mnist1d · mlp · nesterov</p>' in page
    top = page[: page.index('<section id="summary">')]
    for word in ("mnist1d", "mlp", "nesterov", "constant", "2000 steps", "mirrored:2", "48 of 48"):
        assert word in top
    assert "**mnist1d · mlp · nesterov**" in markdown
    assert "- **packages**: study 0.1.0, tensorflow 2.21.0" in markdown
    assert markdown.index("## The study") < markdown.index("## Summary")
    about = data["about"]
    assert about["workload"] == "mnist1d" and about["workload_options"] == {"samples": 4000}
    assert about["model"] == "mlp" and about["optimizer"] == "nesterov"
    assert about["search_space"]["learning_rate"] == {"low": 0.001, "high": 1.0, "scale": "log"}
    assert about["trial_states"] == {"reached": 48} and about["trials_planned"] == 48
    assert about["packages"]["keras"] == "3.15.1"
    assert about == json.loads(json.dumps(about_dict(facts_report)))


def test_paths_in_workload_options_are_not_absolute(make_report, table) -> None:
    config = study_facts().config
    options = {"path": "/home/ana/data/reviews.csv", "label": "sentiment"}
    facts = study_facts(config=config.__class__(**{**config.__dict__, "workload_options": options}))

    report = make_report(table, facts=facts)

    assert dict(about_rows(report))["workload"] == "mnist1d (path=reviews.csv, label=sentiment)"
    assert "/home/ana" not in render_html(report, pngs={})


# ----------------------------------------------------------------------- three digits everywhere


def test_alpha_is_written_the_same_everywhere(facts_report) -> None:
    # The example: alpha 1.0199 was "1" in the summary and "1.02" in the table.
    answers = facts_report.answers
    alpha = dataclasses.replace(answers.alpha, estimate=1.0199, low=0.06883, high=1.9712)
    report = dataclasses.replace(facts_report, answers=dataclasses.replace(answers, alpha=alpha))

    page = render_html(report, pngs={})
    rows = {row[0]: row for row in report_tables(report)[0].rows}

    assert "alpha = 1.02 (0.0688-1.97)" in answer(report)
    assert "<span>alpha in best lr ~ B^alpha</span><b>1.02</b>" in page
    assert "<small>95% CI 0.0688 to 1.97</small>" in page
    assert rows["alpha"][1:3] == ["1.02", "0.0688 to 1.97"]
    assert "| alpha | 1.02 | 0.0688 to 1.97 |" in render_markdown(report)


@pytest.mark.parametrize("fmt_name", ["html", "md"])
def test_no_number_shows_more_than_three_significant_digits(facts_report, fmt_name) -> None:
    if fmt_name == "html":
        text = html.unescape(re.sub(r"<[^>]+>", " ", render_html(facts_report, pngs={})))
    else:
        text = render_markdown(facts_report)
    text = text.replace(dict(about_rows(facts_report))["packages"], "")  # versions, not numbers
    decimals = re.findall(r"(?<![\d.,])\d+\.\d+(?![\d.])", text)

    assert decimals
    too_long = [d for d in decimals if len(d.replace(".", "").lstrip("0")) > 3]
    assert too_long == []


def test_a_stored_study_is_described_with_the_pruning_slack_it_ran_with() -> None:
    from pathlib import Path

    from study.ledger import StudyRecord
    from study.report.stored import stored_config

    text = (Path(__file__).resolve().parents[2] / "search_spaces" / "quickstart.yaml").read_text()
    before = stored_config(StudyRecord("quickstart", config_text=text), "quickstart")
    assert before is not None and before.prune_slack == 1.0  # from before the slack
    now = stored_config(StudyRecord("quickstart", config_text=text, prune_slack=1.5), "q")
    assert now is not None and now.prune_slack == 1.5
    assert now.tuner.pruning and now.name == before.name == "quickstart"
