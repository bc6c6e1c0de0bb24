"""Tests for study.config.studyfile: shipped files, the typed objects, and malformed files."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from study.config import sections, space_reader, studyfile
from study.config.hold import DEFAULT_HOLD
from study.config.rules import FieldError
from study.config.space import CategoricalParam, FloatParam, IntParam, Stratum
from study.config.study import (
    Allocation,
    Confirmation,
    Oracle,
    Sampler,
    StudyConfig,
    TunerSettings,
)
from study.config.studyfile import SCHEMA_PATH, load_study_file, parse_study
from study.config.target import Target
from study.config.trial import Budget, EvalCadence
from study.errors import UsageError
from study.extension import study_sections
from study.workloads.resolve import check_study

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "search_spaces").glob("*.yaml"))

BASE: dict[str, Any] = {
    "name": "x",
    "workload": "mnist1d",
    "workload_options": {"samples": 1000},
    "model": "mlp",
    "target": "val_accuracy>=0.6",
    "budget": {"max_steps": 500},
    "eval_every": "geometric:1.1",
    "optimizer": "nesterov",
    "seed": 0,
    "trials_per_stratum": 2,
    "search_space": {
        "batch_size": [8, 32],
        "learning_rate": {"low": 1.0e-3, "high": 1.0, "scale": "log"},
        "strategy": ["default"],
    },
}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def write(tmp_path: Path, data: Any, name: str = "x.yaml") -> Path:
    path = tmp_path / name
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def study(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return data


def space(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["search_space"].update(changes)
    return data


# --------------------------------------------------------------------------------------------
# Shipped files


def test_shipped_files_exist() -> None:
    names = {p.name for p in SHIPPED}
    assert {
        "quickstart.yaml",
        "tabular_strategies.yaml",
        "mnist1d_mlp.yaml",
        "mnist1d_cnn.yaml",
        "csv_example.yaml",
    } <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_file_loads_and_matches_schema(path: Path, schema: dict[str, Any]) -> None:
    jsonschema.validate(yaml.safe_load(path.read_text(encoding="utf-8")), schema)
    config = load_study_file(path)
    assert isinstance(config, StudyConfig)
    assert config.source == str(path)
    assert config.text == path.read_text(encoding="utf-8")
    assert config.space.params[0].name == "learning_rate"
    assert config.total_trials == len(config.space.strata()) * config.trials_per_stratum
    stratum = config.space.strata()[0]
    lr = config.space.params[0]
    value = lr.choices[0] if isinstance(lr, CategoricalParam) else lr.low
    trial = config.trial_spec(stratum, {"learning_rate": value})
    assert (trial.batch_size, trial.strategy) == (stratum.batch_size, stratum.strategy)


def test_mnist1d_mlp() -> None:
    config = load_study_file(REPO / "search_spaces" / "mnist1d_mlp.yaml")
    assert config.name == "mnist1d-mlp"
    assert config.workload == "mnist1d" and config.model == "mlp"
    assert config.workload_options == {"samples": 10000}
    assert config.target == Target("val_accuracy", ">=", 0.6, hold=DEFAULT_HOLD)
    assert config.settings.budget == Budget(max_steps=5000, max_examples=None, max_seconds=None)
    assert config.settings.cadence == EvalCadence(kind="geometric", ratio=1.05)
    assert config.optimizer == "nesterov"
    assert config.space.batch_sizes == (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    assert config.space.strategies == ("default",)
    assert config.space.params == (
        FloatParam("learning_rate", 1.0e-3, 3.0, log=True),
        CategoricalParam("momentum", (0.9,)),
    )
    assert config.trials_per_stratum == 8
    assert config.total_trials == 80
    assert config.tuner.sampler is Sampler.TPE and config.tuner.oracle is Oracle.BAYESIAN


def test_csv_example_points_at_shipped_data() -> None:
    config = load_study_file(REPO / "search_spaces" / "csv_example.yaml")
    options = config.workload_options
    assert options["label"] == "sentiment" and options["text_column"] == "review"
    data = REPO / options["path"]
    header, *rows = data.read_text(encoding="utf-8").splitlines()
    assert header == "review,sentiment"
    assert len(rows) == 4000


# --------------------------------------------------------------------------------------------
# Typed objects


def test_strata_are_batch_major() -> None:
    config = load_study_file(REPO / "search_spaces" / "tabular_strategies.yaml")
    assert config.space.strata() == [
        Stratum(32, "default"),
        Stratum(32, "mirrored:2"),
        Stratum(128, "default"),
        Stratum(128, "mirrored:2"),
        Stratum(512, "default"),
        Stratum(512, "mirrored:2"),
    ]
    assert config.strata == config.space.strata()
    assert config.total_trials == 6 * config.trials_per_stratum


def test_defaults() -> None:
    data = study()
    for key in ("workload_options", "model", "eval_every", "optimizer", "seed"):
        del data[key]
    del data["search_space"]["strategy"]
    config = parse_study(data, "mem.yaml")
    assert config.space.strategies == ("auto",)
    assert config.workload_options == {} and config.model is None
    assert config.settings.cadence == EvalCadence(kind="geometric", ratio=1.05)
    assert (config.optimizer, config.schedule, config.settings.seed) == ("nesterov", "constant", 0)
    assert config.tuner == TunerSettings()
    assert config.tuner.pruning is True and config.tuner.max_consecutive_failures == 5


def test_batch_sizes_sorted_and_power_bounds() -> None:
    assert parse_study(space(batch_size=[64, 8, 16]), "m").space.batch_sizes == (8, 16, 64)
    bounds = space(batch_size={"low": 10, "high": 100})
    assert parse_study(bounds, "m").space.batch_sizes == (16, 32, 64)
    assert parse_study(space(batch_size={"low": 1, "high": 1}), "m").space.batch_sizes == (1,)


def test_further_params_in_file_order() -> None:
    data = space(
        warmup_steps={"low": 0, "high": 500, "scale": "linear"},
        decay_steps={"low": 10, "high": 1000},
        weight_decay={"choices": [0, 1.0e-4]},
        schedule={"choices": ["constant", "cosine"]},
        optimizer={"choices": ["nesterov", "adam"]},
    )
    params = parse_study(data, "m").space.params
    assert params[1:] == (
        IntParam("warmup_steps", 0, 500, log=False),
        IntParam("decay_steps", 10, 1000, log=True),
        CategoricalParam("weight_decay", (0.0, 1.0e-4)),
        CategoricalParam("schedule", ("constant", "cosine")),
        CategoricalParam("optimizer", ("nesterov", "adam")),
    )
    assert isinstance(params[3].choices[0], float)  # numeric choices of a float param are floats


def test_trial_spec_builds_optimizer_and_schedule() -> None:
    data = space(
        momentum={"low": 0.8, "high": 0.99, "scale": "linear"},
        warmup_steps={"choices": [0, 100]},
        end_factor={"low": 0.0, "high": 0.5, "scale": "linear"},
        schedule={"choices": ["linear", "cosine"]},
        optimizer={"choices": ["momentum", "adam"]},
    )
    config = parse_study(data, "m.yaml")
    params = {
        "batch_size": 32,
        "strategy": "default",
        "learning_rate": 0.05,
        "momentum": 0.9,
        "warmup_steps": 100,
        "end_factor": 0.1,
        "schedule": "cosine",
        "optimizer": "adam",
    }
    trial = config.trial_spec(Stratum(32, "default"), params, seed=7)
    assert trial.workload == "mnist1d" and trial.model == "mlp"
    assert trial.batch_size == 32 and trial.strategy == "default" and trial.settings.seed == 7
    assert trial.optimizer.name == "adam"
    assert trial.optimizer.learning_rate == 0.05 and trial.optimizer.momentum == 0.9
    assert trial.schedule.name == "cosine"
    assert trial.schedule.warmup_steps == 100 and trial.schedule.end_factor == 0.1
    assert trial.target == config.target and trial.settings.budget == config.settings.budget
    assert trial.settings.cadence == config.settings.cadence
    assert dict(trial.workload_options) == {"samples": 1000}
    assert trial.workload_options is not config.workload_options


def test_trial_spec_uses_fixed_settings() -> None:
    config = parse_study(study(optimizer="adam", schedule="linear", seed=3), "m.yaml")
    trial = config.trial_spec(Stratum(8, "default"), {"learning_rate": 1e-3})
    assert trial.optimizer.name == "adam" and trial.schedule.name == "linear"
    assert trial.settings.seed == 3
    assert trial.schedule.warmup_steps == 0  # ScheduleSpec default


@pytest.mark.parametrize(
    ("stratum", "params", "pattern"),
    [
        (
            Stratum(16, "default"),
            {"learning_rate": 0.1},
            r"stratum \(batch_size=16, strategy='default'\)",
        ),
        (
            Stratum(8, "mirrored:2"),
            {"learning_rate": 0.1},
            r"strategy='mirrored:2'\) is not in the study",
        ),
        (Stratum(8, "default"), {}, r"must include 'learning_rate'"),
        (
            Stratum(8, "default"),
            {"learning_rate": 0.1, "momentum": 0.9},
            r"unknown trial parameter 'momentum'",
        ),
        (
            Stratum(8, "default"),
            {"learning_rate": 0.1, "batch_size": 32},
            r"params\['batch_size'\] is 32",
        ),
    ],
)
def test_trial_spec_errors(stratum: Stratum, params: dict[str, Any], pattern: str) -> None:
    config = parse_study(study(), "m.yaml")
    with pytest.raises(UsageError, match=pattern) as info:
        config.trial_spec(stratum, params)
    assert str(info.value).startswith("m.yaml: ")


def test_total_trials() -> None:
    data = study(trials_per_stratum=3)
    data["search_space"]["strategy"] = ["default", "mirrored:2"]
    assert parse_study(data, "m").total_trials == 2 * 2 * 3


def test_config_is_frozen_and_keeps_raw() -> None:
    config = parse_study(study(), "m.yaml")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.name = "y"  # type: ignore[misc]
    assert config.raw == BASE
    assert yaml.safe_load(config.text) == BASE


def test_budget_only_examples_or_seconds() -> None:
    config = parse_study(study(budget={"max_examples": 10000, "max_seconds": 30}), "m")
    assert config.settings.budget == Budget(max_steps=None, max_examples=10000, max_seconds=30)


def test_eval_every_integer() -> None:
    assert parse_study(study(eval_every=50), "m").settings.cadence == EvalCadence(
        kind="fixed", every=50
    )


def test_tuner_settings() -> None:
    data = space(momentum={"choices": [0.9]})
    data["tuner"] = {"sampler": "grid", "oracle": "hyperband", "pruning": False}
    config = parse_study(data, "m")
    assert config.tuner.sampler is Sampler.GRID and config.tuner.oracle is Oracle.HYPERBAND
    assert config.tuner.pruning is False and config.tuner.max_consecutive_failures == 5
    assert config.tuner.fit_ahead is False  # off unless asked for
    data["tuner"] = {"fit_ahead": True}
    assert parse_study(data, "m").tuner.fit_ahead is True
    data["tuner"] = {"fit_ahead": "yes"}
    with pytest.raises(UsageError, match=r"tuner\.fit_ahead.*true or false"):
        parse_study(data, "m")


def test_prune_slack() -> None:
    data = space()
    config = parse_study(data, "m")
    assert config.tuner.prune_slack is None  # the allocation's default:
    assert config.prune_slack == config.prune_factor == 1.5  # trials counted (even)
    steps = Allocation("steps", steps=20_000)  # a mode of the allocation extension
    assert dataclasses.replace(config, allocation=steps).prune_slack == 1.0  # a steps budget
    data["tuner"] = {"prune_slack": 2}
    own = dataclasses.replace(parse_study(data, "m"), allocation=steps)
    assert own.prune_slack == 2.0  # the file's own, whatever the mode
    data["tuner"] = {"prune_slack": 1}
    assert parse_study(data, "m").prune_slack == 1.0
    data["tuner"] = {"prune_slack": 2.0, "pruning": False}
    assert parse_study(data, "m").prune_factor == math.inf  # no pruning: never stopped
    for bad, rule in (
        (0.5, r"must be >= 1"),
        ("1.5", r"must be a number"),
        (True, "must be a number"),
    ):
        data["tuner"] = {"prune_slack": bad}
        with pytest.raises(UsageError, match=rf"m: tuner\.prune_slack {rule}"):
            parse_study(data, "m")
    with pytest.raises(UsageError, match=r"tuner\.prune_slack must be a number >= 1"):
        TunerSettings(prune_slack=0.9)


def test_tuner_seed_transfer_and_confirmation() -> None:
    config = parse_study(study(seed=3), "m")
    assert config.tuner_seed == 3 and config.tuner.transfer is True
    assert not config.tuner.confirm.enabled and config.total_trials == 2 * 2

    data = study(seed=3)
    data["tuner"] = {"seed": 7, "transfer": False, "confirm": {"top": 2, "seeds": 3}}
    config = parse_study(data, "m")
    assert config.tuner_seed == 7 and config.settings.seed == 3  # training keeps the study's seed
    assert config.tuner.transfer is False
    assert config.tuner.confirm == Confirmation(top=2, seeds=3)
    assert config.tuner.confirm.seed_values(config.settings.seed) == (4, 5, 6)
    # each of the 2 strata: 2 search trials and 2 x 3 confirmations
    assert config.total_trials == 2 * (2 + 6)
    data["tuner"] = {"confirm": None}
    assert parse_study(data, "m").tuner.confirm.trials == 0


# --------------------------------------------------------------------------------------------
# Schema


def test_schema_is_valid_draft_2020_12(schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.extension("branch", "schedules")  # the schema and keys of study as shipped
def test_schema_keys_match_loader(schema: dict[str, Any]) -> None:
    props = schema["properties"]
    assert set(props) == set(studyfile.study_keys())  # the core's and the extensions'
    for section in study_sections():  # an extension's key as its fragment states it
        assert props[section.key] == section.schema, section.key
    assert set(schema["required"]) == set(studyfile.REQUIRED_KEYS)
    assert set(props["search_space"]["properties"]) == set(space_reader.SPACE_KEYS)
    assert set(props["budget"]["properties"]) == set(sections.BUDGET_KEYS)
    assert set(props["tuner"]["properties"]) == set(sections.TUNER_KEYS)


def _without_additional_properties_false(node: Any) -> list[str]:
    missing = []
    if isinstance(node, dict):
        closed = node.get("additionalProperties") is False
        if node.get("type") == "object" and "properties" in node and not closed:
            missing.append(node.get("description", "?"))
        for value in node.values():
            missing += _without_additional_properties_false(value)
    elif isinstance(node, list):
        for value in node:
            missing += _without_additional_properties_false(value)
    return missing


def test_schema_closes_every_object(schema: dict[str, Any]) -> None:
    assert _without_additional_properties_false(schema) == []


@pytest.mark.parametrize(
    "data",
    [
        study(bugdet={"max_steps": 1}),
        space(bach_size=[8]),
        study(tuner={"sampler": "tpe", "prune": True}),
        space(momentum={"low": 0.1, "high": 0.5, "scael": "log"}),
    ],
    ids=["top", "search_space", "tuner", "param"],
)
def test_schema_rejects_unknown_keys(data: dict[str, Any], schema: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


@pytest.mark.parametrize(
    "data",
    [
        study(budget={"max_steps": None}),
        space(warmup_steps={"low": 0.5, "high": 10}),
        space(strategy=["mirored:2"]),
        study(trials_per_stratum=0),
        study(target="val_accuracy=>0.9"),
        space(learning_rate={"choices": [0.1]}),
        space(learning_rate={"low": 0, "high": 1.0}),
    ],
)
def test_schema_rejects_other_mistakes(data: dict[str, Any], schema: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


# --------------------------------------------------------------------------------------------
# Malformed files: one UsageError line naming the file, the key path, the rule and the value.


def _set(path: str, value: Any) -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        data = copy.deepcopy(BASE)
        node = data
        *parents, last = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
        return data

    return make


def _drop(key: str) -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        data = copy.deepcopy(BASE)
        del data[key]
        return data

    return make


MALFORMED: list[tuple[str, Any, list[str]]] = [
    (
        "unknown-top-level-key",
        _set("bugdet", {"max_steps": 1}),
        ["unknown key 'bugdet' at top level", "did you mean 'budget'?", "known: name, workload"],
    ),
    (
        "unknown-search-space-key",
        _set("search_space.bach_size", [8]),
        [
            "unknown key 'bach_size' in search_space",
            "did you mean 'batch_size'?",
            "known: batch_size, learning_rate, strategy, momentum",
        ],
    ),
    (
        "unknown-param-key",
        _set("search_space.learning_rate", {"low": 0.1, "high": 1.0, "sacle": "log"}),
        ["unknown key 'sacle' in search_space.learning_rate", "known: low, high, scale"],
    ),
    (
        "unknown-tuner-key",
        _set("tuner", {"prune": True}),
        ["unknown key 'prune' in tuner", "did you mean 'pruning'?"],
    ),
    (
        "lr-low-not-positive",
        _set("search_space.learning_rate", {"low": -1, "high": 1.0}),
        ["search_space.learning_rate.low must be > 0 (got -1)"],
    ),
    (
        "lr-low-not-below-high",
        _set("search_space.learning_rate", {"low": 1.0, "high": 0.1}),
        ["search_space.learning_rate.low must be < high; swap them (got low=1.0, high=0.1)"],
    ),
    (
        "float-param-low-equals-high",
        _set("search_space.momentum", {"low": 0.9, "high": 0.9}),
        ["search_space.momentum.low must be < high; to hold momentum fixed write {choices: [0.9]}"],
    ),
    (
        "lr-bad-scale",
        _set("search_space.learning_rate", {"low": 0.1, "high": 1.0, "scale": "ln"}),
        ["search_space.learning_rate.scale must be one of log, linear (got 'ln')"],
    ),
    (
        "lr-text-number",
        _set("search_space.learning_rate", {"low": "1e-3", "high": 1.0}),
        ["search_space.learning_rate.low must be a number", "(got '1e-3')", "1.0e-3"],
    ),
    (
        "lr-missing",
        _set("search_space", {"batch_size": [8]}),
        ["missing required key 'learning_rate' in search_space"],
    ),
    (
        "batch-size-not-list",
        _set("search_space.batch_size", "64"),
        [
            "search_space.batch_size must be a non-empty list of ints or {low: L, high: H}",
            "(got '64')",
        ],
    ),
    (
        "batch-size-zero",
        _set("search_space.batch_size", [8, 0]),
        ["search_space.batch_size[1] must be >= 1 (got 0)"],
    ),
    (
        "batch-size-float",
        _set("search_space.batch_size", [8, 16.5]),
        ["search_space.batch_size[1] must be an integer", "(got 16.5)"],
    ),
    (
        "batch-size-duplicate",
        _set("search_space.batch_size", [8, 8]),
        ["search_space.batch_size lists a value twice (got 8)"],
    ),
    (
        "batch-bounds-unknown-key",
        _set("search_space.batch_size", {"low": 8, "hi": 64}),
        ["unknown key 'hi' in search_space.batch_size", "did you mean 'high'?"],
    ),
    (
        "batch-powers-empty",
        _set("search_space.batch_size", {"low": 5, "high": 7}),
        [
            "search_space.batch_size contains no power of two between low and high",
            "{low: 5, high: 7}",
        ],
    ),
    (
        "unknown-strategy",
        _set("search_space.strategy", ["default", "mirored:2"]),
        ["search_space.strategy[1] unknown strategy", "mirrored:N", "(got 'mirored:2')"],
    ),
    (
        "strategy-mirrored-zero",
        _set("search_space.strategy", ["mirrored:0"]),
        ["search_space.strategy[0] unknown strategy", "(got 'mirrored:0')"],
    ),
    (
        "strategy-not-list",
        _set("search_space.strategy", "default"),
        ["search_space.strategy must be a non-empty list of strategy names", "(got 'default')"],
    ),
    (
        "batch-not-divisible",
        lambda: space(batch_size=[8, 30], strategy=["default", "mirrored:4"]),
        [
            "search_space.batch_size must be divisible by 4, the replica count of strategy "
            "'mirrored:4' in search_space.strategy; drop 30 or that strategy (got 30)"
        ],
    ),
    (
        "bad-target",
        _set("target", "val_accuracy=>0.9"),
        ["target: cannot parse 'val_accuracy=>0.9'", "METRIC OP NUMBER"],
    ),
    (
        "target-not-string",
        _set("target", 0.9),
        ["target must be a non-empty string (got 0.9)"],
    ),
    (
        "budget-no-limits",
        _set("budget", {"max_steps": None, "max_examples": None}),
        ["budget needs at least one of max_steps, max_examples, max_seconds", "max_steps: null"],
    ),
    (
        "budget-steps-zero",
        _set("budget", {"max_steps": 0}),
        ["budget.max_steps must be >= 1 (got 0)"],
    ),
    (
        "budget-unknown-key",
        _set("budget", {"steps": 100}),
        ["unknown key 'steps' in budget", "known: max_steps, max_examples, max_seconds"],
    ),
    (
        "trials-per-stratum-zero",
        _set("trials_per_stratum", 0),
        ["trials_per_stratum must be >= 1 (got 0)"],
    ),
    (
        "int-param-float-bounds",
        _set("search_space.warmup_steps", {"low": 0.5, "high": 10, "scale": "linear"}),
        ["search_space.warmup_steps.low must be an integer", "(got 0.5)"],
    ),
    (
        "int-param-float-choice",
        _set("search_space.decay_steps", {"choices": [100, 250.5]}),
        ["search_space.decay_steps.choices[1] must be an integer", "(got 250.5)"],
    ),
    (
        "momentum-out-of-range",
        _set("search_space.momentum", {"low": 0.5, "high": 1.0, "scale": "linear"}),
        ["search_space.momentum.high must be in [0, 1) (got 1.0)"],
    ),
    (
        "log-scale-with-zero",
        _set("search_space.weight_decay", {"low": 0, "high": 0.1}),
        ["search_space.weight_decay.low must be > 0 with scale log", "scale: linear", "(got 0)"],
    ),
    (
        "schedule-param-range",
        _set("search_space.schedule", {"low": 0, "high": 1}),
        ["search_space.schedule must be {choices: [...]}"],
    ),
    (
        "schedule-param-unknown-choice",
        _set("search_space.schedule", {"choices": ["constant", "step"]}),
        ["search_space.schedule.choices[1] must be one of constant, linear, cosine (got 'step')"],
    ),
    (
        "empty-choices",
        _set("search_space.momentum", {"choices": []}),
        ["search_space.momentum.choices must be a non-empty list (got [])"],
    ),
    (
        "bad-sampler",
        _set("tuner", {"sampler": "cmaes"}),
        ["tuner.sampler must be one of tpe, random, qmc, grid (got 'cmaes')"],
    ),
    (
        "bad-oracle",
        _set("tuner", {"oracle": "gp"}),
        ["tuner.oracle must be one of random, bayesian, hyperband (got 'gp')"],
    ),
    (
        "bad-pruning",
        _set("tuner", {"pruning": "yes please"}),
        ["tuner.pruning must be true or false (got 'yes please')"],
    ),
    (
        "bad-transfer",
        _set("tuner", {"transfer": "no"}),
        ["tuner.transfer must be true or false (got 'no')"],
    ),
    (
        "bad-tuner-seed",
        _set("tuner", {"seed": -1}),
        ["tuner.seed must be >= 0 (got -1)"],
    ),
    (
        "confirm-not-a-mapping",
        _set("tuner", {"confirm": 2}),
        ["tuner.confirm must be a mapping (got 2)"],
    ),
    (
        "confirm-missing-seeds",
        _set("tuner", {"confirm": {"top": 2}}),
        ["missing required key 'seeds' in tuner.confirm"],
    ),
    (
        "confirm-zero-top",
        _set("tuner", {"confirm": {"top": 0, "seeds": 2}}),
        ["tuner.confirm.top must be >= 1 (got 0)"],
    ),
    (
        "confirm-unknown-key",
        _set("tuner", {"confirm": {"top": 1, "seed": 2}}),
        ["unknown key 'seed' in tuner.confirm", "did you mean 'seeds'?"],
    ),
    (
        "lr-choices",
        _set("search_space.learning_rate", {"choices": [0.01, 0.1]}),
        [
            "search_space.learning_rate must be {low: L, high: H, scale: log|linear} (a range to "
            "tune) (got {choices: [0.01, 0.1]})"
        ],
    ),
    (
        "lr-low-equals-high",
        _set("search_space.learning_rate", {"low": 0.1, "high": 0.1}),
        ["search_space.learning_rate.low must be < high; give a range", "(got low=0.1, high=0.1)"],
    ),
    (
        "missing-name",
        _drop("name"),
        ["missing required key 'name' at top level"],
    ),
    (
        "bad-name",
        _set("name", "my study"),
        ["name must be letters, digits, '_', '.' or '-', not dots alone", "(got 'my study')"],
    ),
    (
        "bad-workload",
        _set("workload", "pkg.mod:"),
        ["workload must be a workload name (e.g. mnist1d) or module:callable (got 'pkg.mod:')"],
    ),
    (
        "bad-optimizer",
        _set("optimizer", "rmsprop"),
        ["optimizer must be one of sgd, momentum, nesterov, adam (got 'rmsprop')"],
    ),
    (
        "bad-eval-every",
        _set("eval_every", "geometric:0.9"),
        ["eval_every geometric ratio must be a number > 1 (got 'geometric:0.9')"],
    ),
    (
        "eval-every-zero",
        _set("eval_every", 0),
        ["eval_every must be >= 1 (got 0)"],
    ),
    (
        "seed-bool",
        _set("seed", True),
        ["seed must be an integer (got True)"],
    ),
    (
        "workload-options-not-mapping",
        _set("workload_options", [1, 2]),
        ["workload_options must be a mapping (got [1, 2])"],
    ),
    (
        "top-level-list",
        "- name: x\n- workload: mnist1d\n",
        ["the top level must be a mapping", "got a list"],
    ),
    (
        "empty-file",
        "",
        ["the top level must be a mapping", "got an empty document"],
    ),
    (
        "yaml-syntax-error",
        "name: x\nworkload: mnist1d\ntarget: [val_accuracy>=0.9\nseed: 0\n",
        ["line 4, column 5: invalid YAML", "while parsing a flow sequence at line 3"],
    ),
    (
        "yaml-bad-indent",
        "name: x\nsearch_space:\n  batch_size: [8]\n    learning_rate: 1\n",
        ["line 4, column 5: invalid YAML: expected <block end>"],
    ),
    (
        "yaml-duplicate-key",
        "name: x\nseed: 0\nseed: 1\n",
        ["line 3, column 1: invalid YAML", "duplicate key 'seed'"],
    ),
]


@pytest.mark.parametrize(("case", "content", "expected"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_file(tmp_path: Path, case: str, content: Any, expected: list[str]) -> None:
    path = write(tmp_path, content() if callable(content) else content)
    with pytest.raises(UsageError) as info:
        load_study_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert "\n" not in message, message
    assert not FLAG.search(message), message  # a study file has keys, not command-line flags
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"


FLAG = re.compile(r"(^|[\s(])--[a-z]")


def test_at_least_ten_malformed_cases() -> None:
    assert len(MALFORMED) >= 10


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(UsageError, match=rf"^study file '{path}' not found"):
        load_study_file(path)
    with pytest.raises(UsageError, match=r"^study file 'x\.yaml' not found"):
        load_study_file("x.yaml")


def test_parse_study_names_the_source() -> None:
    with pytest.raises(UsageError, match=r"^<cli>: trials_per_stratum must be >= 1 \(got 0\)$"):
        parse_study(study(trials_per_stratum=0), "<cli>")


def test_valid_base_loads(tmp_path: Path) -> None:
    config = load_study_file(write(tmp_path, BASE))
    assert config.space.strata() == [Stratum(8, "default"), Stratum(32, "default")]


# --------------------------------------------------------------------------------------------
# Errors of the data model, named by file and key: the workload and model are resolved at load,
# and no message names a command-line flag for a value from the file.

CUSTOM = """
from study.workloads.base import Workload

