"""The ledger as Optuna users see it, in Optuna's API (`trials_dataframe`, TPE's own ranking)
and in optuna-dashboard (through its own WSGI app on the ledger's storage), on a stratum with
reached, pruned, not-reached and diverged trials: every value in steps to target, none of them
an accuracy; distances to the target as intermediate values; the accuracy curve readable as a
user attribute. Ledgers written the older way (accuracies) still read through the ledger."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import optuna
import optuna_dashboard
import pytest
from optuna.samplers._tpe.sampler import _split_pruned_trials, _split_trials
from optuna.trial import TrialState as OptunaState

from study.analysis.load import ledger_table
from study.cli import main as cli
from study.config.space import Stratum
from study.config.target import Target
from study.ledger import Ledger, StudyRecord
from study.ledger import records as rec
from study.ledger.access import METRIC_NAME
from study.ledger.claims import INTERMEDIATE_POINTS
from study.ledger.optuna_view import distance, thinned, view_attrs
from study.results import Measurement, TrialResult, TrialState

S = Stratum(32, "default")
TARGET = Target.parse("val_accuracy>=0.5")
LIMIT = 400
#: (state, steps run, last accuracy, objective the tuners were told)
TRIALS = (
    (TrialState.REACHED, 300, 0.5, 300.0),
    (TrialState.PRUNED, 300, 0.45, 2 * LIMIT * 1.1),  # the pruned trial closest to the target
    (TrialState.PRUNED, 300, 0.30, 2 * LIMIT * 1.4),
    (TrialState.PRUNED, 200, 0.40, 2 * LIMIT * 1.2),  # stopped earlier
    (TrialState.NOT_REACHED, LIMIT, 0.40, 2 * LIMIT * 1.2),
    (TrialState.DIVERGED, 50, 0.10, 5.0 * LIMIT),
)


def curve(n: int, top: float) -> tuple[Measurement, ...]:
    """Accuracy rising linearly from 0 to ``top`` at step ``n``, evaluated every step."""
    return tuple(
        Measurement(
            step, step * 32, step * 0.01, 2.0 / (1 + step), {"val_accuracy": top * step / n}
        )
        for step in range(n + 1)
    )


def result(state: TrialState, n: int, top: float) -> TrialResult:
    reached = state is TrialState.REACHED
    return TrialResult(
        state=state, steps_run=n, steps_to_target=n if reached else None, curve=curve(n, top)
    )


def claimed(ledger: Ledger, lr: float) -> Any:
    slot = ledger.claim(S, budget=10)
    assert slot is not None
    slot.trial.suggest_float("learning_rate", 1e-3, 1.0, log=True)
    ledger.start(slot, tuner="optuna", origin="sampler")
    return slot


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.open(str(tmp_path / "j.journal"), "view")
    ledger.create(StudyRecord("view", config_text="name: view", trials_total=len(TRIALS)))
    for state, n, top, objective in TRIALS:
        slot = claimed(ledger, 0.1)
        ledger.finish(slot, result(state, n, top), objective, target=TARGET, meaning="told")
    return ledger


def load(ledger: Ledger) -> optuna.Study:
    return optuna.load_study(study_name=f"view/{S}", storage=ledger.storage)


def test_every_value_is_in_steps_and_none_is_an_accuracy(ledger: Ledger) -> None:
    study = load(ledger)
    assert study.metric_names == [METRIC_NAME]
    assert "fewer is better" in study.user_attrs.get("objective", "")
    frame = study.trials_dataframe()
    states = ["COMPLETE", "PRUNED", "PRUNED", "PRUNED", "COMPLETE", "COMPLETE"]
    assert list(frame["state"]) == states
    values = list(frame[f"value_{METRIC_NAME}"])
    # reached: its steps; pruned: the steps it ran (it needs more); not reached / diverged: the
    # penalty in steps the tuners were told
    assert values == [300.0, 300.0, 300.0, 200.0, 960.0, 2000.0]
    assert all(v >= 50 for v in values)  # no accuracy (<= 1) among them
    assert list(frame["user_attrs_steps_more_than"].iloc[1:4]) == [300, 300, 200]
    pruned = study.trials[1]
    assert pruned.user_attrs["objective"].startswith("more than 300 steps")
    assert pruned.user_attrs["score"] == pytest.approx(880.0)  # what the tuners were told


def test_intermediate_values_are_distances_and_the_curve_stays_readable(ledger: Ledger) -> None:
    reached, closest, far, early, not_reached, diverged = load(ledger).trials
    assert early.intermediate_values[200] == pytest.approx(0.1)
    assert len(reached.intermediate_values) == INTERMEDIATE_POINTS
    assert reached.intermediate_values[0] == 0.5 and reached.intermediate_values[300] == 0.0
    assert closest.intermediate_values[300] == pytest.approx(0.05)
    assert far.intermediate_values[300] == pytest.approx(0.2)
    assert diverged.intermediate_values[50] == pytest.approx(0.4)
    for t in (reached, closest, not_reached):
        assert "distance to val_accuracy>=0.5" in t.user_attrs["intermediate_values"]
        assert t.user_attrs["target_curve"].startswith("val_accuracy by step: 0=0, ")
        assert "curve" not in t.user_attrs
    assert closest.user_attrs["target_curve"].endswith("300=0.45")
    # ... and the ledger still reads the whole curve back, and no view attribute as an extra
    trials = ledger.trials(S)
    assert trials[1].result.curve == curve(300, 0.45)
    assert all(not set(t.extras) & set(rec.VIEW_KEYS) for t in trials)


def test_tpe_ranks_the_trial_closest_to_the_target_first(ledger: Ledger) -> None:
    study = load(ledger)
    trials = study.get_trials(deepcopy=False)
    below, _ = _split_trials(study, trials, 1)
    assert [t.number for t in below] == [0]  # the reached trial
    pruned = [t for t in trials if t.state is OptunaState.PRUNED]
    ranked, _ = _split_pruned_trials(pruned, study, len(pruned))
    # furthest step first (Optuna's rule), then the one closest to the target
    assert [t.number for t in ranked] == [1, 2, 3]
    # and TPE samples from it
    sampled = optuna.load_study(
        study_name=f"view/{S}",
        storage=ledger.storage,
        sampler=optuna.samplers.TPESampler(n_startup_trials=0, seed=0),
    ).ask()
    assert 1e-3 <= sampled.suggest_float("learning_rate", 1e-3, 1.0, log=True) <= 1.0


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


def test_optuna_dashboard_shows_steps_and_readable_trial_pages(ledger: Ledger) -> None:
    app = optuna_dashboard.wsgi(ledger.storage)
    studies = call(app, "/api/studies")["study_summaries"]
    (stratum_study,) = [s for s in studies if s["study_name"] == f"view/{S}"]
    detail = call(app, f"/api/studies/{stratum_study['study_id']}")
    assert detail["objective_names"] == [METRIC_NAME]
    assert "fewer is better" in {a["key"]: a["value"] for a in detail["user_attrs"]}["objective"]
    trials = detail["trials"]
    assert [t["values"] for t in trials] == [[300.0], [300.0], [300.0], [200.0], [960.0], [2000.0]]
    assert [len(t["intermediate_values"]) for t in trials][:2] == [INTERMEDIATE_POINTS] * 2
    for t in trials:
        attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
        assert "objective" in attrs and "curve" not in attrs and "target_curve" in attrs
        assert all(p["value"] <= 0.5 for p in t["intermediate_values"])  # distances
        assert len(json.dumps(t["user_attrs"])) < 2000  # a page, not 86,733 px of JSON


def finish_the_old_way(ledger: Ledger, slot: Any, res: TrialResult, objective: float) -> None:
    """How trials were closed before: accuracies as intermediate values, and a pruned trial's
    value its last accuracy (Optuna's rule)."""
    user, system = rec.split_stored(rec.encode_result(res))
    user[rec.SCORE] = objective
    for key, value in {**user, rec.OBJECTIVE: "told"}.items():
        slot.trial.set_user_attr(key, value)
    for key, value in system.items():
        ledger.storage.set_trial_system_attr(slot.trial._trial_id, key, value)
    for step, value in thinned(res.curve, "val_accuracy", INTERMEDIATE_POINTS).items():
        slot.trial.report(value, step)
    study = load(ledger)
    if res.state is TrialState.PRUNED:
        study.tell(slot.trial, state=OptunaState.PRUNED)
    else:
        study.tell(slot.trial, objective)


def written(journal: Path, *, old: bool) -> Ledger:
    ledger = Ledger.open(str(journal), "view")
    ledger.create(StudyRecord("view", config_text="name: view", trials_total=len(TRIALS)))
    for state, n, top, objective in TRIALS:
        slot = claimed(ledger, 0.1)
        if old:
            finish_the_old_way(ledger, slot, result(state, n, top), objective)
        else:
            ledger.finish(slot, result(state, n, top), objective, target=TARGET, meaning="told")
    return ledger


def test_older_ledgers_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = tmp_path / "old.journal"
    old = written(journal, old=True)
    assert load(old).trials[1].value == pytest.approx(0.45)  # as they were stored
    trials = Ledger.open(str(journal), "view", create=False).trials(S)
    assert [t.status for t in trials] == [state for state, *_ in TRIALS]
    assert [t.score for t in trials] == pytest.approx([o for *_, o in TRIALS])
    assert [t.result.steps_run for t in trials] == [n for _, n, *_ in TRIALS]
    assert trials[1].result.curve == curve(300, 0.45)
    assert old.best(S) is not None and old.best(S).number == 0
    # what `study report` analyses reads the same from both (but the sampled learning rates)
    new = written(tmp_path / "new.journal", old=False)
    tables = [
        ledger_table("view", x.measurement_rows()).drop(columns="learning_rate") for x in (old, new)
    ]
    assert tables[0].equals(tables[1])
    assert cli(["status", "view", "--storage", str(journal), "--json"]) == 0
    (stratum,) = json.loads(capsys.readouterr().out)["strata"]
    assert stratum["best_steps"] == 300 and stratum["best_trial"] == 0
    assert stratum["statuses"] == {"reached": 1, "pruned": 3, "not_reached": 1, "diverged": 1}


def test_distance_falls_as_a_trial_improves_for_either_direction() -> None:
    assert distance(0.45, Target.parse("val_accuracy>=0.5")) == pytest.approx(0.05)
    assert distance(0.55, Target.parse("val_accuracy>=0.5")) == pytest.approx(-0.05)
    assert distance(0.5, Target.parse("val_loss<=0.3")) == pytest.approx(0.2)
    attrs = view_attrs(result(TrialState.PRUNED, 10, 0.2), Target.parse("val_loss<0.3"), 50)
    assert attrs["steps_more_than"] == 10
    assert attrs["intermediate_values"].startswith("distance to val_loss<0.3: val_loss - 0.3")
