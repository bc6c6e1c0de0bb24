"""A study that lives only in its two services: a real PostgreSQL server (the ledger) and a real
``mlflow server`` whose backend store is PostgreSQL too (runs, artifacts).

Host A runs ``study run FILE --max-trials 2`` in a directory of its own; host B, in another
directory that holds nothing, joins with ``study worker NAME`` and finishes the study; host C,
in a third, writes the report. Nothing lands under any of the three directories but the study
file and the report, KerasTuner's oracles included; the password of the storage URL appears in
no output, MLflow param, tag or artifact, nor in the report.

Bad input through the CLI: a storage not listening, wrong credentials, a study name the storage
does not hold, a tracking server not answering, and a study made by other code: one line,
exit 2, nothing recorded.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from optuna.storages import InMemoryStorage

from study.config.space import Stratum
from study.ledger import Ledger, StudyRecord, list_studies, open_storage
from study.paths import DEFAULT_ROOT
from study.tuners.keras_tuner_backend import KT_TRIAL
from study.version import code_version
from tests.inprocess import study_each, study_in
from tests.runner.conftest import run_study, tiny_study, write_study
from tests.services import PostgresServer, free_port

pytestmark = pytest.mark.slow

NAME = "no-shared-fs"
DATA = tiny_study(name=NAME, trials_per_stratum=2)  # 2 batch sizes x 2 trials, tuner "both"


def host(cwd: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``study ARGS`` in ``cwd`` as a host of its own would (its dataset cache elsewhere),
    in a process of its own: two hosts' trials must carry two owners."""
    cwd.mkdir(parents=True, exist_ok=True)
    return run_study(*args, cwd=cwd, timeout=300, env={"STUDY_CACHE_DIR": str(cache)})


