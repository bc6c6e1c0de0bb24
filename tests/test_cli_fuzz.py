"""Fuzzed command lines: for every command, argument lists drawn from its parser's own actions
(their option strings, choices, types and nargs), each value a good one, a typed edge or junk,
run through `study.cli.main` in this process against a store holding a finished study, up to
where the command would train, load data, serve or run (`tests.fuzzing.BOUNDARIES`): every case
ends in a result or one line with exit 2, never a traceback, and the store does not change."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from study.cli import build_parser
from study.workloads import available
from tests.fuzz_files import EXTREMES, NUMBER_TEXTS, SHIPPED
from tests.fuzzing import Arena, check, examples_for


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


COMMANDS = _commands()

#: Text with no path separator, home or NUL (argv cannot hold NUL), so that no value names a
#: file outside the working directory.
JUNK = st.text(
    st.characters(blacklist_characters="/~\\\x00", blacklist_categories=("Cs",)), max_size=10
).filter(lambda t: t != "..")

#: Values that mean something to the flag with this ``dest``: good ones and their near misses.
CURATED: dict[str, tuple[str, ...]] = {
    "storage": ("other.journal", "sqlite:///fuzz.db", ".", "", "sqlite://", "sqlite:///",
                "nope://x", "grpc://", "grpc://:x", "postgresql://", "journal:"),
    "name": ("tiny", "nope", "..", ".", "", "a b", "t\u00edny", "x" * 300, "-"),
    "file": (*(str(p) for p in SHIPPED), "missing.yaml", ".", ""),
    "spec": (*available(), "module:callable", "os:system", "study.workloads.csv:CsvWorkload"),
    "workload": (*available(), "module:callable", "os:system", "tests.fakes:spec_of"),
    "model": ("mlp", "cnn", "resnet", "text", "os:getcwd", "study.examples.starter_model:build",
              "tests.fakes:nope", "module:"),
    "loss": ("mse", "mae", "huber", "binary_crossentropy", "nope", "os:getcwd", "a:b"),
    "workload_option": ("samples=100", "samples=-1", "samples=1e309", "path=x.csv", "k=v", "=",
                        "=1", "samples=", "rows=nan", "noise=inf", "seed=99999999999999999999"),
    "batch_schedule": ("0:32,4096:128", "0:32", "4096:128,0:32", "0:0", "0:-8", "0:32,0:64",
                       "x", "missing.yaml", str(SHIPPED[0])),
    "csv": ("data.csv", "missing.csv", "."),
    "dir": (".", "missing", ""),
    "out": ("out.csv", "out.parquet", "out.txt", "out", ""),
    "write": ("suggested.yaml", "", "."),
    "schedule_out": ("snippet.yaml", ""),
    "host": ("127.0.0.1", "::1", "localhost", "0.0.0.0", "nope.invalid", "", "256.1.1.1"),
    "tracking_uri": ("mlruns-fuzz", "", "sqlite:///mlflow-fuzz.db"),
    "example": ("quickstart", "mnist1d_mlp", "nope", ""),
    "strategy": ("default", "auto", "mirrored:2", "one_device", "tpu", "multi_worker_mirrored"),
    "strategies": ("default", "auto", "mirrored:2", "tpu"),
}  # fmt: skip


def _typed(kind: Any) -> st.SearchStrategy[str]:
    """Text a flag of this ``type`` parses, and its edges."""
    if kind is int:
        numbers = st.one_of(st.integers(-5, 5000), st.sampled_from(EXTREMES).filter(_is_int))
        return numbers.map(str)
    if kind is float:
        return st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                         st.sampled_from(EXTREMES).map(str))  # fmt: skip
    return st.sampled_from(NUMBER_TEXTS).filter(lambda t: "\x00" not in t and "/" not in t)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _value(action: argparse.Action) -> st.SearchStrategy[str]:
    """One value for ``action``: mostly a choice, a curated value or a typed one; else junk."""
    if action.choices:
        good = st.sampled_from([str(c) for c in action.choices])
    elif action.dest in CURATED:
        good = st.sampled_from(CURATED[action.dest])
    else:
        good = _typed(action.type)
    return st.one_of(good, good, good, _typed(action.type), JUNK)


def _values(action: argparse.Action) -> st.SearchStrategy[list[str]]:
    nargs = action.nargs
    if nargs == 0:
        return st.just([])
    if nargs is None:
        return st.lists(_value(action), min_size=1, max_size=1)
    if nargs == "?":
        return st.lists(_value(action), max_size=1)
    if nargs in ("+", "*"):
        return st.lists(_value(action), min_size=1 if nargs == "+" else 0, max_size=3)
    return st.lists(_value(action), min_size=int(nargs), max_size=int(nargs))


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    """A command's name, some of its flags with values, its positionals (mostly), and now and
    then a stray token."""
    if draw(st.integers(0, 60)) == 0:
        return draw(st.lists(st.one_of(JUNK, st.sampled_from(["--version", "-h", "nope"]))))
    name = draw(st.sampled_from(sorted(COMMANDS)))
    parser = COMMANDS[name]
    flags = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    argv = [name]
    chosen = draw(st.lists(st.sampled_from(flags), max_size=6, unique_by=id)) if flags else []
    for action in chosen:
        argv += [draw(st.sampled_from(action.option_strings)), *draw(_values(action))]
    for action in (a for a in parser._actions if not a.option_strings):
        if draw(st.integers(0, 9)) > 0:
            values = draw(_values(action))
            at = draw(st.integers(1, len(argv)))
            argv[at:at] = values
    if draw(st.integers(0, 9)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(JUNK))
    return argv


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> Arena:
    from tests.config.test_studyfile_fuzz import tiny_store

    return Arena(tmp_path_factory.mktemp("fuzz-flags"), tiny_store)


@settings(max_examples=examples_for("flags"))
@given(argv=argvs())
# Found by the fuzzer (each was a traceback, or not one line on stderr):
@example([])  # help on stdout, nothing on stderr
@example(["init", "x", "a\nb"])  # argparse quoting a line break
@example(["init", "x" * 300])  # a file name too long to write
@example(["branch", "x" * 300 + ".yaml"])  # ... or to look for
@example(["train", "--batch-schedule", "0:32," * 60 + "4096:128"])  # inline stages, long
@example(["status", "tiny", "--storage", "."])  # a folder as the journal file
@example(["ls", "--storage", ".."])
def test_fuzzed_command_lines_end_in_a_result_or_one_line(arena: Arena, argv: list[str]) -> None:
    check(arena.run(argv))
