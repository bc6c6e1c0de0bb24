"""Errors in the command line's words: the flag that sets each field of the data model.

The layers below raise `FieldError` on a field (``batch_size``, ``workload_options.path``,
``model``, ``storage``); the CLI names it by its flag. Workload options are study-file keys
under ``workload_options``; the csv workload's file and columns and the sample count have
flags of their own, every other option is ``--workload-option KEY``::

    flag_of("optimizer.learning_rate")                  # '--lr'
    flag_of("workload_options.path", workload="csv")    # '--csv'
    flag_of("workload_options.image_size")              # '--workload-option image_size'

`add_storage` adds ``--storage`` and the flags that go with it (the loaded extensions' too,
`study.extension.Extension.add_storage_flags`); `storage_retry` applies ``--storage-retry`` and
`storage_access` the extensions' storage flags to every storage a command opens (as the
environment variables they stand for, which the command's child processes inherit).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import fields

from study.commands.trial_flags import TRIAL_FLAGS
from study.config.definition import TrialDefinition, field_paths
from study.errors import FieldError, UsageError
from study.extension import storage_environment, storage_extensions

__all__ = [
    "FLAGS",
    "OPTION_FLAGS",
    "add_storage",
    "flag_of",
    "in_flags",
    "problem_in_flags",
    "storage_access",
    "storage_retry",
]

#: The flag that sets each field, for error messages: each data-model field a trial's flag
#: sets (`study.commands.trial_flags`), and the storage and tuner of the study commands.
FLAGS: dict[str, str] = {
    **{
        path: TRIAL_FLAGS[item.name].flag
        for item in fields(TrialDefinition)
        for path in field_paths(item)
    },
    "targets": "--targets",
    "storage": "--storage",
    "tuner": "--tuner",
}
#: Workload options with a flag of their own, and the workload they belong to (None: any).
OPTION_FLAGS: dict[str, tuple[str, str | None]] = {
    "path": ("--csv", "csv"),
    "label": ("--label", "csv"),
    "text_column": ("--text-column", "csv"),
    "samples": ("--samples", None),
}
_OPTIONS = "workload_options."
_SCHEDULE = "batch_schedule."
_FIELD = re.compile(r"^([A-Za-z_][\w.\[\]]*)(: | )(.*)$", re.DOTALL)


def flag_of(field: str, *, workload: str | None = None) -> str | None:
    """The flag that sets ``field`` (for ``workload``'s options), or None if no flag does."""
    if field in FLAGS:
        return FLAGS[field]
    if field.startswith(_SCHEDULE):  # a stage of study train's --batch-schedule
        return f"--batch-schedule {field.removeprefix(_SCHEDULE)}"
    if not field.startswith(_OPTIONS):
        return None
    option = field.removeprefix(_OPTIONS)
    flag, owner = OPTION_FLAGS.get(option, (None, None))
    if flag is not None and owner in (None, workload):
        return flag
    return f"--workload-option {option}"


def in_flags(exc: UsageError, *, workload: str | None = None) -> UsageError:
    """``exc`` named by its flag when it is a `FieldError` not yet named (``--csv: cannot read
    'x.csv': ...``); any other error as it is."""
    if isinstance(exc, FieldError) and exc.name == exc.field:
        flag = flag_of(exc.field, workload=workload)
        if flag is not None:
            return exc.named(flag)
    return exc


def problem_in_flags(problem: str, *, workload: str | None = None) -> str:
    """A worker's one-line problem, which starts with the field (``workload_options.path:
    cannot read 'x.csv': ...``, ``target: unknown metric ...``), starting with its flag."""
    match = _FIELD.match(problem)
    if match is None:
        return problem
    flag = flag_of(match.group(1), workload=workload)
    return problem if flag is None else f"{flag}{match.group(2)}{match.group(3)}"


def add_storage(p: argparse.ArgumentParser, tracking: bool = False) -> None:
    """``--storage`` and its options (the retry window, and the loaded extensions' storage
    flags), and with ``tracking`` ``--tracking-uri``."""
    extensions = storage_extensions()
    urls = "".join(f", {e.storage_urls}" for e in extensions if e.storage_urls)
    p.add_argument(
        "--storage",
        metavar="URL",
        help=f"Optuna storage: an RDB URL (postgresql://, mysql://, sqlite:///){urls} or a journal file (default: optuna.journal in $STUDY_HOME, else in ./mlruns)",
    )
    p.add_argument(
        "--storage-retry",
        metavar="SECONDS",
        type=float,
        help="how long to wait for a database storage that stops answering (restart, failover, "
        "dropped connection) before exiting with status 75 (default: the study file's "
        "storage_retry, else $STUDY_STORAGE_RETRY, else 300)",
    )
    for extension in extensions:
        extension.add_storage_flags(p)
    if tracking:
        p.add_argument(
            "--tracking-uri",
            metavar="URL",
            help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else mlflow.db in $STUDY_HOME or ./mlruns)",
        )


@contextlib.contextmanager
def storage_access(args: argparse.Namespace) -> Iterator[None]:
    """The loaded extensions' storage flags in ``args`` as the environment variables they stand
    for while the command runs (`study.extension.storage_environment`), as they were
    afterwards."""
    with _environment(storage_environment(args)):
        yield


@contextlib.contextmanager
def _environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """Environment variables set (None: unset) while the block runs, as they were after."""
    previous = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def storage_retry(seconds: float | None) -> Iterator[None]:
    """``--storage-retry``, checked: the window of every storage the command opens (set in
    ``$STUDY_STORAGE_RETRY`` while it runs, as it was afterwards)."""
    if seconds is None:
        yield
        return
    from study.ledger import RETRY_ENV, retry_window

    try:
        window = retry_window(seconds)
    except FieldError as err:
        raise err.named("--storage-retry") from None
    with _environment({RETRY_ENV: repr(window)}):
        yield
