"""A fleet through the storage proxy over TLS with a shared token: a real ``study
serve-storage`` process bound to every address (``--host 0.0.0.0``) with a certificate made in
the test, in front of a real PostgreSQL server; ``study run`` and a ``study worker`` process
reach it at ``grpcs://127.0.0.1:PORT``, trusting the test's CA (``--storage-ca``, and
``$STUDY_STORAGE_CA``), the token from a file (``$STUDY_STORAGE_TOKEN_FILE``, and
``--storage-token-file``). The worker completes the budget's trials; a worker with a wrong
token is refused with one line and exit 2 before it records anything; no output or log of
any process holds either token."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from study.ext.storage_proxy.access import CA_ENV, TOKEN_FILE_ENV
from tests.ext.storage_proxy.tls import Certs, make_certs, make_token
from tests.runner.conftest import (
    Background,
    Store,
    assert_budget_spent,
    counted,
    run_study,
    start_study,
    tiny_study,
    write_study,
)
from tests.services import free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

DATA = tiny_study(
    name="fleet",
    trials_per_stratum=2,
    search_space={"batch_size": [64], "strategy": ["default"]},
)


@pytest.fixture
def fleet(postgres_url: str, tmp_path: Path) -> Iterator[tuple[str, Certs, str, Background]]:
    """``study serve-storage`` on 0.0.0.0 with TLS and a token: the address workers use, the
    certificates, the token and the proxy's process."""
    certs = make_certs(tmp_path / "certs")
    token = make_token(tmp_path / "token")
    (tmp_path / "proxy").mkdir()
    served = start_study(
        "serve-storage", "--storage", postgres_url, "--host", "0.0.0.0",
        "--port", str(free_port()), "--tls-cert", str(certs.cert), "--tls-key", str(certs.key),
        cwd=tmp_path / "proxy", env={TOKEN_FILE_ENV: str(tmp_path / "token")},
    )  # fmt: skip
    line = wait_until(
        lambda: served.output()[0] or (served.process.poll() is not None and served.text()),
        60,
        "the proxy's line",
    )
    assert line.startswith("study serve-storage: serving "), served.text()
    address = line.split(" at ", 1)[1].split()[0]
    assert address.startswith("grpcs://0.0.0.0:")
    yield address.replace("0.0.0.0", "127.0.0.1"), certs, token, served
    served.stop()


def test_a_worker_completes_trials_over_tls_and_a_wrong_token_is_refused(
    fleet: tuple[str, Certs, str, Background], postgres_url: str, tmp_path: Path
) -> None:
    address, certs, token, served = fleet
    host = tmp_path / "host"
    host.mkdir()
    file = write_study(host, DATA)
    secrets = {CA_ENV: str(certs.ca), TOKEN_FILE_ENV: str(tmp_path / "token")}
    first = run_study(
        "run", file.name, "--tuner", "optuna", "--max-trials", "1", "--storage", address,
        cwd=host, env=secrets,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]

    wrong = make_token(tmp_path / "wrong")
    (tmp_path / "intruder").mkdir()
    refused = run_study(
        "worker", DATA["name"], "--storage", address, "--storage-ca", str(certs.ca),
        "--storage-token-file", str(tmp_path / "wrong"), cwd=tmp_path / "intruder",
    )  # fmt: skip
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        f"study worker: error: --storage: the proxy at {address!r} refused the token from "
        f"{TOKEN_FILE_ENV}={tmp_path / 'wrong'} (wrong token); use the token the proxy was "
        "started with\n"
    )
    assert not (tmp_path / "intruder" / "mlruns").exists()  # nothing recorded

    worker = run_study(
        "worker", DATA["name"], "--storage", address, "--storage-ca", str(certs.ca),
        cwd=host, env={TOKEN_FILE_ENV: str(tmp_path / "token")},
    )  # fmt: skip
    assert worker.returncode == 0, worker.stderr[-3000:]

    trials = Store(tmp_path, storage_url=postgres_url).trials(DATA, fresh=True)
    assert_budget_spent(trials, DATA["trials_per_stratum"])
    assert len(counted([t for ts in trials.values() for t in ts])) == 2

    served.process.send_signal(signal.SIGTERM)
    assert served.wait(30) == 0, served.text()
    out, err = served.output()
    assert err == "study serve-storage: refused calls from ipv4:127.0.0.1: wrong token\n"
    logs = [out, first.stdout, first.stderr, refused.stderr, worker.stdout, worker.stderr]
    logs += [p.read_text(errors="replace") for p in tmp_path.rglob("*.log")]
    assert all(token not in text and wrong not in text for text in logs)
