"""Allocation by training steps: every batch size first, then one trial a round where the model
of every trial expects the answer to narrow most per step, within the study's steps; the
decision to stop kept in the ledger; a real study end to end."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from study.config.space import Stratum
from study.ext.allocation.rounds import RoundAllocator
from study.ext.allocation.step_plan import StepView, in_flight_steps, plan_step
from study.ledger import Ledger, open_storage
from study.tuners.design import BATCH_ANSWERS, best_design, design_model
from study.tuners.trial_frame import ledger_frame
from tests.ext.allocation.test_adaptive_allocation import new_ledger
from tests.inprocess import study_here
from tests.runner.conftest import tiny_study, write_study
from tests.tuners.test_design import SIZES, ledger_with

BOUNDS = (1e-3, 1.0)


def view(batch: int, trials: int = 3, best: float = math.inf, most: float = 0.0) -> StepView:
    return StepView(Stratum(batch, "default"), trials, best, most, limit=5000.0, share=8, cap=16)


def test_without_a_model_the_fewest_trials_go_first_then_the_cheapest() -> None:
    views = [view(16, 2, best=900), view(64, 2, best=300), view(256, 3, best=80)]
    empty = ledger_frame([])
    decision, go = plan_step(views, empty, left=10_000, number=1, bounds=BOUNDS, prune_at=1.0)
    assert go and (decision.stratum, decision.trials) == ("b64/default", 1)
    assert "the fewest trials (2)" in decision.reason and "10,000 steps left" in decision.reason
    # 300 steps do not fit in 200 left; 900 neither: the one with more trials (80 steps) does.
    decision, go = plan_step(views, empty, left=200, number=2, bounds=BOUNDS, prune_at=1.0)
    assert go and decision.stratum == "b256/default"
    decision, go = plan_step(views, empty, left=50, number=3, bounds=BOUNDS, prune_at=1.0)
    assert not go and decision.trials == 0 and decision.round == 3
    assert "exceed the 50 training steps left: the study's step budget is spent" in decision.reason


def test_a_batch_size_at_its_most_trials_gets_none() -> None:
    full = [view(64, 16), view(256, 16)]
    decision, go = plan_step(
        full, ledger_frame([]), left=1e9, number=4, bounds=BOUNDS, prune_at=1.0
    )
    assert not go and "every batch size has its most trials" in decision.reason
    decision, go = plan_step(
        [*full, view(32, 15)], ledger_frame([]), left=1e9, number=4, bounds=BOUNDS, prune_at=1.0
    )
    assert go and decision.stratum == "b32/default"


def test_with_a_model_the_most_narrowing_for_its_share_of_steps_and_trials_gets_the_trial(
    tmp_path: Path,
) -> None:
    # Up to 512: the most narrowing per step (512, cheap) is not the most per trial (128).
    sizes = (*SIZES, 512)
    ledger = ledger_with(tmp_path, sizes=sizes)
    frame = ledger_frame([t for b in sizes for t in ledger.trials(Stratum(b, "default"))])
    views = []
    for b in sizes:
        stratum = Stratum(b, "default")
        best = ledger.best(stratum)
        assert best is not None and best.steps_to_target
        views.append(
            StepView(stratum, 3, float(best.steps_to_target), 0.0, limit=5000.0, share=8, cap=16)
        )
    model = design_model(frame)
    assert model is not None
    designs = {
        v.stratum.batch_size: best_design(
            model, v.stratum.batch_size, BOUNDS, budget=v.best_steps, answers=BATCH_ANSWERS
        )
        for v in views
    }
    assert all(d is not None and d.cost > 0 and d.gain > 0 for d in designs.values())
    per_step = sorted(designs, key=lambda b: -designs[b].gain)  # type: ignore[union-attr]
    per_trial = sorted(designs, key=lambda b: -designs[b].gain * designs[b].cost)  # type: ignore[union-attr]
    assert per_step[0] != per_trial[0]  # the data make the two budgets disagree
    # Steps to spare (the trials are the scarce budget): the most narrowing per trial.
    decision, go = plan_step(views, frame, left=1e9, number=1, bounds=BOUNDS, prune_at=1.0)
    assert go and decision.stratum == f"b{per_trial[0]}/default"
    left = len(sizes) * (8 - 3)  # each batch size's share of 8, 3 run
    assert f"the most for its share of the steps and of the {left} trials left" in decision.reason
    # Steps scarce (each trial uses a large share of them): the most narrowing per step, of
    # the batch sizes whose expected steps still fit.
    left = max(d.cost for d in designs.values()) * 1.01  # type: ignore[union-attr]
    fits = [b for b in per_step if designs[b].cost <= left]  # type: ignore[union-attr]
    many = [
        StepView(v.stratum, v.trials, v.best_steps, 0.0, v.limit, 10_000, 20_000) for v in views
    ]
    decision, go = plan_step(many, frame, left=left, number=2, bounds=BOUNDS, prune_at=1.0)
    assert go and decision.stratum == f"b{fits[0]}/default"
    left = min(d.cost for d in designs.values()) * 0.99  # type: ignore[union-attr]
    decision, go = plan_step(views, frame, left=left, number=3, bounds=BOUNDS, prune_at=1.0)
    assert not go and "the study's step budget is spent" in decision.reason


def test_a_batch_size_none_of_whose_trials_reached_the_target_comes_first(
    tmp_path: Path,
) -> None:
    ledger = ledger_with(tmp_path)
    frame = ledger_frame([t for b in SIZES for t in ledger.trials(Stratum(b, "default"))])
    measured = [view(b, 4, best=100.0 * 256 / b) for b in SIZES[1:]]
    # Batch 16's four trials all missed: up to its even share (8) it gets the next trial,
    # whatever the model's gain elsewhere, while its trial fits the steps left.
    decision, go = plan_step(
        [view(16, 4), *measured], frame, left=10_000, number=1, bounds=BOUNDS, prune_at=1.0
    )
    assert go and decision.stratum == "b16/default"
    assert "none of its 4 trials reached the target yet (its even share is 8;" in decision.reason
    # Its trial's expected steps: the model's at its best rate there (S(16) = 435 in the data).
    model = design_model(frame)
    assert model is not None
    expected = float(decision.reason.split("~")[1].split(" steps")[0].replace(",", ""))
    assert expected == pytest.approx(float(model.surrogate.steps(16)[0]), rel=0.25)
    assert expected == pytest.approx(435, rel=0.25)
    # At its even share, or when its trial does not fit in what is left: the model decides.
    for views, left in (
        ([view(16, 8), *measured], 10_000),
        ([view(16, 4), *measured], 0.9 * expected),
    ):
        decision, go = plan_step(views, frame, left=left, number=2, bounds=BOUNDS, prune_at=1.0)
        assert go and decision.stratum != "b16/default"
        assert "the most for its share of the steps" in decision.reason


def steps_study(steps: int, **overrides: object) -> dict:
    return tiny_study(
        name="by-steps",
        trials_per_stratum=4,
        search_space={"batch_size": [16, 32, 64, 128]},
        allocation={"mode": "steps", "steps": steps},
        **overrides,
    )


def test_the_allocator_starts_every_batch_size_and_keeps_its_stop_in_the_ledger(
    tmp_path: Path,
) -> None:
    ledger, config = new_ledger(tmp_path, steps_study(350))
    lines: list[str] = []
    allocator = RoundAllocator(config, ledger, total=16, say=lines.append)
    budgets = allocator.begin(pytest.fail)  # no pilot: the whole grid
    assert budgets == {Stratum(b, "default"): 3 for b in (128, 64, 32, 16)}
    assert "within 350 training steps" in lines[0]
    # Nothing ran: a trial's steps are guessed at its budget (400), which 350 cannot cover.
    assert allocator.next_round() is None and allocator.stopped
    assert "the study's step budget is spent" in lines[-1]
    resumed = RoundAllocator(config, ledger, total=16, say=lines.append)
    assert resumed.begin(pytest.fail) == budgets and resumed.next_round() is None

    ledger, config = new_ledger(tmp_path / "spent", steps_study(350))
    allocator = RoundAllocator(config, ledger, total=16, say=lines.append)
    allocator.begin(pytest.fail)
    slot = ledger.claim(Stratum(128, "default"), budget=3)  # one trial running
    assert slot is not None
    allocator.spent = lambda: 351  # type: ignore[method-assign]
    assert allocator.steps_left() == -1
    closed = allocator.close()  # the untaken slots are taken back, the running one kept
    assert closed == {
        Stratum(128, "default"): 1,
        **{Stratum(b, "default"): 0 for b in (64, 32, 16)},
    }
    assert lines[-1] == (
        "allocation round 1: b16/default -3: the study's 350 training steps are spent "
        "(351 so far): no more trials"
    )
    assert allocator.stopped and allocator.next_round() is None
    resumed = RoundAllocator(config, ledger, total=16, say=lines.append)
    assert resumed.begin(pytest.fail) == closed and resumed.stopped
    assert resumed.close() == closed and ledger.notes.allocation().round == 1  # type: ignore[union-attr]

    ledger, config = new_ledger(tmp_path / "more", steps_study(10_000))
    allocator = RoundAllocator(config, ledger, total=16, say=lines.append)
    allocator.begin(pytest.fail)
    grown = allocator.next_round()
    assert grown is not None and sum(grown.values()) == 13 and allocator.round == 1
    state = ledger.notes.allocation()
    assert state is not None and state.decisions[-1].trials == 1


def test_a_study_by_steps_takes_its_untaken_slots_back_once_its_steps_are_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Batch sizes 16 and 32 take 370-400 steps a trial here: 1,000 steps run out in the first
    # half, and the study stops there without finishing it.
    budget = 1_000
    write_study(tmp_path, steps_study(budget))
    out = study_here(monkeypatch, capsys, "run", "by-steps.yaml", "--tuner", "optuna", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    ledger = Ledger(open_storage(str(tmp_path / "mlruns" / "optuna.journal")), "by-steps")
    state = ledger.notes.allocation()
    assert state is not None and state.round == 1
    ran = {s: len(ledger.counted(s)) for s in ledger.strata()}
    assert {s: n for s, n in state.budgets.items() if n} == ran  # every trial given ran, once
    assert sum(ran.values()) < 12  # not even every batch size's first 3
    cuts = [d for d in state.decisions if d.round == 1]
    assert cuts and all(d.trials < 0 for d in cuts)
    assert all(f"the study's {budget:,} training steps are spent" in d.reason for d in cuts)
    assert all(d.line() in out.stdout for d in cuts)
    trials = [t for s in ledger.strata() for t in ledger.trials(s)]
    spent = sum(t.result.steps_run for t in trials if t.result)
    # No trial started past the budget (one worker: only the last one ran past it).
    assert budget <= spent <= budget + max(t.result.steps_run for t in trials if t.result)
    status = study_here(monkeypatch, capsys, "status", "by-steps", cwd=tmp_path)
    done = sum(ran.values())
    assert status.stdout.startswith(
        f"study by-steps: {done}/{done} trials, complete (the study's 1,000 training steps are "
        "spent"
    ), status.stdout
    again = study_here(monkeypatch, capsys, "run", "by-steps.yaml", cwd=tmp_path)
    assert again.returncode == 0, again.stderr  # a resumed study is done: nothing runs
    assert len([t for s in ledger.strata() for t in ledger.trials(s)]) == len(trials)


def test_trials_in_flight_count_their_expected_steps_and_a_stop_waits_for_them(
    tmp_path: Path,
) -> None:
    # The steps a running trial is expected to take: where it is stopped at the latest.
    views = [view(128, best=87.0), view(64), view(32)]
    assert in_flight_steps(views, [2, 1, 0], prune_at=1.0) == 2 * 87 + 5000  # best, or limit
    unbounded = StepView(Stratum(16, "default"), 3, math.inf, 300.0, math.inf, share=8, cap=16)
    assert in_flight_steps([unbounded], [1], prune_at=1.0) == 300  # the most its trials ran
    assert in_flight_steps([replace(unbounded, most_steps=0.0)], [1], prune_at=1.0) == 0
    # 700 steps: one trial (400 steps expected) fits, but not beside one still running.
    ledger, config = new_ledger(tmp_path, steps_study(700))
    lines: list[str] = []
    allocator = RoundAllocator(config, ledger, total=16, say=lines.append)
    allocator.begin(pytest.fail)
    for stratum in allocator.budgets:  # every slot taken: one running, the rest failed
        for _ in range(allocator.budgets[stratum]):
            slot = ledger.claim(stratum, budget=allocator.budgets[stratum])
            assert slot is not None
            if stratum.batch_size != 128 or slot.number:
                ledger.fail(slot, "set aside")
    assert allocator.next_round(in_flight=True) is None  # nothing decided: ask again later
    assert not allocator.stopped and allocator.round == 0 and len(lines) == 4
    ledger, config = new_ledger(tmp_path / "more", steps_study(10_000))
    allocator = RoundAllocator(config, ledger, total=16, say=lines.append)
    allocator.begin(pytest.fail)
    assert ledger.claim(Stratum(128, "default"), budget=3) is not None
    grown = allocator.next_round(in_flight=True)
    assert grown is not None and sum(grown.values()) == 13 and allocator.round == 1
