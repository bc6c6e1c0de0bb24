"""Batch schedules: schedule trials beside a study's search, and schedules derived from a study.

A study file's ``batch_schedule:`` section (`study.ext.schedules.section`; the schedule itself
is the core's `study.config.schedule.BatchSchedule`, which ``study train --batch-schedule``
trains) makes ``study run`` train ``seeds`` schedule trials once the search is done
(`.trials`, in a ledger of their own, `.ledger`); the report compares them with the study's
best fixed batch size (`.compare`, `.report`: report.json's ``batch_schedules`` and the "Batch
schedule" section). ``study schedule NAME`` (`.command`) derives a schedule from a finished
study by a stated rule (`.rules`); ``Study.schedules()`` and ``Study.schedule()`` are the same
from Python (`.api`).

This module registers the extension and imports nothing heavy: each part is imported when it
is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from study.extension import Extension, Lazy, ReportSection, Section, TrialSource, register


def _read(reader: Any, value: Any, config: Any) -> Any:
    from study.ext.schedules.section import read_batch_schedule

    return read_batch_schedule(reader, value, config)


def _schedules(study: Any) -> Any:
    from study.ext.schedules.api import schedules

    return schedules(study)


def _schedule(study: Any, *args: Any, **kwargs: Any) -> Any:
    from study.ext.schedules.api import schedule

    return schedule(study, *args, **kwargs)


@register
class Schedules(Extension):
    """The ``batch_schedule:`` section's trials, their report section and ``study schedule``."""

    name = "schedules"
    summary = "derive a batch-size schedule from a finished study, as a batch_schedule: snippet"

    def add_commands(self, sub: Any, lazy: Lazy) -> None:
        from study.commands.flags import add_storage

        p = sub.add_parser(
            "schedule",
            help=self.summary,
            description="Start at the study's best fixed batch size B* (the fewest steps within "
            "1.1x the fewest examples) at its best rate, and grow the batch by a rule: "
            "double-at-half (2 B* from half the examples B* needed) or cbs (CBS(t) of `study "
            "branch`, floored at B*). Prints the snippet and why; --out writes it.",
        )
        p.add_argument("name", help="a study name (see `study ls`)")
        p.add_argument("--rule", choices=("double-at-half", "cbs"), default="double-at-half")
        p.add_argument(
            "--rate",
            choices=("keep", "local", "fit"),
            default="keep",
            help="later stages' rate: B*'s (keep), the power law through the study's best rates "
            "at the schedule's batch sizes (local), or the study's fitted exponent (fit)",
        )
        p.add_argument("--stage-warmup", type=int, default=0, metavar="N", help="ramp over N steps")
        p.add_argument(
            "--seeds", type=int, default=3, help="schedule trials a study runs (default 3)"
        )
        p.add_argument("--strategy", help="the strategy (default: the study's first)")
        p.add_argument("--target", help="another target, e.g. 'val_accuracy>=0.7'")
        p.add_argument("--out", metavar="FILE", help="write the snippet to FILE")
        p.add_argument("--json", action="store_true", help="the schedule and why as JSON")
        add_storage(p)
        p.set_defaults(handler=lazy("study.ext.schedules.command", "main"))

    def sections(self) -> Sequence[Section]:
        from study.config.schedule import SECTION
        from study.ext.schedules.schema import SCHEMA

        return (Section(SECTION, _read, SCHEMA),)

    def report_sections(self) -> Sequence[ReportSection]:
        from study.ext.schedules.report import SECTION

        return (SECTION,)

    def trial_sources(self, config: Any) -> Sequence[TrialSource]:
        if config.section("batch_schedule") is None:
            return ()
        from study.ext.schedules.trials import trial_source

        source = trial_source(config)
        return () if source is None else (source,)

    def study_methods(self) -> Mapping[str, Callable[..., Any]]:
        return {"schedules": _schedules, "schedule": _schedule}
