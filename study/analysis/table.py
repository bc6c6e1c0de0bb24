"""The standard measurement table: one row per evaluation of a trial.

Every analysis function reads this one table (the layout of Google's batch_science data release,
indexed by ``(batch_size, trial, step)``). Columns:

===================  =======  =================================================================
column               type     meaning
===================  =======  =================================================================
``study``            str      study name (one study covers many batch sizes and strategies)
``trial``            int      trial number within the study
``batch_size``       int      global batch size (summed over replicas)
``strategy``         str      distribution strategy, e.g. ``"default"``, ``"mirrored:2"``
``replicas``         int      number of replicas the strategy ran on
``tuner``            str      the search backend that proposed the trial
``state``            str      ``reached``, ``not_reached``, ``diverged``, ``pruned``, ``failed``,
                              ``infeasible`` or ``running`` (see `study.results.TrialState`)
``learning_rate``    float    base learning rate
``hp.<name>``        any      every other metaparameter, e.g. ``hp.momentum``
``step``             int      training steps taken when this evaluation ran
``examples``         int      training examples processed by then (``step * batch_size``)
``train_seconds``    float    training time so far, evaluation excluded
``train_loss``       float    training loss at this evaluation
``val_*``, ``val/*`` float    validation metrics, e.g. ``val_accuracy`` or
                              ``val/classification_error``
===================  =======  =================================================================

Optional columns: ``stratum_trial`` (the trial's number inside its stratum), ``seed`` (the seed
a confirmation trial ran under; NaN for the study's seed, see `study.analysis.seeds`) and
``origin`` (how the tuner chose the point: ``sampler``, ``transfer``, ``retry``, ``confirm``).

Example::

    df = index_table(df)          # index (batch_size, trial, step), sorted
    validate_table(df)            # ValueError naming any missing column
    export_table(df, "runs.parquet")
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

STUDY = "study"
TRIAL = "trial"
BATCH_SIZE = "batch_size"
STRATEGY = "strategy"
REPLICAS = "replicas"
TUNER = "tuner"
STATE = "state"
LEARNING_RATE = "learning_rate"
STEP = "step"
EXAMPLES = "examples"
TRAIN_SECONDS = "train_seconds"
TRAIN_LOSS = "train_loss"
HP_PREFIX = "hp."
STRATUM_TRIAL = "stratum_trial"
"""Optional: a trial's number inside its stratum (as in MLflow run names ``b128/default#3``)."""
SEED = "seed"
"""Optional: the seed a trial ran under when not the study's (NaN: the study's seed)."""
ORIGIN = "origin"
"""Optional: how a trial's point was chosen (``confirm`` for a confirmation trial)."""

INDEX = (BATCH_SIZE, TRIAL, STEP)
"""The index levels set by `index_table`."""

COLUMNS = (
    STUDY,
    TRIAL,
    BATCH_SIZE,
    STRATEGY,
    REPLICAS,
    TUNER,
    STATE,
    LEARNING_RATE,
    STEP,
    EXAMPLES,
    TRAIN_SECONDS,
    TRAIN_LOSS,
)
"""Every fixed column of the standard table (``hp.*`` and metric columns come on top)."""

_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def hp_columns(df: pd.DataFrame) -> list[str]:
    """The metaparameter columns, e.g. ``["hp.momentum"]``."""
    return [c for c in df.columns if str(c).startswith(HP_PREFIX)]


def metric_columns(df: pd.DataFrame) -> list[str]:
    """The numeric validation metric columns: numeric, neither fixed nor ``hp.*``.

    Example: a table with ``train_loss``, ``val_loss`` and ``val/classification_error`` gives
    ``["val_loss", "val/classification_error"]``.
    """
    fixed = set(COLUMNS) | {STRATUM_TRIAL, SEED}
    return [
        c
        for c in df.columns
        if c not in fixed
        and not str(c).startswith(HP_PREFIX)
        and pd.api.types.is_numeric_dtype(df[c])
        and not pd.api.types.is_bool_dtype(df[c])
    ]


def validate_table(
    df: pd.DataFrame, columns: Iterable[str] = COLUMNS, *, metrics: Iterable[str] = ()
) -> None:
    """Check that ``df`` has ``columns`` and ``metrics`` (as columns or index levels).

    Raises:
        ValueError: naming every missing column, e.g. ``measurement table is missing columns
            'step', 'val_accuracy' (it has: batch_size, trial)``.
    """
    present = set(df.columns) | {n for n in df.index.names if n is not None}
    wanted = list(dict.fromkeys([*columns, *metrics]))
    missing = [c for c in wanted if c not in present]
    if missing:
        have = ", ".join(str(c) for c in [*df.index.names, *df.columns] if c is not None)
        raise ValueError(
            "measurement table is missing columns "
            + ", ".join(repr(c) for c in missing)
            + f" (it has: {have or 'nothing'})"
        )


def flatten_table(df: pd.DataFrame) -> pd.DataFrame:
    """Undo `index_table`: named index levels become columns again (a no-op on a flat table)."""
    names = [n for n in df.index.names if n is not None]
    return df.reset_index(level=names) if names else df


def index_table(df: pd.DataFrame) -> pd.DataFrame:
    """Index the table by ``(batch_size, trial, step)``, sorted.

    Example: ``index_table(df).loc[(128, 3)]`` is the curve of trial 3 at batch size 128.
    """
    flat = flatten_table(df)
    validate_table(flat, INDEX)
    return flat.set_index(list(INDEX)).sort_index()


def to_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """Write the table (flat, index levels as columns) to CSV; returns the path."""
    path = Path(path)
    flatten_table(df).to_csv(path, index=False)
    return path


def to_parquet(df: pd.DataFrame, path: str | Path) -> Path:
    """Write the table (flat, index levels as columns) to Parquet with pyarrow."""
    path = Path(path)
    flatten_table(df).to_parquet(path, engine="pyarrow", index=False)
    return path


def export_table(df: pd.DataFrame, path: str | Path) -> Path:
    """Write the table as CSV (``.csv``) or Parquet (``.parquet``, ``.pq``), chosen by suffix.

    Raises:
        ValueError: for any other suffix.
    """
    path = Path(path)
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(
            f"cannot export the table to {str(path)!r}: the suffix must be one of "
            f"{', '.join(_SUFFIXES)} (got {path.suffix or 'none'!r})"
        )
    return to_csv(df, path) if kind == "csv" else to_parquet(df, path)


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a table written by `export_table` (flat; call `index_table` to index it)."""
    path = Path(path)
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(
            f"cannot read a table from {str(path)!r}: the suffix must be one of "
            f"{', '.join(_SUFFIXES)} (got {path.suffix or 'none'!r})"
        )
    return pd.read_csv(path) if kind == "csv" else pd.read_parquet(path, engine="pyarrow")
