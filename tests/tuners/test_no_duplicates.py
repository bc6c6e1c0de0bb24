"""No wasted trials across processes: 100 trials of one study with both tuners and confirmation
trials, run by two processes (two worker threads each) on one ledger, never repeat a point.

The trainer is synthetic (steps to target from a smooth function of the learning rate, a few
milliseconds a trial, evaluated on a coarse geometric grid so the ledger stays small), so the
test measures the search, not training. The learning-rate range is narrow (a factor 3: about
220 points 0.5% apart), so 50 trials per stratum drawn without looking would repeat points many
times over. Two batch sizes: one whose best rate lies inside the range (32) and one whose best
lies beyond its top (256), where the search crowds against the edge.
"""

from __future__ import annotations

import math
import os
import sys
import zlib
from collections.abc import Callable
from itertools import combinations, pairwise
from pathlib import Path
from typing import Any

import pytest

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.config.trial import TrialSpec
from study.ledger import Ledger, LedgerTrial, StudyRecord
from study.results import Measurement, TrialResult, TrialState
from study.tuners.points import LR_TOLERANCE, point_of, same_point
from tests.fakes import rising_curve
from tests.zygote import ROOT, zygote

pytestmark = pytest.mark.slow

BATCH_SIZES = [32, 256]
STUDY: dict[str, Any] = {
    "name": "no-duplicates",
    "workload": "tabular",
    "target": "val_accuracy>=0.6",
    "budget": {"max_steps": 3000},
    "eval_every": 10,
    "trials_per_stratum": 46,
    "search_space": {
        "batch_size": BATCH_SIZES,
        "learning_rate": {"low": 0.05, "high": 0.15, "scale": "log"},
        "strategy": ["default"],
    },
    "tuner": {"sampler": "tpe", "oracle": "random", "confirm": {"top": 2, "seeds": 2}},
}
TRIALS = len(BATCH_SIZES) * (46 + 4)


def synthetic(spec: TrialSpec, hook: Callable[[Measurement], bool] | None) -> TrialResult:
    """A trial whose steps to target grow away from lr 0.02 * sqrt(batch), with seed noise."""
    lr, batch = spec.optimizer.learning_rate, spec.batch_size
    best = 0.02 * math.sqrt(batch)
    wiggle = zlib.crc32(f"{lr!r}/{spec.settings.seed}".encode()) % 1000 / 1000.0
    needed = 6000.0 / batch * (1 + 3 * math.log(lr / best) ** 2) * (0.85 + 0.3 * wiggle)
    curve = []
    for m in rising_curve(batch, needed, ratio=1.5):
        if m.step > 3000:
            break
        curve.append(m)
        if m.metrics["val_accuracy"] >= 0.6:
            return _result(TrialState.REACHED, curve, m.step)
        if hook is not None and not hook(m):
            return _result(TrialState.PRUNED, curve, None)
    return _result(TrialState.NOT_REACHED, curve, None)


def _result(state: TrialState, curve: list[Measurement], reached: int | None) -> TrialResult:
    last = curve[-1]
    return TrialResult(
        state=state,
        steps_run=last.step,
        examples_run=last.examples,
        train_seconds=last.train_seconds,
        steps_to_target=reached,
        examples_to_target=last.examples if reached is not None else None,
        seconds_to_target=last.train_seconds if reached is not None else None,
        curve=tuple(curve),
        timings={"train": last.train_seconds},
    )


class SyntheticPool:
    """The engine's worker pool, training synthetically in the calling thread."""

    def run(
        self, spec: TrialSpec, hook: Callable[[Measurement], bool] | None = None
    ) -> TrialResult:
        return synthetic(spec, hook)

    def close(self) -> None:
        pass


class QuietTracker:
    """The engine's MLflow tracker, keeping nothing."""

    def start_trial(self, trial: LedgerTrial) -> None:
        pass

    def finish_trial(self, trial: LedgerTrial, spec: TrialSpec, result: TrialResult) -> None:
        pass


def run_process(journal: str, home: str, workers: int) -> None:
    """One ``study run`` process: the real engine and lineup, a synthetic trainer."""
    os.environ["STUDY_HOME"] = home
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (the progress lines of a child)
    from study.runner.engine import StudyEngine
    from study.runner.failures import FailurePolicy
    from study.runner.launch import budgets, visiting_order
    from study.runner.progress import Progress
    from study.tuners.registry import build_lineup

    config = parse_study(STUDY, "no-duplicates.yaml")
    ledger = Ledger.open(journal, config.name)
    ledger.create(StudyRecord(name=config.name, config_text="x", trials_total=TRIALS))
    plan = budgets(visiting_order(config), config.total_trials)
    lineup = build_lineup("both", config, ledger)
    progress = Progress.from_ledger(ledger, plan, config.name, live=False)
    engine = StudyEngine(
        config, ledger, lineup, QuietTracker(), SyntheticPool(), plan, progress, FailurePolicy(5)
    )
    try:
        engine.run(workers)
    finally:
        lineup.close()


def test_two_processes_with_both_tuners_never_repeat_a_point(tmp_path: Path) -> None:
    journal, home = str(tmp_path / "optuna.journal"), str(tmp_path / "mlruns")
    script = tmp_path / "host.py"  # each process forked from the tests' zygote
    script.write_text(
        "from tests.tuners.test_no_duplicates import run_process\n"
        f"run_process({journal!r}, {home!r}, 2)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    outputs = [(tmp_path / f"out{i}", tmp_path / f"err{i}") for i in range(2)]
    processes = [
        zygote().spawn([], cwd=tmp_path, env=env, stdout=out, stderr=err, module=str(script))
        for out, err in outputs
    ]
    codes = [process.wait(600) for process in processes]
    assert codes == [0, 0], [err.read_text()[-2000:] for _, err in outputs]

    ledger = Ledger.open(journal, STUDY["name"])
    everything: list[LedgerTrial] = []
    for batch in BATCH_SIZES:
        trials = ledger.counted(Stratum(batch, "default"))
        assert len(trials) == 46 + 4 and all(t.status.is_outcome() for t in trials)
        everything += trials
        points = [point_of(t.params, t.extras.get("seed")) for t in trials]
        assert [(a, b) for a, b in combinations(points, 2) if same_point(a, b)] == []
        for a, b in combinations(points, 2):  # the same rule, written out
            if a["seed"] == b["seed"]:
                assert abs(math.log(a["learning_rate"] / b["learning_rate"])) > LR_TOLERANCE
        # crowded: the closest two rates of a stratum lie within 2% (so repeats were near)
        rates = sorted(p["learning_rate"] for p in points if p["seed"] is None)
        assert min(math.log(b / a) for a, b in pairwise(rates)) < 0.02
    assert len(everything) == TRIALS
    assert {t.tuner for t in everything} == {"optuna", "keras-tuner"}
    assert sum(t.origin == "confirm" for t in everything) == 4 * len(BATCH_SIZES)
    assert len({t.owner.split(":")[1] for t in everything if t.owner}) == 2  # two processes
