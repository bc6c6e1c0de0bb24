"""Adaptive allocation: the grid around a pilot's B_simple, each round's decisions (initial
trials first, one trial to a best rate at the edge of its range, then the stratum whose best
falling to what it can attain narrows B_noise's interval most, never past maximal data
parallelism, a batch size added where the knee may lie beyond the grid), the state kept in the
ledger for a resumed run, a round decided by one process only, and a real adaptive study end
to end."""

from __future__ import annotations

import copy
import json
import math
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from mlflow import MlflowClient

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.ext.allocation.plan import (
    StratumView,
    attainable,
    fit_views,
    initial_grid,
    interval_gain,
    interval_width,
    plan_round,
    tried_range,
)
from study.ext.allocation.rounds import CLAIM_WAIT, RoundAllocator
from study.ledger import Decision, Ledger, LedgerTrial, StudyRecord, open_storage
from study.results import TrialResult, TrialState
from tests.inprocess import study_here
from tests.runner.conftest import tiny_study, write_study

GRID = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def views(b_noise: float, sizes: tuple[int, ...] = GRID, s_min: float = 100.0) -> list[StratumView]:
    """Strata whose best steps follow S(B) = s_min (1 + b_noise / B) exactly, with best rates
    in the middle of their searched range."""
    return [
        StratumView(
            Stratum(b, "default"),
            trials=2,
            best_steps=s_min * (1 + b_noise / b),
            best_lr=0.03,
            searched=(0.001, 1.0),
        )
        for b in sizes
    ]


def test_initial_grid_is_sixteen_times_either_side_and_at_least_six() -> None:
    assert initial_grid(GRID, 100) == (8, 16, 32, 64, 128, 256, 512, 1024)
    assert initial_grid(GRID, 2) == (8, 16, 32, 64, 128, 256)  # grown with the nearest
    assert initial_grid(GRID, 1e6) == (64, 128, 256, 512, 1024, 2048)
    assert initial_grid(GRID, math.nan) == GRID  # no estimate: the whole grid


def test_edge_is_the_outer_tenth_of_the_searched_log_range() -> None:
    view = views(64)[0]
    assert not view.at_edge
    assert StratumView(view.stratum, 2, 200.0, 0.0014, (0.001, 1.0)).at_edge
    assert StratumView(view.stratum, 2, 200.0, 0.8, (0.001, 1.0)).at_edge
    assert not StratumView(view.stratum, 2, 200.0, None, (0.001, 1.0)).at_edge


def test_tried_range_spans_the_rates_that_ran_to_an_outcome() -> None:
    def trial(lr: float, state: TrialState, finished: bool = True) -> LedgerTrial:
        result = TrialResult(state, steps_to_target=100 if state is TrialState.REACHED else None)
        return LedgerTrial(
            Stratum(64, "default"),
            0,
            state,
            params={"learning_rate": lr},
            result=result if finished else None,
        )

    trials = [
        trial(0.01, TrialState.REACHED),
        trial(0.1, TrialState.DIVERGED),
        trial(1.0, TrialState.FAILED),  # an exception says nothing of the rate
        trial(0.001, TrialState.RUNNING, finished=False),
    ]
    assert tried_range(trials) == (0.01, 0.1)
    assert tried_range(trials[2:]) is None
    # A best at the top of the rates tried is at the edge: its optimum may lie higher.
    view = StratumView(Stratum(64, "default"), 2, 100.0, 0.1, tried_range(trials))
    assert view.at_edge


def test_round_skips_maximal_data_parallelism_and_spends_exactly() -> None:
    decisions = plan_round(views(64), 6, 1)
    given = {d.stratum: d.trials for d in decisions}
    assert sum(given.values()) == 6
    # B_noise = 64 exactly: past 8 x 64 = 512 there is nothing to learn.
    for size in (1024, 2048):
        assert given[f"b{size}/default"] == 0
        reason = next(d.reason for d in decisions if d.stratum == f"b{size}/default")
        assert reason.startswith("past maximal data parallelism")
    assert all(d.round == 1 for d in decisions)