def here(cwd: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`host` in this test's process, where who runs it does not matter (a report, refusals)."""
    cwd.mkdir(parents=True, exist_ok=True)
    return study_in(*args, cwd=cwd, cache=cache)


def files_under(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@dataclass
class Shared:
    storage: str
    tracking: str
    password: str
    root: Path
    file: Path
    runs: dict[str, subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def shared(
    postgres: PostgresServer, mlflow_server_pg: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shared]:
    root = tmp_path_factory.mktemp("shared-services")
    storage = postgres.create_database()
    urls = ("--storage", storage, "--tracking-uri", mlflow_server_pg)
    cache = root / "cache"
    (root / "a").mkdir()
    file = write_study(root / "a", DATA)
    runs = {
        "run": host(root / "a", cache, "run", file.name, *urls, "--max-trials", "2"),
        "worker": host(root / "b", cache, "worker", NAME, *urls),
        "report": here(root / "c", cache, "report", NAME, *urls, "--out", "report"),
    }
    for command, result in runs.items():
        assert result.returncode == 0, f"{command}: {result.stderr[-3000:]}"
    yield Shared(storage, mlflow_server_pg, postgres.password, root, file, runs)


def parent_run(client: MlflowClient) -> Any:
    experiment = client.get_experiment_by_name(NAME)
    assert experiment is not None
    (parent,) = [
        r for r in client.search_runs([experiment.experiment_id]) if r.info.run_name == NAME
    ]
    return parent


def test_two_hosts_finish_the_study_in_the_database(shared: Shared) -> None:
    ledger = Ledger.open(shared.storage, NAME, create=False)
    trials = [t for b in (32, 128) for t in ledger.trials(Stratum(b, "default"))]
    counted = [t for t in trials if t.status.counts()]
    assert len(counted) == 4 and not any(t.open for t in trials)
    assert len({t.owner.split(":")[1] for t in counted if t.owner}) == 2  # host A's, host B's
    kt = [t for t in counted if t.tuner == "keras-tuner"]
    assert kt and all(KT_TRIAL in t.extras for t in kt)
    assert "4 trials (complete)" in shared.runs["report"].stdout


def test_the_ledger_holds_the_study_file_and_its_code_version(shared: Shared) -> None:
    record = Ledger.open(shared.storage, NAME, create=False).record()
    assert record is not None
    assert record.config_text == shared.file.read_text()
    assert record.code_version == code_version()


def test_nothing_is_written_under_any_hosts_directory(shared: Shared) -> None:
    assert files_under(shared.root / "a") == [shared.file.name]
    assert files_under(shared.root / "b") == []
    assert all(f.startswith("report") for f in files_under(shared.root / "c"))
    for directory in ("a", "b", "c"):
        assert not (shared.root / directory / DEFAULT_ROOT).exists()  # no mlruns/, no KerasTuner


def test_report_artifacts_are_on_the_tracking_server(shared: Shared) -> None:
    client = MlflowClient(tracking_uri=shared.tracking)
    parent = parent_run(client)
    assert parent.info.artifact_uri.startswith("mlflow-artifacts:")  # served, not a local path
    uploaded = {Path(a.path).name for a in client.list_artifacts(parent.info.run_id, "report")}
    written = {p.name for p in (shared.root / "c" / "report").iterdir()}
    assert {"report.html", "report.md", "report.json"} <= uploaded
    assert uploaded == written


def test_the_password_appears_nowhere(shared: Shared, tmp_path: Path) -> None:
    secret = shared.password
    for command, result in shared.runs.items():
        assert secret not in result.stdout + result.stderr, command
    assert "study:***@" in (shared.root / "c" / "report" / "report.md").read_text()
    for path in (shared.root / "c" / "report").iterdir():
        assert secret not in path.read_text(errors="replace"), path.name
    client = MlflowClient(tracking_uri=shared.tracking)
    experiment = client.get_experiment_by_name(NAME)
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 5  # the parent and 4 trials
    for run in runs:
        for key, value in {**run.data.params, **run.data.tags}.items():
            assert secret not in f"{key}={value}", (run.info.run_name, key)
    downloaded = Path(client.download_artifacts(parent_run(client).info.run_id, "", str(tmp_path)))
    artifacts = [p for p in downloaded.rglob("*") if p.is_file()]
    assert len(artifacts) >= 5
    for path in artifacts:
        assert secret not in path.read_text(errors="replace"), path.name


# --------------------------------------------------------------------------------------------
# Bad input: one line, exit 2, nothing recorded


def refused(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The one-line error of a command that exited 2, checked to contain ``needles``."""
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def no_experiment(tracking: str, name: str) -> bool:
    return MlflowClient(tracking_uri=tracking).get_experiment_by_name(name) is None


@pytest.fixture
def study_file(tmp_path: Path) -> Path:
    (tmp_path / "files").mkdir()
    return write_study(tmp_path / "files", tiny_study(name="refused"))


@pytest.mark.parametrize("command", ["run"])
def test_a_storage_that_does_not_listen(
    command: str, study_file: Path, mlflow_server_pg: str, tmp_path: Path
) -> None:
    url = f"postgresql+psycopg://study:pw5678@127.0.0.1:{free_port()}/ledger"
    target = str(study_file) if command == "run" else "refused"
    result = here(
        tmp_path / "cwd",
        tmp_path / "cache",
        command,
        target,
        "--storage",
        url,
        "--tracking-uri",
        mlflow_server_pg,
    )
    line = refused(result, "--storage: cannot open", "Connection refused", "study:***@")
    assert "pw5678" not in result.stdout + line
    assert no_experiment(mlflow_server_pg, "refused")
    assert files_under(tmp_path / "cwd") == []


@pytest.mark.parametrize("command", ["worker"])
def test_wrong_credentials(
    command: str,
    study_file: Path,
    postgres: PostgresServer,
    postgres_url: str,
    mlflow_server_pg: str,
    tmp_path: Path,
) -> None:
    wrong = postgres.url(postgres_url.rsplit("/", 1)[1], password="N0tThePassw0rd")
    target = str(study_file) if command == "run" else "refused"
    result = here(
        tmp_path / "cwd",
        tmp_path / "cache",
        command,
        target,
        "--storage",
        wrong,
        "--tracking-uri",
        mlflow_server_pg,
    )
    line = refused(result, "password authentication failed", "check the user and password")
    assert "N0tThePassw0rd" not in result.stdout + line
    assert list_studies(open_storage(postgres_url)) == []
    assert no_experiment(mlflow_server_pg, "refused")


@pytest.mark.parametrize("command", ["worker", "report"])
def test_a_study_the_storage_does_not_hold(
    command: str, postgres_url: str, mlflow_server_pg: str, tmp_path: Path
) -> None:
    args = ["--storage", postgres_url]
    if command != "status":
        args += ["--tracking-uri", mlflow_server_pg]
    result = here(tmp_path / "cwd", tmp_path / "cache", command, "nosuch", *args)
    refused(result, "no study named 'nosuch' in this storage", "study ls")
    assert isinstance(open_storage(postgres_url, create=False), InMemoryStorage)  # no tables
    assert list_studies(open_storage(postgres_url)) == []
    assert no_experiment(mlflow_server_pg, "nosuch")
    assert files_under(tmp_path / "cwd") == []


def test_a_tracking_server_that_does_not_answer_records_nothing(
    shared: Shared, study_file: Path, postgres_url: str, tmp_path: Path
) -> None:
    """``run`` on a new storage, ``worker`` and ``report`` on the shared study, each in a
    directory of its own, one after the other in one Python process."""
    dead = f"http://127.0.0.1:{free_port()}"
    before = Ledger.open(shared.storage, NAME, create=False).summary().to_dict()
    for host_dir in ("a", "b", "c"):
        (tmp_path / host_dir).mkdir()
    new_storage = ("--storage", postgres_url, "--tracking-uri", dead)
    on_shared = ("--storage", shared.storage, "--tracking-uri", dead)
    run, worker, report = study_each(
        [
            (tmp_path / "a", ["run", str(study_file), *new_storage]),
            (tmp_path / "b", ["worker", NAME, *on_shared]),
            (tmp_path / "c", ["report", NAME, *on_shared, "--out", "report"]),
        ],
        logs=tmp_path / "logs",
    )
    refused(run, "--tracking-uri: no MLflow tracking server answers at", dead)
    assert list_studies(open_storage(postgres_url)) == []
    refused(worker, "no MLflow tracking server answers")
    assert Ledger.open(shared.storage, NAME, create=False).summary().to_dict() == before
    assert shared.password not in worker.stdout + worker.stderr
    refused(report, "no MLflow tracking server answers")
    assert files_under(tmp_path / "c") == []  # no report half-written


@pytest.mark.parametrize("command", ["run", "worker"])
def test_a_study_made_by_other_code_is_refused(
    command: str, study_file: Path, postgres_url: str, mlflow_server_pg: str, tmp_path: Path
) -> None:
    text = study_file.read_text()
    ledger = Ledger.open(postgres_url, "refused")
    ledger.create(
        StudyRecord(
            name="refused",
            config_text=text,
            tuner="both",
            trials_total=6,
            code_version="0.0.1+0123456789",
        )
    )
    target = str(study_file) if command == "run" else "refused"
    env_pin = os.environ.get("STUDY_CODE_VERSION")
    assert env_pin == code_version()
    result = here(
        tmp_path / "cwd",
        tmp_path / "cache",
        command,
        target,
        "--storage",
        postgres_url,
        "--tracking-uri",
        mlflow_server_pg,
    )
    refused(
        result,
        "'refused' was created by study 0.0.1+0123456789",
        code_version(),
        "install the same version",
        "new study",
    )
    assert ledger.strata() == []  # no trial claimed
    assert no_experiment(mlflow_server_pg, "refused")
