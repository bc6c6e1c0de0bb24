"""Errors in the command line's words: the flag that sets each field of the data model.

The layers below raise `FieldError` on a field (``batch_size``, ``workload_options.path``,
``model``, ``storage``); the CLI names it by its flag. Workload options are study-file keys
under ``workload_options``; the csv workload's file and columns and the sample count have
flags of their own, every other option is ``--workload-option KEY``::

    flag_of("optimizer.learning_rate")                  # '--lr'
    flag_of("workload_options.path", workload="csv")    # '--csv'
    flag_of("workload_options.image_size")              # '--workload-option image_size'

`storage_retry` applies ``--storage-retry`` to every storage a command opens.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import fields

from study.commands.trial_flags import TRIAL_FLAGS
from study.config.definition import TrialDefinition, field_paths
from study.errors import FieldError, UsageError

__all__ = ["FLAGS", "OPTION_FLAGS", "flag_of", "in_flags", "problem_in_flags", "storage_retry"]

#: The flag that sets each field, for error messages: each data-model field a trial's flag
#: sets (`study.commands.trial_flags`), and the storage and tuner of the study commands.
FLAGS: dict[str, str] = {
    **{
        path: TRIAL_FLAGS[item.name].flag
        for item in fields(TrialDefinition)
        for path in field_paths(item)
    },
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
    previous = os.environ.get(RETRY_ENV)
    os.environ[RETRY_ENV] = repr(window)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(RETRY_ENV, None)
        else:
            os.environ[RETRY_ENV] = previous