def test_a_best_rate_at_the_edge_of_the_rates_tried_is_likelier_to_improve() -> None:
    # Bests within 1% of the curve, five trials each; b64's best rate is the highest it tried:
    # its optimum may lie beyond, so its next trials count as likelier to improve it (1/2, not
    # 1/6) and it gets most of the round.
    found = [
        StratumView(v.stratum, 5, v.best_steps * f, v.best_lr, v.searched)
        for v, f in zip(
            views(64, GRID[:7]), (1.01, 0.99, 1.01, 0.99, 1.01, 0.99, 1.01), strict=True
        )
    ]
    found[3] = StratumView(found[3].stratum, 5, found[3].best_steps, 0.9, (0.001, 1.0))
    assert found[3].at_edge and not found[2].at_edge
    given = {d.stratum: d for d in plan_round(found, 4, 1) if d.trials}
    assert max(given, key=lambda s: given[s].trials) == "b64/default"
    assert "its optimum may lie beyond" in given["b64/default"].reason
    assert "5 trials so far" in given["b64/default"].reason


def test_round_spreads_by_the_width_of_the_interval_of_steps() -> None:
    # Bests within 1% of the curve: none can fall to narrow B_noise's interval by 2%, so the
    # pointwise interval of steps spreads the trials.
    low = [
        StratumView(v.stratum, v.trials, v.best_steps * f, v.best_lr, v.searched)
        for v, f in zip(
            views(64, GRID[:7]), (1.01, 0.99, 1.01, 0.99, 1.01, 0.99, 1.01), strict=True
        )
    ]
    decisions = plan_round(low, 4, 2)
    assert sum(d.trials for d in decisions) == 4
    assert all("interval of steps is wide here" in d.reason for d in decisions if d.trials)
    assert len({d.stratum for d in decisions if d.trials}) >= 2  # spread, not piled up


def test_attainable_is_the_least_of_its_best_the_curve_and_its_neighbours() -> None:
    found = views(64, GRID[:7])
    fit = fit_views(found)
    # On the curve: it can attain only its best.
    assert attainable(found, 3, fit) == pytest.approx(found[3].best_steps)
    # Above a smaller batch size's best: steps never grow with the batch size.
    slow = list(found)
    slow[5] = StratumView(found[5].stratum, 3, found[3].best_steps * 1.5)  # b256 above b64
    assert attainable(slow, 5, fit_views(slow)) <= found[4].best_steps
    # Above what halving a larger batch size allows: at most B' / B times its steps.
    slow = list(found)
    slow[0] = StratumView(found[0].stratum, 3, found[1].best_steps * 4)  # b8 vs b16
    assert attainable(slow, 0, fit_views(slow)) <= found[1].best_steps * 2


def test_the_outlier_that_widens_b_noise_interval_gets_the_trials() -> None:
    # Bests near the curve with a little scatter, and b1024 twice as slow as b512 (steps never
    # grow with the batch size: it is under-searched). Its falling would narrow the interval
    # most, so it gets the round.
    found = [
        StratumView(v.stratum, 3, v.best_steps * f, v.best_lr, v.searched)
        for v, f in zip(
            views(128), (1.05, 0.97, 1.04, 1.0, 0.96, 1.03, 1.0, 1.0, 1.02), strict=True
        )
    ]
    found[7] = StratumView(found[7].stratum, 3, found[6].best_steps * 2, 0.03, (0.001, 1.0))
    fit = fit_views(found)
    gains = [interval_gain(found, i, fit) for i in range(len(found))]
    assert max(range(len(found)), key=gains.__getitem__) == 7
    # The gain is the mean narrowing of refits with its best fallen to what it can attain
    # and to the geometric middle between that and its best.
    target = attainable(found, 7, fit)
    refits = [
        interval_width(fit_views([*found[:7], StratumView(found[7].stratum, 3, s), found[8]]))
        for s in (target, math.sqrt(target * found[7].best_steps))
    ]
    assert gains[7] == pytest.approx(interval_width(fit) - sum(refits) / 2)
    assert gains[7] > math.log(1.5)
    decisions = plan_round(found, 3, 1)
    given = {d.stratum: d for d in decisions if d.trials}
    assert given["b1024/default"].trials >= 2
    assert "would narrow to" in given["b1024/default"].reason
    assert "3 trials so far" in given["b1024/default"].reason


