"""Whether CBS(t) from branching agrees with the study's own answers (`agreement`).

The two measure the critical batch size differently. A branch is as good as ``B0`` when it
keeps ``1 - tol`` of ``B0``'s progress over its window; under ``E(B) = E_min (1 + B /
B_noise)`` that is the batch size needing ``1 / (1 - tol)`` times ``B0``'s examples, about
``B_noise x tol / (1 - tol)`` (``tol`` 0.5: B_noise itself). The study's model gives that
value at its target (`at_tolerance`) and its own critical batch size (at the study's overhead,
from steps to the target). The checkpoint compared is the last one, which the branch defaults
put at the examples where ``B0``'s best trial reached the target
(`study.ext.branch.defaults`); the study answers at its target only, so earlier checkpoints
have nothing of the study's to compare with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from study.report.formatting import fmt, span_text

if TYPE_CHECKING:  # pragma: no cover
    from study.analysis.answers import Answer

__all__ = ["agreement", "answer_triple", "at_tolerance", "overlap"]

Triple = tuple[float, float, float]


def answer_triple(answer: Answer | None) -> Triple | None:
    """A study's answer as ``(estimate, low, high)``; an end the trials do not set
    (`Answer.open_low` / ``open_high``: B_noise's search range) is infinite, no bound to reach
    past or to agree with."""
    if answer is None:
        return None
    low = -math.inf if answer.open_low else float(answer.low)
    high = math.inf if answer.open_high else float(answer.high)
    return float(answer.estimate), low, high


def at_tolerance(b_noise: Triple, tolerance: float) -> Triple:
    """The study's B_noise (estimate, low, high) scaled to the batch size that keeps ``1 -
    tolerance`` of ``B0``'s progress: ``B_noise x tolerance / (1 - tolerance)``."""
    scale = tolerance / (1 - tolerance) if tolerance < 1 else math.inf
    est, low, high = b_noise
    return est * scale, low * scale, high * scale


def overlap(a: Triple, b: Triple) -> bool:
    """Whether two intervals (estimate, low, high) share a point."""
    return a[1] <= b[2] and b[1] <= a[2]


def agreement(
    last: Mapping[str, Any],
    plan: Mapping[str, Any],
    b_noise: Triple | None,
    critical: Triple | None,
    tolerance: tuple[float, str],
) -> list[str]:
    """Sentences: CBS at the last checkpoint (a `cbs_curve` row) next to the study's answers,
    whether they agree within their intervals, and where they do not, why they may differ."""
    cbs = (float(last["cbs"]), float(last["cbs_low"]), float(last["cbs_high"]))
    if not math.isfinite(cbs[0]):
        return [f"At {int(last['examples']):,} examples the branches give no CBS to compare."]
    tol, basis = tolerance
    here = f"At {int(last['examples']):,} examples CBS {_text(cbs)}"
    out = []
    found: list[tuple[str, Triple]] = []
    if b_noise is not None and math.isfinite(b_noise[0]):
        if basis == "progress":
            name = (
                "B_noise"
                if tol == 0.5
                else f"B_noise x {tol:g} / (1 - {tol:g}) (the same share of progress)"
            )
            found.append((name, at_tolerance(b_noise, tol)))
        else:
            found.append(("B_noise", b_noise))
    if critical is not None and math.isfinite(critical[0]):
        found.append(("critical batch size", critical))
    verdicts = []
    for name, value in found:
        if overlap(cbs, value):
            verdicts.append(
                f"agrees with the study's {name} {_text(value)} ({name} / CBS = "
                f"{value[0] / cbs[0]:.2g})"
            )
        else:
            verdicts.append(
                f"differs by a factor {value[0] / cbs[0]:.2g} from the study's {name} "
                f"{_text(value)}"
            )
    target = plan.get("target_examples")
    at = f"at its target, {int(target):,} examples" if target else "at its target"
    if verdicts:
        out.append(f"{here} {'; it '.join(verdicts)} (the study's answers {at}).")
    if all(overlap(cbs, v) for _, v in found):
        return out
    early = bool(target) and float(last["examples"]) < 0.8 * float(target)
    if math.isinf(cbs[2]) and bool(last.get("censored", False)):
        largest = max(plan.get("batch_sizes", [cbs[0]]))
        out.append(
            f"Why: every batch size tried was as good, so CBS is only known to be at least "
            f"{largest:,}; larger multipliers would bound it."
        )
    elif any(v[2] < cbs[1] for _, v in found):
        out.append(
            "Why the branches say more: they continue a trained state (weights and momentum) "
            "for one window, where the study's trials pay a large batch's start from scratch "
            "on their way to the target."
        )
    elif early:
        out.append(
            f"Why the branches say less: their last checkpoint comes before the target "
            f"({int(last['examples']):,} of {int(target):,} examples), and the critical batch "
            "size grows as the loss falls; each branch also trains at lr0 (B / B0)^alpha rather "
            "than its batch size's own best rate."
        )
    else:
        out.append(
            "Why the branches say less: each branch trains at lr0 (B / B0)^alpha rather than "
            "its batch size's own best rate, and one window measures the progress from that "
            "checkpoint only."
        )
    return out


def _text(value: Triple) -> str:
    return f"{fmt(value[0])} ({span_text(value[1], value[2])})"
