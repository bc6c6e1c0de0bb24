"""The ledger as Optuna users see it, in Optuna's API and in optuna-dashboard (through its own
WSGI app on the ledger's storage): curves as intermediate values, values explained, no curve in
the user attributes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import optuna
import optuna_dashboard
import pytest

from study.config.space import Stratum
from study.ledger import Ledger, StudyRecord
from study.ledger.access import METRIC_NAME
from study.ledger.claims import INTERMEDIATE_POINTS
from study.results import Measurement, TrialResult, TrialState

S = Stratum(32, "default")


def curve(n: int) -> tuple[Measurement, ...]:
    return tuple(
        Measurement(step, step * 32, step * 0.01, 2.0 / (1 + step), {"val_accuracy": step / n})
        for step in range(n + 1)
    )


def finish(ledger: Ledger, state: TrialState, n: int, objective: float, meaning: str) -> None:
    slot = ledger.claim(S, budget=10)
    assert slot is not None
    slot.trial.suggest_float("learning_rate", 1e-3, 1.0, log=True)
    ledger.start(slot, tuner="optuna", origin="sampler")
    result = TrialResult(
        state=state,
        steps_run=n,
        steps_to_target=n if state is TrialState.REACHED else None,
        curve=curve(n),
    )
    ledger.finish(slot, result, objective, metric="val_accuracy", meaning=meaning)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.open(str(tmp_path / "j.journal"), "view")
    ledger.create(StudyRecord("view", config_text="name: view", trials_total=3))
    finish(ledger, TrialState.REACHED, 300, 300.0, "300 steps to val_accuracy>=1")
    finish(ledger, TrialState.PRUNED, 20, 4000.0, "penalty 4000: pruned before ...")
    finish(ledger, TrialState.NOT_REACHED, 10, 2400.0, "penalty 2400 = ...: never reached ...")
    return ledger


def test_curves_are_intermediate_values_and_values_are_explained(ledger: Ledger) -> None:
    study = optuna.load_study(study_name=f"view/{S}", storage=ledger.storage)
    assert study.metric_names == [METRIC_NAME]
    assert "fewer is better" in study.user_attrs.get("objective", "")
    reached, pruned, not_reached = study.trials
    assert len(reached.intermediate_values) == INTERMEDIATE_POINTS
    assert reached.intermediate_values[0] == 0.0 and reached.intermediate_values[300] == 1.0
    assert pruned.intermediate_values == {s: s / 20 for s in range(21)}
    assert pruned.value == 1.0  # Optuna: a pruned trial's value is its last intermediate value
    assert not_reached.value == 2400.0
    assert "never reached" in not_reached.user_attrs.get("objective", "")
    for t in study.trials:
        assert "curve" not in t.user_attrs
    # ... and the ledger still reads the whole curve back
    assert ledger.trials(S)[0].result.curve == curve(300)


def call(app: Any, path: str) -> Any:
    """GET ``path`` from a WSGI app; the JSON body."""
    status: list[str] = []
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": io.StringIO(),
    }
    body = b"".join(app(environ, lambda s, headers, exc=None: status.append(s)))
    assert status[0].startswith("200"), (path, status, body[:300])
    return json.loads(body)


def test_optuna_dashboard_shows_readable_trial_pages(ledger: Ledger) -> None:
    app = optuna_dashboard.wsgi(ledger.storage)
    studies = call(app, "/api/studies")["study_summaries"]
    (stratum_study,) = [s for s in studies if s["study_name"] == f"view/{S}"]
    detail = call(app, f"/api/studies/{stratum_study['study_id']}")
    assert detail["objective_names"] == [METRIC_NAME]
    assert "fewer is better" in {a["key"]: a["value"] for a in detail["user_attrs"]}["objective"]
    trials = detail["trials"]
    assert [len(t["intermediate_values"]) for t in trials] == [INTERMEDIATE_POINTS, 21, 11]
    for t in trials:
        attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
        assert "objective" in attrs and "curve" not in attrs
        assert len(json.dumps(t["user_attrs"])) < 2000  # a page, not 86,733 px of JSON
