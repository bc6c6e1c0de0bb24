"""Tests for study.tracking.server (links, the fail-fast probe) and the study tracker against a
real tracking server through its REST API: run status and ``status`` tag of every kind of trial,
the parent's study-level metrics, and ``study run`` failing fast, before its ledger records anything, when no server answers."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from study.config.space import Stratum
from study.errors import UsageError
from study.ledger import LedgerTrial
from study.results import TrialResult, TrialState
from study.tracking.server import (
    browse_hint,
    check_answers,
    experiment_links,
    experiments_url,
    is_unreachable,
    probe,
    runs_view_url,
)
from study.tracking.study_tracker import StudyTracker
from study.tracking.views import view_tag
from tests.fakes import rising_curve, tabular_spec
from tests.runner.conftest import run_study, tiny_study, write_study
from tests.tracking.conftest import free_port

# Links


def test_runs_view_url_opens_the_model_training_runs_table() -> None:
    assert (
        runs_view_url("http://127.0.0.1:5000/", "3")
        == "http://127.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning"
    )
    assert runs_view_url("http://h:1", "3", view=True) == (
        "http://h:1/#/experiments/3/runs?workflowType=machine_learning"
        "&viewStateShareKey=study-trials"
    )
    assert experiments_url("http://h:1") == "http://h:1/#/experiments?workflowType=machine_learning"


def test_study_ui_links_open_the_saved_view_of_experiments_that_have_one() -> None:
    experiments = [
        {"name": "quick", "experiment_id": "1", "tags": [{"key": view_tag(), "value": "{}"}]},
        {"name": "older-one", "experiment_id": "2", "tags": []},
    ]
    assert experiment_links("http://h:1", experiments) == [
        "quick      http://h:1/#/experiments/1/runs?workflowType=machine_learning"
        "&viewStateShareKey=study-trials",
        "older-one  http://h:1/#/experiments/2/runs?workflowType=machine_learning",
    ]


def test_browse_hint_masks_passwords_and_says_how_to_start_the_ui() -> None:
    assert browse_hint("https://me:s3cret@mlflow.example:443", "7") == (
        "https://me:***@mlflow.example:443/#/experiments/7/runs?workflowType=machine_learning"
        "&viewStateShareKey=study-trials"
    )
    local = browse_hint("sqlite:////data/mlruns/mlflow.db", "2")
    assert local == (
        "http://127.0.0.1:5000/#/experiments/2/runs?workflowType=machine_learning"
        "&viewStateShareKey=study-trials (start the UI with `study ui`)"
    )
    given = browse_hint("postgresql://me:s3cret@db/mlflow", "2", uri_option="postgresql://...")
    assert "`study ui --tracking-uri postgresql://me:***@db/mlflow`" in given
    assert "s3cret" not in given


# The probe


@contextlib.contextmanager
def http_answering(status: int) -> Iterator[str]:
    """A local HTTP server answering every GET with ``status``."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_probe_accepts_a_tracking_server_and_ignores_stores(mlflow_server: str) -> None:
    assert probe(mlflow_server) is None
    assert probe("sqlite:////nowhere/mlflow.db") is None
    assert probe("databricks") is None


def test_probe_says_why_nothing_answers() -> None:
    assert "Connection refused" in (probe(f"http://127.0.0.1:{free_port()}") or "")
    with http_answering(404) as url:
        assert "not an MLflow tracking server" in (probe(url) or "")
    with http_answering(503) as url:
        assert (probe(url) or "").startswith("HTTP 503")
    with http_answering(401) as url:  # asks for credentials: it answers
        assert probe(url) is None


def test_probe_gives_up_on_a_server_that_never_replies() -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        assert probe(url, timeout=0.5) == "no answer within 0.5 s"


def test_check_answers_fails_in_one_line_with_the_password_masked() -> None:
    port = free_port()
    with pytest.raises(UsageError) as raised:
        check_answers(f"http://me:s3cret@127.0.0.1:{port}")
    message = str(raised.value)
    assert message.startswith(
        f"--tracking-uri: no MLflow tracking server answers at http://me:***@127.0.0.1:{port} ("
    )
    assert "leave out --tracking-uri" in message
    assert "s3cret" not in message and "\n" not in message
    with pytest.raises(UsageError, match="unset MLFLOW_TRACKING_URI"):
        check_answers(f"http://127.0.0.1:{port}", "MLFLOW_TRACKING_URI")


def raised_from(cause: Exception) -> MlflowException:
    """The error MLflow's REST client raises while handling ``cause``."""
    try:
        try:
            raise cause
        except Exception:
            raise MlflowException("API request to http://x failed") from None
    except MlflowException as exc:
        exc.__context__ = cause  # what `raise ... from None` hid, as MLflow's plain raise keeps
        return exc


