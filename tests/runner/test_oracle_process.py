"""`study.runner.oracle_process`: KerasTuner's oracle in a process of its own proposes what it
would propose in the host, survives its process being killed, names its errors, ends with the
run, and leaves a study's host without TensorFlow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.ledger import Ledger
from study.results import TrialResult, TrialState
from study.runner.oracle_process import OracleProcess
from study.tuners.base import History
from study.tuners.keras_tuner_backend import KerasTunerBackend
from study.tuners.keras_tuner_oracle import LocalOracle
from study.tuners.keras_tuner_records import DrawRequest

STUDY = {
    "name": "oracle",
    "workload": "tabular",
    "target": "val_accuracy>=0.9",
    "budget": {"max_steps": 100},
    "trials_per_stratum": 8,
    "search_space": {"batch_size": [32], "learning_rate": {"low": 0.01, "high": 1.0}},
}
STRATUM = Stratum(32, "auto")


@pytest.fixture
def oracle() -> Iterator[OracleProcess]:
    process = OracleProcess(parse_study(STUDY, "oracle.yaml"))
    yield process
    process.close()


def proposals(backend: KerasTunerBackend, ledger: Ledger, count: int) -> list[float]:
    """Learning rates of ``count`` KerasTuner proposals, each finished with a score."""
    rates = []
    for n in range(count):
        slot = ledger.claim(STRATUM, budget=8)
        assert slot is not None
        proposal = backend.propose(slot, History(STRATUM, tuple(ledger.trials(STRATUM))))
        assert proposal is not None and proposal.tuner == "keras-tuner"
        ledger.start(slot, tuner=proposal.tuner, origin=proposal.origin, extras=proposal.extras)
        steps = 100 + 10 * n
        result = TrialResult(state=TrialState.REACHED, steps_run=steps, steps_to_target=steps)
        ledger.finish(slot, result, float(steps))
        rates.append(float(proposal.params["learning_rate"]))
    return rates


def started_pid(oracle: OracleProcess, timeout: float = 60.0) -> int | None:
    """The oracle's process id once `OracleProcess.warm`'s thread has done its work."""
    for thread in threading.enumerate():
        if thread.name == "study-oracle-warm":
            thread.join(timeout)
    return oracle.pid


def test_it_proposes_what_the_oracle_proposes_in_this_process(
    tmp_path: Path, oracle: OracleProcess
) -> None:
    config = parse_study(STUDY, "oracle.yaml")
    remote = Ledger.open(str(tmp_path / "remote.journal"), "oracle")
    local = Ledger.open(str(tmp_path / "local.journal"), "oracle")

    there = proposals(KerasTunerBackend(config, remote, oracle=lambda c: oracle), remote, 4)
    here = proposals(KerasTunerBackend(config, local, oracle=LocalOracle), local, 4)

    assert there == here
    assert len(set(there)) == 4
    assert oracle.pid is not None and oracle.pid != os.getpid()


def test_a_killed_oracle_process_is_started_again(oracle: OracleProcess) -> None:
    request = DrawRequest(STRATUM, None, 0, ())
    first = oracle.call("draw", request)
    pid = oracle.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)

    assert oracle.call("draw", request) == first  # the same seed: the same proposal
    assert oracle.pid not in (None, pid)


def test_a_redraw_whose_process_died_names_the_end_of_the_process(oracle: OracleProcess) -> None:
    oracle.call("draw", DrawRequest(STRATUM, None, 0, ()))
    pid = oracle.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)

    with pytest.raises(RuntimeError, match=r"oracle process ended"):
        oracle.call("redraw", 0)


def test_an_error_in_the_oracle_is_raised_with_its_message(oracle: OracleProcess) -> None:
    with pytest.raises(RuntimeError, match=r"oracle failed: RuntimeError: redraw before any draw"):
        oracle.call("redraw", 0)
    assert oracle.call("draw", DrawRequest(STRATUM, None, 0, ())) is not None  # still serving


def test_close_ends_the_process(oracle: OracleProcess) -> None:
    oracle.call("draw", DrawRequest(STRATUM, None, 0, ()))
    pid = oracle.pid
    assert pid is not None
    oracle.close()
    assert oracle.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_warm_starts_the_process_without_a_call(oracle: OracleProcess) -> None:
    oracle.warm()
    pid = started_pid(oracle)
    assert pid is not None and pid != os.getpid()

    assert oracle.call("draw", DrawRequest(STRATUM, None, 0, ())) is not None
    assert oracle.pid == pid  # the first call used the process warm started


def test_warm_after_close_starts_nothing() -> None:
    oracle = OracleProcess(parse_study(STUDY, "oracle.yaml"))
    oracle.close()
    oracle.warm()
    assert started_pid(oracle) is None  # the warm thread has done what it was going to do


def test_a_lineup_warms_its_keras_tuner_oracle(tmp_path: Path) -> None:
    from study.tuners.registry import build_lineup

    config = parse_study(STUDY, "oracle.yaml")
    made: list[OracleProcess] = []

    def oracle(c: object) -> OracleProcess:
        made.append(OracleProcess(config))
        return made[-1]

    lineup = build_lineup("both", config, Ledger.open(str(tmp_path / "j"), "oracle"), oracle)
    try:
        lineup.warm()
        assert len(made) == 1
        assert started_pid(made[0]) is not None
    finally:
        lineup.close()
    assert made[0].pid is None


HOST = """
import sys
from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.ledger import Ledger
from study.runner.oracle_process import OracleProcess
from study.tuners.base import History
from study.tuners.registry import build_lineup

