"""Exceptions with a clear next step.

`UsageError` is bad input: the CLI prints its one-line message and exits with status 2.
`FieldError` is bad input in one field of the data model (``batch_size``, ``path``, ``model``):
it names the field, the rule and the value, and the front end renames the field to what the
user wrote (a flag on the command line, ``FILE: key`` in a study file)::

    err = FieldError("optimizer.learning_rate", "must be > 0", -1.0)
    str(err)                                    # optimizer.learning_rate must be > 0 (got -1.0)
    str(err.named("--lr"))                      # --lr must be > 0 (got -1.0)
    str(FieldError("path", detail="cannot read 'x.csv'").named("--csv"))
    # --csv: cannot read 'x.csv'

`StudyNotFound` is a `UsageError` for a study name the storage does not hold.

`StorageUnavailable` is a storage that stayed away longer than the retry window: the CLI
prints its one line and exits with status 75 (`EXIT_TEMPFAIL`, try again later); so is
`StoreFull`, a store whose disk is full (free space, then run the command again).

`StoreDamaged` is a store file that cannot be read (a damaged ledger or MLflow store): a
`UsageError` naming the file, what is wrong with it and what to do.

`InfeasibleError` is a strategy or configuration this host cannot provide: a trial that meets
one is recorded as infeasible and the study goes on.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from enum import IntEnum
from typing import Any

__all__ = [
    "EXIT_TEMPFAIL",
    "ExitCode",
    "FieldError",
    "InfeasibleError",
    "StorageUnavailable",
    "StoreDamaged",
    "StoreFull",
    "StudyError",
    "StudyNotFound",
    "UsageError",
    "one_line",
    "show",
    "summary_line",
]


class ExitCode(IntEnum):
    """The exit statuses of ``study`` (docs/reference/exit-codes.md): sysexits.h's for bad
    input and a storage that stayed away, the shell's 128 + signal for a stopped command."""

    OK = 0
    #: What the command ran failed: a trial crashed, a server did not start.
    FAILED = 1
    #: Bad input: one line says what is wrong and how to fix it; nothing recorded changed.
    USAGE = 2
    #: The storage stayed away longer than the retry window, or its disk is full: try again.
    TEMPFAIL = 75
    #: Stopped by Ctrl-C (SIGINT).
    INTERRUPTED = 130
    #: Stopped by SIGTERM.
    TERMINATED = 143


#: The exit status of a command whose storage stayed away longer than its retry window
#: (sysexits.h's EX_TEMPFAIL: try again later).
EXIT_TEMPFAIL = ExitCode.TEMPFAIL


class StudyError(Exception):
    """Base class of the errors this package raises on purpose."""


class UsageError(StudyError, ValueError):
    """Bad input (an option, a file, a key): one line saying what is wrong and how to fix it."""


