"""Fuzzed workload options: for every built-in workload, options drawn from its own declarations
(``option_specs``: each option's default says its type) with edge and junk values and unknown
names, given two ways: typed, in a study file's ``workload_options`` (``study run``), and as
``KEY=VALUE`` text (``study train`` and ``study check-workload``, which also check the data
the options name). Every case ends in a result or one line with exit 2, never a traceback,
and the store does not change."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from study.importing import import_callable
from study.workloads import _BUILTIN, Workload
from tests.fuzz_files import EXTREMES, NUMBER_TEXTS, junk
from tests.fuzzing import Arena, Case, check, examples_for

#: Every built-in workload's class, by name.
WORKLOADS: dict[str, type[Workload]] = {
    n: import_callable(s, field="workload") for n, s in sorted(_BUILTIN.items())
}

#: Values for the options that name files, columns or features: good ones and near misses.
CURATED: dict[str, tuple[Any, ...]] = {
    "path": ("data.csv", "missing.csv", ".", "", "images", "data.tfrecord", "*.csv"),
    "label": ("y", "x", "nope", "", 0, None),
    "text_column": ("text", "y", "nope", ""),
    "train": ("*.tfrecord", "data.tfrecord", "missing-*.tfrecord", "[", "**", "", "."),
    "val": ("*.tfrecord", "data.tfrecord", "missing-*.tfrecord", "[", "", "."),
    "features": ("x:float32[4],y:int64[]", "x:float32[0],y:int64[]", "y:int64[]", "x:nope[1]",
                 "x:float32[4];y=float32[]", "x:float32[99999999999999999999],y:int64[]",
                 "x:float32[4,4,4,4,4,4,4,4,4,4,4,4],y:int64[]", "", ",,", {"x": "float32[4]"}),
    "task": ("multiclass", "binary", "multilabel", "regression", "nope", ""),
    "split": ("hash", "stratified", "nope"),
    "channels": (1, 3, 4, 2, 0, "rgb"),
}  # fmt: skip


def _value(name: str, default: Any) -> st.SearchStrategy[Any]:
    """A value for option ``name``: its kind's edges (from the default's type) or junk."""
    pools: list[st.SearchStrategy[Any]] = [junk(1)]
    if name in CURATED:
        pools += [st.sampled_from(CURATED[name])] * 3
    if isinstance(default, bool):
        pools += [st.booleans(), st.sampled_from(("true", "no", "1", 2, "yes"))]
    elif isinstance(default, int):
        pools += [st.integers(), st.sampled_from(EXTREMES), st.integers(-3, 300)] * 2
    elif isinstance(default, float):
        pools += [st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(EXTREMES)] * 2
    else:
        pools.append(st.sampled_from(NUMBER_TEXTS))
    return st.one_of(pools)


@st.composite
def options(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A workload's name and options: a few of its own, now and then an unknown one."""
    name = draw(st.sampled_from(sorted(WORKLOADS)))
    specs = WORKLOADS[name].option_specs
    chosen = draw(st.lists(st.sampled_from(sorted(specs)), max_size=4, unique=True))
    given = {key: draw(_value(key, specs[key].default)) for key in chosen}
    if draw(st.integers(0, 9)) == 0:
        given[draw(st.text(max_size=8))] = draw(junk(1))
    return name, given


def _study_file(name: str, given: dict[str, Any]) -> str:
    """The quickstart's shape, on workload ``name`` with ``given`` options and its target."""
    doc = {
        "name": "fuzz-options",
        "workload": name,
        "workload_options": given,
        "target": WORKLOADS[name].default_target,
        "budget": {"max_steps": 100},
        "trials_per_stratum": 2,
        "search_space": {"batch_size": [16, 64], "learning_rate": {"low": 0.001, "high": 0.1}},
    }
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _as_text(value: Any) -> str:
    text = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True)
    return text.removesuffix("\n...\n").strip()


def run_options(arena: Arena, name: str, given: dict[str, Any], route: str) -> Case:
    """``workload_options`` in a study file (``route`` run), or ``--workload-option KEY=VALUE``
    flags of ``study train`` / ``study check-workload``."""
    if route == "run":
        (arena.work / "options.yaml").write_text(_study_file(name, given), encoding="utf-8")
        return arena.run(["run", "options.yaml"])
    flags = [f"--workload-option={key}={_as_text(value)}" for key, value in given.items()]
    return arena.run([route, "--workload", name, *flags])


def option_cases() -> st.SearchStrategy[Callable[[Arena], Case]]:
    """A case as a function of the arena (what `benchmarks/fuzz.py` draws)."""
    routes = st.sampled_from(("run", "train", "check-workload"))
    return st.builds(
        lambda drawn, route: functools.partial(run_options, name=drawn[0], given=drawn[1],
                                               route=route),
        options(), routes,
    )  # fmt: skip


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> Arena:
    from tests.config.test_studyfile_fuzz import tiny_store

    return Arena(tmp_path_factory.mktemp("fuzz-options"), tiny_store)


@settings(max_examples=examples_for("options"))
@given(drawn=options(), route=st.sampled_from(("run", "train", "check-workload")))
# Found by the fuzzer (a traceback, a message of two lines):
@example(("images", {"path": "x" * 300}), "check-workload")
@example(("tabular", {"rows": {"a\nb": 0}}), "run")
def test_fuzzed_workload_options_end_in_a_result_or_one_line(
    arena: Arena, drawn: tuple[str, dict[str, Any]], route: str
) -> None:
    check(run_options(arena, *drawn, route))