def test_is_unreachable_follows_the_cause_of_mlflows_errors() -> None:
    assert is_unreachable(raised_from(requests.exceptions.ConnectionError("refused")))
    assert is_unreachable(raised_from(requests.exceptions.ReadTimeout("slow")))
    broken = requests.exceptions.ChunkedEncodingError("Connection broken: IncompleteRead")
    assert is_unreachable(raised_from(broken))  # the server was killed while it answered
    assert not is_unreachable(raised_from(ValueError("bad param")))
    assert not is_unreachable(MlflowException("RESOURCE_DOES_NOT_EXIST"))


# The study tracker on a server


def ledger_trial(number: int, status: TrialState, result: TrialResult | None) -> LedgerTrial:
    return LedgerTrial(
        stratum=Stratum(64, "default"),
        number=number,
        status=status,
        params={"learning_rate": 0.1},
        result=result,
        tuner="optuna",
        origin="sampler",
    )


def outcome(state: TrialState, steps: int = 40, error: str | None = None) -> TrialResult:
    curve = tuple(m for m in rising_curve(64, 30) if m.step <= steps)
    return TrialResult(
        state=state,
        steps_run=curve[-1].step,
        examples_run=curve[-1].examples,
        train_seconds=curve[-1].train_seconds,
        steps_to_target=curve[-1].step if state is TrialState.REACHED else None,
        curve=curve,
        error=error,
    )


#: Each kind of trial the tracker logs, and the MLflow run status it must get.
SHOWN_AS = {
    TrialState.REACHED: "FINISHED",
    TrialState.NOT_REACHED: "FINISHED",
    TrialState.PRUNED: "FINISHED",
    TrialState.DIVERGED: "FINISHED",
    TrialState.FAILED: "FAILED",
    TrialState.INTERRUPTED: "KILLED",
}


def test_tracker_logs_every_kind_of_trial_as_mlflow_shows_it(mlflow_server: str) -> None:
    name = f"tracker-{uuid.uuid4().hex[:8]}"
    tracker = StudyTracker(mlflow_server, name)
    tracker.ensure_parent({"study": name}, {"study.yaml": "name: x\n"})
    results = {
        TrialState.PRUNED: outcome(TrialState.PRUNED, steps=20),
        TrialState.FAILED: TrialResult(TrialState.FAILED, error="boom"),
        TrialState.INTERRUPTED: None,
    }
    for number, state in enumerate(SHOWN_AS):
        trial = ledger_trial(number, state, results.get(state, outcome(state)))
        tracker.start_trial(trial)
        tracker.finish_trial(trial, tabular_spec(batch_size=64))
    died = ledger_trial(len(SHOWN_AS), TrialState.RUNNING, None)  # its process was killed
    tracker.start_trial(died)
    tracker.flush()
    tracker.mark_interrupted(
        tracker.trial_runs()[f"{name}/{died.stratum}#{died.number}"].info.run_id
    )
    tracker.end_parent("FINISHED", {"trials_done": 6, "best_steps": {32: 90.0, 64: 40.0}})
    tracker.close()

    client = MlflowClient(mlflow_server)
    found = client.search_runs([tracker.experiment_id])
    runs = {r.data.tags.get("study.trial", "").removeprefix(f"{name}/"): r for r in found}
    parent = runs.pop("")
    assert parent.info.run_name == name
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["trials_done"] == 6
    steps = client.get_metric_history(parent.info.run_id, "best_steps")
    assert sorted((m.step, m.value) for m in steps) == [(32, 90.0), (64, 40.0)]
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in runs.values())
    for number, (state, status) in enumerate(SHOWN_AS.items()):
        run = runs[f"b64/default#{number}"]
        assert (run.data.tags["status"], run.info.status) == (state.value, status)
    run = runs[f"b64/default#{died.number}"]
    assert (run.data.tags["status"], run.info.status) == ("interrupted", "KILLED")
    last = outcome(TrialState.REACHED).steps_run  # the curve's last evaluation
    assert runs["b64/default#0"].info.run_name == f"b64/default#0 lr 0.1: {last} steps (reached)"
    assert runs["b64/default#1"].info.run_name == (
        f"b64/default#1 lr 0.1: stopped at {last} steps (not_reached)"
    )
    assert runs["b64/default#4"].info.run_name == "b64/default#4 lr 0.1: failed"
    pruned = runs["b64/default#2"]
    assert {k.split("/")[0] for k in pruned.data.metrics} == {"curves", "progress", "summary"}
    assert pruned.data.metrics["summary/steps_run"] == results[TrialState.PRUNED].steps_run


# `study run` on a dead server


def test_a_dead_tracking_server_fails_fast_before_anything_is_recorded(tmp_path: Path) -> None:
    file = write_study(tmp_path, tiny_study(name="dead-server"))
    port = free_port()

    result = run_study("run", str(file), "--tracking-uri", f"http://127.0.0.1:{port}", cwd=tmp_path)

    assert result.returncode == 2
    # The probe's own words and the refused connection it saw: MLflow's client, which retries
    # for minutes, was never asked.
    assert result.stderr.startswith(
        f"study run: error: --tracking-uri: no MLflow tracking server answers at "
        f"http://127.0.0.1:{port} ([Errno 111] Connection refused); "
    )
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "mlruns").exists()  # no ledger, no MLflow store
