"""The pilot of an adaptive allocation: B_simple, the gradient noise scale of one short trial,
around which the grid of batch sizes is chosen (`study.ext.allocation.plan.initial_grid`).

A pilot stored before (``study noise-scale --study NAME``) is taken as it is; else one is run
now on the study's worker pool and stored in the ledger (``ledger.notes.set_pilot``).
"""

from __future__ import annotations

import dataclasses
import math

from study.analysis.pilot import pilot_from_result
from study.config.space import CategoricalParam, Stratum
from study.config.study import StudyConfig
from study.config.trial import PILOT_NOISE_EVERY
from study.ledger import Ledger
from study.runner.pool import WorkerPool

__all__ = ["pilot_estimate"]


def pilot_estimate(config: StudyConfig, ledger: Ledger, pool: WorkerPool) -> float:
    """B_simple of the study's pilot: as stored (``study noise-scale --study NAME``), else
    measured now by a pilot trial at the smallest batch size and the geometric middle of the
    learning-rate range, and stored; NaN when the pilot gives no estimate."""
    stored = ledger.notes.pilot()
    if stored is not None and math.isfinite(stored.b_simple):
        return stored.b_simple
    strategy = config.space.strategies[0]
    even = [b for b in config.space.batch_sizes if b % 2 == 0] or list(config.space.batch_sizes)
    param = config.space.param("learning_rate")
    rate = (
        math.sqrt(min(param.choices) * max(param.choices))
        if isinstance(param, CategoricalParam)
        else math.sqrt(param.low * param.high)
    )
    spec = config.trial_spec(
        Stratum(min(config.space.batch_sizes), strategy), {"learning_rate": rate}
    )
    spec = dataclasses.replace(
        spec.with_settings(noise_scale=True, noise_every=PILOT_NOISE_EVERY), batch_size=min(even)
    )
    print(
        f"pilot: batch {spec.batch_size} lr {rate:.3g} on {strategy}, measuring the gradient "
        "noise scale B_simple to choose the batch sizes",
        flush=True,
    )
    result = pool.run(spec)
    pilot = pilot_from_result(spec, result)
    if not pilot.measured:
        print(f"pilot: no estimate of B_simple ({result.state.value}); the whole grid", flush=True)
        return math.nan
    ledger.notes.set_pilot(pilot)
    print(
        f"pilot: B_simple = {pilot.b_simple:.3g} at step {pilot.at_step} ({result.state.value}; "
        f"{result.steps_run} steps, {result.train_seconds:.1f} s of training)",
        flush=True,
    )
    return pilot.b_simple
