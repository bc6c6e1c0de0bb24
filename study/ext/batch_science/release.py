"""Reading Shallue et al.'s (2018) data release: the layout of Google's batch_science data.

The release is a tree of *studies* (one metaparameter search per workload and batch size)::

    dataset/model/optimizer/batch_size/study.json
    dataset/model/optimizer/batch_size/trial_id/metadata.json
    dataset/model/optimizer/batch_size/trial_id/measurements.csv

``study.json`` holds at least ``dataset``, ``model``, ``optimizer`` and ``batch_size``;
``metadata.json`` holds ``trial_id``, ``status`` (``COMPLETE``, ``INCOMPLETE`` or
``INFEASIBLE``, i.e. diverged) and the metaparameters, under ``"parameters"`` (as in the
release) or ``"hparams"``, or as further top-level numbers; ``measurements.csv`` has a ``step``
column and one column per metric, e.g. ``val/classification_error``.

`scan_release` finds and checks every study below a directory (reading only the JSON files and
the CSV headers); `read_measurements` reads one trial's curve; `workload_table` turns a whole
workload into the standard measurement table (see `study.analysis.table`), so the release can
be analysed without importing it into a ledger (`study.ext.batch_science.ledger` imports it).

Example::

    workloads = scan_release("batch_science/mnist/simple_cnn")
    df = workload_table(workloads[0])
    steps_to_result(df, Target.parse("val/classification_error<0.01"))
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from study.analysis.table import (
    BATCH_SIZE,
    EXAMPLES,
    HP_PREFIX,
    LEARNING_RATE,
    REPLICAS,
    STATE,
    STEP,
    STRATEGY,
    STUDY,
    TRAIN_LOSS,
    TRAIN_SECONDS,
    TRIAL,
    TUNER,
)
from study.errors import UsageError

STUDY_FILE = "study.json"
TRIAL_FILE = "metadata.json"
MEASUREMENTS_FILE = "measurements.csv"

#: Trial statuses of the release and the state each maps to in a study's ledger.
STATUSES = {"COMPLETE": "not_reached", "INCOMPLETE": "not_reached", "INFEASIBLE": "diverged"}
_WORKLOAD_KEYS = ("dataset", "model", "optimizer")
_NOT_PARAMS = {"trial_id", "status", "steps", "parameters", "hparams"}
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class LayoutError(UsageError):
    """A directory that is not in the release layout: names the file and the problem."""


@dataclass(frozen=True)
class ReleaseTrial:
    """One trial of a released study: its id, status, metaparameters and where its curve is."""

    trial_id: int
    status: str
    params: Mapping[str, Any]
    path: Path

    @property
    def measurements(self) -> Path:
        return self.path / MEASUREMENTS_FILE

    @property
    def state(self) -> str:
        """The ledger state: ``not_reached`` (targets apply at report time) or ``diverged``."""
        return STATUSES[self.status]


@dataclass(frozen=True)
class ReleaseStudy:
    """One released study: a workload at one batch size, with its trials (sorted by id)."""

    path: Path
    batch_size: int
    metadata: Mapping[str, Any]
    trials: tuple[ReleaseTrial, ...]


@dataclass(frozen=True)
class ReleaseWorkload:
    """A (dataset, model, optimizer) triple with one study per batch size (sorted)."""

    dataset: str
    model: str
    optimizer: str
    path: Path
    studies: tuple[ReleaseStudy, ...]

    @property
    def name(self) -> str:
        """``dataset-model-optimizer`` reduced to ``[A-Za-z0-9_.-]``."""
        return sanitize_name("-".join((self.dataset, self.model, self.optimizer)))

    @property
    def trials_total(self) -> int:
        return sum(len(s.trials) for s in self.studies)


def sanitize_name(text: str) -> str:
    """A study name from any text: runs of other characters become ``_``.

    Example: ``sanitize_name("imagenet/resnet 50")`` is ``"imagenet_resnet_50"``.
    """
    name = _NAME.sub("_", str(text)).strip("_")
    return name or "imported"


def scan_release(root: str | Path) -> list[ReleaseWorkload]:
    """Find and check every study below ``root`` (a workload directory or any parent).

    Reads every ``study.json`` and ``metadata.json`` and the header of every
    ``measurements.csv``, so a bad file is found before anything is imported. Studies are
    grouped into workloads by their parent directory.

    Raises:
        LayoutError: ``root`` is missing or not a directory; no ``study.json`` below it; a JSON
            file that does not parse or lacks a key; a trial directory without
            ``metadata.json``; an unknown status; a ``measurements.csv`` without a ``step``
            column; two studies of one workload with the same batch size.
    """
    root = Path(root)
    if not root.exists():
        raise LayoutError(f"{root}: no such directory")
    if not root.is_dir():
        raise LayoutError(f"{root}: not a directory (give the directory holding the studies)")
    files = sorted(root.rglob(STUDY_FILE))
    if not files:
        raise LayoutError(
            f"{root}: no {STUDY_FILE} found below it; expected the layout "
            "dataset/model/optimizer/batch_size/study.json with trial_id/metadata.json and "
            "trial_id/measurements.csv"
        )
    groups: dict[Path, list[ReleaseStudy]] = {}
    for file in files:
        study = read_study(file.parent)
        groups.setdefault(file.parent.parent, []).append(study)
    return [_workload(path, studies) for path, studies in sorted(groups.items())]


def _workload(path: Path, studies: list[ReleaseStudy]) -> ReleaseWorkload:
    studies.sort(key=lambda s: s.batch_size)
    first = studies[0]
    for study in studies[1:]:
        for key in _WORKLOAD_KEYS:
            if str(study.metadata[key]) != str(first.metadata[key]):
                raise LayoutError(
                    f"{study.path / STUDY_FILE}: {key} is {study.metadata[key]!r} but "
                    f"{first.path / STUDY_FILE} in the same workload directory says "
                    f"{first.metadata[key]!r}"
                )
    for a, b in itertools.pairwise(studies):
        if a.batch_size == b.batch_size:
            raise LayoutError(
                f"{b.path / STUDY_FILE}: batch size {b.batch_size} is also the batch size of "
                f"{a.path / STUDY_FILE}"
            )
    return ReleaseWorkload(
        dataset=str(first.metadata["dataset"]),
        model=str(first.metadata["model"]),
        optimizer=str(first.metadata["optimizer"]),
        path=path,
        studies=tuple(studies),
    )


def read_study(path: str | Path) -> ReleaseStudy:
    """Read ``path/study.json`` and every integer-named trial directory below ``path``.

    Raises:
        LayoutError: see `scan_release`.
    """
    path = Path(path)
    file = path / STUDY_FILE
    metadata = _read_json(file)
    missing = [k for k in (*_WORKLOAD_KEYS, "batch_size") if k not in metadata]
    if missing:
        raise LayoutError(
            f"{file}: missing key(s) {', '.join(missing)} (a study.json names the dataset, "
            "model, optimizer and batch_size)"
        )
    batch_size = _positive_int(metadata["batch_size"])
    if batch_size is None:
        raise LayoutError(
            f"{file}: batch_size must be a positive integer (got {metadata['batch_size']!r})"
        )
    dirs = sorted(
        (p for p in path.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)
    )
    trials = tuple(read_trial(d) for d in dirs)
    return ReleaseStudy(path=path, batch_size=batch_size, metadata=metadata, trials=trials)


def read_trial(path: str | Path) -> ReleaseTrial:
    """Read ``path/metadata.json`` and check the header of ``path/measurements.csv``.

    The metaparameters are ``metadata["parameters"]`` or ``metadata["hparams"]`` when present,
    else every other top-level number (``trial_id``, ``status``, ``steps`` and keys starting with
    ``_`` are not metaparameters). A missing ``measurements.csv`` means an empty curve.

    Raises:
        LayoutError: see `scan_release`.
    """
    path = Path(path)
    file = path / TRIAL_FILE
    if not file.is_file():
        raise LayoutError(f"{file}: missing (every trial directory holds a metadata.json)")
    metadata = _read_json(file)
    status = metadata.get("status")
    if status not in STATUSES:
        raise LayoutError(f"{file}: status must be one of {', '.join(STATUSES)} (got {status!r})")
    trial_id = _positive_int(metadata.get("trial_id", path.name), allow_zero=True)
    if trial_id is None:
        raise LayoutError(
            f"{file}: trial_id must be a non-negative integer (got {metadata.get('trial_id')!r})"
        )
    params = _params(file, metadata)
    _check_header(path / MEASUREMENTS_FILE)
    return ReleaseTrial(trial_id=trial_id, status=status, params=params, path=path)


def read_measurements(trial: ReleaseTrial) -> pd.DataFrame:
    """One trial's curve: ``step`` and every metric column as numbers, sorted by step.

    Values that are not numbers become NaN; a missing or empty file gives no rows.

    Raises:
        LayoutError: the file does not parse as CSV or has no ``step`` column.
    """
    file = trial.measurements
    if not file.is_file() or file.stat().st_size == 0:
        return pd.DataFrame({STEP: pd.Series(dtype="int64")})
    try:
        df = pd.read_csv(file)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise LayoutError(f"{file}: not a readable CSV file ({_first_line(exc)})") from None
    if STEP not in df.columns:
        raise LayoutError(f"{file}: no 'step' column (columns: {', '.join(map(str, df.columns))})")
    df = df.apply(pd.to_numeric, errors="coerce")
    df = df[df[STEP].notna()].astype({STEP: "int64"})
    return df.sort_values(STEP, kind="stable").reset_index(drop=True)


def curve_rows(trial: ReleaseTrial, batch_size: int) -> list[dict[str, float | int | None]]:
    """The curve as ledger rows: ``step``, ``examples = step * batch_size``, ``train_seconds``
    (None: the release holds no timings) and every metric (None for NaN)."""
    df = read_measurements(trial)
    metrics = [c for c in df.columns if c != STEP]
    rows = []
    for record in df.to_dict("records"):
        step = int(record[STEP])
        row: dict[str, float | int | None] = {
            STEP: step,
            EXAMPLES: step * batch_size,
            TRAIN_SECONDS: None,
        }
        for metric in metrics:
            value = float(record[metric])
            row[str(metric)] = value if math.isfinite(value) else None
        rows.append(row)
    return rows


def workload_table(workload: ReleaseWorkload, *, study: str | None = None) -> pd.DataFrame:
    """The standard measurement table of a released workload (flat, one row per evaluation).

    ``trial`` numbers run over the whole workload (in batch-size, then trial-id order);
    ``state`` is ``not_reached`` or ``diverged`` (targets are applied by the measures);
    ``train_seconds`` is NaN. A trial without measurements gets one row at step 0.
    """
    name = study or workload.name
    rows: list[dict[str, Any]] = []
    number = 0
    for s in workload.studies:
        for t in s.trials:
            base = {
                STUDY: name,
                TRIAL: number,
                BATCH_SIZE: s.batch_size,
                STRATEGY: "default",
                REPLICAS: 1,
                TUNER: "batch_science",
                STATE: t.state,
                LEARNING_RATE: float(t.params.get(LEARNING_RATE, math.nan)),
                **{f"{HP_PREFIX}{k}": v for k, v in t.params.items() if k != LEARNING_RATE},
            }
            curve = curve_rows(t, s.batch_size) or [{STEP: 0, EXAMPLES: 0, TRAIN_SECONDS: None}]
            for row in curve:
                values = {k: (math.nan if v is None else v) for k, v in row.items()}
                rows.append({**base, TRAIN_LOSS: math.nan, **values})
            number += 1
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------- helpers


def _read_json(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LayoutError(
            f"{file}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LayoutError(f"{file}: cannot read it ({_first_line(exc)})") from None
    if not isinstance(data, dict):
        raise LayoutError(f"{file}: must hold a JSON object (got {type(data).__name__})")
    return data


def _params(file: Path, metadata: Mapping[str, Any]) -> dict[str, Any]:
    for key in ("parameters", "hparams"):
        if key in metadata:
            nested = metadata[key]
            if not isinstance(nested, dict):
                raise LayoutError(
                    f"{file}: {key!r} must be a JSON object of metaparameters "
                    f"(got {type(nested).__name__})"
                )
            return {str(k): v for k, v in nested.items() if _is_param_value(v)}
    return {
        str(k): v
        for k, v in metadata.items()
        if k not in _NOT_PARAMS and not str(k).startswith("_") and _is_number(v)
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_param_value(value: Any) -> bool:
    """Numbers (finite), strings and booleans; lists, objects and null are left out."""
    return _is_number(value) or isinstance(value, (str, bool))


def _check_header(file: Path) -> None:
    if not file.is_file():
        return
    try:
        with file.open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), None)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise LayoutError(f"{file}: not a readable CSV file ({_first_line(exc)})") from None
    if header is None:
        return
    if STEP not in header:
        raise LayoutError(f"{file}: no 'step' column (columns: {', '.join(header) or 'none'})")


def _positive_int(value: Any, *, allow_zero: bool = False) -> int | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if isinstance(value, bool) or not number.is_integer():
        return None
    if number < 0 or (number == 0 and not allow_zero):
        return None
    return int(number)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