def test_an_unreached_stratum_among_well_fitted_ones_is_not_worth_a_trial() -> None:
    # Seven bests near the curve pin it down; b32 has three trials and no reach. Reaching may
    # land it well above the curve, which would widen the interval: on average it does not
    # narrow it, so it gets no priority from the fit.
    found = [
        StratumView(v.stratum, 3, v.best_steps * f, v.best_lr, v.searched)
        for v, f in zip(
            views(128), (1.05, 0.97, 1.04, 1.0, 0.96, 1.03, 1.0, 1.0, 1.02), strict=True
        )
    ]
    found[2] = StratumView(found[2].stratum, 3)
    fit = fit_views(found)
    assert interval_gain(found, 2, fit) < 0
    # Though reaching right on the curve would narrow it a little.
    best_case = [
        *found[:2],
        StratumView(found[2].stratum, 3, attainable(found, 2, fit)),
        *found[3:],
    ]
    assert interval_width(fit_views(best_case)) < interval_width(fit)


def test_a_stratum_short_of_its_initial_trials_is_topped_up_and_not_fitted() -> None:
    found = views(64, GRID[:7])
    # b128 has one trial, with a best far off the curve: it does not count in the fit (its
    # lone best is luck) and gets the trials it lacks first.
    found[4] = StratumView(found[4].stratum, 1, found[4].best_steps * 20, 0.03, (0.001, 1.0))
    found = [
        StratumView(v.stratum, max(v.trials, 3), v.best_steps, v.best_lr, v.searched)
        if i != 4
        else v
        for i, v in enumerate(found)
    ]
    decisions = plan_round(found, 3, 1, initial=3)
    given = {d.stratum: d for d in decisions if d.trials}
    assert given["b128/default"].trials >= 2
    assert "1 trial of the 3 a stratum needs before its best counts" in (
        given["b128/default"].reason
    )
    # Without it the rest lie on the curve: nothing else looks under-searched.
    assert not any("would narrow" in d.reason for d in decisions if d.trials)


def test_a_large_batch_size_off_the_curve_is_not_given_up() -> None:
    # The large batch sizes' bests are far above their smaller neighbours' (under-searched),
    # so even if the fit puts them past maximal data parallelism they get trials.
    found = views(4, GRID)
    for i in (6, 7, 8):
        v = found[i]
        found[i] = StratumView(v.stratum, 2, v.best_steps * 30, v.best_lr, v.searched)
    decisions = plan_round(found, 6, 1)
    given = {d.stratum: d.trials for d in decisions}
    assert sum(given.get(f"b{b}/default", 0) for b in (512, 1024, 2048)) >= 3
    assert not any(d.reason.startswith("past maximal") for d in decisions if d.trials)


def test_round_adds_a_batch_size_where_the_knee_may_lie_beyond_the_grid() -> None:
    found = views(256, sizes=(8, 16, 32, 64))
    decisions = plan_round(found, 5, 1, candidates=GRID, initial=2)
    added = decisions[0]
    assert (added.stratum, added.trials) == ("b128/default", 2)
    assert "B_noise may be as large as" in added.reason
    assert sum(d.trials for d in decisions) == 5


def test_round_without_a_fit_tries_the_strata_that_never_reached() -> None:
    found = views(64, sizes=(8, 16, 32))
    found[0] = StratumView(found[0].stratum, 3)  # b8 never reached the target
    found[1] = StratumView(found[1].stratum, 3)
    decisions = plan_round(found, 2, 1)
    given = {d.stratum: d.trials for d in decisions if d.trials}
    assert given == {"b8/default": 1, "b16/default": 1}


def allocation_study(sizes: tuple[int, ...] = GRID[:7], rounds: int = 2) -> dict:
    return tiny_study(
        name="adaptive",
        trials_per_stratum=2,
        search_space={"batch_size": list(sizes)},
        allocation={"mode": "adaptive", "rounds": rounds},
    )


def new_ledger(tmp_path: Path, data: dict) -> tuple[Ledger, object]:
    """A ledger under ``tmp_path`` holding the study of ``data`` (named as it is), and its
    config."""
    name = data["name"]
    config = parse_study(copy.deepcopy(data), f"{name}.yaml")
    ledger = Ledger(open_storage(str(tmp_path / "optuna.journal")), name)
    ledger.create(StudyRecord(name, config_text=config.text, fingerprint="x"))
    return ledger, config


