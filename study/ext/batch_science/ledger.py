"""Shallue et al.'s released measurements as a study in the ledger.

Each workload (dataset, model, optimizer) becomes one study: a `StudyRecord` of kind
``imported`` (source, dataset, model, optimizer, trial count) and one stratum
``b{B}/default`` per batch size whose trials are the released trials, finished, with their
curves, so `study ls`, `study status` and `study report --target ...` read it like any other
study. The release holds no target: a trial is ``not_reached`` (COMPLETE, INCOMPLETE) or
``diverged`` (INFEASIBLE), and ``study report`` re-derives reached/not reached from the curves
for the target it is given.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from study.analysis.table import EXAMPLES, STEP, TRAIN_SECONDS
from study.config.space import Stratum
from study.ext.batch_science.release import ReleaseStudy, ReleaseWorkload, curve_rows
from study.ledger import Ledger, LedgerTrial, StudyRecord
from study.results import Measurement, TrialResult, TrialState

#: The tuner and strategy imported trials are recorded with.
TUNER = "batch_science"
STRATEGY = "default"


def import_workload(ledger: Ledger, workload: ReleaseWorkload, *, source: str) -> dict[str, int]:
    """Write one workload into ``ledger`` as its study; return trial counts per status.

    If anything fails half-way (e.g. a measurements file that does not parse), the study is
    deleted again, so the storage is as before.
    """
    name = ledger.name
    counts: dict[str, int] = {}
    try:
        ledger.create(
            StudyRecord(
                name=name,
                kind="imported",
                source=source,
                dataset=workload.dataset,
                model=workload.model,
                optimizer=workload.optimizer,
                trials_total=workload.trials_total,
                created=time.time(),
            )
        )
        for release_study in workload.studies:
            stratum = Stratum(release_study.batch_size, STRATEGY)
            trials = ledger_trials(release_study, tuner=TUNER, strategy=STRATEGY)
            ledger.import_trials(stratum, trials)
            ledger.tuning.set_stratum_source(stratum, str(release_study.path))
            for trial in trials:
                counts[trial.status.value] = counts.get(trial.status.value, 0) + 1
    except BaseException:
        ledger.delete()
        raise
    return counts


def ledger_trials(study: ReleaseStudy, *, tuner: str, strategy: str) -> list[LedgerTrial]:
    """The trials of a released study as finished ledger records.

    The release holds no target: a trial is ``not_reached`` (COMPLETE, INCOMPLETE) or
    ``diverged`` (INFEASIBLE), and ``study report --target`` re-derives reached/not reached
    from the curves. ``extras`` keep the release's status and trial id.
    """
    stratum = Stratum(study.batch_size, strategy)
    out = []
    for number, trial in enumerate(study.trials):
        rows = curve_rows(trial, study.batch_size)
        curve = tuple(_measurement(row) for row in rows)
        result = TrialResult(
            state=TrialState(trial.state),
            steps_run=curve[-1].step if curve else 0,
            examples_run=curve[-1].examples if curve else 0,
            curve=curve,
        )
        out.append(
            LedgerTrial(
                stratum=stratum,
                number=number,
                status=result.state,
                params=dict(trial.params),
                result=result,
                tuner=tuner,
                extras={"source_status": trial.status, "source_trial": trial.trial_id},
            )
        )
    return out


def _measurement(row: Mapping[str, Any]) -> Measurement:
    fixed = (STEP, EXAMPLES, TRAIN_SECONDS)
    return Measurement(
        step=int(row[STEP]),
        examples=int(row[EXAMPLES]),
        train_seconds=math.nan,
        train_loss=math.nan,
        metrics={k: math.nan if v is None else v for k, v in row.items() if k not in fixed},
    )
