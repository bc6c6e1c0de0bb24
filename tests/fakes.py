"""Fakes shared by the tests: trial specs, synthetic curves, and ledgers written through the
ledger API (never by hand into Optuna)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from study.config.space import Stratum
from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec, TrialSettings, TrialSpec
from study.ledger import Ledger, LedgerTrial, StudyRecord
from study.ledger.notes import Pilot
from study.results import Measurement, TrialResult, TrialState

#: A target no tabular trial meets (accuracy is at most 1), so trials run their whole budget.
UNREACHABLE = Target.parse("val_accuracy>=1.01")


#: The names of the `TrialSettings` fields (``seed``, ``budget``, ``noise_scale``, ...).
SETTINGS = tuple(f.name for f in dataclasses.fields(TrialSettings))


#: A pilot as `study noise-scale` stores it: its last interval has no upper end.
PILOT = Pilot(
    batch_size=32,
    strategy="default",
    learning_rate=0.1,
    seed=0,
    steps_run=480,
    target="val_accuracy>=0.9",
    at_step=480,
    b_simple=25.0,
    b_simple_low=18.0,
    b_simple_high=math.nan,
    curve=((400, 24.0, math.nan, math.nan), (480, 25.0, 18.0, math.nan)),
)


def spec_of(**fields: Any) -> TrialSpec:
    """A `TrialSpec` from flat fields: the settings' (``seed=3``, ``budget=...``) go into its
    `TrialSettings`, the others are the spec's own."""
    settings = {k: fields.pop(k) for k in SETTINGS if k in fields}
    return TrialSpec(**fields, settings=TrialSettings(**settings))


def tabular_spec(**changes: Any) -> TrialSpec:
    """A 30-step trial of the tabular workload (2,000 rows), evaluated every 10 steps; flat
    ``changes`` as `spec_of` takes them."""
    fields: dict[str, Any] = {
        "workload": "tabular",
        "workload_options": {"rows": 2000},
        "batch_size": 64,
        "optimizer": OptimizerSpec(name="nesterov", learning_rate=0.1),
        "target": UNREACHABLE,
        "budget": Budget(max_steps=30),
        "cadence": EvalCadence(kind="fixed", every=10),
        "strategy": "default",
    }
    fields.update(changes)
    return spec_of(**fields)


def rising_curve(
    batch: int, needed: float, seconds_per_step: float = 0.001, ratio: float = 1.1
) -> tuple[Measurement, ...]:
    """Validation accuracy rising linearly from 0.1 to 0.6 at ``needed`` steps (capped at 0.9),
    evaluated on a geometric grid up to ``2 * needed``."""
    rows, step = [], 0
    while step <= 2 * needed:
        acc = min(0.9, 0.1 + 0.5 * step / needed)
        rows.append(
            Measurement(
                step=step,
                examples=step * batch,
                train_seconds=step * seconds_per_step,
                train_loss=2 * (1 - acc),
                metrics={"val_accuracy": acc, "val_loss": 2.2 * (1 - acc)},
            )
        )
        step = max(step + 1, math.ceil(step * ratio))
    return tuple(rows)


def finished_trial(
    stratum: Stratum,
    number: int,
    learning_rate: float,
    curve: Sequence[Measurement],
    target: Target,
    *,
    tuner: str = "optuna",
    replicas: int = 1,
) -> LedgerTrial:
    """A trial that ran the whole ``curve``: ``reached`` at the first evaluation meeting
    ``target``, else ``not_reached``."""
    hit = next((m for m in curve if target.met_by(m.metrics)), None)
    last = curve[-1]
    result = TrialResult(
        state=TrialState.REACHED if hit else TrialState.NOT_REACHED,
        steps_run=last.step,
        examples_run=last.examples,
        train_seconds=last.train_seconds,
        steps_to_target=hit.step if hit else None,
        examples_to_target=hit.examples if hit else None,
        seconds_to_target=hit.train_seconds if hit else None,
        curve=tuple(curve),
        environment={"replicas": replicas},
    )
    return LedgerTrial(
        stratum=stratum,
        number=number,
        status=result.state,
        params={"learning_rate": learning_rate},
        result=result,
        tuner=tuner,
    )


def write_ledger(
    ledger: Ledger, record: StudyRecord, trials: Iterable[LedgerTrial]
) -> list[LedgerTrial]:
    """Create the study and store ``trials`` (grouped by stratum) through the ledger API;
    return what the ledger holds."""
    ledger.create(record)
    by_stratum: dict[Stratum, list[LedgerTrial]] = {}
    for trial in trials:
        by_stratum.setdefault(trial.stratum, []).append(trial)
    for stratum, group in by_stratum.items():
        ledger.import_trials(stratum, group)
    return [t for stratum in by_stratum for t in ledger.trials(stratum)]


class FakeClock:
    """A clock for the ledger (`study.ledger.clock.Clock`) that moves only when told to:
    ``advance(seconds)``. It starts at the wall clock's now, in whole seconds (so that
    ``start + 60.0 - start`` is exactly 60), keeping times Optuna stamps itself (a trial's
    start) comparable."""

    def __init__(self, start: float | None = None) -> None:
        import time

        self._now = float(math.floor(time.time())) if start is None else start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds


#: The tiny study of `write_tiny_ledger`.
TINY = "tiny"
TINY_BATCH_SIZES = (8, 16, 32, 64, 128, 256)
TINY_STUDY_YAML = f"""\
name: {TINY}
workload: mnist1d
target: "val_accuracy>=0.6"
budget: {{max_steps: 4000}}
trials_per_stratum: 3
search_space:
  batch_size: {list(TINY_BATCH_SIZES)}
  learning_rate: {{low: 1.0e-3, high: 1.0, scale: log}}
"""


def write_tiny_ledger(journal: Path, **record: Any) -> None:
    """A finished study: 6 batch sizes x 3 learning rates, S(B) = 100 (1 + 64 / B); ``record``
    changes its `StudyRecord`."""
    target = Target.parse("val_accuracy>=0.6")
    trials = []
    for batch in TINY_BATCH_SIZES:
        best = 0.01 * (batch / 8) ** 0.5
        for number, factor in enumerate((1 / 3, 1.0, 3.0)):
            needed = 100 * (1 + 64 / batch) * (1 + math.log(factor) ** 2)
            curve = rising_curve(batch, needed, 0.001 * (1 + batch / 64))
            trials.append(
                finished_trial(Stratum(batch, "default"), number, best * factor, curve, target)
            )
    fields = {
        "config_text": TINY_STUDY_YAML,
        "config_source": "tiny.yaml",
        "trials_total": 18,
        **record,
    }
    write_ledger(Ledger.open(str(journal), TINY), StudyRecord(TINY, **fields), trials)
