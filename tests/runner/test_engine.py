"""The study engine end to end, in process, on tiny tabular studies: each tuner backend spends
exactly the budget and records its proposals in the ledger, MLflow mirrors the ledger, pruning
stops only trials that can no longer win, an infeasible strategy does not stop the study,
every trial's wall time is accounted for (the trainer's parts plus bookkeeping), and
`study status` / `study ls` report what the ledger holds.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState as OptunaState

from study import cli
from study.analysis import steps_to_result
from study.analysis.load import ledger_table
from study.config.hold import DEFAULT_HOLD
from study.config.space import Stratum
from study.config.study import drawn_seed
from study.config.studyfile import load_study_file, parse_study
from study.config.target import Target
from study.ledger import Ledger, LedgerTrial
from study.report.formatting import fmt
from study.results import TrialResult, TrialState
from study.runner import WorkerPool, launch
from study.runner import timings as trial_timings
from study.runner.launch import RunOptions, run_study
from study.runner.timings import TRAINER_PARTS, account, timed
from study.tuners.keras_tuner_backend import KT_TRIAL, KerasTunerBackend
from tests.runner.conftest import (
    FINISHED,
    Store,
    assert_budget_spent,
    assert_mlflow_mirrors_ledger,
    assert_optuna_mirrors_ledger,
    best_before,
    status,
    tiny_study,
    write_study,
)

TUNERS = ("optuna", "keras-tuner", "both")
EVAL_EVERY = 10


@dataclass
class Finished:
    """A study run to the end by `run_study` in its own directory."""

    config: dict[str, Any]
    file: Path
    store: Store
    exit_status: int
    trials: dict[str, list[LedgerTrial]]


class KeptPool(WorkerPool):
    """A `WorkerPool` that outlives the studies run on it: `run_study` closes its pool when the
    study ends, this one keeps its worker for the next study (each would otherwise start one,
    seconds of TensorFlow start-up) until `shut`."""

    def close(self) -> None:
        """Keep the workers for the next study."""

    def shut(self) -> None:
        super().close()


@pytest.fixture(scope="module")
def pool() -> Iterator[KeptPool]:
    """The module's one trainer worker, shared by every study run in process here."""
    shared = KeptPool(1)
    yield shared
    shared.shut()


def run_engine(directory: Path, data: dict[str, Any], tuner: str, pool: KeptPool) -> Finished:
    """Run a study in process with its stores (and KerasTuner's state) under ``directory``,
    its trials on ``pool`` (as `run_study` runs them on the one-worker pool it starts)."""
    file = write_study(directory, data)
    store = Store(directory)

    def one_worker(max_workers: int = 1) -> KeptPool:
        assert max_workers == 1, "these studies run with --workers 1"
        return pool

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(launch, "WorkerPool", one_worker)
        mp.setenv("STUDY_HOME", str(store.root))
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        options = RunOptions(
            tuner=tuner,
            storage=str(store.journal),
            tracking_uri=store.tracking_uri,
            live=False,
        )
        exit_status = run_study(load_study_file(file), options)
    return Finished(data, file, store, exit_status, store.trials(data, fresh=True))


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, pool: KeptPool) -> Callable[[str], Finished]:
    """``finished(tuner)``: the tiny study (2 batch sizes x 3 trials, pruning on) run with that
    tuner; each is run once per module."""
    done: dict[str, Finished] = {}

    def get(tuner: str) -> Finished:
        if tuner not in done:
            data = tiny_study(name=f"tiny-{tuner}")
            done[tuner] = run_engine(tmp_path_factory.mktemp(tuner), data, tuner, pool)
        return done[tuner]

    return get


def all_trials(run: Finished) -> list[LedgerTrial]:
    return [t for trials in run.trials.values() for t in trials]


@pytest.mark.slow
@pytest.mark.parametrize("tuner", TUNERS)
def test_each_tuner_spends_the_budget_and_records_its_proposals(
    finished: Callable[[str], Finished], tuner: str
) -> None:
    run = finished(tuner)

    assert run.exit_status == 0
    assert_budget_spent(run.trials, run.config["trials_per_stratum"])
    assert all(status(t) in FINISHED for t in all_trials(run))
    expected = {"optuna", "keras-tuner"} if tuner == "both" else {tuner}
    for stratum, trials in run.trials.items():
        assert {t.tuner for t in trials} == expected, stratum
    assert all(t.origin in ("sampler", "transfer") for t in all_trials(run))
    assert_optuna_mirrors_ledger(run.store, run.config)
    lr = run.config["search_space"]["learning_rate"]
    for trials in run.store.optuna_trials(run.config).values():
        for t in trials:
            # whoever proposed it, the stratum's Optuna study holds the trial's parameters: in
            # the study's range, or in the window a transfer centred the stratum's search on
            dist = t.distributions["learning_rate"]
            assert isinstance(dist, optuna.distributions.FloatDistribution) and dist.log
            assert lr["low"] <= dist.low < dist.high <= lr["high"]
            assert dist.low <= t.params["learning_rate"] <= dist.high


