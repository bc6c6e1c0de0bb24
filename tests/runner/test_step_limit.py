"""`study.runner.step_limit`: the worker's side of a trial's step limit reads what the parent
sent without waiting (the latest limit of its own trial, an exit), and the pruning rule of
`study.runner.pruning` is a step limit that follows the stratum's best."""

from __future__ import annotations

import math
import multiprocessing

import pytest

from study.config.space import Stratum
from study.results import Measurement
from study.runner.step_limit import LimitedTrial, StepLimit, WorkerLimit
from tests.fakes import tabular_spec


def _at(step: int) -> Measurement:
    return Measurement(step, step * 32, 0.0, 1.0)


def test_the_worker_keeps_its_trials_latest_limit() -> None:
    parent, child = multiprocessing.Pipe()
    limit = WorkerLimit(child, LimitedTrial(tabular_spec(), serial=3, limit=100.0))
    assert limit(_at(99)) and not limit(_at(100))
    parent.send(("limit", (2, 5.0)))  # a previous trial's, arrived late: not this one's
    parent.send(("limit", (3, 50.0)))
    parent.send(("limit", (3, 400.0)))  # a limit may rise (a cap gives way to a best)
    assert limit(_at(300)) and limit.limit == 400.0
    assert not child.poll()  # everything sent was read
    parent.send(("limit", (3, 10.0)))
    assert not limit(_at(10))


def test_an_exit_between_evaluations_stops_the_trial() -> None:
    parent, child = multiprocessing.Pipe()
    limit = WorkerLimit(child, LimitedTrial(tabular_spec(), serial=1, limit=math.inf))
    parent.send(("exit", None))
    with pytest.raises(SystemExit):
        limit(_at(1))


def test_a_step_limit_is_a_hook_read_when_asked() -> None:
    bound = [20.0]
    limit = StepLimit(lambda: bound[0])
    assert limit(_at(19)) and not limit(_at(20))
    bound[0] = 5.0
    assert not limit(_at(19))
    assert StepLimit.unbounded()(_at(10**9))


def test_the_pruning_rule_follows_the_best(tmp_path) -> None:
    from study.ledger import Ledger
    from study.runner.pruning import Pruning, trial_hook
    from study.tuners.base import History, Proposal

    stratum = Stratum(64, "default")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "s", create=True)
    pruning = Pruning(ledger, slack=2.0)
    proposal = Proposal(params={"learning_rate": 0.1}, tuner="optuna")
    rule = trial_hook(pruning, stratum, proposal, History(stratum), cap=500.0)
    assert isinstance(rule, StepLimit)
    assert rule.limit() == 500.0  # no best anywhere yet: the cap
    pruning.note(stratum, 400.0)
    assert rule.limit() == 800.0  # a best: twice it, past the cap
    pruning.note(stratum, 100.0)
    assert rule.limit() == 200.0