class StudyNotFound(UsageError, LookupError):
    """No study of this name in the storage (``name``: the study asked for)."""

    def __init__(self, name: str, message: str | None = None) -> None:
        self.study = name
        super().__init__(
            message or f"no study named {name!r} in this storage; `study ls` lists the studies"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (StudyNotFound, (self.study, str(self)))


class StorageUnavailable(StudyError):
    """The storage did not answer within the retry window (`study.ledger.retry`): nothing
    recorded is lost, and the same command (or ``study resume``) continues once it answers.
    ``where`` is the storage with its password masked."""

    def __init__(self, where: str, seconds: float, cause: BaseException | str = "") -> None:
        self.where, self.seconds = where, seconds
        if isinstance(cause, BaseException):
            first = " ".join(str(cause).split()).partition(" (Background on this error")[0]
            cause = f"{type(cause).__name__}: {first[:200]}"
        self.cause = cause
        super().__init__(
            f"the storage {where} did not answer for {seconds:.0f} s"
            + (f" ({cause})" if cause else "")
            + "; everything recorded is kept: run the command again (or `study resume NAME`) "
            "once it answers, or allow it longer (storage_retry)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (StorageUnavailable, (self.where, self.seconds, self.cause))


class StoreFull(StorageUnavailable):
    """The disk holding a store file (``where``) is full: the write that met it was undone,
    everything recorded before is kept, and the same command (or ``study resume NAME``)
    continues once space is freed. ``cause``: what the system said, e.g. ``[Errno 28] No
    space left on device``."""

    def __init__(self, where: str, cause: str = "") -> None:
        self.where, self.seconds, self.cause = where, 0.0, cause
        StudyError.__init__(
            self,
            f"no space left for {where}" + (f" ({cause})" if cause else "")
            + "; everything recorded before is kept: free space on its disk, then run the "
            "command again (or `study resume NAME`)",
        )  # fmt: skip

    def __reduce__(self) -> tuple[Any, ...]:
        return (StoreFull, (self.where, self.cause))


class StoreDamaged(UsageError):
    """A store file that cannot be read as what it is: ``where`` (the file), ``problem`` (what
    is wrong, e.g. ``line 12 (byte 4096) is not a whole record``) and ``fix`` (what to do)."""

    def __init__(self, where: str, problem: str, fix: str) -> None:
        self.where, self.problem, self.fix = where, problem, fix
        super().__init__(f"{where} is damaged: {problem}; {fix}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (StoreDamaged, (self.where, self.problem, self.fix))


class InfeasibleError(StudyError):
    """The host cannot provide what a trial asks for (e.g. `tpu` without a TPU)."""


class FieldError(UsageError):
    """A value of one field of the data model breaks a rule; the front end names the field.

    ``field`` is the data-model name (``batch_size``, ``optimizer.learning_rate``, ``cadence``,
    a workload option such as ``path``), ``rule`` what a good value looks like and ``value`` the
    bad one (``...`` when the rule says it all). The message is ``NAME RULE (got VALUE)``, the
    study-file style. When the problem reads better with the value inline, ``detail`` gives it
    as ``NAME: DETAIL`` (``sep`` replaces the ``": "``), e.g. ``--optimizer: unknown optimizer
    'rmsprop'; choose from ...``; ``rule`` may then be left out.

    Args:
        got: shows the value this way instead of `show(value)` (e.g. ``low=1.0, high=0.5``).
        name: what the message calls the field (default: ``field``); see `named`.
    """

    def __init__(
        self,
        field: str,
        rule: str = "",
        value: Any = ...,
        *,
        detail: str | None = None,
        sep: str = ": ",
        got: str | None = None,
        name: str | None = None,
    ) -> None:
        self.field, self.rule, self.value = field, rule or (detail or ""), value
        self.detail, self.sep = detail, sep
        self.got = got if got is not None or value is ... else show(value)
        self.name = name or field
        super().__init__(self.message(self.name))

    def message(self, name: str) -> str:
        """The message with the field called ``name``."""
        if self.detail is not None:
            return f"{name}{self.sep}{self.detail}"
        tail = f" (got {self.got})" if self.got is not None else ""
        return f"{name} {self.rule}{tail}"

    def named(self, name: str) -> FieldError:
        """The same error, its message calling the field ``name`` (a flag, or ``FILE: key``)."""
        return FieldError(self.field, self.rule, self.value, name=name, **self._options())

    def within(self, section: str) -> FieldError:
        """The same error on the field ``SECTION.FIELD``, named so (``path`` of the workload
        options is ``workload_options.path``)."""
        field = f"{section}.{self.field}"
        return FieldError(field, self.rule, self.value, name=field, **self._options())

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across worker processes
        return (_rebuild, (self.field, self.rule, self.value, self.name, self._options()))

    def _options(self) -> dict[str, Any]:
        return {"detail": self.detail, "sep": self.sep, "got": self.got}


def _rebuild(field: str, rule: str, value: Any, name: str, options: dict[str, Any]) -> FieldError:
    return FieldError(field, rule, value, name=name, **options)


def show(value: Any) -> str:
    """A value as messages show it: strings quoted, mappings as ``{key: value}``, None as null."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)}: {show(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "null"
    if isinstance(value, numbers.Number):
        return str(value)  # 0.5, not np.float64(0.5)
    return repr(value).replace("\n", " ")


def _key(key: Any) -> str:
    """A mapping's key as `show` writes it: bare when printable text (``low``), else `show`n
    (so a key holding a line break stays on the message's one line)."""
    return key if isinstance(key, str) and key.isprintable() else show(key)


def one_line(message: str) -> str:
    """``message`` with its line breaks written as ``\\n`` and ``\\r``: what the command line
    prints of an error is one line, whatever text of the user's it quotes."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_BOLD = re.compile(r"\x1b\[1m(.+?)\x1b\[0m")
_KERAS_CALL = "Exception encountered when calling"
_NAMED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Warning): .+")


def summary_line(exc: BaseException) -> str:
    """``Type: the line that says what went wrong`` for an error from user code, on one line.

    TensorFlow and Keras wrap an error raised while tracing a model in a report whose first line
    is ``in user code:`` followed by frames: the line that says what is wrong is the one Keras
    marks bold (on a terminal), else the last ``SomeError: ...`` line of the report, else its
    first line; Keras' ``Exception encountered when calling Layer.call().`` gives the line after.
    """
    text = str(exc).strip()
    bold = _BOLD.search(text)
    lines = [_ANSI.sub("", line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    if bold:
        return f"{type(exc).__name__}: {_ANSI.sub('', bold.group(1)).strip()}"
    at = 0
    if lines and lines[0].rstrip(":") == "in user code":
        named = [i for i, line in enumerate(lines) if _NAMED.match(line)]
        at = named[-1] if named else len(lines) - 1
    # Keras' "Exception encountered when calling Layer.call()." is followed by the reason.
    if at + 1 < len(lines) and _KERAS_CALL in lines[at]:
        at += 1
    line = lines[at] if lines else ""
    return f"{type(exc).__name__}: {line}".rstrip(": ")
