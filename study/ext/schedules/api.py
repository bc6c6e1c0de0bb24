"""The methods the schedules extension adds to `study.Study` (`study.extension`):
``schedules()``, the study's schedule trials against its best fixed batch size, and
``schedule(rule, rate)``, a batch schedule derived from it as ``study schedule`` derives it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from study.api.arguments import in_arguments, text
from study.errors import FieldError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from study.config.target import Target
    from study.ext.schedules.rules import DerivedSchedule

__all__ = ["schedule", "schedules"]


def schedules(study: Any) -> list[dict[str, Any]]:
    """Each batch schedule the study trained (``batch_schedule:``) against its best fixed
    batch size, as the report's JSON has it: ``schedule``, ``verdict``, ``wins``, the
    ``runs`` per seed, the medians with their range (``steps``, ``examples``,
    ``seconds``), ``best`` and every ``fixed`` batch size; empty when it trained none."""
    from study.report.stored import stored_report

    return [c.to_dict() for c in stored_report(study.ledger).section("batch_schedules") or ()]


def schedule(
    study: Any,
    rule: str = "double-at-half",
    rate: str = "keep",
    *,
    target: str | Target | None = None,
    stage_warmup_steps: int = 0,
    strategy: str | None = None,
) -> DerivedSchedule:
    """A batch-size schedule derived from the study by a stated rule, as ``study schedule``
    derives it (`study.ext.schedules.rules`): ``rule`` ``double-at-half`` or ``cbs``,
    ``rate`` ``keep``, ``local`` or ``fit``. ``.schedule`` is the `BatchSchedule` (for
    ``study.train(batch_schedule=...)``; ``.schedule.snippet()`` is the study-file section)
    and ``.why`` says how each part was chosen.

    Raises:
        UsageError: a bad argument, named; no batch size that reached the target; ``cbs``
            without branch trials.
    """
    from study.ext.schedules.report import derive_from_report
    from study.report.stored import stored_report

    steps = int(stage_warmup_steps) if not isinstance(stage_warmup_steps, bool) else -1
    if steps < 0 or steps != stage_warmup_steps:
        raise UsageError(f"stage_warmup_steps must be an integer >= 0 (got {stage_warmup_steps!r})")
    try:
        report = stored_report(study.ledger, target=_target(target))
        derived, _strategy = derive_from_report(
            report,
            rule=text("rule", rule) or "",
            rate=text("rate", rate) or "",
            stage_warmup_steps=steps,
            strategy=text("strategy", strategy, optional=True),
        )
    except UsageError as exc:
        raise in_arguments(exc) from None
    return derived


def _target(target: str | Target | None) -> Target | None:
    from study.config.target import Target

    if target is None or isinstance(target, Target):
        return target
    if not isinstance(target, str):
        raise FieldError("target", "must be a string such as 'val_accuracy>=0.9'", target)
    return Target.parse(target, option="target")
