"""The hold rule: when a crossing of the target counts as reaching it.

A validation metric near its target can cross it and fall back (0.931 at one step, 0.924 four
steps later), so "the first evaluation at which the target held" depends on how often one
looks. The rule here does not: **steps to target is the first step s from which the target
holds at every step through s + window(s)**, with ``window(s) = max(min_steps,
ceil(fraction * s))``. It is a property of the training trajectory alone, so any evaluation
cadence that sees every step of the window (the trainer replays them one by one, and never
lets two evaluations lie further apart than a window: `Hold.max_gap`) finds the same step.

`Crossings` applies it to evaluations in step order, for the trainer while it trains and for
the analysis over a recorded curve; a crossing that fell back inside its window is kept
(``fell_back``) so the ledger and the report can say so. ``Hold.OFF`` is the older rule (the
first evaluation that met the target), which studies recorded before the rule still use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from study.config.rules import FieldError, check

__all__ = ["DEFAULT_HOLD", "Crossings", "Hold"]


@dataclass(frozen=True)
class Hold:
    """How long the target must keep holding after a crossing for the crossing to count.

    Example: ``Hold(0.05, 5).window(1000)`` is 50: a crossing at step 1000 counts once the
    target has held at every step through 1050.
    """

    fraction: float = 0.05
    min_steps: int = 5

    OFF: ClassVar[Hold]

    def __post_init__(self) -> None:
        check("target_hold.fraction", self.fraction, "[0, 1]")
        if isinstance(self.min_steps, bool) or int(self.min_steps) != self.min_steps:
            raise FieldError("target_hold.min_steps", "must be an integer", self.min_steps)
        check("target_hold.min_steps", self.min_steps, ">= 0", unit="steps")

    @property
    def active(self) -> bool:
        """Whether a crossing must hold at all (``Hold.OFF``: the first crossing counts)."""
        return self.fraction > 0 or self.min_steps > 0

    def window(self, step: int) -> int:
        """The steps after a crossing at ``step`` through which the target must hold."""
        return max(int(self.min_steps), math.ceil(self.fraction * step - 1e-9))

    def max_gap(self, step: int) -> int | None:
        """The furthest the next evaluation after ``step`` may be (None: no limit), so that
        every window contains an evaluation and none is missed between two that fail."""
        return step + self.window(step) + 1 if self.active else None

    def to_param(self) -> str:
        """The rule in one short text, for params and records: ``5%,5`` or ``off``."""
        return f"{self.fraction * 100:g}%,{self.min_steps}" if self.active else "off"

    @classmethod
    def parse(cls, text: str, *, option: str | None = None) -> Hold:
        """``off``, ``PCT%`` or ``PCT%,N`` (or a fraction: ``0.05,5``) as the command line
        writes it; N (the least window, in steps) defaults to `DEFAULT_HOLD`'s.

        Raises:
            FieldError: ``target_hold`` (named ``option`` if given) when it does not parse or
                is out of range.
        """
        raw = str(text).strip()
        if raw.lower() in ("off", "none", "0"):
            return cls.OFF
        share, _, steps = raw.partition(",")
        try:
            fraction = float(share[:-1]) / 100 if share.endswith("%") else float(share)
            least = int(steps) if steps.strip() else cls().min_steps
        except ValueError:
            raise FieldError(
                "target_hold",
                "must be PCT%,N (e.g. 5%,5) or off",
                text,
                detail=f"cannot parse {raw!r}; write PCT%,N (e.g. 5%,5: through the next 5% of "
                "steps, at least 5) or off",
                name=option,
            ) from None
        if not share.endswith("%") and fraction > 1:
            raise FieldError(
                "target_hold",
                f"must be a fraction in [0, 1] or a percentage (e.g. {share}%)",
                text,
                name=option,
            )
        if not 0 <= fraction <= 1:
            raise FieldError(
                "target_hold", "must be a share of the steps from 0% to 100%", text, name=option
            )
        if least < 0:
            raise FieldError(
                "target_hold", "needs N >= 0 (the least window, in steps)", text, name=option
            )
        return cls(fraction, least)

    @classmethod
    def from_param(cls, text: Any) -> Hold:
        """The inverse of `to_param`; None (a record from before the rule) is ``OFF``."""
        if text is None or str(text) == "off":
            return cls.OFF
        percent, _, steps = str(text).partition(",")
        return cls(float(percent.rstrip("%")) / 100, int(steps or 0))

    def __str__(self) -> str:
        if not self.active:
            return "the first evaluation that meets it"
        return f"through the next {self.fraction * 100:g}% of steps, at least {self.min_steps}"


Hold.OFF = Hold(0.0, 0)
#: The rule new studies and ``study train`` use unless told otherwise.
DEFAULT_HOLD = Hold()


@dataclass
class Crossings:
    """The hold rule applied to evaluations fed in step order (`observe`).

    ``start`` is the first step of the current run of evaluations meeting the target (None
    outside one), ``held`` the steps to target once the run has lasted its window, and
    ``fell_back`` each earlier run as ``(first step, step it failed again)``.
    """

    hold: Hold
    start: int | None = None
    held: int | None = None
    fell_back: list[tuple[int, int]] = field(default_factory=list)

    def observe(self, step: int, met: bool) -> int | None:
        """Take the evaluation at ``step`` (``met``: the target held there); return the steps
        to target once known (and from then on)."""
        if self.held is not None:
            return self.held
        if not met:
            if self.start is not None:
                self.fell_back.append((self.start, step))
            self.start = None
            return None
        if self.start is None:
            self.start = step
        if step >= self.start + self.hold.window(self.start):
            self.held = self.start
        return self.held

    @property
    def open(self) -> bool:
        """Whether a run meeting the target is in progress and not yet held long enough."""
        return self.held is None and self.start is not None
