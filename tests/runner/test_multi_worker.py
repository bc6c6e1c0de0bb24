"""Tests for multi-worker trials: ``multi_worker_mirrored:2`` on a group of two trainer processes
coordinated by ``TF_CONFIG`` on loopback ports (study.runner.cluster, through study.runner.pool).

One pool serves the in-process tests (a `default` worker and one group, each started once); the
CLI and study-file tests run `study.cli.main` (its own pool and group), and the bad-input test
`study` as a user does. Trials are the tabular workload's MLP.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import re
import select
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from study.config.schedule import BatchSchedule, Stage
from study.config.target import Target
from study.config.trial import Budget
from study.results import Measurement, TrialResult, TrialState
from study.runner import WorkerPool
from study.runner.cluster import (
    GroupError,
    WorkerGroup,
    follower_spec,
    free_ports,
    out_of_time,
    tf_config,
)
from tests.cli import study
from tests.fakes import tabular_spec
from tests.inprocess import study_here
from tests.runner.conftest import FINISHED, Store, tiny_study, write_study
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

GROUP = "multi_worker_mirrored:2"
LOSS_RTOL = 1e-3


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    """One pool for the module. Its group starts once (10-20 s here) and serves every test in
    file order until the dead-or-hung test drops it, so the tests that reuse it come first."""
    with WorkerPool(2) as shared:  # room for the default worker and the group side by side
        yield shared


def two_ways(pool: WorkerPool, **changes: object) -> tuple[TrialResult, TrialResult]:
    """The same trial under ``default`` and under a 2-worker group."""
    results = tuple(
        pool.run(tabular_spec(strategy=strategy, **changes)) for strategy in ("default", GROUP)
    )
    for result in results:
        assert result.error is None, result.error
    return results  # type: ignore[return-value]


def test_two_workers_match_one_device_at_the_same_global_batch(pool: WorkerPool) -> None:
    one, group = two_ways(pool, batch_size=64, budget=Budget(max_steps=40))
    assert group.environment["strategy"] == "multi_worker_mirrored"
    assert group.environment["replicas"] == 2
    assert group.environment["per_replica_batch"] == 32
    assert group.environment["workers"] == 2
    ports = [a.split(":") for a in group.environment["cluster"].split(",")]
    assert [host for host, _ in ports] == ["localhost", "localhost"]
    assert len({port for _, port in ports}) == 2
    assert group.environment["workers_agree"] is True  # both workers measured the same curve
    assert [m.step for m in group.curve] == [m.step for m in one.curve] == [0, 10, 20, 30, 40]
    for a, b in zip(one.curve[1:], group.curve[1:], strict=True):
        assert b.train_loss == pytest.approx(a.train_loss, rel=LOSS_RTOL)
        assert b.metrics["val_loss"] == pytest.approx(a.metrics["val_loss"], rel=LOSS_RTOL)
    assert (group.state, group.steps_run) == (one.state, one.steps_run)


def test_two_workers_train_a_batch_schedule_as_one_device(pool: WorkerPool) -> None:
    """A batch schedule on two hosts: each worker changes its replica's batch at the same
    step (the global batch / 2), and the curve is one device's."""
    plan = BatchSchedule((Stage(0, 32), Stage(640, 64)), learning_rate=0.1)
    one, group = (
        pool.run(tabular_spec(strategy=s, budget=Budget(max_steps=40)).with_batch_schedule(plan))
        for s in ("default", GROUP)
    )
    assert group.error is None and one.error is None, (group.error, one.error)
    assert group.environment["per_replica_batch"] == 16  # the first stage's 32 over 2 workers
    assert group.environment["workers_agree"] is True
    steps = [(m.step, m.examples) for m in group.curve]
    assert steps == [(m.step, m.examples) for m in one.curve]
    assert steps[-1] == (40, 640 + 20 * 64)
    for a, b in zip(one.curve[1:], group.curve[1:], strict=True):
        assert b.train_loss == pytest.approx(a.train_loss, rel=LOSS_RTOL)


