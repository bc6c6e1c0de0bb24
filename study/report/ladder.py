"""A data ladder read from stored studies (`study ladder`, `study.fit_ladder`): each finished
study is a rung at its training-set size, answered by its model of every trial, and the laws in
the data size are fitted across them (`study.analysis.data_ladder`).

A rung's data size is the one given for it, else the training examples its trials recorded
(each trial stores a description of its data: ``dataset.train_rows``). Every rung is read as
`stored_report` reads a study (its target and hold rule; ``target`` replaces the metric and
threshold of all), with one accelerator count (the largest of the rungs' defaults unless
given) and one overhead. Errors name the data-model field: ``studies``, ``data_sizes``,
``target``, ``predict``.

Example::

    ladder = stored_ladder(["d5k", "d10k", "d20k"], storage="mlruns/optuna.journal")
    ladder_lines(ladder, [ladder.predict(40_000)])
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from study.analysis.data_ladder import DataLadder, LadderPrediction
from study.analysis.data_law import NAMES, QUANTITIES
from study.analysis.target_law import MAX_DISTANCE
from study.errors import FieldError
from study.report.formatting import percent

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from study.config.target import Target
    from study.ledger import Ledger

FINISHED = ("complete", "imported")
"""The states of a study that may be a rung."""


@dataclasses.dataclass(frozen=True)
class _Stored:
    """One rung's study as read from its ledger, before its answers."""

    name: str
    table: pd.DataFrame
    target: Target
    overhead: float
    data_size: float
    steps: int
    examples: int


def recorded_data_size(ledger: Ledger) -> int | None:
    """The training examples the study's trials recorded (their data description's
    ``train_rows``), None when none did.

    Raises:
        FieldError: on ``data_sizes``, when its trials recorded different sizes.
    """
    sizes = {
        t.result.dataset.train_rows
        for s in ledger.strata()
        for t in ledger.trials(s)
        if t.result is not None and t.result.dataset is not None
    }
    if len(sizes) > 1:
        raise FieldError(
            "data_sizes",
            detail=f"study {ledger.name!r}: its trials trained on different training-set sizes "
            f"({', '.join(f'{n:,}' for n in sorted(sizes))}); give its rung's size",
        )
    return sizes.pop() if sizes else None


def _read(ledger: Ledger, target: Target | None, data_size: float | None) -> _Stored:
    """One finished study of the ladder (see the module)."""
    from study.analysis.table import flatten_table
    from study.config.study import DEFAULT_OVERHEAD
    from study.report.stored import stored_config, stored_table, stored_target

    summary = ledger.summary()  # StudyNotFound for an unknown study
    name = ledger.name
    if summary.state not in FINISHED:
        raise FieldError(
            "studies",
            detail=f"study {name!r} is {summary.state} ({summary.trials_done} of "
            f"{summary.trials_total} trials): a rung must be a finished study; finish it "
            f"(study resume {name}) or leave it out",
        )
    record = ledger.require()
    config = stored_config(record, name)
    table = flatten_table(stored_table(ledger))
    goal = stored_target(record, config, table, target)
    if table.empty or goal.metric not in table.columns:
        raise FieldError(
            "studies", detail=f"study {name!r}: its trials never measured {goal.metric}"
        )
    size = data_size if data_size is not None else recorded_data_size(ledger)
    if size is None:
        raise FieldError(
            "data_sizes",
            detail=f"study {name!r} recorded no training-set size (its trials store no data "
            "description); give every rung's size, in the order of the studies",
        )
    overhead = DEFAULT_OVERHEAD if config is None else config.overhead
    runs = [(s.batch_size, t.result.steps_run) for s in ledger.strata() for t in ledger.trials(s)
            if t.result is not None]  # fmt: skip
    steps, examples = sum(n for _, n in runs), sum(b * n for b, n in runs)
    return _Stored(name, table, goal, overhead, float(size), steps, examples)


def stored_ladder(
    ledgers: Sequence[Ledger],
    *,
    data_sizes: Sequence[float] | None = None,
    target: Target | None = None,
    accelerators: int | None = None,
    confidence: float = 0.95,
) -> DataLadder:
    """The ladder of the finished studies in ``ledgers`` (see the module), each rung at its
    ``data_sizes`` entry (in the same order; default: the size its trials recorded).

    Raises:
        StudyNotFound: a study not in its storage.
        FieldError: on ``studies`` (fewer than two, one unfinished, two of one size), on
            ``data_sizes`` (a count that does not match, or a size neither given nor
            recorded), on ``target`` (rungs with different targets or overheads).
    """
    from study.analysis.answers import study_answers
    from study.analysis.data_ladder import fit_ladder
    from study.analysis.data_law import MIN_RUNGS, Rung
    from study.report.build import default_accelerators

    if len(ledgers) < MIN_RUNGS:
        raise FieldError(
            "studies",
            detail=f"a ladder needs at least {MIN_RUNGS} finished studies at different data "
            f"sizes (got {len(ledgers)}), e.g. study ladder d5k d10k d20k",
        )
    if data_sizes is not None and len(data_sizes) != len(ledgers):
        raise FieldError(
            "data_sizes",
            detail=f"give one data size per study, in their order ({len(ledgers)} studies, "
            f"{len(data_sizes)} sizes)",
        )
    sizes = list(data_sizes) if data_sizes is not None else [None] * len(ledgers)
    stored = [_read(ledger, target, size) for ledger, size in zip(ledgers, sizes, strict=True)]
    by_size: dict[float, str] = {}
    for s in stored:
        if s.data_size in by_size:
            raise FieldError(
                "studies",
                detail=f"studies {by_size[s.data_size]!r} and {s.name!r} both trained on "
                f"{s.data_size:,.0f} examples; each rung needs a data size of its own",
            )
        by_size[s.data_size] = s.name
    goals = {(s.target.metric, s.target.op, s.target.threshold) for s in stored}
    if len(goals) > 1:
        shown = "; ".join(f"{s.name}: {s.target.metric} {s.target.op} {s.target.threshold:g}"
                          for s in stored)  # fmt: skip
        raise FieldError(
            "target",
            detail=f"the rungs answer for different targets ({shown}); give one for all",
        )
    overheads = {s.overhead for s in stored}
    if len(overheads) > 1:
        raise FieldError(
            "target",
            detail=f"the rungs' study files set different overheads {sorted(overheads)}; a "
            "ladder compares critical batch sizes at one",
        )
    count = accelerators or max(default_accelerators(s.table) for s in stored)
    rungs = [
        Rung(
            s.name,
            s.data_size,
            study_answers(
                s.table, s.target, accelerators=count, confidence=confidence, overhead=s.overhead
            ),
            steps=s.steps,
            examples=s.examples,
        )
        for s in stored
    ]
    try:
        return fit_ladder(rungs, confidence=confidence, target=stored[0].target)
    except ValueError as exc:
        raise FieldError("studies", detail=str(exc)) from None