def broken() -> Workload:
    raise RuntimeError("no GPU here")

NOT_CALLABLE = 3
"""

AT_LOAD: list[tuple[str, Callable[[], dict[str, Any]], str]] = [
    (
        "unknown-workload",
        _set("workload", "nosuchworkload"),
        "workload: unknown workload 'nosuchworkload'; choose from csv, digits, images, mnist1d, shapes, "
        "tabular, tfrecord, or give module:callable",
    ),
    (
        "unknown-model",
        _set("model", "nosuchmodel"),
        "model: unknown model 'nosuchmodel' for workload 'mnist1d'; choose from mlp, cnn",
    ),
    (
        "custom-not-importable",
        _set("workload", "no_such_module_xyz:Thing"),
        "workload: cannot import module 'no_such_module_xyz' (ModuleNotFoundError",
    ),
    (
        "custom-missing-attribute",
        _set("workload", "custom_for_studyfile:Missing"),
        "workload: module 'custom_for_studyfile' has no attribute 'Missing'",
    ),
    (
        "custom-not-callable",
        _set("workload", "custom_for_studyfile:NOT_CALLABLE"),
        "workload: 'custom_for_studyfile:NOT_CALLABLE' is not callable (got int)",
    ),
    (
        "custom-constructor-fails",
        lambda: study(workload="custom_for_studyfile:broken", workload_options={}, model=None),
        "workload: building 'custom_for_studyfile:broken' failed (RuntimeError: no GPU here)",
    ),
    (
        "unknown-target-metric",
        _set("target", "nosuchmetric>=0.5"),
        "target: unknown metric 'nosuchmetric'; workload 'mnist1d' reports val_loss, "
        "val_accuracy, val_error",
    ),
    (
        "target-against-direction",
        _set("target", "val_loss>=0.3"),
        "target: 'val_loss>=0.3' waits for val_loss to rise, but lower val_loss is better",
    ),
    (
        "loss-unsuited",
        _set("loss", "mae"),
        "loss: loss 'mae' does not suit a multiclass task",
    ),
    (
        "model-module-missing",
        _set("model", "no_such_module_xyz:build"),
        "model: cannot find module 'no_such_module_xyz'",
    ),
    (
        "bad-workload-option",
        _set("workload_options", {"samples": 5}),
        "workload_options.samples must be an integer >= 100 (got 5)",
    ),
    (
        "unknown-workload-option",
        _set("workload_options", {"rows": 5}),
        "workload_options: workload 'mnist1d' takes no option 'rows'; its options are samples, seed",
    ),
]


@pytest.mark.parametrize(("case", "content", "expected"), AT_LOAD, ids=[c[0] for c in AT_LOAD])
def test_workload_and_model_are_checked_at_load(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    content: Callable[[], dict[str, Any]],
    expected: str,
) -> None:
    (tmp_path / "custom_for_studyfile.py").write_text(CUSTOM, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write(tmp_path, content())
    with pytest.raises(UsageError) as info:
        load_study_file(path, check=check_study)
    message = str(info.value)
    assert message.startswith(f"{path}: {expected}"), message
    assert "\n" not in message and not FLAG.search(message), message


def test_precision_jit_and_loss_reach_every_trial(tmp_path: Path) -> None:
    data = study(
        precision="mixed_bfloat16", jit_compile=True, loss="sparse_categorical_crossentropy"
    )
    config = load_study_file(write(tmp_path, data))
    spec = config.trial_spec(Stratum(8, "default"), {"learning_rate": 0.1})
    assert (spec.settings.precision, spec.settings.jit_compile, spec.settings.loss) == (
        "mixed_bfloat16",
        "on",
        "sparse_categorical_crossentropy",
    )
    default = load_study_file(write(tmp_path, BASE, "d.yaml"))
    spec = default.trial_spec(Stratum(8, "default"), {"learning_rate": 0.1})
    assert (spec.settings.precision, spec.settings.jit_compile, spec.settings.loss) == (
        "auto",
        "auto",
        None,
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "precision",
            "fp8",
            "precision must be one of auto, float32, mixed_float16, mixed_bfloat16",
        ),
        ("jit_compile", "maybe", "jit_compile must be one of auto, on, off"),
        ("loss", 3, "loss must be"),
    ],
)
def test_precision_jit_and_loss_errors(key: str, value: Any, message: str) -> None:
    with pytest.raises(UsageError, match=f"^m: {message}"):
        parse_study(study(**{key: value}), "m")


def test_model_callable_is_accepted_when_its_module_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_models_for_studyfile.py").write_text("def build(): ...\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = load_study_file(write(tmp_path, study(model="my_models_for_studyfile:build")))
    assert config.model == "my_models_for_studyfile:build"


def test_parse_study_leaves_the_workload_alone() -> None:
    # A stored study is read (e.g. by `study report`) where its workload may not be importable.
    config = parse_study(study(workload="not_installed.pkg:make", model="nosuchmodel"), "m")
    assert config.workload == "not_installed.pkg:make" and config.model == "nosuchmodel"


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (
            _set("budget", {"max_steps": 0}),
            "budget.max_steps",
            "budget.max_steps must be >= 1 (got 0)",
        ),
        (
            _set("search_space.momentum", {"low": 0.5, "high": 1.0, "scale": "linear"}),
            "momentum.high",
            "search_space.momentum.high must be in [0, 1) (got 1.0)",
        ),
        (
            _set("search_space.epsilon", {"choices": [1.0e-8, 0]}),
            "epsilon.choices[1]",
            "search_space.epsilon.choices[1] must be > 0 (got 0)",
        ),
        (_set("target", "oops"), "target", "target: cannot parse 'oops'"),
        (_set("workload", "nosuchworkload"), "workload", "workload: unknown workload"),
    ],
    ids=["budget", "range", "choice", "target", "workload"],
)
def test_data_model_errors_keep_their_field(
    tmp_path: Path, data: Callable[[], dict[str, Any]], field: str, message: str
) -> None:
    path = write(tmp_path, data())
    with pytest.raises(FieldError) as info:
        load_study_file(path, check=check_study)
    assert info.value.field == field
    assert str(info.value).startswith(f"{path}: {message}")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("geometric:x", "eval_every must be a step count >= 1 or 'geometric:RATIO'"),
        ("often", "(got 'often')"),
        (2.5, "eval_every must be a step count >= 1 or 'geometric:RATIO'"),
        (None, "(got null)"),
        (-5, "eval_every must be >= 1 (got -5)"),
        ("geometric:1.0", "eval_every geometric ratio must be a number > 1 (got 'geometric:1.0')"),
    ],
)
def test_eval_every_is_read_by_the_cadence_grammar(value: Any, expected: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_study(study(eval_every=value), "m.yaml")
    message = str(info.value)
    assert message.startswith("m.yaml: eval_every ") and expected in message, message


@pytest.mark.parametrize(
    ("value", "cadence"),
    [
        ("25", EvalCadence(kind="fixed", every=25)),
        ("geometric", EvalCadence(kind="geometric", ratio=1.05)),
        (" geometric:1.25 ", EvalCadence(kind="geometric", ratio=1.25)),
    ],
)
def test_eval_every_accepts_what_the_command_line_accepts(value: str, cadence: EvalCadence) -> None:
    assert parse_study(study(eval_every=value), "m").settings.cadence == cadence


def test_strategies_are_read_by_the_strategy_grammar() -> None:
    config = parse_study(space(strategy=["mirrored", "mirrored:4", "one_device"]), "m")
    assert config.space.strategies == ("mirrored", "mirrored:4", "one_device")
    with pytest.raises(
        UsageError, match=r"^m: search_space\.strategy\[0\] unknown strategy.*'tpu:2'"
    ):
        parse_study(space(strategy=["tpu:2"]), "m")
    with pytest.raises(UsageError, match=r"^m: search_space\.strategy lists a value twice"):
        parse_study(space(strategy=["mirrored:2", "mirrored:02"]), "m")  # the same strategy


@pytest.mark.parametrize("name", [".", ".."])
def test_a_name_of_dots_alone_is_refused(tmp_path: Path, name: str) -> None:
    """The name names folders (``reports/NAME``): ``..`` would be the folder above."""
    path = write(tmp_path, study(name=name))
    with pytest.raises(UsageError) as info:
        load_study_file(path)
    assert str(info.value) == (
        f"{path}: name must be letters, digits, '_', '.' or '-', not dots alone "
        f"(it names folders: reports/NAME) (got '{name}')"
    )


def test_the_schema_refuses_dots_alone_too(schema: dict[str, Any]) -> None:
    jsonschema.validate(study(name="a..b"), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(study(name=".."), schema)


def test_storage_retry_is_seconds_the_run_waits_for_its_database(tmp_path: Path) -> None:
    assert load_study_file(write(tmp_path, BASE)).storage_retry is None
    config = load_study_file(write(tmp_path, {**BASE, "storage_retry": 45}))
    assert config.storage_retry == 45.0
    with pytest.raises(UsageError, match=r"x.yaml: storage_retry must be a number of seconds >= 0"):
        load_study_file(write(tmp_path, {**BASE, "storage_retry": -1}))
    with pytest.raises(UsageError, match=r"x.yaml: storage_retry must be a number"):
        load_study_file(write(tmp_path, {**BASE, "storage_retry": "soon"}))


def test_overhead_is_the_critical_batch_sizes_share_above_perfect_scaling(
    tmp_path: Path, schema: dict[str, Any]
) -> None:
    assert load_study_file(write(tmp_path, BASE)).overhead == 0.2
    config = load_study_file(write(tmp_path, {**BASE, "overhead": 0.1}))
    assert config.overhead == 0.1
    jsonschema.validate({**BASE, "overhead": 0.1}, schema)
    for bad in (0, -0.5, 11):
        with pytest.raises(UsageError, match=r"x.yaml: overhead must be in \(0, 10\]"):
            load_study_file(write(tmp_path, {**BASE, "overhead": bad}))
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**BASE, "overhead": bad}, schema)
    with pytest.raises(UsageError, match=r"x\.yaml: overhead must be a number"):
        load_study_file(write(tmp_path, {**BASE, "overhead": "lots"}))
