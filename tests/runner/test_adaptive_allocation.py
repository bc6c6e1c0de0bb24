"""Adaptive allocation: the grid around a pilot's B_simple, each round's decisions (edge of the
learning-rate range first, then the widest interval of steps, never past maximal data
parallelism, a batch size added where the knee may lie beyond the grid), the state kept in the
ledger for a resumed run, and a real adaptive study end to end."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from mlflow import MlflowClient

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.ledger import Ledger, StudyRecord, open_storage
from study.runner.allocation import (
    EDGE_PRIORITY,
    Allocator,
    StratumView,
    initial_grid,
    plan_round,
)
from tests.runner.conftest import run_study, tiny_study, write_study

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


def test_round_gives_trials_first_to_a_best_rate_at_the_edge() -> None:
    found = views(64, sizes=GRID[:7])
    edge = found[3]  # b64
    found[3] = StratumView(edge.stratum, 2, edge.best_steps, 0.9, (0.001, 1.0))
    decisions = plan_round(found, 2, 1)
    given = {d.stratum: d for d in decisions if d.trials}
    assert list(given) == ["b64/default"] and given["b64/default"].trials == 2
    assert "at the edge of its searched range" in given["b64/default"].reason
    assert EDGE_PRIORITY > 10  # above any interval width


def test_round_spreads_by_the_width_of_the_interval_of_steps() -> None:
    noisy = [
        StratumView(v.stratum, v.trials, v.best_steps * f, v.best_lr, v.searched)
        for v, f in zip(views(64, GRID[:7]), (1.1, 0.95, 1.05, 0.97, 1.04, 0.96, 1.0), strict=True)
    ]
    decisions = plan_round(noisy, 4, 2)
    assert sum(d.trials for d in decisions) == 4
    assert all("interval of steps is wide here" in d.reason for d in decisions if d.trials)
    assert len({d.stratum for d in decisions if d.trials}) >= 2  # spread, not piled up


def test_round_gives_trials_to_a_best_above_the_curve() -> None:
    found = views(64, GRID[:7])
    slow = found[4]  # b128, twice the steps the others' curve says: under-searched
    found[4] = StratumView(slow.stratum, 2, slow.best_steps * 2, slow.best_lr, slow.searched)
    decisions = plan_round(found, 2, 1)
    given = {d.stratum: d for d in decisions if d.trials}
    assert given["b128/default"].trials >= 1
    assert "above" in given["b128/default"].reason and "more trials can only lower" in (
        given["b128/default"].reason
    )


def test_a_large_batch_size_off_the_curve_is_not_given_up() -> None:
    # Two trials each: the large batch sizes' bests are far above their smaller neighbours'
    # (under-searched), so even if the fit puts them past maximal data parallelism they
    # get trials.
    found = views(4, GRID)
    for i in (6, 7, 8):
        v = found[i]
        found[i] = StratumView(v.stratum, 2, v.best_steps * 30, v.best_lr, v.searched)
    decisions = plan_round(found, 6, 1)
    given = {d.stratum: d.trials for d in decisions}
    assert sum(given[f"b{b}/default"] for b in (512, 1024, 2048)) >= 3
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


def test_allocator_keeps_its_state_in_the_ledger(tmp_path: Path) -> None:
    data = allocation_study()
    config = parse_study(copy.deepcopy(data), "adaptive.yaml")
    ledger = Ledger(open_storage(str(tmp_path / "optuna.journal")), "adaptive")
    ledger.create(StudyRecord("adaptive", config_text=config.text, fingerprint="x"))
    lines: list[str] = []
    allocator = Allocator(config, ledger, total=14, say=lines.append)
    budgets = allocator.start(lambda: 4.0)
    assert budgets == {Stratum(b, "default"): 1 for b in (64, 32, 16, 8, 128, 256)}
    assert len(lines) == 6 and "within 16x of the pilot's B_simple 4" in lines[0]
    # A resumed run takes the stored state, deciding nothing anew.
    again = Allocator(config, ledger, total=14, say=lines.append)
    assert again.start(pytest.fail) == budgets and len(lines) == 6  # no pilot asked for
    # Rounds: no trial has reached yet, so each round goes to strata that never reached.
    first = allocator.next_round()
    assert first is not None and sum(first.values()) == 6 + 4 and allocator.round == 1
    assert again.next_round() == first  # another process took the round already
    second = allocator.next_round()
    assert second is not None and sum(second.values()) == 14
    assert allocator.next_round() is None  # the budget is spent
    state = ledger.allocation()
    assert state is not None and state["round"] == 2 and sum(state["budgets"].values()) == 14
    assert [d["round"] for d in state["decisions"]][-1] == 2


def test_adaptive_study_runs_its_rounds_end_to_end(tmp_path: Path) -> None:
    data = allocation_study(sizes=GRID[1:7], rounds=1)
    write_study(tmp_path, data)
    out = run_study("run", "adaptive.yaml", "--tuner", "optuna", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "pilot: B_simple = " in out.stdout
    assert "allocation round 0: " in out.stdout and "allocation round 1: " in out.stdout
    ledger = Ledger(open_storage(str(tmp_path / "mlruns" / "optuna.journal")), "adaptive")
    pilot, state = ledger.pilot(), ledger.allocation()
    assert pilot is not None and pilot["b_simple"] > 0
    assert state is not None and state["round"] == 1 and state["total"] == 12
    budgets = {Stratum.parse(k): n for k, n in state["budgets"].items()}
    assert sum(budgets.values()) == 12
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
    assert logged["round"] == 1 and logged["decisions"] == state["decisions"]


def test_even_allocation_stays_the_default() -> None:
    config = parse_study(tiny_study(), "tiny.yaml")
    assert not config.allocation.adaptive and config.total_trials == 2 * 3