def test_two_workers_measure_the_noise_scale_one_device_measures(pool: WorkerPool) -> None:
    """Per-replica gradients across two hosts are the two half-batch micro-batches of one
    device: the same estimate (the statistics are summed over hosts once per chunk)."""
    one, group = two_ways(
        pool, batch_size=64, budget=Budget(max_steps=40), noise_scale=True, noise_every=2
    )
    for a, b in zip(one.curve[1:], group.curve[1:], strict=True):
        assert b.train_loss == pytest.approx(a.train_loss, rel=LOSS_RTOL)
        for key in ("b_simple", "grad_sq", "trace_sigma"):
            assert b.noise[key] == pytest.approx(a.noise[key], rel=LOSS_RTOL), key


def test_the_group_serves_the_next_trial_and_its_target_step_matches(pool: WorkerPool) -> None:
    before = pool.pids()["mwm2"]
    one, group = two_ways(
        pool,
        batch_size=32,
        budget=Budget(max_steps=400),
        target=Target.parse("val_accuracy>=0.8"),
    )
    assert pool.pids()["mwm2"] == before  # no new processes: the cluster is set up once
    assert group.environment["reused"] is True  # and the model and traces were kept
    assert one.state is group.state is TrialState.REACHED
    assert group.steps_to_target == one.steps_to_target
    assert group.environment["workers_agree"] is True


def test_pruning_and_time_budget_reach_every_worker(pool: WorkerPool) -> None:
    """The hook sees the chief's measurements; its decision stops the whole group, which then
    runs the next trial (a worker left training would block the group's collectives)."""
    seen: list[int] = []

    def prune_at_20(m: Measurement) -> bool:
        seen.append(m.step)
        return m.step < 20

    spec = tabular_spec(strategy=GROUP, budget=Budget(max_steps=60))
    pruned = pool.run(spec, prune_at_20)
    assert pruned.state is TrialState.PRUNED, pruned.error
    assert seen == [0, 10, 20]
    assert pruned.environment["workers_agree"] is True
    timed = pool.run(tabular_spec(strategy=GROUP, budget=Budget(max_steps=None, max_seconds=1e-9)))
    assert timed.state is TrialState.NOT_REACHED, timed.error
    assert timed.steps_run == 10  # the chief's clock ran out after the first chunk
    assert timed.environment["workers_agree"] is True


def test_a_group_checks_trials_like_one_worker(pool: WorkerPool) -> None:
    bad = tabular_spec(strategy=GROUP, target=Target.parse("val_top9>=0.5"))
    problem = pool.check(bad)
    assert problem is not None and "val_top9" in problem
    assert pool.check(tabular_spec(strategy=GROUP)) is None


