"""Validation targets such as ``val_accuracy>=0.9`` or ``val/classification_error<0.1``."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from study.errors import UsageError

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_PATTERN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_./-]*)\s*(<=|>=|<|>)\s*([-+0-9.eE]+|inf|-inf)\s*$")


@dataclass(frozen=True)
class Target:
    """A threshold on one validation metric.

    Example: ``Target.parse("val_accuracy>=0.9")`` holds once ``val_accuracy`` is at least 0.9.
    """

    metric: str
    op: str
    threshold: float

    @classmethod
    def parse(cls, text: str, *, option: str = "--target") -> Target:
        """Parse ``METRIC OP THRESHOLD`` with OP one of ``<``, ``<=``, ``>``, ``>=``.

        Raises:
            UsageError: naming the option and the value when the text does not parse.
        """
        match = _PATTERN.match(str(text))
        if not match:
            raise UsageError(
                f"{option}: cannot parse {text!r}; write METRIC OP NUMBER with OP one of "
                "<, <=, >, >= (e.g. 'val_accuracy>=0.9' or 'val_loss<=0.3')"
            )
        metric, op, raw = match.groups()
        try:
            threshold = float(raw)
        except ValueError:
            raise UsageError(f"{option}: threshold {raw!r} in {text!r} is not a number") from None
        if math.isnan(threshold):
            raise UsageError(f"{option}: threshold in {text!r} must be a number, not nan")
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
