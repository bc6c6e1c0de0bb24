"""The ledger through Optuna's gRPC storage proxy (``grpc://HOST:PORT``) in front of a real
PostgreSQL server: claims keep the budget across clients, heartbeats and liveness work, a
finished trial reads back the same; a malformed or unanswered address is one line; an outage
of the database behind the proxy, or of the proxy itself, is waited through by the client's
retry (one line each way) and answered ``UNAVAILABLE`` by the proxy."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator

import optuna
import pytest

from study.config.space import Stratum
from study.errors import UsageError
from study.ext.storage_proxy import client as proxy_module
from study.ext.storage_proxy.server import ProxyServer, _Database, start_proxy
from study.ledger import Ledger, StudyRecord, open_storage
from study.ledger.owners import HOST_ENV
from study.ledger.retry import RetryingStorage
from study.results import TrialResult, TrialState
from tests.fakes import FakeClock
from tests.services import PostgresServer, free_port, postgresql_server
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

S32 = Stratum(32, "default")
GRACE = 60.0


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[ProxyServer]:
    """Optuna's proxy, in this process, in front of a fresh database."""
    server = start_proxy(postgres_url, "127.0.0.1", 0)
    yield server
    server.stop(0)


def ledger_as(address: str, host: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    monkeypatch.setenv(HOST_ENV, host)
    ledger = Ledger.open(address, "s", clock=clock)
    ledger.create(StudyRecord("s", config_text="name: s", trials_total=2))
    return ledger


@pytest.mark.parametrize(
    "url",
    ["grpc://127.0.0.1", "grpc://:13000", "grpc://127.0.0.1:13000/db", "grpc://h:13000?x=1"],
)
def test_a_proxy_address_names_a_host_and_a_port(url: str) -> None:
    with pytest.raises(UsageError) as error:
        open_storage(url)
    assert str(error.value) == (
        "storage must be grpc://HOST:PORT or grpcs://HOST:PORT (a `study serve-storage` "
        f"address) (got {url!r})"
    )


def test_a_port_nothing_listens_on_is_one_line_at_once() -> None:
    port = free_port()
    url = f"grpc://127.0.0.1:{port}"
    started = time.monotonic()
    with pytest.raises(UsageError) as error:
        open_storage(url)
    assert time.monotonic() - started < 2  # refused: no wait for the connect timeout (10 s)
    assert str(error.value) == (
        f"storage: cannot open {url!r}: nothing listens on 127.0.0.1:{port} (connection "
        "refused; is `study serve-storage` running there, on that port?)"
    )


def test_a_host_that_never_answers_is_waited_for_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def silent(address, timeout):
        assert timeout == proxy_module.CONNECT_TIMEOUT
        raise TimeoutError("timed out")

    monkeypatch.setattr(proxy_module.socket, "create_connection", silent)
    monkeypatch.setattr(proxy_module, "_proxy_class", lambda: pytest.fail("a second wait"))
    with pytest.raises(UsageError) as error:
        open_storage("grpc://10.255.255.1:13000")
    assert str(error.value) == (
        "storage: cannot open 'grpc://10.255.255.1:13000': no storage proxy answered in 10 s "
        "(is `study serve-storage` running there, on that port?)"
    )


def test_a_listener_that_is_no_proxy_is_one_line_in_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(proxy_module, "CONNECT_TIMEOUT", 1)
    with socket.socket() as listener:  # accepts connections, never speaks gRPC
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"grpc://127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(UsageError) as error:
            open_storage(url)
    assert time.monotonic() - started < 5
    assert str(error.value) == (
        f"storage: cannot open {url!r}: no storage proxy answered in 1 s "
        "(is `study serve-storage` running there, on that port?)"
    )


def test_the_ledger_works_through_the_proxy(
    proxy: ProxyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    worker = ledger_as(proxy.address, "host-a", clock, monkeypatch)
    assert isinstance(worker.storage, RetryingStorage)
    other = ledger_as(proxy.address, "host-b", clock, monkeypatch)  # a second client
    first = worker.claim(S32, budget=2, grace=GRACE)
    second = other.claim(S32, budget=2, grace=GRACE)
    assert first is not None and second is not None and first.number != second.number
    assert worker.claim(S32, budget=2) is None  # the budget holds across clients
    worker.start(first, tuner="optuna", origin="sampler")
    result = TrialResult(
        state=TrialState.REACHED, steps_run=120, examples_run=3840, steps_to_target=100
    )
    done = worker.finish(first, result, 100.0)
    assert (done.status, done.steps_to_target, done.open) == (TrialState.REACHED, 100, False)
    assert other.trial(S32, first.number) == done  # what another client reads back

    assert other.liveness.recover_stale([S32]) == []  # host-b's own trial is fresh
    monkeypatch.setenv(HOST_ENV, "host-a")
    clock.advance(GRACE + 1)  # host-b stops beating
    assert [t.number for t in worker.liveness.recover_stale([S32])] == [second.number]
    assert worker.trials(S32)[second.number].status is TrialState.INTERRUPTED
    monkeypatch.setenv(HOST_ENV, "host-b")
    assert not other.liveness.beat(second, GRACE)  # the late owner learns it was taken
    assert worker.remaining(S32, 2) == 1


def test_a_restarted_proxy_is_found_again_within_seconds(
    postgres_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    server = start_proxy(postgres_url, "127.0.0.1", 0)
    port = int(server.address.rsplit(":", 1)[1])
    storage = open_storage(server.address, retry=120)
    assert storage.get_all_studies() == []
    server.stop(0)
    answered: list[float] = []
    call = threading.Thread(target=lambda: answered.append(len(storage.get_all_studies())))
    call.start()
    wait_until(lambda: storage.outage.since is not None, 30, "the client to see the outage")
    wait_until(lambda: time.monotonic() - storage.outage.since > 15, 30, "a 15 s outage")
    server = start_proxy(postgres_url, "127.0.0.1", port)
    back = time.monotonic()
    try:
        call.join(60)
        # gRPC's own reconnection backs off to 120 s; ours tries every 2 s at most, and the
        # retry every 10 s at most
        assert answered == [0] and time.monotonic() - back < 12
    finally:
        server.stop(0)
    err = capfd.readouterr().err
    assert err.count("is not answering") == 1 and err.count("answers again") == 1, err


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A durable PostgreSQL server this test may stop and start."""
    with postgresql_server(durable=True) as server:
        yield server


def test_a_database_outage_behind_the_proxy_is_waited_through(
    own_postgres: PostgresServer, dispose_engines: None, capfd: pytest.CaptureFixture[str]
) -> None:
    said: list[str] = []
    server = start_proxy(own_postgres.create_database(), "127.0.0.1", 0, say=said.append)
    try:
        storage = open_storage(server.address, retry=120)
        optuna.create_study(storage=storage, study_name="s")
        calls: list[int] = []

        def outage() -> None:  # down until the client retries a call the proxy refused
            thread = threading.Thread(target=lambda: calls.append(len(storage.get_all_studies())))
            thread.start()
            wait_until(lambda: storage.outage.since is not None, 60, "the client's retry")
            outage.thread = thread  # type: ignore[attr-defined]

        own_postgres.restart_after(outage)
        outage.thread.join(60)  # type: ignore[attr-defined]
        assert calls == [1]
    finally:
        server.stop(0)
    assert len(said) == 2, said
    assert "not answering" in said[0] and "workers are told it is unavailable" in said[0]
    assert "answers again" in said[1]
    assert own_postgres.password not in " ".join(said)
    err = capfd.readouterr().err
    assert err.count("is not answering") == 1 and err.count("answers again") == 1, err
    assert "(gRPC UNAVAILABLE: database: " in err and "_InactiveRpcError" not in err


def group(trial_id: int, **changes: object) -> object:
    """A group of writes to one trial: attributes, a parameter, a curve and its close."""
    from study.ledger.batch import TrialWrites

    dist = optuna.distributions.FloatDistribution(1e-3, 1.0, log=True)
    fields: dict[str, object] = {
        "user": {"status": "reached", "extras": [1, "x"]},
        "system": {"study:heartbeat": {"at": 1.5, "grace": 60.0}},
        "params": {"learning_rate": (0.05, dist)},
        "intermediate": {10: 0.5, 20: -0.25},
        "state": optuna.trial.TrialState.COMPLETE,
        "values": [120.0],
    }
    return TrialWrites(trial_id, **{**fields, **changes})  # type: ignore[arg-type]


def test_a_group_of_writes_travels_as_json_unchanged() -> None:
    writes = group(7, intermediate={10: float("nan"), 30: 0.0})
    back = proxy_module.decode_writes(proxy_module.encode_writes(writes))
    assert back.trial_id == 7 and back.user == writes.user and back.system == writes.system
    assert back.params == writes.params and back.state is writes.state
    assert back.values == writes.values and list(back.intermediate) == [10, 30]


def test_a_group_of_writes_is_one_call_to_the_proxy(proxy: ProxyServer) -> None:
    from study.ledger import batch

    storage = open_storage(proxy.address)
    trial = optuna.create_study(storage=storage, study_name="s").ask()
    writes = group(trial._trial_id)
    calls: list[str] = []
    for name in ("set_trial_user_attr", "set_trial_state_values", "set_trial_param"):
        method = getattr(storage.inner, name)
        setattr(
            storage.inner, name, lambda *a, _n=name, _m=method, **k: calls.append(_n) or _m(*a, **k)
        )
    batch.write(storage, writes)
    assert calls == []  # not one call per write: the proxy's own method
    stored = storage.get_trial(trial._trial_id)
    assert stored.state is optuna.trial.TrialState.COMPLETE and stored.values == [120.0]
    assert stored.params == {"learning_rate": 0.05} and stored.intermediate_values == {
        10: 0.5,
        20: -0.25,
    }
    assert stored.user_attrs == writes.user and stored.system_attrs == writes.system
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        batch.write(storage, group(trial._trial_id, state=None))  # closed: refused whole


def test_a_proxy_without_the_group_method_gets_one_call_each(postgres_url: str) -> None:
    """Optuna's own proxy (an older `study serve-storage`) answers UNIMPLEMENTED: the writes
    go one call each, and the group is stored the same."""
    from optuna.storages._grpc.server import make_server

    from study.ledger import batch
    from study.ledger.storage import open_database

    port = free_port()
    server = make_server(open_database(postgres_url), "127.0.0.1", port)
    server.start()
    try:
        storage = open_storage(f"grpc://127.0.0.1:{port}")
        trial = optuna.create_study(storage=storage, study_name="s").ask()
        assert storage.write_trial(group(trial._trial_id, state=None)) is False
        batch.write(storage, group(trial._trial_id))
        stored = storage.get_trial(trial._trial_id)
        assert stored.state is optuna.trial.TrialState.COMPLETE and stored.values == [120.0]
        assert stored.intermediate_values == {10: 0.5, 20: -0.25}
    finally:
        server.stop(0)


def test_a_proxy_away_past_the_window_is_storage_unavailable(
    postgres_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    from study.errors import StorageUnavailable

    server = start_proxy(postgres_url, "127.0.0.1", 0)
    storage = open_storage(server.address, retry=1.5)
    assert storage.get_all_studies() == []
    server.stop(0)
    with pytest.raises(StorageUnavailable) as lost:
        storage.get_all_studies()
    message = str(lost.value)
    said = re.match(
        rf"the storage {server.address} did not answer for (\d+) s \(gRPC UNAVAILABLE: ", message
    )
    assert said and int(said.group(1)) >= 2, message  # the window, 1.5 s, or a little more
    assert "\n" not in message and "run the command again" in message
    err = capfd.readouterr().err
    assert err.count("is not answering") == 1 and "(gRPC UNAVAILABLE: " in err, err


def test_a_call_under_way_when_the_database_went_away_does_not_say_it_is_back() -> None:
    said: list[str] = []
    database = _Database("db", said.append)
    under_way = time.monotonic()
    database.failed(ConnectionResetError(104, "Connection reset by peer"))
    database.answered(under_way)  # it was answered before the fault: nothing said
    assert database.away_since is not None and len(said) == 1
    database.answered(time.monotonic())
    assert database.away_since is None and len(said) == 2 and "answers again" in said[1]
