"""The allocation-mode hook: an extension adds a mode (a name and its `Allocator`), a study file
takes it with its options checked, and the engine runs its rounds, stops its claims once it is
exhausted and takes its untaken slots back; without the extension, the mode is one line that
names the extension (exit status 2)."""

from __future__ import annotations

import copy
import importlib
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from study import extension
from study.cli import main
from study.config.space import Stratum
from study.config.study import Allocation, StudyConfig
from study.config.studyfile import parse_study
from study.errors import UsageError
from study.extension import AllocationModeSpec, Extension, allocation_modes, register
from study.ledger import Ledger, StudyRecord
from study.runner.allocator import Allocator, allocator_class
from study.runner.engine import StudyEngine
from study.runner.failures import FailurePolicy
from study.runner.launch import visiting_order
from study.runner.pool import WorkerPool
from study.runner.progress import Progress
from study.tuners.registry import build_lineup
from tests.config.test_studyfile import BASE
from tests.runner.conftest import tiny_study, write_study
from tests.tuners.test_no_duplicates import QuietTracker, SyntheticPool

TOY = f"{__name__}:Toy"
ROOT = Path(__file__).resolve().parents[2]


class Toy(Allocator):
    """One trial per stratum first, then ``rounds`` rounds of one more trial for the smallest
    batch size; with ``allocation.steps``, exhausted once that many trials finished."""

    def start(self, pool: WorkerPool) -> dict[Stratum, int]:
        self.budgets = {stratum: 1 for stratum in visiting_order(self.config)}
        self.asked: list[bool] = []
        self.closed = False
        return dict(self.budgets)

    def next_round(self, *, in_flight: bool = False) -> dict[Stratum, int] | None:
        self.asked.append(in_flight)
        if self.closed or len(self.asked) > self.config.allocation.rounds:
            return None
        smallest = min(self.budgets, key=lambda s: s.batch_size)
        self.budgets[smallest] += 1
        return dict(self.budgets)

    def exhausted(self) -> bool:
        limit = self.config.allocation.steps
        ran = sum(len(self.ledger.counted(s)) for s in self.budgets)
        return limit is not None and ran >= limit and not self.closed

    def close(self) -> dict[Stratum, int]:
        self.closed = True
        self.budgets = {s: len(self.ledger.counted(s)) for s in self.budgets}
        return dict(self.budgets)


