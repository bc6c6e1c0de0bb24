"""Who may reach `study serve-storage`, as a user types it: an address other hosts reach needs
TLS and a token (or client certificates) or ``--insecure``, which warns in one line; a missing
partner flag, an unreadable file or a token sent in the clear is one line and exit 2, before
the database is opened; the token is never printed. (A fleet of workers over TLS:
`tests/ext/storage_proxy/test_tls_study.py`.)"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from study.ext.storage_proxy.access import TOKEN_ENV, TOKEN_FILE_ENV
from tests.cli import study
from tests.ext.storage_proxy.tls import Certs, make_certs, make_token
from tests.services import free_port

#: A database nothing serves: each case fails before the proxy would open it.
NOWHERE = "postgresql://u:p@127.0.0.1:1/db"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def refused(*args: str, cwd: Path) -> str:
    """The one line ``study serve-storage ARGS`` fails with (exit 2, nothing on stdout)."""
    result = study("serve-storage", "--storage", NOWHERE, "--port", "0", *args, cwd=cwd)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr.removeprefix("study serve-storage: error: ").rstrip("\n")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7", "db-proxy.example.org"])
def test_a_non_loopback_bind_without_tls_refuses_to_start(host: str, tmp_path: Path) -> None:
    assert refused("--host", host, cwd=tmp_path) == (
        f"binding {host} needs --tls-cert and --tls-key (or --insecure on a trusted network)"
    )


def test_tls_without_a_token_or_client_ca_refuses_to_start(certs: Certs, tmp_path: Path) -> None:
    tls = ("--tls-cert", str(certs.cert), "--tls-key", str(certs.key))
    assert refused("--host", "0.0.0.0", *tls, cwd=tmp_path) == (
        f"binding 0.0.0.0 needs a token (--token-file FILE, or {TOKEN_FILE_ENV}) or client "
        "certificates (--tls-client-ca FILE), or --insecure on a trusted network"
    )


@pytest.mark.slow
def test_bad_access_flags_are_one_line_each(certs: Certs, tmp_path: Path) -> None:
    token = make_token(tmp_path / "token")
    cert, key = str(certs.cert), str(certs.key)
    cases = {
        ("--tls-cert", cert): "--tls-cert needs --tls-key too (the certificate and its "
        "private key)",
        ("--tls-key", key): "--tls-key needs --tls-cert too (the certificate and its private key)",
        ("--tls-cert", cert, "--tls-key", key, "--insecure"): "--insecure serves without TLS: "
        "drop it, or drop --tls-cert/--tls-key",
        ("--tls-client-ca", str(certs.ca)): "--tls-client-ca needs --tls-cert and --tls-key "
        "(mutual TLS)",
        (
            "--tls-cert",
            cert,
            "--tls-key",
            str(certs.client_key),
        ): f"--tls-key: {str(certs.client_key)!r} "
        f"is not the unencrypted private key of the certificate {cert!r} ",
        ("--tls-cert", "nosuch.pem", "--tls-key", key): "--tls-cert: cannot read 'nosuch.pem' "
        "(No such file or directory)",
        ("--token-file", "nosuch"): "--token-file nosuch: cannot read the token file (No such "
        "file or directory)",
        ("--host", "0.0.0.0", "--insecure", "--token-file", str(tmp_path / "token")): "the token "
        f"from --token-file {tmp_path / 'token'} would cross the network in the clear: add "
        f"--tls-cert and --tls-key, or unset {TOKEN_FILE_ENV} and {TOKEN_ENV} for --insecure",
    }
    for args, line in cases.items():
        got = refused(*args, cwd=tmp_path)
        assert got.startswith(line), (args, got)
        assert token not in got


def serve(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "study", "serve-storage", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_insecure_serves_any_address_with_a_one_line_warning(
    postgres_url: str, tmp_path: Path
) -> None:
    port = free_port()
    proxy = serve(
        "--storage", postgres_url, "--host", "0.0.0.0", "--port", str(port), "--insecure",
        cwd=tmp_path,
    )  # fmt: skip
    try:
        assert proxy.stdout is not None and proxy.stderr is not None
        line = proxy.stdout.readline()
        assert line.startswith("study serve-storage: serving postgresql+psycopg://study:***@")
        assert f" at grpc://0.0.0.0:{port} " in line
        listed = study("ls", "--storage", f"grpc://127.0.0.1:{port}", cwd=tmp_path)
        assert (listed.returncode, listed.stderr) == (0, "")
        proxy.send_signal(signal.SIGTERM)
        _, err = proxy.communicate(timeout=30)
    finally:
        proxy.kill()
    assert proxy.returncode == 0
    assert err == (
        "study serve-storage: warning: --insecure: serving 0.0.0.0 without TLS or a token; "
        "anyone who can reach the port can read and rewrite every study (a trusted network "
        "only)\n"
    )