def test_allocator_keeps_its_state_in_the_ledger(tmp_path: Path) -> None:
    ledger, config = new_ledger(tmp_path, allocation_study())
    lines: list[str] = []
    allocator = RoundAllocator(config, ledger, total=20, say=lines.append)
    assert allocator.initial == 2  # 2 trials per stratum: all of them (at most the even share)
    budgets = allocator.begin(lambda: 4.0)
    assert budgets == {Stratum(b, "default"): 2 for b in (64, 32, 16, 8, 128, 256)}
    assert len(lines) == 6 and "within 16x of the pilot's B_simple 4" in lines[0]
    # A resumed run takes the stored state, deciding nothing anew.
    again = RoundAllocator(config, ledger, total=20, say=lines.append)
    assert again.begin(pytest.fail) == budgets and len(lines) == 6  # no pilot asked for
    # Rounds: no trial has run, so each round tops up the strata short of their trials.
    first = allocator.next_round()
    assert first is not None and sum(first.values()) == 12 + 4 and allocator.round == 1
    assert all("a stratum needs before its best counts" in line for line in lines[6:])
    assert again.next_round() == first  # another process took the round already
    second = allocator.next_round()
    assert second is not None and sum(second.values()) == 20
    assert allocator.next_round() is None  # the budget is spent
    state = ledger.notes.allocation()
    assert state is not None and state.round == 2 and sum(state.budgets.values()) == 20
    assert state.decisions[-1].round == 2


def test_initial_trials_are_half_the_even_share_and_at_least_three() -> None:
    for per_stratum, initial in ((1, 1), (2, 2), (4, 3), (8, 4), (12, 6)):
        config = parse_study(tiny_study(trials_per_stratum=per_stratum), "tiny.yaml")
        assert RoundAllocator(config, None, total=0).initial == initial  # type: ignore[arg-type]


