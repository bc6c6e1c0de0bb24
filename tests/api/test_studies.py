"""`study.load` and `Study`: what a notebook reads from a stored study, nothing written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

import study
from study.cli import main as cli
from study.ledger import Ledger, StudyRecord
from tests.fakes import TINY, TINY_BATCH_SIZES, write_tiny_ledger


@pytest.fixture(scope="module")
def shared_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny study, written once for the tests that only read it."""
    path = tmp_path_factory.mktemp("tiny") / "j.journal"
    write_tiny_ledger(path)
    return path


@pytest.fixture
def journal(shared_journal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    return shared_journal


@pytest.fixture
def tiny(journal: Path) -> study.Study:
    return study.load(TINY, storage=journal)


@pytest.fixture(scope="module")
def fitted(shared_journal: Path) -> study.Fit:
    """The tiny study's fit for its own target, computed once."""
    return study.load(TINY, storage=shared_journal).fit()


def test_a_missing_study_is_named_and_nothing_is_written(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    with pytest.raises(study.StudyNotFound, match="no study named 'nope'") as caught:
        study.load("nope")
    assert caught.value.study == "nope"
    assert isinstance(caught.value, study.UsageError)
    with pytest.raises(study.StudyNotFound):
        study.load("nope", storage=tmp_path / "other.journal")
    assert list(tmp_path.iterdir()) == []  # no mlruns/, no journal


def test_bad_arguments_are_named(tmp_path, journal) -> None:
    with pytest.raises(study.UsageError, match=r"^name must be letters"):
        study.load("../x", storage=journal)
    with pytest.raises(study.UsageError, match=r"^name must be a non-empty string \(got 3\)"):
        study.load(3, storage=journal)  # type: ignore[arg-type]
    with pytest.raises(study.UsageError, match=r"^storage must be a string or a path"):
        study.load(TINY, storage=5)  # type: ignore[arg-type]


def test_the_table_is_what_study_export_writes(tiny, journal, tmp_path, capsys) -> None:
    out = tmp_path / "m.csv"
    assert cli(["export", TINY, "--storage", str(journal), "--out", str(out)]) == 0
    capsys.readouterr()
    assert tiny.table().to_csv(index=False) == out.read_text()


def test_trials_have_one_row_each_with_their_parameters_and_results(tiny) -> None:
    trials = tiny.trials()
    assert len(trials) == 3 * len(TINY_BATCH_SIZES) == tiny.table()["trial"].nunique()
    assert set(trials["batch_size"]) == set(TINY_BATCH_SIZES)
    assert list(trials["trial"]) == list(range(len(trials)))
    for column in ("learning_rate", "state", "steps_to_target", "seed", "started", "steps_run"):
        assert column in trials.columns
    reached = trials["state"] == "reached"
    assert reached.any()
    assert trials.loc[reached, "steps_to_target"].gt(0).all()
    assert trials.loc[~reached, "steps_to_target"].isna().all()
    # the same numbering as the measurement table
    table = tiny.table().groupby("trial")["learning_rate"].first()
    assert trials.set_index("trial")["learning_rate"].equals(table.rename("learning_rate"))


def test_the_fit_is_the_reports_fit(tiny, fitted, journal, tmp_path, capsys) -> None:
    out = tmp_path / "r"
    args = ["report", TINY, "--storage", str(journal), "--out", str(out), "--format", "json"]
    assert cli([*args, "--no-mlflow"]) == 0
    capsys.readouterr()
    expected = json.loads((out / "report.json").read_text())
    fit = fitted
    assert fit.b_noise == pytest.approx(expected["noise_scale"]["b_noise"], rel=1e-12)
    assert fit.b_noise_interval == pytest.approx(expected["noise_scale"]["b_noise_ci"])
    assert 20 < fit.b_noise < 200  # the tiny study's S(B) has B_noise 64
    assert str(fit.target) == "val_accuracy>=0.6"
    assert fit.answers is not None and fit.answers.ok
    assert fit.to_dict()["noise_scale"]["b_noise"] == pytest.approx(fit.b_noise)
    easier = tiny.fit("val_accuracy>=0.4", confidence=0.9)
    assert easier.confidence == 0.9
    assert (easier.steps["steps_to_result"] < fit.steps["steps_to_result"]).all()


def test_fit_arguments_are_named(tiny) -> None:
    with pytest.raises(study.UsageError, match=r"^target: cannot parse 'accuracy'"):
        tiny.fit("accuracy")
    with pytest.raises(study.UsageError, match=r"^confidence must be a level .* \(got 2\)"):
        tiny.fit(confidence=2)
    with pytest.raises(study.UsageError, match=r"^accelerators must be an integer >= 1"):
        tiny.fit(accelerators=0)


def test_an_imported_study_needs_a_target_argument(tmp_path) -> None:
    journal = tmp_path / "imported.journal"
    write_tiny_ledger(journal, config_text=None, kind="imported", source="x")
    imported = study.load(TINY, storage=journal)
    with pytest.raises(study.UsageError, match=r"^target: study 'tiny' was imported"):
        imported.fit()
    assert imported.fit("val_accuracy>=0.6").b_noise > 0


def test_report_writes_the_formats_asked_for(tiny, tmp_path) -> None:
    paths = tiny.report(tmp_path / "out", formats=("html", "json"))
    assert set(paths) == {"report.html", "report.json"}
    assert "B_noise" in paths["report.html"].read_text()
    with pytest.raises(study.UsageError, match=r"^formats must be a non-empty sequence"):
        tiny.report(tmp_path / "x", formats="html")
    assert not (tmp_path / "x").exists()


def test_plots_draw_into_the_given_axes(tiny, fitted) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure()
    ax = figure.add_subplot()
    assert tiny.plot.steps(ax) is ax
    assert ax.get_xscale() == "log" and len(ax.lines) >= 2
    fit = fitted
    for name in ("examples", "best_lr", "trials"):
        drawn = getattr(fit.plot, name)(Figure().add_subplot())
        assert drawn.has_data()
    new = fit.plot.steps()  # a new pyplot figure
    assert new.figure is not figure and new.has_data()
    assert fit.plot.time(Figure().add_subplot()).has_data()  # the trials' own seconds per step
    unreached = tiny.fit("val_accuracy>=0.99")
    with pytest.raises(
        study.UsageError, match=r"^plot.steps: nothing to draw yet .*>=0.99 \(drawable: trials\)"
    ):
        unreached.plot.steps()


def test_a_study_shows_itself_as_text_and_html(tiny, fitted) -> None:
    text = repr(tiny)
    assert text.splitlines()[0] == "study tiny: 18/18 trials, complete"
    assert "b8/default" in text and "best steps" in text
    page = tiny._repr_html_()
    assert "<table>" in page and "study tiny: 18/18 trials, complete" in page
    assert page.count("<tr>") == 1 + len(TINY_BATCH_SIZES)
    fit = fitted
    assert "answer: B_noise " in repr(fit)
    assert "<table>" in fit._repr_html_() and "B_noise" in fit._repr_html_()


def test_runs_without_a_tracking_store_is_empty_and_creates_none(tiny, tmp_path) -> None:
    runs = tiny.runs()
    assert isinstance(runs, pd.DataFrame) and runs.empty
    assert not (tmp_path / "mlruns").exists()


def test_runs_reads_the_studys_mlflow_runs(tiny, tmp_path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'track.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment(TINY, artifact_location=(tmp_path / "a").as_uri())
    parent = client.create_run(experiment, tags={"study.role": "parent"})
    client.log_metric(parent.info.run_id, "trials_done", 18)
    runs = study.load(TINY, storage=tiny.storage, tracking_uri=uri).runs()
    assert list(runs["run_id"]) == [parent.info.run_id]
    assert runs["metrics.trials_done"].tolist() == [18]
    assert runs["tags.study.role"].tolist() == ["parent"]
    import mlflow

    assert mlflow.get_tracking_uri() != uri  # the caller's MLflow state is left alone


def test_a_study_sees_trials_added_after_it_was_loaded(tmp_path, fitted) -> None:
    journal = tmp_path / "grow.journal"
    write_tiny_ledger(journal)
    opened = study.load(TINY, storage=journal)
    before = len(opened.trials())
    ledger = Ledger.open(str(journal), TINY)
    from study.config.space import Stratum
    from study.config.target import Target
    from tests.fakes import finished_trial, rising_curve

    curve = rising_curve(8, 400)
    extra = finished_trial(Stratum(8, "default"), 3, 0.02, curve, Target.parse("val_accuracy>=0.6"))
    ledger.import_trials(Stratum(8, "default"), [extra])
    assert len(opened.trials()) == before + 1
    assert opened.fit().b_noise != fitted.b_noise  # refitted with the new trial
    assert math.isfinite(fitted.b_noise)
    assert isinstance(ledger.require(), StudyRecord)


def test_report_attach_logs_to_the_parent_run(tiny, tmp_path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'track.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment(TINY, artifact_location=(tmp_path / "a").as_uri())
    parent = client.create_run(experiment, tags={"study.role": "parent", "study.name": TINY})
    tracked = study.load(TINY, storage=tiny.storage, tracking_uri=uri)
    tracked.report(tmp_path / "out", formats=("html",), attach=True)
    run = client.get_run(parent.info.run_id)
    assert [a.path for a in client.list_artifacts(run.info.run_id, "report")] == [
        "report/report.html"
    ]
    assert run.data.tags["study.answer"].startswith("B_noise")
    assert "answer/b_noise" in run.data.metrics
    assert "report/report.html" in run.data.tags["mlflow.note.content"]


def test_one_answer_in_the_report_status_mlflow_and_the_api(tiny, fitted, tmp_path, capsys) -> None:
    """Every answer is the same number in report.json, `study status --json`, the MLflow parent
    run and `study.load(...).fit()` (the issue's "one answer")."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'track.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment(TINY, artifact_location=(tmp_path / "a").as_uri())
    parent = client.create_run(experiment, tags={"study.role": "parent", "study.name": TINY})
    storage = str(tiny.storage)
    out = tmp_path / "r"
    report_args = ["report", TINY, "--storage", storage, "--out", str(out), "--format", "json"]
    assert cli([*report_args, "--tracking-uri", uri]) == 0
    capsys.readouterr()
    assert cli(["status", TINY, "--storage", storage, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    report = json.loads((out / "report.json").read_text())
    metrics = client.get_run(parent.info.run_id).data.metrics
    answers = fitted.answers

    assert answers.ok
    for answer_name in ("b_noise", "s_min", "e_min", "alpha", "critical_batch", "perfect_end",
                        "recommended_batch", "recommended_lr", "step_speedup"):  # fmt: skip
        answer = getattr(answers, answer_name)
        for part, value in (("estimate", answer.estimate), ("low", answer.low),
                            ("high", answer.high)):  # fmt: skip
            assert report["answers"][answer_name][part] == pytest.approx(value, rel=1e-12)
            assert status["answers"][answer_name][part] == pytest.approx(value, rel=1e-12)
        assert metrics[f"answer/{answer_name}"] == pytest.approx(answer.estimate, rel=1e-12)
    # The top level of report.json and the API's attributes are the same answers.
    assert report["noise_scale"]["b_noise"] == fitted.b_noise == answers.b_noise.estimate
    assert report["noise_scale"]["critical_batch"] == fitted.critical_batch_size
    assert report["regimes"]["perfect_end"] == fitted.perfect_scaling_end
    assert report["lr_scaling"]["alpha"] == fitted.alpha
    assert report["recommendation"]["batch_size"] == fitted.recommended_batch_size
    assert report["recommendation"]["learning_rate"] == fitted.recommended_learning_rate
    assert fitted.recommended_batch_size == answers.recommended_batch.estimate
    # The best trials alone are the cross-check, named as such.
    assert report["cross_check"]["noise_scale"]["b_noise"] == pytest.approx(
        fitted.cross_check.noise_scale.b_noise
    )
