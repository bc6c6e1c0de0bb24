"""The storage proxy as an extension: with it loaded, ``study serve-storage``, the ``grpc://``
and ``grpcs://`` storage URLs and ``--storage-ca`` / ``--storage-token-file`` are there; without
it (``STUDY_EXTENSIONS=none``, or a list that leaves it out), such a URL is one line naming the
extension and exit status 2, and the command and the flags are unknown. Also the client's own
transient faults: gRPC status codes."""

from __future__ import annotations

import argparse
import os

import pytest

from study.cli import build_parser, main
from study.commands.flags import storage_access
from study.ext.storage_proxy import StorageProxy, open_proxy_storage
from study.ext.storage_proxy.access import CA_ENV, TOKEN_ENV, TOKEN_FILE_ENV
from study.ext.storage_proxy.client import grpc_fault
from study.extension import EXTENSIONS_ENV, loaded, storage_opener
from study.ledger.retry import is_transient

MISSING = (
    "study ls: error: --storage: 'grpc://127.0.0.1:1' needs the extension 'storage_proxy' "
    "(unset STUDY_EXTENSIONS or add storage_proxy to it)\n"
)


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]


def test_loaded_it_adds_its_command_schemes_and_flags(monkeypatch) -> None:
    monkeypatch.delenv(EXTENSIONS_ENV, raising=False)
    assert "storage_proxy" in {e.name for e in loaded()}
    parser = build_parser()
    assert "serve-storage" in commands(parser)
    for command in ("run", "resume", "worker", "ls", "status", "report", "export"):
        flags = {o for a in commands(parser)[command]._actions for o in a.option_strings}
        assert {"--storage", "--storage-retry", "--storage-ca", "--storage-token-file"} <= flags
    assert storage_opener("grpc://h:1") is open_proxy_storage
    assert storage_opener("GRPCS://h:1") is open_proxy_storage


@pytest.mark.parametrize("wanted", ["none", "batch_science"])
def test_left_out_a_grpc_storage_is_one_line_and_exit_2(wanted, monkeypatch, capsys) -> None:
    monkeypatch.setenv(EXTENSIONS_ENV, wanted)
    assert main(["ls", "--storage", "grpc://127.0.0.1:1"]) == 2
    assert capsys.readouterr().err == MISSING


def test_left_out_serve_storage_and_the_flags_are_unknown(monkeypatch, capsys) -> None:
    monkeypatch.setenv(EXTENSIONS_ENV, "none")
    parser = build_parser()
    assert "serve-storage" not in commands(parser)
    assert "grpc://" not in commands(parser)["run"].format_help()
    with pytest.raises(SystemExit) as stop:
        main(["serve-storage", "--storage", "sqlite:///x.db", "--port", "0"])
    assert stop.value.code == 2
    assert "invalid choice: 'serve-storage'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["ls", "--storage-ca", "ca.pem"])
    assert stop.value.code == 2
    assert "unrecognized arguments: --storage-ca ca.pem" in capsys.readouterr().err


def test_the_flags_stand_for_their_variables_while_the_command_runs(monkeypatch) -> None:
    monkeypatch.delenv(EXTENSIONS_ENV, raising=False)
    monkeypatch.setenv(TOKEN_ENV, "a-token-from-a-secret-store")
    monkeypatch.delenv(CA_ENV, raising=False)
    args = argparse.Namespace(storage_ca="ca.pem", storage_token_file="token")
    assert StorageProxy().storage_environment(args) == {
        CA_ENV: "ca.pem",
        TOKEN_FILE_ENV: "token",
        TOKEN_ENV: None,
    }
    with storage_access(args):
        assert os.environ[CA_ENV] == "ca.pem" and os.environ[TOKEN_FILE_ENV] == "token"
        assert TOKEN_ENV not in os.environ  # the file wins
    assert CA_ENV not in os.environ and os.environ[TOKEN_ENV] == "a-token-from-a-secret-store"
    assert StorageProxy().storage_environment(argparse.Namespace()) == {}


class RpcError(Exception):
    """What gRPC raises, by its class name (no server needed)."""

    def __init__(self, name: str, details: str = "") -> None:
        self.name, self._details = name, details

    def code(self):
        return type("Code", (), {"name": self.name})()

    def details(self) -> str:
        return self._details


def test_transient_grpc_codes_are_the_client_s_own_faults() -> None:
    assert is_transient(RpcError("UNAVAILABLE"), grpc_fault)
    assert not is_transient(RpcError("NOT_FOUND"), grpc_fault)
    assert not is_transient(RpcError("UNAVAILABLE"))  # a database storage has no such fault
    assert grpc_fault(ValueError("x"), 200) is None
    text = grpc_fault(RpcError("UNAVAILABLE", "failed to connect\n  to all addresses"), 20)
    assert text == "gRPC UNAVAILABLE: failed to connect to"
