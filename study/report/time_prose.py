"""The time-to-result section's sentences: which probed batch size and strategy reach the
target in the least wall time, what the fewest steps would cost instead, and what extrapolated
rows mean; or how to run a throughput probe.

Example::

    time_sentences(report.time_model)[0]  # "With the seconds per step of the throughput probe ..."
"""

from __future__ import annotations

from study.analysis.table import BATCH_SIZE, STRATEGY
from study.analysis.time_model import TimeModel
from study.report.formatting import fmt, sentence

PROBE_HOW_TO = (
    "No throughput probe: `study probe NAME` measures seconds per step for every batch size "
    "and strategy of the study (short untracked runs, several repeats) and stores them with "
    "it; the next report then predicts the time to result of each and says which batch size "
    "and strategy minimise wall time."
)
"""What the time-to-result section says when the study has no probe."""


def probe_text(model: TimeModel) -> str:
    """How the probe was made, e.g. ``"2026-11-30 09:40 UTC, 2 x Intel Xeon (CPU), 3 repeats of
    100 steps"`` (the parts it stored)."""
    parts = [p for p in (model.measured_at, model.hardware) if p]
    if model.repeats:
        runs = f"{model.repeats} repeat{'' if model.repeats == '1' else 's'}"
        parts.append(runs + (f" of {model.probe_steps} steps" if model.probe_steps else ""))
    return ", ".join(parts)


def time_sentences(model: TimeModel) -> list[str]:
    """The time-to-result section: which batch size and strategy minimise wall time, what the
    fewest steps would cost instead, and what extrapolated rows mean; or how to probe."""
    if not model.ok or model.best is None:
        return [
            PROBE_HOW_TO
            if "no throughput probe" in model.reason
            else sentence(f"No time to result: {model.reason}")
        ]
    out = fastest_sentences(model)
    extrapolated = model.table[model.table["extrapolated"].astype(bool)]
    if len(extrapolated):
        replicas = ", ".join(dict.fromkeys(str(fmt(r)) for r in extrapolated["replicas"]))
        out.append(
            f"Rows for {replicas} replicas were not measured: they extrapolate the probe's "
            "per-replica throughput at the most replicas it ran, linearly, with no "
            "communication cost, so they are lower bounds on time, not predictions; probe "
            "those strategies to know."
        )
    return out


def fastest_sentences(model: TimeModel) -> list[str]:
    """Which probed batch size and strategy reach the target in the least wall time and, if
    another takes fewer steps, how much longer that one takes (empty without a choice)."""
    if not model.ok or model.best is None:
        return []
    best = model.best
    how = probe_text(model)
    out = [
        f"With the seconds per step of the throughput probe ({how}), batch size "
        f"{fmt(best[BATCH_SIZE])} on {best[STRATEGY]} reaches the target in the least wall "
        f"time: {fmt(best['time_to_result'])} s ({fmt(best['steps_to_result'])} steps, "
        f"{best['steps_source']}, at {fmt(best['seconds_per_step'])} s per step)."
    ]
    fewest = model.fewest_steps
    if fewest is not None and (
        fewest[BATCH_SIZE] != best[BATCH_SIZE] or fewest[STRATEGY] != best[STRATEGY]
    ):
        out.append(
            f"The fewest steps ({fmt(fewest['steps_to_result'])}, batch size "
            f"{fmt(fewest[BATCH_SIZE])} on {fewest[STRATEGY]}) would take "
            f"{fmt(fewest['time_to_result'])} s, {fmt(model.slowdown_of_fewest_steps)} times as "
            "long."
        )
    return out
