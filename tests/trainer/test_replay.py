"""Exact steps' replay in one compiled call (`study.trainer.replay`): the same trial, to the bit,
as replaying one call a step; a trial that ends among the replayed steps ends at its step."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from study.config.hold import DEFAULT_HOLD
from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec, TrialSpec
from study.results import Measurement, TrialResult, TrialState
from study.trainer import loop
from study.trainer.loop import train
from study.trainer.replay import replayer
from study.trainer.session import SessionCache, open_session
from study.workloads import Dataset, Workload, get_workload
from tests.fakes import tabular_spec
from tests.trainer.conftest import shuffled_blocks

pytestmark = pytest.mark.slow

#: A noisy trial whose accuracy crosses 0.8 and falls back before it holds (the default rule).
NOISY = {
    "batch_size": 16,
    "optimizer": OptimizerSpec("nesterov", 0.1),
    "target": replace(Target.parse("val_accuracy>=0.8"), hold=DEFAULT_HOLD),
    "budget": Budget(max_steps=600),
}


@pytest.fixture(scope="module")
def tabular() -> tuple[Workload, Dataset]:
    workload = get_workload("tabular", {"rows": 2000})
    return workload, workload.load()


def spec(cadence: str, **changes: Any) -> TrialSpec:
    return tabular_spec(cadence=EvalCadence.parse(cadence), **{**NOISY, **changes})


def run(spec: TrialSpec, tabular, strategy, hook=None, data=None) -> TrialResult:
    workload, arrays = tabular
    return train(
        spec,
        data if data is not None else arrays,
        lambda: workload.build_model("mlp", arrays),
        *strategy,
        hook=hook,
    )


def without_replayer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replay one call a step, as the trainer did before the replayer."""
    monkeypatch.setattr(loop, "replayer", lambda session: None)


def same_trial(a: TrialResult, b: TrialResult) -> None:
    assert (a.state, a.steps_run, a.steps_to_target) == (b.state, b.steps_run, b.steps_to_target)
    assert a.fell_back == b.fell_back
    assert a.environment["replay_steps"] == b.environment["replay_steps"]
    assert [(m.step, m.fine, m.train_loss) for m in a.curve] == [
        (m.step, m.fine, m.train_loss) for m in b.curve
    ]
    assert [dict(m.metrics) for m in a.curve] == [dict(m.metrics) for m in b.curve]


@pytest.mark.parametrize("cadence", ["geometric:1.05", "40"])
def test_one_call_replays_the_trial_one_call_a_step_does(
    tabular, default_strategy, cadence: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = run(spec(cadence), tabular, default_strategy)
    with monkeypatch.context() as patch:
        without_replayer(patch)
        slow = run(spec(cadence), tabular, default_strategy)
    assert fast.state is TrialState.REACHED and fast.environment["replay_steps"] > 1
    assert any(m.fine for m in fast.curve)
    same_trial(fast, slow)
    # the replays' seconds count apart from training; each replayed step at the chunk's pace
    assert fast.timings["replay"] > 0
    held = next(m for m in fast.curve if m.step == fast.steps_to_target)
    assert fast.seconds_to_target == held.train_seconds
    fine = [i for i, m in enumerate(fast.curve) if m.fine]
    paces = {
        round(fast.curve[i].train_seconds - fast.curve[i - 1].train_seconds, 12)
        for i in fine[1:]
        if fast.curve[i - 1].fine and fast.curve[i].step == fast.curve[i - 1].step + 1
    }
    assert paces and all(p > 0 for p in paces)


def test_the_replay_of_an_xla_compiled_step_is_the_same_trial(
    tabular, default_strategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = run(spec("geometric:1.05", jit_compile="on"), tabular, default_strategy)
    with monkeypatch.context() as patch:
        without_replayer(patch)
        slow = run(spec("geometric:1.05", jit_compile="on"), tabular, default_strategy)
    assert fast.environment["jit_compile"] and fast.environment["replay_steps"] > 1
    same_trial(fast, slow)


def test_a_trial_pruned_among_the_replayed_steps_ends_at_that_step(
    tabular, default_strategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = run(spec("40"), tabular, default_strategy)
    fine = [m.step for m in whole.curve if m.fine]
    stop_at = fine[len(fine) // 2]  # a replayed step before the one that met the target

    def hook(m: Measurement) -> bool:
        return m.step < stop_at

    fast = run(spec("40"), tabular, default_strategy, hook)
    with monkeypatch.context() as patch:
        without_replayer(patch)
        slow = run(spec("40"), tabular, default_strategy, hook)
    assert fast.state is TrialState.PRUNED and fast.steps_run == stop_at
    assert fast.curve[-1].step == stop_at and fast.curve[-1].fine
    same_trial(fast, slow)


def test_the_replayer_serves_data_in_memory_without_the_noise_scale(
    tabular, default_strategy
) -> None:
    workload, arrays = tabular
    build = lambda: workload.build_model("mlp", arrays)  # noqa: E731

    def session(data: Any, **changes: Any) -> Any:
        s, _, _ = open_session(
            spec("40", **changes), data, build, *default_strategy, workload.task, SessionCache()
        )
        return s

    plain = session(arrays)
    made = replayer(plain)
    assert made is not None and replayer(plain) is made  # traced once, kept by the session
    plain.start(0, 16)
    before = plain.snapshot()
    losses, rows = made.run(plain.args(3))
    plain.restore(before)
    one_by_one = []
    for _ in range(3):
        loss, _ = plain.run(plain.args(1))
        one_by_one.append((float(loss[0]), plain.evaluate()))
    assert [(float(x), r) for x, r in zip(losses, rows, strict=True)] == one_by_one
    assert set(rows[0]) == set(plain.evaluator.keys) and np.isfinite(losses).all()

    streamed = session(shuffled_blocks(arrays))
    assert replayer(streamed) is None and streamed.replayer is False
    measured = session(arrays, noise_scale=True)
    assert replayer(measured) is None