@pytest.mark.slow
@pytest.mark.parametrize("tuner", ["keras-tuner", "both"])
def test_keras_tuner_proposals_are_the_ledger_params(
    finished: Callable[[str], Finished], tuner: str
) -> None:
    """KerasTuner keeps nothing on disk: the oracle derived from the ledger holds every trial
    with the ledger's params and objective."""
    run = finished(tuner)
    assert not (run.store.root / "keras_tuner").exists()
    config = load_study_file(run.file)
    ledger = Ledger.open(str(run.store.journal), config.name, create=False)
    backend = KerasTunerBackend(config, ledger)
    for stratum, trials in run.trials.items():
        kt = [t for t in trials if t.tuner == "keras-tuner"]
        assert len({t.extras[KT_TRIAL] for t in kt}) == len(kt)
        oracle = backend.derive(Stratum.parse(stratum), None, len(trials)).oracle
        scores = {
            t.hyperparameters.values["learning_rate"]: t.score for t in oracle.trials.values()
        }
        for t in trials:
            if t.status.counts() and t.score is not None:
                assert scores[t.params["learning_rate"]] == pytest.approx(t.score)


@pytest.mark.slow
@pytest.mark.parametrize("tuner", TUNERS)
def test_mlflow_mirrors_the_ledger(finished: Callable[[str], Finished], tuner: str) -> None:
    run = finished(tuner)
    name = run.config["name"]

    children = assert_mlflow_mirrors_ledger(run.store, run.config, run.trials)

    assert len(children) == sum(len(ts) for ts in run.trials.values())
    client = run.store.mlflow()
    (parent,) = [r for r in run.store.runs(name) if r.data.tags.get("study.role") == "parent"]
    assert parent.info.status == "FINISHED"
    assert parent.data.params["tuner"] == tuner
    assert parent.data.metrics["trials_done"] == len(children)
    text = Path(client.download_artifacts(parent.info.run_id, "study.yaml", str(run.store.cwd)))
    assert text.read_text() == run.file.read_text()
    environment = client.download_artifacts(
        parent.info.run_id, "environment.json", str(run.store.cwd)
    )
    assert "optuna" in json.loads(Path(environment).read_text())["packages"]


@pytest.mark.slow
def test_pruning_stops_only_trials_that_can_no_longer_win(
    finished: Callable[[str], Finished],
) -> None:
    run = finished("both")
    pruned = [t for t in all_trials(run) if status(t) == "pruned"]
    assert pruned, "a stratum with several trials should prune some"
    optuna_view = run.store.optuna_trials(run.config)
    slack = parse_study(run.config, "tiny.yaml").prune_slack
    for stratum, trials in run.trials.items():
        for t in trials:
            best = slack * best_before(trials, t)
            assert t.result is not None
            if status(t) == "pruned":
                # stopped at the first evaluation at or past slack x the best steps so far
                assert best <= t.result.steps_run < best + EVAL_EVERY, (stratum, t.number)
                seen = optuna_view[stratum][t.number]
                assert seen.state is OptunaState.PRUNED
                # its value: the steps it ran (it needs more), not an accuracy
                assert seen.value == t.result.steps_run == seen.user_attrs["steps_more_than"]
                # its distance to the target is its intermediate values, up to the step
                steps = list(seen.intermediate_values)
                assert steps[-1] == t.result.steps_run
                assert set(steps) <= {m.step for m in t.result.curve}
                target = Target.parse(run.config["target"])  # its metric and threshold
                last = t.result.curve[-1].metrics[target.metric]
                assert seen.intermediate_values[steps[-1]] == pytest.approx(
                    target.threshold - last if target.maximize else last - target.threshold
                )
                # short of the target, or on a crossing that began there, past the best: it
                # could only tie or lose once it held
                if seen.intermediate_values[steps[-1]] <= 0:
                    assert not target.met_by(t.result.curve[-2].metrics)
            elif math.isfinite(best) and status(t) == "not_reached":
                assert t.result.steps_run < best  # its budget ended before the slack did
            elif math.isfinite(best) and status(t) != "diverged":
                # a trial that ran while a better one was known reached the target within the
                # slack
                assert status(t) == "reached", (stratum, t.number)
                assert (t.steps_to_target or math.inf) <= best