if __name__ == "__main__":  # a worker process imports this file as its main module
    config = parse_study({study!r}, "oracle.yaml")
    ledger = Ledger.open({journal!r}, "oracle")
    lineup = build_lineup("both", config, ledger, oracle=OracleProcess)
    stratum = Stratum(32, "auto")
    tuners = []
    for _ in range(2):
        slot = ledger.claim(stratum, budget=8)
        _, proposal = lineup.propose(slot, History(stratum, tuple(ledger.trials(stratum))))
        tuners.append(proposal.tuner)
    lineup.close()
    print(tuners, *(name in sys.modules for name in ("tensorflow", "keras_tuner", "keras")))
"""


def test_a_host_proposing_for_keras_tuner_imports_no_tensorflow(tmp_path: Path) -> None:
    script = tmp_path / "host.py"
    script.write_text(HOST.format(study=STUDY, journal=str(tmp_path / "j.journal")))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "['optuna', 'keras-tuner'] False False False"


def test_closing_a_warmed_process_that_never_answered_does_not_wait_for_it() -> None:
    oracle = OracleProcess(parse_study(STUDY, "oracle.yaml"))
    oracle.warm()
    pid = started_pid(oracle)
    assert pid is not None

    began = time.monotonic()
    oracle.close()

    assert time.monotonic() - began < 2.0
    assert oracle.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize(
    ("tuner", "starts"), [("both", True), ("keras-tuner", True), ("optuna", False)]
)
def test_a_run_starts_keras_tuners_oracle_while_its_preflight_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tuner: str, starts: bool
) -> None:
    """KerasTuner's import overlaps the preflight; a preflight that fails ends the process."""
    from study.errors import UsageError
    from study.runner import launch

    made: list[OracleProcess] = []
    pids: list[int | None] = []

    class Recorded(OracleProcess):
        def __init__(self, config) -> None:
            super().__init__(config)
            made.append(self)

    def preflight(config: object, pool: object) -> None:
        pids.extend(started_pid(oracle) for oracle in made)
        raise UsageError("oracle.yaml: stopped by the test after its preflight")

    monkeypatch.setattr(launch, "OracleProcess", Recorded)
    monkeypatch.setattr(launch, "preflight", preflight)
    options = launch.RunOptions(
        tuner=tuner,
        storage=str(tmp_path / "j.journal"),
        tracking_uri=(tmp_path / "mlruns").as_uri(),
    )
    with pytest.raises(UsageError, match="stopped by the test"):
        launch.run_study(parse_study(STUDY, "oracle.yaml"), options)

    assert len(made) == int(starts)
    assert all(pid is not None for pid in pids) and len(pids) == int(starts)
    assert all(oracle.pid is None for oracle in made)  # closed with the failed run
