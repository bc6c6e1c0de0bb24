"""Schedule trials in a study: a ``batch_schedule:`` section trains one trial per seed after the
search, each a trial of the study's schedule ledger (claimed within its budget, never in the
search's strata), logged as a nested MLflow run with the schedule as params; a second run adds
nothing; and deleting the study takes them along."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import study as api
from study.config.schedule import SECTION, BatchSchedule
from study.config.space import Stratum
from study.ext.schedules.ledger import ScheduleLedger, ScheduleStratum
from study.ledger import list_studies
from study.ledger.records import SEED
from study.results import TrialState
from tests.inprocess import study_here
from tests.runner.conftest import Store, tiny_study, write_study

pytestmark = pytest.mark.slow

#: 40 steps of 32 (1,280 examples), then 128 at twice the rate.
SCHEDULE = {
    "learning_rate": 0.05,
    "lr_scaling": {"alpha": 0.5},
    "stages": [
        {"from_examples": 0, "batch_size": 32},
        {"from_examples": 1280, "batch_size": 128},
    ],
    "seeds": 3,
}
DIGEST = BatchSchedule.from_mapping({k: v for k, v in SCHEDULE.items() if k != "seeds"}).digest()
STUDY = tiny_study(name="scheduled", trials_per_stratum=1, **{SECTION: SCHEDULE})


def test_a_study_trains_its_schedule_trials_once_per_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_study(tmp_path, STUDY)
    done = study_here(monkeypatch, capsys, "run", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "schedule trials: 3 seed(s)" in done.stdout
    store = Store(tmp_path)
    ledger = store.ledger("scheduled")
    schedules = ScheduleLedger.of(ledger)
    cell = ScheduleStratum(32, "default", DIGEST)
    assert schedules.strata() == [cell]
    assert ledger.strata() == [Stratum(32, "default"), Stratum(128, "default")]  # no schedule
    trials = schedules.trials(cell)
    assert [t.number for t in trials] == [0, 1, 2]
    assert [t.extras[SEED] for t in trials] == [0, 1, 2]
    assert all(t.status is TrialState.REACHED for t in trials), [t.status for t in trials]
    assert all(t.origin == "schedule" and t.stratum == cell for t in trials)
    for t in trials:
        assert t.result is not None and t.result.steps_to_target is not None
        steps = t.result.steps_to_target
        past = max(0, steps - 40)  # the target is past the first stage (~100+ steps at 128)
        assert t.result.examples_to_target == 32 * min(steps, 40) + 128 * past
    assert len({t.result.steps_to_target for t in trials if t.result}) > 1  # the seeds differ
    # MLflow: one nested run per schedule trial, keyed apart from the b32 stratum's trials
    runs = {r.data.tags.get("study.trial"): r for r in store.runs("scheduled")}
    for number in range(3):
        run = runs[f"scheduled/schedule-{DIGEST}-b32/default#{number}"]
        assert run.info.status == "FINISHED"
        assert run.data.params["batch_schedule"] == "32@0,128@1280"
        assert run.data.params["batch_schedule.alpha"] == "0.5"
        assert run.data.params["origin"] == "schedule"
        assert "mlflow.parentRunId" in run.data.tags  # nested under the study's run
    assert "scheduled/b32/default#0" in runs  # the search's own trial 0 is another run

    # The report compares them with the best fixed batch size, in JSON, Markdown and HTML
    out = tmp_path / "report"
    made = study_here(
        monkeypatch, capsys, "report", "scheduled", "--out", str(out), "--no-mlflow", cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr[-3000:]
    (section,) = json.loads((out / "report.json").read_text())["batch_schedules"]
    assert section["ok"] and section["schedule"] == "32@0,128@1280"
    assert [r["seed"] for r in section["runs"]] == [0, 1, 2]
    assert [r["steps"] for r in section["runs"]] == [t.result.steps_to_target for t in trials]
    assert section["best"]["batch_size"] in (32, 128)
    assert section["verdict"].startswith(("the schedule wins", "the schedule does not win"))
    assert section["steps"]["n"] == 3
    markdown = (out / "report.md").read_text()
    assert "## Batch schedule" in markdown and section["verdict"] in markdown
    assert "| schedule 32@0,128@1280 |" in markdown and "best fixed" in markdown
    assert 'id="schedule"' in (out / "report.html").read_text()
    (from_python,) = api.load("scheduled", storage=str(store.journal)).schedules()
    assert from_python["verdict"] == section["verdict"]

    again = study_here(monkeypatch, capsys, "run", str(path), cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "schedule trials" not in again.stdout  # nothing left to run
    assert len(ScheduleLedger.of(store.ledger("scheduled", fresh=True)).trials(cell)) == 3
    # An edited schedule is another schedule: trials of its own, the first one's kept
    edited = {**SCHEDULE, "learning_rate": 0.08, "seeds": 1}
    write_study(tmp_path, {**STUDY, SECTION: edited})
    third = study_here(monkeypatch, capsys, "run", str(path), cwd=tmp_path)
    assert third.returncode == 0, third.stderr[-3000:]
    stored = ScheduleLedger.of(store.ledger("scheduled", fresh=True)).schedules()
    assert [(c.digest == DIGEST, t.schedule.learning_rate, t.seeds) for c, t in stored] in (
        [(True, 0.05, 3), (False, 0.08, 1)],
        [(False, 0.08, 1), (True, 0.05, 3)],
    )
    fresh = ScheduleLedger.of(store.ledger("scheduled", fresh=True))
    assert sorted(len(fresh.trials(c)) for c, _ in stored) == [1, 3]

    store.ledger("scheduled", fresh=True).delete()  # the study's delete takes them along
    assert ScheduleLedger.of(store.ledger("scheduled", fresh=True)).strata() == []


def test_a_schedule_the_trainer_cannot_run_fails_before_anything_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = {**SCHEDULE, "stages": [{"from_examples": 0, "batch_size": 30}]}
    path = write_study(
        tmp_path,
        tiny_study(
            name="odd",
            **{SECTION: bad},
            search_space={"strategy": ["mirrored:4"], "batch_size": [32, 128]},
        ),
    )
    done = study_here(monkeypatch, capsys, "run", str(path), cwd=tmp_path)
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "batch_schedule.stages[0].batch_size must be divisible by the 4 replicas on mirrored:4 "
            "(got 30)"
        )
    )
    store = Store(tmp_path)
    assert not store.started or list_studies(store.storage()) == []  # nothing recorded
