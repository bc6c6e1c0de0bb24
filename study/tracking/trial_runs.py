"""What a trial's MLflow run holds, from the ledger's trial: its key, params and tags, and the
whole run of a trial that started and finished before its run was opened.

A trial's run is keyed by the tag ``study.trial`` (`trial_key`); its params are the study's
bookkeeping and the proposed values (`trial_params`), its tags name it (`trial_tags`). The
tracker (`study.tracking.study_tracker`) opens a running trial's run when its background job
runs; a trial that has finished by then (`Pending` with its `Finish`) is written whole instead
(`whole_run`): the run `start_trial` would have opened, with what `finish_trial` would have
logged into it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from study.config.trial import TrialSpec
from study.ledger import LedgerTrial
from study.results import TrialResult
from study.tracking.dataset_input import dataset_input
from study.tracking.descriptions import trial_run_name
from study.tracking.mlflow_logger import trial_content
from study.tracking.run_rows import NewRun

TRIAL_ROLE = "trial"
#: The tag nesting a run under its parent.
PARENT_TAG = "mlflow.parentRunId"
#: The tag holding a run's name.
NAME_TAG = "mlflow.runName"


def trial_key(study: str, trial: LedgerTrial) -> str:
    """The key of a trial's run (tag ``study.trial``), e.g. ``quickstart/b128/default#3``."""
    return f"{study}/{trial.stratum}#{trial.number}"


def trial_params(trial: LedgerTrial) -> dict[str, Any]:
    """The study bookkeeping logged with a trial, and its proposed values as ``hp.*``."""
    return {
        "tuner": trial.tuner,
        "origin": trial.origin,
        "trial_number": trial.number,
        "stratum": str(trial.stratum),
        **{f"hp.{k}": v for k, v in trial.params.items()},
    }


def trial_tags(trial: LedgerTrial, result: TrialResult | None = None) -> dict[str, str]:
    """A trial run's tags; its name (`trial_run_name`) says how ``result`` ended (running
    without one)."""
    return {
        NAME_TAG: trial_run_name(trial, result),
        "tuner": str(trial.tuner),
        "stratum": str(trial.stratum),
        "study.owner": str(trial.owner),
    }


@dataclass(frozen=True)
class Finish:
    """What `StudyTracker.finish_trial` was given for a trial, and when (ms since the epoch)."""

    spec: TrialSpec
    result: TrialResult
    params: Mapping[str, Any]
    tags: Mapping[str, str]
    end_ms: int


@dataclass(frozen=True)
class Pending:
    """A trial `StudyTracker.start_trial` was given and not logged yet: its run's tags, when
    (ms since the epoch), and how it finished once it has."""

    tags: Mapping[str, str]
    start_ms: int
    finish: Finish | None = None


def whole_run(pending: Pending, parent_run_id: str | None) -> NewRun:
    """The whole run of a started and finished trial (nested under ``parent_run_id``), as
    `start_trial`'s and `finish_trial`'s jobs would have left it: the start's tags updated by
    the finish's, named as it ended, started and ended when they were called."""
    finish = pending.finish
    if finish is None:
        raise ValueError("whole_run: the trial has not finished")
    content = trial_content(
        finish.spec, finish.result, extra_params=finish.params, tags=finish.tags
    )
    tags = {**pending.tags, **content.tags}
    if parent_run_id:
        tags[PARENT_TAG] = parent_run_id
    data = finish.result.dataset
    return NewRun(
        name=tags[NAME_TAG],
        start_ms=pending.start_ms,
        end_ms=max(finish.end_ms, pending.start_ms),
        status=content.status,
        tags=tags,
        params=content.params,
        metrics=content.metrics,
        datasets=(dataset_input(data),) if data is not None else (),
    )


def now_ms() -> int:
    """Milliseconds since the epoch, as MLflow stamps runs."""
    return int(time.time() * 1000)
