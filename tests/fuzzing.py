"""The fuzzing harness (Hypothesis) of the suite's fuzz tests and `benchmarks/fuzz.py`: one input
run through `study.cli.main` in this process, judged by the rule every input must keep.

The rule: a case ends in a result (exit status 0, or the command got as far as it would start
training or serving: `Reached`) or in exactly one line on stderr with exit status 2; never a
traceback; and no file of the store (``STUDY_HOME``: a finished study's ledger) changes. A
`Case` records how one input ended; `Tally` counts cases by outcome for the benchmark.

Commands stop short of real work where it would start: `BOUNDARIES` are the functions that
would train, load a workload's data (fuzzed on its own in tests/workloads), serve or run a
study; each raises `Reached` instead, so a case that gets there passed every check before it.

Profiles (``settings.load_profile``): ``ci`` (the default: derandomized, a few hundred cases in
all, no example database) and ``benchmark`` (10,000 per surface).
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import io
import os
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from study.cli import main

__all__ = [
    "BOUNDARIES",
    "Arena",
    "Case",
    "Outcome",
    "Reached",
    "Tally",
    "check",
    "examples_for",
]

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "ci", max_examples=100, deadline=None, derandomize=True, database=None,
    suppress_health_check=_QUIET, print_blob=True,
)  # fmt: skip
settings.register_profile(
    "benchmark", max_examples=10_000, deadline=None, derandomize=True, database=None,
    suppress_health_check=_QUIET,
)  # fmt: skip
settings.load_profile(os.environ.get("STUDY_FUZZ_PROFILE", "ci"))

#: Cases per surface in the ``ci`` profile, by surface (the whole fuzz suite: a few hundred).
CI_EXAMPLES = {"study_files": 120, "flags": 160, "options": 100, "data": 40}


def examples_for(surface: str) -> int:
    """How many cases a surface runs under the loaded profile."""
    if settings.default.max_examples >= 10_000:
        return settings.default.max_examples
    return CI_EXAMPLES[surface]


class Reached(BaseException):
    """A command got to where it would train, load data, serve or run: its input was good.
    A BaseException, so no ``except Exception`` of the product turns it into an error."""


def _reached(*_args: Any, **_kwargs: Any) -> Any:
    raise Reached


#: (module, attribute) of each function where a command's checks end and real work starts.
BOUNDARIES: tuple[tuple[str, str], ...] = (
    ("study.deps", "require_tensorflow"),  # train, noise-scale, probe: after every check
    ("study.commands.run", "run_config"),  # run, resume, worker: the study file is valid
    ("study.trainer.check", "_load"),  # check-workload: built and validated, data next
    ("study.ext.branch.branching", "run_branches"),  # branch: the file and flags are valid
    ("study.ext.storage_proxy.server", "_check_free"),  # serve-storage: before binding the port
    ("study.commands.ui", "_Server"),  # ui: before starting mlflow server
)


class Outcome(enum.Enum):
    """How a case ended."""

    RESULT = "result"  # exit status 0, or `Reached`
    USAGE = "exit 2, one line"
    TRACEBACK = "traceback"
    NOT_ONE_LINE = "exit 2, not one line"
    OTHER_STATUS = "other exit status"
    CHANGED = "changed records"

    @property
    def ok(self) -> bool:
        return self in (Outcome.RESULT, Outcome.USAGE)


@dataclass(frozen=True)
class Case:
    """One input and how it ended (``detail``: the traceback, or stderr)."""

    argv: tuple[str, ...]
    outcome: Outcome
    status: int
    stderr: str
    detail: str = ""

    def explain(self) -> str:
        return f"study {' '.join(self.argv)!r} -> {self.outcome.value} ({self.status}):\n" + (
            self.detail or self.stderr
        )


def check(case: Case) -> None:
    """Fail the test unless the case kept the rule."""
    assert case.outcome.ok, case.explain()


@dataclass
class Tally:
    """Outcomes counted per surface, with the first few failing cases kept."""

    counts: Counter[Outcome] = field(default_factory=Counter)
    failures: list[Case] = field(default_factory=list)

    def add(self, case: Case) -> None:
        self.counts[case.outcome] += 1
        if not case.outcome.ok and len(self.failures) < 20:
            self.failures.append(case)

    @property
    def cases(self) -> int:
        return sum(self.counts.values())


class Arena:
    """A store (``root/home``: ``STUDY_HOME`` holding a finished study's journal), a working
    directory (``root/work``) and a dataset cache, and `run`, which runs one command there."""

    def __init__(self, root: Path, setup: Callable[[Path], None] | None = None) -> None:
        self.root = root
        self.home, self.work, self.cache = root / "home", root / "work", root / "cache"
        for folder in (self.home, self.work, self.cache):
            folder.mkdir(parents=True, exist_ok=True)
        if setup is not None:
            setup(self.home)

    def snapshot(self) -> dict[str, str]:
        """Every file of the store and its SHA-256."""
        return {
            str(p.relative_to(self.home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(self.home.rglob("*"))
            if p.is_file()
        }

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        """This arena's directory, store and cache, with the boundaries in place; undone after."""
        import importlib

        saved_env = {k: os.environ.get(k) for k in _ENV}
        saved_cwd = os.getcwd()
        patched: list[tuple[Any, str, Any]] = []
        try:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
            os.environ.pop("STUDY_STORAGE_RETRY", None)
            os.environ.pop("STUDY_LOG", None)
            os.environ["STUDY_HOME"] = str(self.home)
            os.environ["STUDY_CACHE_DIR"] = str(self.cache)
            os.chdir(self.work)
            for module_name, attr in BOUNDARIES:
                module = importlib.import_module(module_name)
                patched.append((module, attr, getattr(module, attr)))
                setattr(module, attr, _reached)
            yield
        finally:
            for module, attr, original in patched:
                setattr(module, attr, original)
            os.chdir(saved_cwd)
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def run(self, argv: Sequence[str]) -> Case:
        """``study ARGV`` in this arena, judged by the rule."""
        argv = tuple(argv)
        before = self.snapshot()
        err, out = io.StringIO(), io.StringIO()
        detail = ""
        with self.inside(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                status = main(list(argv))
            except SystemExit as exc:  # argparse: --help, --version, a bad flag
                status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Reached:
                status = 0
            except BaseException:
                status, detail = 1, traceback.format_exc()
        stderr, after = err.getvalue(), self.snapshot()
        outcome = _judge(status, stderr, detail, before, after)
        return Case(argv, outcome, status, stderr, detail or _changed(before, after))


_ENV = ("STUDY_HOME", "STUDY_CACHE_DIR", "MLFLOW_TRACKING_URI", "STUDY_STORAGE_RETRY", "STUDY_LOG")


def _judge(
    status: int, stderr: str, detail: str, before: dict[str, str], after: dict[str, str]
) -> Outcome:
    if detail:
        return Outcome.TRACEBACK
    if before != after:
        return Outcome.CHANGED
    if status == 0:
        return Outcome.RESULT
    if status != 2:
        return Outcome.OTHER_STATUS
    lines = stderr.removesuffix("\n").split("\n")
    one = len(lines) == 1 and lines[0].strip() and "\r" not in lines[0]
    return Outcome.USAGE if one else Outcome.NOT_ONE_LINE


def _changed(before: dict[str, str], after: dict[str, str]) -> str:
    if before == after:
        return ""
    names = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return "changed in the store: " + ", ".join(names)