HEADERS = ("data size", "study", "training steps", *(NAMES[q] for q in QUANTITIES))


def rung_rows(ladder: DataLadder) -> list[list[str]]:
    """One row of cells per rung (`HEADERS`), smallest first."""
    rows = []
    for rung in ladder.rungs:
        cells = [f"{rung.data_size:,.0f}", rung.study, _count(rung.steps)]
        if not rung.ok:
            blank = [""] * (len(QUANTITIES) - 1)
            rows.append([*cells, f"no answer: {rung.answers.reason}", *blank])
            continue
        cells += [_cell(getattr(rung.answers, q)) for q in QUANTITIES]
        rows.append(cells)
    return rows


def cost_line(ladder: DataLadder) -> str | None:
    """``"The rungs trained 24,776 steps in all (9.2 million examples: steps times batch
    size), pruned trials included."``, None when a rung's cost is not known."""
    if any(r.steps is None or r.examples is None for r in ladder.rungs):
        return None
    steps = sum(r.steps or 0 for r in ladder.rungs)
    examples = sum(r.examples or 0 for r in ladder.rungs)
    return (
        f"The rungs trained {steps:,} steps in all ({examples / 1e6:.3g} million examples: steps "
        "times batch size), pruned trials included."
    )


def law_line(ladder: DataLadder, quantity: str) -> str:
    """``"B_noise ~ D^0.41 (0.22 to 0.60): rises with the data (3 rungs, residual scale 1, own
    scatter 0)"``, or why there is no law."""
    law = ladder.laws[quantity]
    if not law.ok:
        return law.text()
    return (
        f"{law.text()}: {law.words()} ({len(law.sizes)} rungs, residual scale {law.scale:.2g}, "
        f"own scatter {law.tau:.2g})"
    )


def ladder_lines(ladder: DataLadder, predictions: Sequence[LadderPrediction] = ()) -> list[str]:
    """What `study ladder` prints: the rungs as a table, the laws, and each prediction."""
    target = _target_text(ladder)
    level = percent(ladder.confidence)
    lines = [
        f"Ladder of {len(ladder.rungs)} studies ({target}; batch sizes for "
        f"{ladder.accelerators} accelerators; {level} intervals):",
        *_aligned([list(HEADERS), *rung_rows(ladder)]),
        *([f"  {cost}"] if (cost := cost_line(ladder)) else []),
        "",
        "Laws in the training-set size D (weighted least squares in log-log; exponent with its "
        f"{level} interval):",
        *(f"  {law_line(ladder, q)}" for q in QUANTITIES),
    ]
    if predictions:
        lines += [
            "",
            f"Predictions ({level} intervals for the answer at that size itself: the laws' "
            "uncertainty and the rungs' own scatter; a study run there measures it with its own "
            f"noise on top; trusted up to {MAX_DISTANCE:g} fitted range of log D beyond the rungs):",
        ]
        lines += [f"  {p.line()}" for p in predictions]
    return lines


def ladder_dict(ladder: DataLadder, predictions: Sequence[LadderPrediction] = ()) -> dict[str, Any]:
    """The ladder as JSON: ``rungs`` (one object each), ``laws`` (by quantity: ``ok``,
    ``reason``, ``exponent``, ``scale``, ``tau``, ``rungs``, ``text``) and ``predictions``."""
    frame = ladder.frame()
    rungs = [
        {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        for row in frame.to_dict(orient="records")
    ]
    laws = {}
    for q in QUANTITIES:
        law = ladder.laws[q]
        laws[q] = {
            "name": law.name,
            "ok": law.ok,
            "reason": law.reason,
            "text": law.text(),
            "words": law.words(),
            "exponent": None if law.exponent is None else law.exponent.to_dict(),
            "coefficients": list(law.coefficients) if law.ok else None,
            "scale": law.scale if law.ok else None,
            "tau": law.tau if law.ok else None,
            "rungs": len(law.sizes),
        }
    return {
        "target": _target_text(ladder),
        "accelerators": ladder.accelerators,
        "confidence": ladder.confidence,
        "max_distance": MAX_DISTANCE,
        "rungs": rungs,
        "laws": laws,
        "predictions": [p.to_dict() for p in predictions],
    }


def _target_text(ladder: DataLadder) -> str:
    t = ladder.target
    return "the rungs' target" if t is None else f"{t.metric} {t.op} {t.threshold:g}"


def _count(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def _cell(answer: Any) -> str:
    return "" if answer is None else answer.text()


def _aligned(rows: list[list[str]]) -> list[str]:
    """Rows as columns padded to their widths, two spaces in, two between."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
