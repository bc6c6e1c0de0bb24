"""A study run against a real MLflow tracking server, checked through its REST API and in the
MLflow UI itself (headless Chromium): one experiment marked as model training, one parent run
FINISHED with study-level metrics charted against batch size, a nested run per trial whose
status follows the ledger (pruned and not-reached trials FINISHED with a ``status`` tag), the
curves first and where the time went last in a trial's metric tab, and the printed link opening
the runs table in the study's saved view. The pages explain themselves: the study's data is a
dataset input of every run, the parent's description states the question and the answer, trial
names carry learning rate, steps and status, and the report ``study report`` attaches renders
in the run's artifact view.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from study.ledger import LedgerTrial
from study.tracking.descriptions import ANSWER_HEADING, NOTE
from study.tracking.server import EXPERIMENT_KIND, MODEL_TRAINING, runs_view_url
from study.tracking.views import COLUMNS, view_tag
from tests.browser import Browser, require_chromium
from tests.inprocess import study_in
from tests.runner.conftest import (
    Store,
    assert_mlflow_mirrors_ledger,
    tiny_study,
    write_study,
)

pytestmark = pytest.mark.slow


@dataclass
class Served:
    """A tiny study run with ``--tracking-uri`` pointing at the server."""

    config: dict[str, Any]
    store: Store
    result: subprocess.CompletedProcess[str]
    trials: dict[str, list[LedgerTrial]]
    experiment_id: str

    @property
    def name(self) -> str:
        return str(self.config["name"])

    def runs(self) -> list[Any]:
        return self.store.runs(self.name)

    def parent(self) -> Any:
        (parent,) = [r for r in self.runs() if r.data.tags.get("study.role") == "parent"]
        return parent


@pytest.fixture(scope="module")
def served(mlflow_server: str, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """Two batch sizes, four trials each; the low end of the learning-rate range is too slow
    for the target, so pruned (and possibly not-reached) trials come with the reached ones."""
    config = tiny_study(
        name=f"served-{uuid.uuid4().hex[:8]}",
        trials_per_stratum=4,
        search_space={"learning_rate": {"low": 1.0e-3, "high": 0.3, "scale": "log"}},
    )
    cwd = tmp_path_factory.mktemp("served")
    file = write_study(cwd, config)
    result = study_in("run", str(file), "--tracking-uri", mlflow_server, cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    store = Store(cwd, uri=mlflow_server)  # the local ledger, MLflow on the server
    experiment = store.mlflow().get_experiment_by_name(config["name"])
    assert experiment is not None
    return Served(config, store, result, store.trials(config), experiment.experiment_id)


def test_the_study_is_one_model_training_experiment_mirroring_the_ledger(served: Served) -> None:
    client = served.store.mlflow()

    assert client.get_experiment(served.experiment_id).tags[EXPERIMENT_KIND] == MODEL_TRAINING
    children = assert_mlflow_mirrors_ledger(served.store, served.config, served.trials)
    assert len(children) == 8
    statuses = {r.data.tags["status"] for r in children.values()}
    assert "reached" in statuses and statuses <= {"reached", "not_reached", "pruned", "diverged"}
    assert {r.info.status for r in children.values()} == {"FINISHED"}
    for run in children.values():
        sections = {k.split("/")[0] for k in run.data.metrics}
        assert sections == {"curves", "progress", "summary", "timing"}
        assert run.data.metrics["timing/wall_seconds"] >= run.data.metrics["summary/train_seconds"]


def test_the_parent_charts_the_study_against_batch_size(served: Served) -> None:
    client = served.store.mlflow()
    (parent,) = [r for r in served.runs() if r.data.tags.get("study.role") == "parent"]

    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["trials_done"] == 8
    best = {
        stratum: min(t.steps_to_target for t in trials if t.steps_to_target is not None)
        for stratum, trials in served.trials.items()
    }
    history = client.get_metric_history(parent.info.run_id, "best_steps")
    assert {(m.step, m.value) for m in history} == {
        (int(stratum.split("/")[0][1:]), steps) for stratum, steps in best.items()
    }
    rates = client.get_metric_history(parent.info.run_id, "best_learning_rate")
    assert {m.step for m in rates} == {32, 128}
    walls = [t.result.timings["wall"] for ts in served.trials.values() for t in ts if t.result]
    assert parent.data.metrics["timing/trials"] == 8
    assert parent.data.metrics["timing/total_wall_seconds"] == pytest.approx(sum(walls))


def test_the_run_prints_the_runs_view_link_and_no_warnings(served: Served) -> None:
    link = runs_view_url(served.store.uri, served.experiment_id, view=True)

    assert served.result.stdout.splitlines()[-1] == f"MLflow runs of {served.name}: {link}"
    assert "View run" not in served.result.stdout
    # The one warning is the study's own: 8 trials are too few for the model to answer.
    (own,) = [x for x in served.result.stderr.splitlines() if "warning" in x.lower()]
    assert "the model of every trial will have no answer (8 trials planned" in own


def test_the_runs_view_lists_the_parent_with_its_nested_trials(served: Served) -> None:
    require_chromium()
    trials = sorted(f"{s}#{t.number}" for s, ts in served.trials.items() for t in ts)
    rows = "[...document.querySelectorAll('[role=row]')]"
    with Browser() as browser:
        browser.open(runs_view_url(served.store.uri, served.experiment_id))
        browser.wait_for(
            f"{rows}.some(r => r.innerText.includes({served.name!r}))", what="the parent run"
        )
        text = browser.text()
        assert "Token Usage" not in text and "Traces 0" not in text  # not the GenAI overview
        assert "usage data" not in text  # no telemetry notice
        assert not any(t in text for t in trials)  # nested: folded under the parent
        expanded = browser.evaluate(_CLICK_EXPANDER % {"name": served.name})
        assert expanded, "the parent run has no expander: its trials are not nested under it"
        names = browser.wait_for(
            f"(() => {{ const t = document.body.innerText; "
            f"return {trials!r}.every(n => t.includes(n)) && t; }})()",
            what="the nested trial runs",
        )
        assert all(t in names for t in trials)


def test_a_trials_metric_tab_opens_on_the_curves(served: Served) -> None:
    require_chromium()
    run = next(r for r in served.runs() if r.data.tags.get("status") == "reached")
    url = runs_view_url(served.store.uri, served.experiment_id).replace(
        "/runs?", f"/runs/{run.info.run_id}/model-metrics?"
    )
    with Browser() as browser:
        browser.open(url)
        text = browser.wait_for(_SECTIONS_SHOWN % {"names": SECTIONS}, what="the four sections")
    sections = re.findall(r"^(.+)\n\((\d+)\)\nAdd chart$", text, re.M)
    names = [name for name, count in sections if count != "0"]
    assert names == SECTIONS, sections


#: The metric sections a trial's run shows, in the order the tab lists them.
SECTIONS = ["curves", "progress", "summary", "timing"]
#: The page's text once every section in %(names)s shows a non-zero count of charts (the tab
#: fills its sections in as the metrics arrive), else false.
_SECTIONS_SHOWN = """(() => {
  const text = document.body.innerText;
  const shown = [...text.matchAll(/^(.+)\\n\\((\\d+)\\)\\nAdd chart$/gm)]
    .filter(m => m[2] !== '0').map(m => m[1]);
  return %(names)r.every(n => shown.includes(n)) && text;
})()"""


#: Click the expander in the Run Name cell of the row that links to run ``name``.
_CLICK_EXPANDER = """(() => {
  const row = [...document.querySelectorAll('[role=row]')].find(
    r => [...r.querySelectorAll('a')].some(a => a.innerText.trim() === %(name)r));
  const button = row && row.querySelector('[col-id*="Run Name"] button');
  if (!button) return false;
  button.click();
  return true;
})()"""


def test_every_run_names_its_data_and_trials_carry_their_numbers(served: Served) -> None:
    client = served.store.mlflow()
    parent = client.get_run(served.parent().info.run_id)
    (data,) = [i.dataset for i in parent.inputs.dataset_inputs]  # once, for all eight trials
    assert data.name == "tabular(rows=1500)" and len(data.digest) == 16
    assert (
        json.loads(data.profile)["train_rows"] + json.loads(data.profile)["validation_rows"] == 1500
    )
    for run in served.runs():
        if run.data.tags.get("study.role") != "trial":
            continue
        (used,) = client.get_run(run.info.run_id).inputs.dataset_inputs
        assert (used.dataset.name, used.dataset.digest) == (data.name, data.digest)
        assert [(t.key, t.value) for t in used.tags] == [("mlflow.data.context", "training")]
        status, steps = run.data.tags["status"], run.data.metrics.get("summary/steps_to_target")
        rate = float(run.data.params["optimizer.learning_rate"])
        assert run.info.run_name.startswith(f"{run.data.params['stratum']}#")
        assert f" lr {rate:.3g}" in run.info.run_name and run.info.run_name.endswith(f"({status})")
        if steps is not None:
            assert f": {int(steps)} steps" in run.info.run_name
    view = json.loads(client.get_experiment(served.experiment_id).tags[view_tag()])
    assert json.loads(view["state"])["selectedColumns"] == list(COLUMNS)


@pytest.fixture(scope="module")
def reported(served: Served) -> str:
    """The served study's HTML report, written by ``study report`` and attached to its parent
    run; returns the parent's description afterwards."""
    result = study_in(
        "report", served.name, "--tracking-uri", served.store.uri,
        "--format", "html", cwd=served.store.cwd,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return str(served.store.mlflow().get_run(served.parent().info.run_id).data.tags[NOTE])


def test_the_parent_run_page_shows_the_dataset_the_question_and_the_answer(
    served: Served, reported: str
) -> None:
    require_chromium()
    parent = served.store.mlflow().get_run(served.parent().info.run_id)
    (data,) = [i.dataset for i in parent.inputs.dataset_inputs]
    answer = reported.partition(ANSWER_HEADING)[2].split()
    assert "Question:" in reported and "report/report.html" in reported
    run_page = runs_view_url(served.store.uri, served.experiment_id).replace(
        "/runs?", f"/runs/{parent.info.run_id}?"
    )
    with Browser() as browser:
        browser.open(run_page)
        text = browser.wait_for(
            f"(() => {{ const t = document.body.innerText; "
            f"return t.includes({data.digest!r}) && t.includes('Question:') && t; }})()",
            what="the dataset and the description on the parent run's page",
        )
        assert f"{data.name} ({data.digest})" in text
        assert "tabular" in text and "Answer" in text
        assert " ".join(answer[:6]) in " ".join(text.split())  # the answer's first words

        browser.open(run_page.replace("?", "/artifacts/report/report.html?", 1))
        shown = browser.wait_in_frame(
            "blob:",
            "document.readyState === 'complete' && [...document.images].length > 0 && "
            "[...document.images].every(i => i.complete && i.naturalWidth > 0) && "
            "JSON.stringify([document.title, document.querySelector('h1').innerText, "
            "document.images.length])",
            timeout=60,
            what="the report with its figures in the artifact view",
        )
    title, heading, images = json.loads(shown)
    assert title.startswith(f"Scaling report: {served.name}")
    assert heading == f"Scaling report: {served.name}" and images >= 1
