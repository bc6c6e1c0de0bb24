"""Validation targets such as ``val_accuracy>=0.9`` or ``val/classification_error<0.1``."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from study.config.hold import Hold
from study.config.rules import FieldError

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_RULE = "must be METRIC OP NUMBER with OP one of <, <=, >, >= (e.g. 'val_accuracy>=0.9')"
_PATTERN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_./-]*)\s*(<=|>=|<|>)\s*([-+0-9.eE]+|inf|-inf)\s*$")


@dataclass(frozen=True)
class Target:
    """A threshold on one validation metric.

    Example: ``Target.parse("val_accuracy>=0.9")`` holds once ``val_accuracy`` is at least 0.9.
    ``hold`` says when a crossing counts as reaching it (`study.config.hold`): a study file's
    ``target_hold`` (default 5% of the steps, at least 5), or the first crossing (``Hold.OFF``,
    what a bare `parse` gives and studies recorded before the rule use).
    """

    metric: str
    op: str
    threshold: float
    hold: Hold = field(default=Hold.OFF, compare=True)

    @classmethod
    def parse(cls, text: str, *, option: str | None = None) -> Target:
        """Parse ``METRIC OP THRESHOLD`` with OP one of ``<``, ``<=``, ``>``, ``>=``.

        Raises:
            FieldError: field ``target``, when the text does not parse; the message calls the
                value ``option`` if given (e.g. ``--target``), else ``target``.
        """
        match = _PATTERN.match(str(text))
        if not match:
            problem = (
                f"cannot parse {text!r}; write METRIC OP NUMBER with OP one of "
                "<, <=, >, >= (e.g. 'val_accuracy>=0.9' or 'val_loss<=0.3')"
            )
            raise FieldError("target", _RULE, text, detail=problem, name=option)
        metric, op, raw = match.groups()
        try:
            threshold = float(raw)
        except ValueError:
            problem = f"threshold {raw!r} in {text!r} is not a number"
            raise FieldError("target", _RULE, text, detail=problem, name=option) from None
        if math.isnan(threshold):
            problem = f"threshold in {text!r} must be a number, not nan"
            raise FieldError("target", _RULE, text, detail=problem, name=option)
        return cls(metric=metric, op=op, threshold=threshold)

    @property
    def maximize(self) -> bool:
        """True when larger metric values are better (``>`` or ``>=``)."""
        return self.op in (">", ">=")

    def holds(self, value: float) -> bool:
        """Whether ``value`` meets the target (NaN never does)."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return False
        return _OPS[self.op](float(value), self.threshold)

    def met_by(self, metrics: Mapping[str, float]) -> bool:
        """Whether the target holds for a mapping of metric names to values."""
        return self.metric in metrics and self.holds(metrics[self.metric])

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.threshold:g}"