def test_a_dead_or_hung_worker_fails_the_trial_and_the_next_trial_runs(
    pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member killed mid-trial fails the trial at once; one that hangs alive (stopped) makes
    the chief's collective op fail (timeout, or TensorFlow finds the peer unresponsive), and the
    trial fails after a short grace. Each time the group is dropped; the next trial starts a new
    one."""

    def signal_worker_1(sig: int, seen: list[int]) -> Callable[[Measurement], bool]:
        def hook(m: Measurement) -> bool:
            if m.step == 10:
                seen.append(pool.pids()["mwm2"][1])
                os.kill(seen[-1], sig)
            return True

        return hook

    long_trial = tabular_spec(strategy=GROUP, budget=Budget(max_steps=100_000))
    killed: list[int] = []
    # The death ends the trial at once, not the chief's collective timeout: see
    # test_a_members_death_ends_a_wait_without_limit.
    result = pool.run(long_trial, signal_worker_1(signal.SIGKILL, killed))
    assert result.state is TrialState.FAILED
    assert result.error.startswith(f"worker 1 (a worker) of {GROUP} on localhost:"), result.error
    assert "died during the trial (exit code -9)" in result.error
    assert "the group is stopped and the next trial starts a new one" in result.error
    assert "mwm2" not in pool.pids()

    monkeypatch.setenv("STUDY_COLLECTIVE_TIMEOUT", "10")  # for the next group's members
    warm = pool.run(long_trial, lambda m: False)  # a fresh group traces the trial's functions
    assert warm.state is TrialState.PRUNED, warm.error
    assert killed[0] not in pool.pids()["mwm2"]
    monkeypatch.delenv("STUDY_COLLECTIVE_TIMEOUT")
    stopped: list[int] = []
    result = pool.run(long_trial, signal_worker_1(signal.SIGSTOP, stopped))
    assert stopped and result.state is TrialState.FAILED
    assert result.error.startswith(f"worker 1 (a worker) of {GROUP} on localhost:"), result.error
    assert "sent nothing during the trial after worker 0 (the chief)" in result.error
    # The chief's collective op timed out, or TensorFlow found its peer unresponsive first.
    assert re.search(r"failed \(\S*(DeadlineExceeded|Unavailable)Error: ", result.error)
    assert "mwm2" not in pool.pids()  # replaced by the next trial, as after the kill


def test_the_environments_cluster_runs_one_trial_per_host(
    pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bare ``multi_worker_mirrored`` on a real cluster: one `study` process per host, each
    with the scheduler's ``TF_CONFIG`` (here two pools on loopback ports), all given the same
    trial; they train it together and agree with one device."""
    one = pool.run(tabular_spec(budget=Budget(max_steps=20)))
    addresses = [f"localhost:{port}" for port in free_ports(2)]
    # What one host names multi_worker_mirrored, auto finds on the other (TF_CONFIG has peers).
    specs = [
        tabular_spec(strategy=name, budget=Budget(max_steps=20))
        for name in ("multi_worker_mirrored", "auto")
    ]
    hosts = [WorkerPool(1), WorkerPool(1)]
    try:
        with ThreadPoolExecutor(2) as threads:
            checks = []
            for index, host in enumerate(hosts):  # each worker copies TF_CONFIG when spawned
                monkeypatch.setenv("TF_CONFIG", tf_config(addresses, index))
                checks.append(threads.submit(host.check, specs[index]))
                wait_until(
                    lambda h=host: h.started, 30, f"host {index} spawning its worker", poll=0.01
                )
            # TF_CONFIG stays set, as on a real host: auto is routed by it on every trial.
            assert [check.result(timeout=120) for check in checks] == [None, None]
            results = list(threads.map(WorkerPool.run, hosts, specs))
    finally:
        for host in hosts:
            host.close()
    for result in results:
        assert result.state is TrialState.NOT_REACHED, result.error
        assert result.environment["replicas"] == 2
        assert result.environment["strategy"] == "multi_worker_mirrored"
        for a, b in zip(one.curve[1:], result.curve[1:], strict=True):
            assert b.train_loss == pytest.approx(a.train_loss, rel=LOSS_RTOL)
    chief, worker = results
    assert [(m.step, m.metrics) for m in chief.curve] == [(m.step, m.metrics) for m in worker.curve]


def test_a_members_death_ends_a_wait_without_limit() -> None:
    """A member that dies ends the group's wait for messages at once, though no deadline
    applies and its peer stays silent (as a chief blocked in a collective op does until its
    timeout). The silent member gives up after two minutes and closes its end of the pipe, so
    a death left unnoticed fails the test (worker 0 "died", exit code 0) instead of hanging it.
    """
    context = multiprocessing.get_context("spawn")
    (chief, chief_end), (peer, _peer_end) = context.Pipe(), context.Pipe()
    members = [
        context.Process(target=select.select, args=([chief_end], [], [], 120), daemon=True),
        context.Process(target=os._exit, args=(9,), daemon=True),
    ]
    for member in members:
        member.start()
    chief_end.close()
    group = WorkerGroup("mwm2", members, [chief, peer], ("a:1", "b:2"), GROUP)
    try:
        with pytest.raises(GroupError) as error:
            group._gather(None, "during the trial")
    finally:
        group.kill()
    assert str(error.value) == f"worker 1 (a worker) of {GROUP} on b:2 died during the trial " + (
        "(exit code 9)"
    )


def test_followers_ignore_the_clock_and_the_chief_decides() -> None:
    spec = tabular_spec(budget=Budget(max_steps=50, max_seconds=2.0))
    follower = follower_spec(spec)
    assert follower.settings.budget.max_seconds == math.inf
    assert follower.settings.budget.max_steps == 50
    assert follower_spec(tabular_spec()) == tabular_spec()
    assert out_of_time(spec, Measurement(10, 320, 2.0, 0.5, {}))
    assert not out_of_time(spec, Measurement(10, 320, 1.9, 0.5, {}))
    assert not out_of_time(tabular_spec(), Measurement(10, 320, 1e9, 0.5, {}))


def test_tf_config_names_every_worker_and_this_task() -> None:
    config = json.loads(tf_config(["localhost:5000", "localhost:5001"], 1))
    assert config == {
        "cluster": {"worker": ["localhost:5000", "localhost:5001"]},
        "task": {"type": "worker", "index": 1},
    }


def test_train_cli_runs_a_two_worker_trial_and_logs_the_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = f"sqlite:///{tmp_path}/m.db"
    proc = study_here(
        monkeypatch,
        capsys,
        "train",
        "--workload",
        "tabular",
        "--workload-option",
        "rows=2000",
        "--batch-size",
        "64",
        "--lr",
        "0.1",
        "--max-steps",
        "40",
        "--eval-every",
        "10",
        "--strategy",
        GROUP,
        "--tracking-uri",
        uri,
        "--json",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["environment"]["workers"] == 2
    assert out["environment"]["replicas"] == 2
    assert out["steps_run"] == 40

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("study-train")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.data.params["strategy"] == GROUP
    assert run.data.params["replicas"] == "2"
    assert run.data.params["per_replica_batch"] == "32"
    assert run.data.tags["workers"] == "2"
    assert run.data.tags["cluster"] == out["environment"]["cluster"]
    assert run.data.tags["workers_agree"] == "true"


def test_a_study_file_runs_default_and_two_worker_strata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tiny_study(
        name="groups",
        trials_per_stratum=1,
        budget={"max_steps": 60},  # a finished trial in each stratum is all this test needs
        search_space={"batch_size": [64], "strategy": ["default", GROUP]},
    )
    file = write_study(tmp_path, config)
    proc = study_here(monkeypatch, capsys, "run", str(file), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr

    store = Store(tmp_path)
    trials = store.trials(config)
    assert sorted(trials) == ["b64/default", f"b64/{GROUP}"]
    for stratum, kept in trials.items():
        assert [t.status.value in FINISHED for t in kept] == [True], stratum
    runs = [r for r in store.runs("groups") if "study.trial" in r.data.tags]
    group_runs = [r for r in runs if r.data.params.get("strategy") == GROUP]
    assert len(runs) == 2 and len(group_runs) == 1
    for run in group_runs:
        assert run.data.params["replicas"] == "2"
        assert run.data.tags["workers"] == "2"
        assert run.data.tags["cluster"].startswith("localhost:")
        assert run.data.tags["workers_agree"] == "true"


def test_a_worker_group_of_an_odd_batch_is_bad_input(tmp_path: Path) -> None:
    proc = study(
        "train", "--workload", "tabular", "--batch-size", "63", "--strategy", GROUP, cwd=tmp_path
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"study train: error: --batch-size 63 is not divisible by the 2 replicas of strategy "
        f"{GROUP!r}; use a multiple of 2"
    ]
    assert not (tmp_path / "mlruns").exists()