def test_only_one_of_many_writers_claims_a_round(tmp_path: Path) -> None:
    new_ledger(tmp_path, allocation_study())
    path = str(tmp_path / "optuna.journal")
    # Each thread opens the journal on its own, as a separate process would.
    ledgers = [Ledger(open_storage(path), "adaptive") for _ in range(6)]
    start = threading.Barrier(len(ledgers))
    won: list[bool] = []

    def claim(ledger: Ledger) -> None:
        start.wait()
        won.append(ledger.notes.claim_round(1))

    threads = [threading.Thread(target=claim, args=(ledger,)) for ledger in ledgers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == [False] * 5 + [True]
    assert not ledgers[0].notes.claim_round(1) and ledgers[0].notes.claim_round(2)
    assert ledgers[0].strata() == []  # a claim is not a stratum
    from study.ledger.storage import list_studies

    assert list_studies(ledgers[0].storage) == ["adaptive"]  # nor a study
    # A study deleted and made anew under the same name claims its rounds afresh.
    ledger, _ = new_ledger(tmp_path, allocation_study())
    ledger.delete()
    ledger, _ = new_ledger(tmp_path, allocation_study())
    assert ledger.notes.claim_round(1)


def test_a_process_that_loses_the_claim_takes_the_winners_round(tmp_path: Path) -> None:
    ledger, config = new_ledger(tmp_path, allocation_study())
    lines: list[str] = []

    def winner_writes(seconds: float) -> None:
        # Another process claimed round 1 and stores its decisions while this one waits.
        state = ledger.notes.allocation()
        assert state is not None
        if state.round == 0:
            b8 = Stratum(8, "default")
            budgets = {**state.budgets, b8: state.budgets[b8] + 4}
            decisions = (*state.decisions, Decision(1, "b8/default", 4, "the winner's"))
            ledger.notes.set_allocation(
                replace(state, round=1, budgets=budgets, decisions=decisions)
            )

    allocator = RoundAllocator(config, ledger, total=20, say=lines.append, sleep=winner_writes)
    allocator.begin(lambda: 4.0)
    lines.clear()
    assert ledger.notes.claim_round(1)  # the other process's claim, made first
    budgets = allocator.next_round()
    assert allocator.round == 1 and budgets is not None and budgets[Stratum(8, "default")] == 6
    assert allocator.decisions[-1].reason == "the winner's" and lines == []  # nothing decided


def test_a_claim_whose_winner_never_writes_is_decided_after_a_wait(tmp_path: Path) -> None:
    ledger, config = new_ledger(tmp_path, allocation_study())
    lines: list[str] = []
    waited: list[float] = []
    allocator = RoundAllocator(config, ledger, total=20, say=lines.append, sleep=waited.append)
    allocator.begin(lambda: 4.0)
    assert ledger.notes.claim_round(1)  # claimed by a process that died before it wrote
    budgets = allocator.next_round()
    assert budgets is not None and sum(budgets.values()) == 16 and allocator.round == 1
    assert sum(waited) >= CLAIM_WAIT
    assert any("claimed by another process" in line for line in lines)


def test_adaptive_study_runs_its_rounds_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = dict(allocation_study(sizes=GRID[2:6], rounds=1), trials_per_stratum=4)
    write_study(tmp_path, data)
    out = study_here(monkeypatch, capsys, "run", "adaptive.yaml", "--tuner", "optuna", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "pilot: B_simple = " in out.stdout
    assert "allocation round 0: " in out.stdout and "allocation round 1: " in out.stdout
    ledger = Ledger(open_storage(str(tmp_path / "mlruns" / "optuna.journal")), "adaptive")
    pilot, state = ledger.notes.pilot(), ledger.notes.allocation()
    assert pilot is not None and pilot.b_simple > 0
    assert state is not None and state.round == 1 and state.total == 16
    budgets = dict(state.budgets)
    assert sum(budgets.values()) == 16 and min(budgets.values()) >= 3  # 3 each, then 4 more
    ran = {s: len(ledger.counted(s)) for s in ledger.strata()}
    assert ran == {s: n for s, n in budgets.items() if n}  # every trial given was run, once
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    (experiment,) = [e for e in client.search_experiments() if e.name == "adaptive"]
    parents = client.search_runs(
        [experiment.experiment_id], "tags.`study.role` = 'parent'", max_results=5
    )
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    logged = json.loads(
        Path(
            client.download_artifacts(parents[0].info.run_id, "allocation.json", str(tmp_path))
        ).read_text(encoding="utf-8")
    )
    assert logged["round"] == 1 and logged["decisions"] == state.to_stored()["decisions"]


def test_even_allocation_stays_the_default() -> None:
    config = parse_study(tiny_study(), "tiny.yaml")
    assert not config.allocation.rounds_of and config.total_trials == 2 * 3


def test_a_claimed_round_that_is_decided_already_is_taken_not_decided(tmp_path: Path) -> None:
    ledger, config = new_ledger(tmp_path, allocation_study(rounds=3))
    first = RoundAllocator(config, ledger, total=30, say=lambda _: None)
    first.begin(lambda: 4.0)
    late = RoundAllocator(config, ledger, total=30, say=lambda _: None)
    late._adopt_stored()  # read round 0, then another process decides rounds 1-3
    for _ in range(3):
        assert first.next_round() is not None
    lines: list[str] = []
    late.say = lines.append
    # Round 1's claim was deleted (only the latest are kept): the late process claims it again.
    assert late._claim(1) is False and late.round == 3 and lines == []
    assert late.budgets == first.budgets


def test_the_stored_state_keeps_the_grid_and_the_latest_decisions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from study.ext.allocation import rounds

    monkeypatch.setattr(rounds, "KEPT_DECISIONS", 2)
    ledger, config = new_ledger(tmp_path, allocation_study(rounds=3))
    allocator = RoundAllocator(config, ledger, total=30, say=lambda _: None)
    allocator.begin(lambda: 4.0)
    grid = [d for d in allocator.decisions if d.round == 0]
    for _ in range(3):
        assert allocator.next_round() is not None
    stored = ledger.notes.allocation()
    assert stored is not None and stored.round == 3
    later = [d for d in stored.decisions if d.round]
    assert list(stored.decisions[: len(grid)]) == grid and len(later) == 2
    assert later[-1].round == 3