@pytest.mark.slow
def test_each_trial_trains_under_its_own_seed_drawn_from_the_studys(
    finished: Callable[[str], Finished],
) -> None:
    run = finished("both")
    config = parse_study(run.config, "tiny.yaml")
    trials = [t for t in all_trials(run) if t.result is not None]
    seeds = [t.result.environment["seed"] for t in trials]
    assert seeds == [config.trial_seed(t.stratum, t.number) for t in trials]
    assert len(set(seeds)) == len(seeds)  # seed noise is sampled, not frozen into the search
    first = trials[0]
    assert seeds[0] == drawn_seed(0, first.stratum, first.number)  # the study's seed: 0


@pytest.mark.slow
def test_confirmation_trials_rerun_the_best_points_under_other_seeds(
    tmp_path: Path, pool: KeptPool
) -> None:
    """``tuner.confirm: {top: 1, seeds: 2}``: after its 3 search trials each stratum re-runs
    its best point under seeds 1 and 2 (never pruned); the per-batch-size table reports the
    median over the three seeds and its spread."""
    data = tiny_study(name="confirm", tuner={"confirm": {"top": 1, "seeds": 2}})
    run = run_engine(tmp_path, data, "both", pool)

    assert run.exit_status == 0
    assert_budget_spent(run.trials, data["trials_per_stratum"] + 2)
    rows = []
    for stratum, trials in run.trials.items():
        search = [t for t in trials if t.origin != "confirm"]
        confirm = [t for t in trials if t.origin == "confirm"]
        assert len(search) == 3 and [t.number for t in confirm] == [3, 4]
        best = min(search, key=lambda t: t.rank())
        assert {t.extras["seed"] for t in confirm} == {1, 2}
        for t in confirm:
            assert t.params == best.params and t.extras["confirms"] == best.number
            assert t.result is not None and t.result.environment["seed"] == t.extras["seed"]
            assert status(t) in ("reached", "not_reached"), (stratum, t.number)
            assert t.tuner == best.tuner
        rows.append((stratum, best, confirm))

    ledger = run.store.ledger(data["name"], fresh=True)
    table = ledger_table(data["name"], ledger.measurement_rows())
    target = replace(Target.parse(data["target"]), hold=ledger.require().hold_rule)
    steps = steps_to_result(table, target).set_index("batch_size")
    for stratum, best, confirm in rows:
        seeds = [best.steps_to_target, *(t.steps_to_target for t in confirm)]
        if None in seeds:
            continue
        row = steps.loc[best.stratum.batch_size]
        assert row["seeds"] == 3, stratum
        assert row["steps_to_result"] == sorted(seeds)[1]
        assert (row["steps_low"], row["steps_high"]) == (min(seeds), max(seeds))


@pytest.mark.slow
def test_without_pruning_every_trial_runs_to_the_target_or_the_budget(
    tmp_path: Path, pool: KeptPool
) -> None:
    data = tiny_study(
        name="no-pruning", search_space={"batch_size": [128]}, tuner={"pruning": False}
    )
    run = run_engine(tmp_path, data, "optuna", pool)

    assert run.exit_status == 0
    (trials,) = run.trials.values()
    assert len(trials) == 3
    assert_optuna_mirrors_ledger(run.store, data)
    for t in trials:
        assert status(t) in ("reached", "not_reached")
        assert t.result is not None
        if t.steps_to_target:  # stopped once the target had held through its window
            window = DEFAULT_HOLD.window(t.steps_to_target)
            assert t.result.steps_run == t.steps_to_target + window
        else:
            assert t.result.steps_run == data["budget"]["max_steps"]
    # some trial went on past the best steps known when it ran: pruning would have stopped it
    assert any(t.result and t.result.steps_run > best_before(trials, t) for t in trials)


