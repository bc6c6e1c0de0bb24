"""Fuzzed study files (`tests.fuzz_files`) through the commands that read one (``study run``,
``study noise-scale FILE``, ``study branch``), up to where they would train: every case ends in
a result or one line with exit 2, never a traceback, and the store does not change."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.fakes import write_tiny_ledger
from tests.fuzz_files import study_file_bytes
from tests.fuzzing import Arena, Case, check, examples_for


def tiny_store(home: Path) -> None:
    """A finished study's journal in the store (what must not change)."""
    write_tiny_ledger(home / "optuna.journal")


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> Arena:
    return Arena(tmp_path_factory.mktemp("fuzz-study-files"), tiny_store)


COMMANDS = (("run",), ("run", "--tuner", "optuna"), ("noise-scale",), ("branch",))


def run_file(arena: Arena, data: bytes, command: tuple[str, ...]) -> Case:
    """``study COMMAND FILE`` on a file holding ``data``."""
    path = arena.work / "fuzzed.yaml"
    path.write_bytes(data)
    return arena.run([command[0], path.name, *command[1:]])


QUICKSTART = (Path(__file__).parents[2] / "study/examples/quickstart.yaml").read_text("utf-8")


@settings(max_examples=examples_for("study_files"))
@given(data=study_file_bytes(), command=st.sampled_from(COMMANDS))
# Found by the fuzzer (each was a traceback or a message of two lines):
@example(QUICKSTART.encode("utf-16"), ("run",))  # not UTF-8
@example(b"name: x\nsearch_space: " + b"[" * 3000 + b"]" * 3000, ("run",))  # past the parser
@example(QUICKSTART.replace("seed: 0", "seed: !!int _").encode(), ("run",))  # PyYAML: IndexError
@example(QUICKSTART.replace("seed: 0", "seed: !!bool maybe").encode(), ("run",))  # ... KeyError
@example(  # a mapping key holding a line break, quoted in the message
    QUICKSTART.replace(
        "workload: mnist1d", 'workload: mnist1d\nworkload_options: {samples: {"a\\nb": 1}}'
    ).encode(),
    ("run",),
)
def test_fuzzed_study_files_end_in_a_result_or_one_line(
    arena: Arena, data: bytes, command: tuple[str, ...]
) -> None:
    check(run_file(arena, data, command))
