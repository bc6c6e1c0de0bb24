"""Exceptions with a clear next step.

`UsageError` is bad input: the CLI prints its one-line message and exits with status 2.
`InfeasibleError` is a strategy or configuration this host cannot provide: a trial that meets
one is recorded as infeasible and the study goes on.
"""

from __future__ import annotations


class StudyError(Exception):
    """Base class of the errors this package raises on purpose."""


class UsageError(StudyError, ValueError):
    """Bad input (an option, a file, a key): one line saying what is wrong and how to fix it."""


class InfeasibleError(StudyError):
    """The host cannot provide what a trial asks for (e.g. `tpu` without a TPU)."""
