"""TLS and the shared token of the storage proxy (`study.ext.storage_proxy.access`), with real
certificates made in the test (`tests.ext.storage_proxy.tls`) and a real proxy in front of a real PostgreSQL
server: a client that presents the token over TLS uses the ledger; a wrong token, no token, a
CA that did not sign the proxy's certificate, a plain client of a TLS proxy and a TLS client
of a plain one are each refused at once with one line that names what to fix, never the
token; the proxy checks the token on every call, not only the first."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import optuna
import pytest

from study.errors import FieldError, UsageError
from study.ext.storage_proxy.access import (
    CA_ENV,
    CERT_ENV,
    KEY_ENV,
    TOKEN_ENV,
    TOKEN_FILE_ENV,
    ServerAccess,
    client_access,
    env_token,
    is_loopback,
    read_key_pair,
    read_pem,
    read_token,
)
from study.ext.storage_proxy.server import ProxyServer, start_proxy
from study.ledger import open_storage
from tests.ext.storage_proxy.tls import Certs, make_certs, make_token

ACCESS_ENV = (CA_ENV, CERT_ENV, KEY_ENV, TOKEN_ENV, TOKEN_FILE_ENV)


@pytest.fixture(autouse=True)
def no_inherited_access(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ACCESS_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


# --------------------------------------------------------------------------------------------
# Reading the token, the certificates and the environment (no server)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.0.0.5", False),
     ("db.example.org", False)],
)  # fmt: skip
def test_only_loopback_addresses_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_token_file_gives_its_first_line(tmp_path: Path) -> None:
    token = make_token(tmp_path / "token")
    read = read_token(tmp_path / "token", "here")
    assert read.value == token and read.matches(token) and not read.matches(token[:-1] + "x")
    assert token not in repr(read)  # a token in a traceback or a log shows only its source


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "cannot read the token file (No such file or directory)"),
     ("", "the token must be one word of at least 16 characters"),
     ("short\n", "the token must be one word of at least 16 characters"),
     ("two words of a long token\n", "the token must be one word of at least 16 characters")],
)  # fmt: skip
def test_a_bad_token_file_is_one_line_without_the_token(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError) as error:
        read_token(path, f"{TOKEN_FILE_ENV}={path}")
    assert str(error.value).startswith(f"{TOKEN_FILE_ENV}={path}: {problem}")
    assert "\n" not in str(error.value)
    if content:
        assert content.strip() not in str(error.value)


def test_the_environment_gives_the_token_from_a_file_or_itself(tmp_path: Path) -> None:
    token = make_token(tmp_path / "token")
    from_file = env_token({TOKEN_FILE_ENV: str(tmp_path / "token")})
    assert from_file is not None and from_file.value == token
    assert from_file.source == f"{TOKEN_FILE_ENV}={tmp_path / 'token'}"
    itself = env_token({TOKEN_ENV: token})
    assert itself is not None and (itself.value, itself.source) == (token, TOKEN_ENV)
    assert env_token({}) is None
    with pytest.raises(UsageError, match=f"set one of {TOKEN_FILE_ENV} and {TOKEN_ENV}, not"):
        env_token({TOKEN_FILE_ENV: str(tmp_path / "token"), TOKEN_ENV: token})


def test_certificates_are_checked_before_any_server_starts(certs: Certs, tmp_path: Path) -> None:
    assert read_key_pair(str(certs.cert), str(certs.key), ("tls_cert", "tls_key"))
    with pytest.raises(FieldError, match=r"^tls_key: .* is not the unencrypted private key of "):
        read_key_pair(str(certs.cert), str(certs.client_key), ("tls_cert", "tls_key"))
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    with pytest.raises(FieldError, match=r"^ca: cannot read '.*junk.pem' \("):
        read_pem(str(tmp_path / "junk.pem"), "ca", "ca")
    with pytest.raises(FieldError, match=r"^tls_cert: cannot read '.*nosuch.pem' \(No such"):
        read_key_pair(str(tmp_path / "nosuch.pem"), str(certs.key), ("tls_cert", "tls_key"))


def test_a_client_reads_its_ca_and_certificate_from_the_environment(certs: Certs) -> None:
    url = "grpcs://127.0.0.1:1"
    env = {CA_ENV: str(certs.ca), CERT_ENV: str(certs.client_cert), KEY_ENV: str(certs.client_key)}
    access = client_access(url, env)
    assert access.tls and access.ca == certs.ca.read_bytes()
    assert (
        access.cert == certs.client_cert.read_bytes() and access.ca_source == f"{CA_ENV}={certs.ca}"
    )
    assert not client_access("grpc://127.0.0.1:1", env).tls
    with pytest.raises(FieldError) as error:
        client_access(url, {CERT_ENV: str(certs.client_cert)})
    assert str(error.value) == (
        f"storage: cannot open {url!r}: set both {CERT_ENV} and {KEY_ENV} (a client "
        "certificate), or none"
    )
    with pytest.raises(FieldError, match=rf"cannot open .*: {CA_ENV}=/nosuch: cannot read"):
        client_access(url, {CA_ENV: "/nosuch"})


# --------------------------------------------------------------------------------------------
# A proxy with TLS and a token, in this process, in front of a real database


def serve(url: str, access: ServerAccess, said: list[str]) -> ProxyServer:
    return start_proxy(url, "127.0.0.1", 0, access=access, say=said.append)


@pytest.fixture
def secured(
    postgres_url: str, certs: Certs, tmp_path: Path
) -> Iterator[tuple[ProxyServer, str, list[str]]]:
    """A proxy serving TLS with ``certs`` and asking for a token: it, the token, its lines."""
    token = make_token(tmp_path / "token")
    access = ServerAccess(
        certs.cert.read_bytes(), certs.key.read_bytes(), None, read_token(tmp_path / "token", "t")
    )
    said: list[str] = []
    server = serve(postgres_url, access, said)
    yield server, token, said
    server.stop(0)


@pytest.mark.slow
def test_a_client_with_the_ca_and_the_token_uses_the_ledger(
    secured: tuple[ProxyServer, str, list[str]],
    certs: Certs,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _, said = secured
    assert server.address.startswith("grpcs://127.0.0.1:")
    monkeypatch.setenv(CA_ENV, str(certs.ca))
    monkeypatch.setenv(TOKEN_FILE_ENV, str(tmp_path / "token"))
    storage = open_storage(server.address)
    study = optuna.create_study(storage=storage, study_name="s")
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    again = open_storage(server.address.replace("127.0.0.1", "localhost"))  # the other SAN
    assert len(optuna.load_study(study_name="s", storage=again).trials) == 2
    assert said == []


def refusal(url: str) -> str:
    """The one line that opening ``url`` fails with (after ``storage: cannot open URL: ``,
    or ``storage: the proxy at URL ``), and that it failed within 3 s."""
    start = time.monotonic()
    with pytest.raises(FieldError) as error:
        open_storage(url)
    assert time.monotonic() - start < 3, "refused at once, not after waiting"
    message = str(error.value)
    assert "\n" not in message, message
    for prefix in (f"storage: cannot open {url!r}: ", f"storage: the proxy at {url!r} "):
        if message.startswith(prefix):
            return message.removeprefix(prefix)
    raise AssertionError(message)


@pytest.mark.slow
def test_a_wrong_or_missing_token_is_refused_and_never_shown(
    secured: tuple[ProxyServer, str, list[str]],
    certs: Certs,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, token, said = secured
    monkeypatch.setenv(CA_ENV, str(certs.ca))
    wrong = make_token(tmp_path / "wrong")
    monkeypatch.setenv(TOKEN_FILE_ENV, str(tmp_path / "wrong"))
    assert refusal(server.address) == (
        f"refused the token from {TOKEN_FILE_ENV}={tmp_path / 'wrong'} (wrong token); use the "
        "token the proxy was started with"
    )
    monkeypatch.delenv(TOKEN_FILE_ENV)
    assert refusal(server.address) == (
        f"wants the fleet's token and none was sent (set {TOKEN_FILE_ENV} to the file that "
        "holds it)"
    )
    assert said == ["study serve-storage: refused calls from ipv4:127.0.0.1: wrong token"]
    assert all(token not in line and wrong not in line for line in said)


@pytest.mark.slow
def test_every_call_is_checked_not_only_the_first(
    secured: tuple[ProxyServer, str, list[str]], certs: Certs
) -> None:
    server, token, _ = secured
    port = int(server.address.rpartition(":")[2])
    with grpc.secure_channel(
        f"127.0.0.1:{port}", grpc.ssl_channel_credentials(certs.ca.read_bytes())
    ) as channel:  # Optuna's own client, past any check of ours: no token on its calls
        from optuna.storages._grpc.auto_generated import api_pb2, api_pb2_grpc

        stub = api_pb2_grpc.StorageServiceStub(channel)
        with pytest.raises(grpc.RpcError) as error:
            stub.GetAllStudies(api_pb2.GetAllStudiesRequest())
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
        bearer = grpc.access_token_call_credentials(token)
        assert stub.GetAllStudies(api_pb2.GetAllStudiesRequest(), credentials=bearer) is not None


@pytest.mark.slow
def test_a_proxy_restarted_with_another_token_is_one_line_mid_study(
    secured: tuple[ProxyServer, str, list[str]],
    postgres_url: str,
    certs: Certs,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, token, _ = secured
    monkeypatch.setenv(CA_ENV, str(certs.ca))
    monkeypatch.setenv(TOKEN_ENV, token)
    storage = open_storage(server.address)
    optuna.create_study(storage=storage, study_name="s")
    server.stop(0)
    rotated = make_token(tmp_path / "rotated")
    access = ServerAccess(
        certs.cert.read_bytes(), certs.key.read_bytes(), None, read_token(tmp_path / "rotated", "r")
    )
    port = int(server.address.rpartition(":")[2])
    again = start_proxy(postgres_url, "127.0.0.1", port, access=access, say=[].append)
    try:
        with pytest.raises(FieldError) as error:
            storage.get_all_studies()
    finally:
        again.stop(0)
    assert str(error.value) == (
        f"storage: the proxy at {server.address!r} refused the token from {TOKEN_ENV} (wrong "
        "token); use the token the proxy was started with"
    )
    assert token not in str(error.value) and rotated not in str(error.value)


@pytest.mark.slow
def test_a_ca_that_did_not_sign_the_proxy_is_a_failed_handshake(
    secured: tuple[ProxyServer, str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _, _ = secured
    other = make_certs(tmp_path / "other", authority="another CA")
    monkeypatch.setenv(CA_ENV, str(other.ca))
    monkeypatch.setenv(TOKEN_FILE_ENV, str(make_token(tmp_path / "t") and tmp_path / "t"))
    assert refusal(server.address) == (
        "the TLS handshake failed (CERTIFICATE_VERIFY_FAILED: unable to get local issuer "
        f"certificate; is {CA_ENV}={other.ca} the CA that signed the proxy's certificate?)"
    )
    plain = server.address.replace("grpcs://", "grpc://")
    assert refusal(plain) == (
        "the proxy closes every connection (a proxy served with TLS is grpcs://HOST:PORT)"
    )


@pytest.mark.slow
def test_a_tls_client_of_a_plain_proxy_is_told_its_url(
    postgres_url: str, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve(postgres_url, ServerAccess(), [])
    try:
        monkeypatch.setenv(CA_ENV, str(certs.ca))
        url = server.address.replace("grpc://", "grpcs://")
        message = refusal(url)
        assert message.startswith("the TLS handshake failed (WRONG_VERSION_NUMBER")
        assert message.endswith(
            "; the proxy does not serve TLS there: its URL is grpc://HOST:PORT)"
        )
    finally:
        server.stop(0)


@pytest.mark.slow
def test_a_loopback_proxy_with_a_token_takes_it_without_tls(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = make_token(tmp_path / "token")
    server = serve(postgres_url, ServerAccess(token=read_token(tmp_path / "token", "t")), [])
    try:
        assert server.address.startswith("grpc://127.0.0.1:")
        assert refusal(server.address).startswith("wants the fleet's token")
        monkeypatch.setenv(TOKEN_ENV, token)  # gRPC's local credentials carry it
        assert open_storage(server.address).get_all_studies() == []
    finally:
        server.stop(0)


@pytest.mark.slow
def test_client_certificates_are_mutual_tls(
    postgres_url: str, certs: Certs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    access = ServerAccess(certs.cert.read_bytes(), certs.key.read_bytes(), certs.ca.read_bytes())
    server = serve(postgres_url, access, [])
    try:
        monkeypatch.setenv(CA_ENV, str(certs.ca))
        assert refusal(server.address) == (
            "the proxy closes every connection (a proxy that asks for a client certificate: "
            f"set {CERT_ENV} and {KEY_ENV})"
        )
        monkeypatch.setenv(CERT_ENV, str(certs.client_cert))
        monkeypatch.setenv(KEY_ENV, str(certs.client_key))
        assert open_storage(server.address).get_all_studies() == []
    finally:
        server.stop(0)