@pytest.mark.slow
def test_an_infeasible_strategy_does_not_stop_the_study(tmp_path: Path, pool: KeptPool) -> None:
    data = tiny_study(
        name="needs-tpu",
        trials_per_stratum=2,
        search_space={"batch_size": [128], "strategy": ["tpu", "default"]},
        tuner={"max_consecutive_failures": 1},  # infeasible trials are not failures
    )
    run = run_engine(tmp_path, data, "optuna", pool)

    assert run.exit_status == 0
    assert_budget_spent(run.trials, 2)
    assert_optuna_mirrors_ledger(run.store, data)
    for t in run.trials["b128/tpu"]:
        assert status(t) == "infeasible"
        assert t.result is not None and "TPU" in (t.result.error or "")
    assert all(status(t) != "infeasible" for t in run.trials["b128/default"])
    runs = assert_mlflow_mirrors_ledger(run.store, data, run.trials)
    assert Counter(r.data.tags["status"] for r in runs.values())["infeasible"] == 2
    summary = study_status(run)
    assert summary["state"] == "complete"


def study_status(run: Finished) -> dict[str, Any]:
    return cli_json(["status", run.config["name"], "--storage", str(run.store.journal)])


def cli_json(argv: list[str]) -> Any:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main([*argv, "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.mark.slow
def test_status_and_ls_report_the_ledger(
    finished: Callable[[str], Finished], capsys: pytest.CaptureFixture[str]
) -> None:
    run = finished("both")
    name, journal = run.config["name"], str(run.store.journal)

    summary = study_status(run)

    total = 2 * run.config["trials_per_stratum"]
    assert (summary["study"], summary["state"]) == (name, "complete")
    assert (summary["trials_done"], summary["trials_total"], summary["running"]) == (
        total,
        total,
        0,
    )
    assert [s["stratum"] for s in summary["strata"]] == ["b32/default", "b128/default"]
    for row in summary["strata"]:
        trials = run.trials[row["stratum"]]
        assert row["trials"] == len(trials)
        assert row["statuses"] == dict(Counter(status(t) for t in trials))
        reached = [t for t in trials if status(t) == "reached"]
        best = min(reached, key=lambda t: (t.steps_to_target, t.learning_rate))
        assert row["best_steps"] == best.steps_to_target
        assert row["best_learning_rate"] == best.params["learning_rate"]
        assert (row["best_trial"], row["best_tuner"]) == (best.number, best.tuner)
    # Two batch sizes are too few for the model of every trial: it says so instead of answering.
    answers = summary.pop("answers")
    assert answers == {
        "ok": False,
        "reason": "fewer than 3 batch sizes reached the target (2)",
        "line": "no answer yet: fewer than 3 batch sizes reached the target (2)",
    }
    assert cli_json(["ls", "--storage", journal]) == [summary]

    capsys.readouterr()  # what the study's run printed, when this test ran it
    assert cli.main(["status", name, "--storage", journal]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0] == f"study {name}: {total}/{total} trials, complete"
    for row in summary["strata"]:
        line = next(line for line in table if line.startswith(row["stratum"] + " "))
        assert line.split()[1:3] == [str(row["trials"]), str(row["statuses"].get("reached", 0))]
    assert cli.main(["ls", "--storage", journal]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[1].split() == [name, f"{total}/{total}", "2", "complete"]


# -- where a trial's wall time went -----------------------------------------------------------

PARTS = {"build": 0.25, "trace": 0.5, "train": 1.0, "evaluate": 0.125}


def test_bookkeeping_is_the_wall_time_the_trainer_did_not_measure() -> None:
    timings = account(PARTS, wall=2.0)

    assert timings == {**PARTS, "bookkeeping": 0.125, "wall": 2.0}
    assert sum(timings.get(p, 0.0) for p in (*TRAINER_PARTS, "bookkeeping")) == timings["wall"]


def test_bookkeeping_is_never_negative() -> None:
    # the trainer's clocks and the engine's disagree by a little: no negative remainder
    assert account(PARTS, wall=1.8)["bookkeeping"] == 0.0


def test_only_the_wall_time_is_known_without_the_trainers_parts() -> None:
    assert account({}, wall=0.75) == {"wall": 0.75}
    # some parts measured (a trial that failed while building): the rest is bookkeeping
    assert account({"build": 0.25}, wall=0.75) == {"build": 0.25, "bookkeeping": 0.5, "wall": 0.75}


def test_the_engine_owns_bookkeeping_and_wall_and_keeps_other_keys() -> None:
    given = {**PARTS, "bookkeeping": 9.0, "wall": 9.0, "compile": 0.5}
    assert account(given, wall=2.0) == {**PARTS, "compile": 0.5, "bookkeeping": 0.125, "wall": 2.0}


def test_timed_stops_the_clock_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trial_timings, "time", SimpleNamespace(perf_counter=lambda: 100.75))
    result = TrialResult(state=TrialState.REACHED, timings={"train": 0.25})

    timings = timed(result, started=100.0).timings

    assert timings == {"train": 0.25, "bookkeeping": 0.5, "wall": 0.75}
    assert result.timings == {"train": 0.25}  # the result itself is left as it was


@pytest.mark.slow
def test_every_trial_records_its_wall_time_in_the_ledger_mlflow_and_status(
    finished: Callable[[str], Finished],
) -> None:
    run = finished("both")
    name = run.config["name"]
    trials = all_trials(run)

    for t in trials:
        assert t.result is not None
        timings = t.result.timings
        # the wall time covers at least the training the trial measured
        assert timings["wall"] >= t.result.train_seconds > 0, (t.stratum, t.number)
        measured = [timings[p] for p in TRAINER_PARTS if p in timings]
        if measured:
            assert timings["bookkeeping"] == pytest.approx(
                max(0.0, timings["wall"] - sum(measured))
            )
    runs = {
        r.data.tags["study.trial"]: r for r in run.store.runs(name) if "study.trial" in r.data.tags
    }
    for t in trials:
        assert t.result is not None
        metrics = runs[f"{name}/{t.stratum}#{t.number}"].data.metrics
        # MLflow's copy stops the clock later: it also counts the ledger write
        assert metrics["timing/wall_seconds"] >= t.result.timings["wall"]
        assert metrics["timing/wall_seconds"] < t.result.timings["wall"] + 5.0
    (parent,) = [r for r in run.store.runs(name) if r.data.tags.get("study.role") == "parent"]
    walls = [t.result.timings["wall"] for t in trials if t.result is not None]
    assert parent.data.metrics["timing/trials"] == len(trials)
    assert parent.data.metrics["timing/total_wall_seconds"] == pytest.approx(sum(walls))
    assert 0 < parent.data.metrics["timing/train_share"] < 1

    summary = study_status(run)
    assert summary["timings"]["trials"] == len(trials)
    assert summary["timings"]["total_seconds"]["wall"] == pytest.approx(sum(walls))


@pytest.mark.slow
def test_a_study_of_four_batch_sizes_designs_trials_and_states_its_answers(
    tmp_path: Path, pool: KeptPool, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_study(
        name="tiny-design",
        trials_per_stratum=8,  # designed: 2, 3, 6, 7 (bracketing first, then the model's)
        search_space={"batch_size": [32, 64, 128, 256]},
    )
    run = run_engine(tmp_path, data, "both", pool)
    out = capsys.readouterr().out

    assert run.exit_status == 0
    trials = all_trials(run)
    designed = [t for t in trials if t.origin == "design"]
    assert designed and all(t.number in (2, 3, 6, 7) for t in designed)
    assert {t.tuner for t in designed} <= {"optuna", "keras-tuner"}
    # placed by the model (its expected gain), or bracketing its batch size's best first
    assert all("design_gain" in t.extras or "design_probe" in t.extras for t in designed)
    assert {t.extras.get("design_probe") for t in designed} <= {None, "bracket", "gap"}
    line = next(x for x in out.splitlines() if x.startswith("answer: "))
    assert line.startswith("answer: B_noise ") and "(95% intervals, " in line
    parent = next(
        r for r in run.store.runs(data["name"]) if r.data.tags.get("study.role") == "parent"
    )
    metrics = parent.data.metrics
    assert (
        metrics["answer/b_noise_low"] <= metrics["answer/b_noise"] <= metrics["answer/b_noise_high"]
    )
    # The end of the run states the parent run's numbers.
    assert f"B_noise {fmt(metrics['answer/b_noise'])} (" in line


def test_a_ledger_damaged_while_the_study_runs_ends_it_in_one_error(
    tmp_path: Path, pool: KeptPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store found damaged mid-run (`StoreDamaged`, a usage error: one line, exit 2) stops
    the study and reaches the caller; it is not an internal error with a traceback, and the
    trials finished before it stay recorded."""
    from study.errors import StoreDamaged

    finish = Ledger.finish
    calls = {"n": 0}

    def damaged_on_the_third(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise StoreDamaged("mlruns/optuna.journal", "line 9 is not a whole record", "restore")
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(Ledger, "finish", damaged_on_the_third)
    with pytest.raises(StoreDamaged, match=r"optuna\.journal is damaged"):
        run_engine(tmp_path, tiny_study(name="tiny-damaged"), "optuna", pool)
    kept = Store(tmp_path).trials(tiny_study(name="tiny-damaged"), fresh=True)
    assert sum(t.result is not None for trials in kept.values() for t in trials) == 2