class ToyExtension(Extension):
    name = "toy"
    summary = "a toy allocation mode"

    def allocation_modes(self) -> Mapping[str, AllocationModeSpec]:
        return {"toy": AllocationModeSpec(TOY), "toy-steps": AllocationModeSpec(TOY, True)}


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy extension registered (for this test only) and loaded alone."""
    for module in extension.BUILTIN.values():  # registered for good, outside this test's copy
        importlib.import_module(module)
    monkeypatch.setattr(extension, "_REGISTERED", dict(extension._REGISTERED))
    register(ToyExtension)
    monkeypatch.setenv(extension.EXTENSIONS_ENV, "toy")
    yield


def with_allocation(value: Any) -> dict[str, Any]:
    return {**copy.deepcopy(BASE), "allocation": value}


def test_a_mode_of_an_extension_is_read_checked_and_found(toy: None) -> None:
    assert list(allocation_modes()) == ["toy", "toy-steps"]
    config = parse_study(with_allocation({"mode": "toy", "rounds": 2}), "x.yaml")
    assert config.allocation == Allocation("toy", rounds=2) and config.allocation.rounds_of
    assert allocator_class(config) is Toy
    config = parse_study(with_allocation({"mode": "toy-steps", "steps": 5}), "x.yaml")
    assert config.allocation.steps == 5 and allocator_class(config) is Toy
    assert allocator_class(parse_study(copy.deepcopy(BASE), "x.yaml")) is None  # even
    for value, message in (
        ({"mode": "smart"}, "x.yaml: allocation.mode must be one of even, toy, toy-steps"),
        ({"mode": "adaptive"}, "x.yaml: allocation.mode 'adaptive' needs the extension "),
        ({"mode": "toy-steps"}, "x.yaml: allocation.steps is required with mode toy-steps: "),
        ({"mode": "toy", "steps": 5}, "allocation.steps applies to mode toy-steps only (mode is"),
    ):
        with pytest.raises(UsageError) as err:
            parse_study(with_allocation(value), "x.yaml")
        assert message in str(err.value) and "\n" not in str(err.value)


def test_two_extensions_cannot_add_one_mode(toy: None, monkeypatch: pytest.MonkeyPatch) -> None:
    class Again(ToyExtension):
        name = "toy-again"

    register(Again)
    monkeypatch.setenv(extension.EXTENSIONS_ENV, "toy,toy-again")
    with pytest.raises(ValueError, match="two extensions add the allocation mode 'toy': toy and"):
        allocation_modes()


class InFlightToy(Toy):
    """`Toy` deciding in flight: asked while this process runs trials, it has nothing yet."""

    @property
    def decides_in_flight(self) -> bool:
        return True

    def next_round(self, *, in_flight: bool = False) -> dict[Stratum, int] | None:
        if in_flight:
            self.asked.append(in_flight)
            return None
        return super().next_round(in_flight=in_flight)


def toy_engine(
    tmp_path: Path, config: StudyConfig, kind: type[Toy] = Toy
) -> tuple[Toy, StudyEngine, Any]:
    """The engine on ``config`` with its toy allocator, trials trained synthetically; its
    lineup (to close)."""
    ledger = Ledger.open(str(tmp_path / "optuna.journal"), config.name)
    ledger.create(StudyRecord(name=config.name, config_text="x", trials_total=1))
    toy = kind(config, ledger, config.total_trials, say=lambda _line: None)
    plan = toy.start(SyntheticPool())  # type: ignore[arg-type]
    lineup = build_lineup("optuna", config, ledger)
    progress = Progress.from_ledger(ledger, plan, config.name, live=False)
    engine = StudyEngine(
        config,
        ledger,
        lineup,
        QuietTracker(),  # type: ignore[arg-type]
        SyntheticPool(),  # type: ignore[arg-type]
        plan,
        progress,
        FailurePolicy(5),
        allocator=toy,
    )
    return toy, engine, lineup


def run_toy(tmp_path: Path, config: StudyConfig) -> tuple[Toy, StudyEngine]:
    """The engine on ``config`` with its toy allocator, run with one worker."""
    toy, engine, lineup = toy_engine(tmp_path, config)
    try:
        assert engine.run(1) == 0
    finally:
        lineup.close()
    return toy, engine


def test_a_round_asked_while_another_thread_runs_a_trial_is_decided_in_flight(
    tmp_path: Path, toy: None
) -> None:
    """A worker thread that found no trial of its process running asks for the next round, but
    the other thread has claimed a slot since (from a round it opened meanwhile). The round is
    asked in flight: asked as if nothing ran, a round by steps counted that trial's steps as
    still to come and ended a two-worker study for good, 2,214 of its 21,000 steps unspent. With
    nothing to give yet, the thread looks again instead of leaving."""
    config = parse_study(tabular({"mode": "toy", "rounds": 2}), "toy.yaml")
    allocator, engine, lineup = toy_engine(tmp_path, config, InFlightToy)
    try:
        for stratum, budget in engine.budgets.items():  # every budget taken
            slot = engine.ledger.claim(stratum, budget)
        assert slot is not None
        engine._active[(slot.stratum, slot.number)] = slot  # the other thread's, running
        assert engine._next_round() is True  # look again: not the study's end
        assert allocator.asked == [True]
        engine._active.clear()  # it ended: the round is decided from every result
        assert engine._next_round() is True and allocator.asked == [True, False]
    finally:
        lineup.close()


def tabular(allocation: dict[str, Any]) -> dict[str, Any]:
    return tiny_study(
        target="val_accuracy>=0.6", search_space={"batch_size": [32, 256]}, allocation=allocation
    )


def test_the_engine_runs_the_rounds_of_a_mode_of_an_extension(tmp_path: Path, toy: None) -> None:
    config = parse_study(tabular({"mode": "toy", "rounds": 2}), "toy.yaml")
    allocator, engine = run_toy(tmp_path, config)
    small, large = Stratum(32, "default"), Stratum(256, "default")
    assert engine.budgets == {large: 1, small: 3}  # the first budgets, then two rounds
    assert allocator.asked == [False, False, False]  # the third round: none
    assert {s: len(allocator.ledger.counted(s)) for s in engine.budgets} == engine.budgets
    assert engine.complete()


def test_an_exhausted_allocation_stops_the_claims_and_takes_its_slots_back(
    tmp_path: Path, toy: None
) -> None:
    config = parse_study(tabular({"mode": "toy-steps", "rounds": 5, "steps": 3}), "toy.yaml")
    allocator, engine = run_toy(tmp_path, config)
    assert allocator.closed and engine.budgets == {
        Stratum(256, "default"): 1,
        Stratum(32, "default"): 2,
    }
    assert sum(len(allocator.ledger.counted(s)) for s in engine.budgets) == 3
    assert engine.progress.state.total == 3


def test_without_its_extension_a_mode_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(extension.EXTENSIONS_ENV, "none")
    monkeypatch.setenv("STUDY_HOME", str(tmp_path / "home"))
    file = write_study(tmp_path, with_allocation({"mode": "adaptive", "rounds": 2}))
    assert main(["run", str(file)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.endswith(
        "x.yaml: allocation.mode 'adaptive' needs the extension 'allocation' (unset "
        "STUDY_EXTENSIONS or add allocation to it)"
    )
    assert not (tmp_path / "home").exists()  # nothing recorded


def test_the_core_alone_names_the_extension_of_a_mode_in_a_fresh_process(tmp_path: Path) -> None:
    file = write_study(tmp_path, with_allocation({"mode": "steps", "steps": 100}))
    env = {"STUDY_EXTENSIONS": "none", "STUDY_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    code = (
        "import sys\n"
        "from study.config.studyfile import load_study_file\n"
        "from study.errors import UsageError\n"
        f"try:\n    load_study_file({str(file)!r})\n"
        "except UsageError as err:\n    print(err)\n"
        "print(sorted(m for m in sys.modules if m.startswith('study.ext.allocation.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    message, imported = done.stdout.strip().splitlines()
    assert message.endswith(
        "allocation.mode 'steps' needs the extension 'allocation' (unset "
        "STUDY_EXTENSIONS or add allocation to it)"
    )
    assert imported == "[]"  # asked which extension adds it: its allocator stays unimported
