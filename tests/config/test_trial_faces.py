"""One trial, four faces: the fields of `TrialDefinition` are the flags of the one-trial commands,
the keywords of `study.train`, the keys of a study file (and its schema), and every field of the
settings records a trial is built from. A field in one face and not in the others fails here,
and so does a field that does not reach the trial's spec or a default that drifted."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
from typing import Any

import pytest

import study
from study.api.training import trial_definition
from study.cli import build_parser
from study.commands.train import build_spec
from study.commands.trial_flags import TRIAL_FLAGS
from study.config.definition import TrialDefinition, field_paths, study_file_key
from study.config.hold import DEFAULT_HOLD
from study.config.schedule import SCHEDULE_KEYS, BatchSchedule
from study.config.sections import BUDGET_KEYS, SETTING_KEYS
from study.config.space import Stratum
from study.config.space_reader import SPACE_KEYS
from study.config.studyfile import SCHEMA_PATH, parse_study, study_keys
from study.config.trial import (
    Budget,
    OptimizerSpec,
    ScheduleSpec,
    TrialSettings,
    TrialSpec,
    default_of,
)
from study.errors import UsageError
from study.runner.single import resolve_trial

FIELDS = [item.name for item in dataclasses.fields(TrialDefinition)]
DEFAULT = TrialDefinition()
#: Where each one-trial command leaves fields out, and why.
LEFT_OUT = {
    "train": set(),
    # checks a workload: no schedule, no measurement
    "check-workload": {
        "batch_schedule", "lr_alpha", "stage_warmup_steps", "noise_scale", "noise_every",
        "exact_steps",
    },
    # a pilot: always measures the noise scale, at a fixed batch size
    "noise-scale": {"batch_schedule", "lr_alpha", "stage_warmup_steps", "noise_scale",
                    "exact_steps"},
}  # fmt: skip
#: The flags and keywords that say where a trial is logged and how it is shown (not a field).
CLI_ONLY = {"tracking_uri", "experiment", "no_track", "json", "samples", "csv", "label",
            "text_column", "handler", "command", "spec", "file", "write", "study", "storage",
            "storage_retry", "storage_ca", "storage_token_file", "trial_defaults"}  # fmt: skip
API_ONLY = {"trial", "track", "tracking_uri", "experiment"}
#: Study-file keys of the study, not of one trial.
STUDY_ONLY = {"name", "trials_per_stratum", "search_space", "tuner", "heartbeat", "allocation",
              "training_seeds", "storage_retry", "overhead", "branch"}  # fmt: skip

#: One value other than the default for every field (with what it needs besides).
SCHEDULE = {"batch_schedule": "32,128@4096"}
CHANGES: dict[str, tuple[Any, dict[str, Any]]] = {
    "workload": ("tabular", {}),
    "model": ("cnn", {}),
    "loss": ("sparse_categorical_crossentropy", {}),
    "workload_options": ({"samples": 2000}, {}),
    "batch_size": (64, {}),
    "learning_rate": (0.2, {}),
    "optimizer": ("adam", {}),
    "momentum": (0.8, {}),
    "beta1": (0.8, {}),
    "beta2": (0.99, {}),
    "epsilon": (1e-6, {}),
    "weight_decay": (1e-4, {}),
    "schedule": ("cosine", {}),
    "warmup_steps": (5, {}),
    "decay_steps": (100, {}),
    "end_factor": (0.1, {}),
    "target": ("val_accuracy>=0.5", {}),
    "max_steps": (500, {}),
    "max_examples": (5000, {}),
    "max_seconds": (60.0, {}),
    "eval_every": ("10", {}),
    "target_hold": ("off", {}),
    "seed": (3, {}),
    "strategy": ("default", {}),
    "precision": ("float32", {}),
    "jit_compile": ("off", {}),
    "batch_schedule": ("32,128@4096", {}),
    "lr_alpha": (1.0, SCHEDULE),
    "stage_warmup_steps": (10, SCHEDULE),
    "noise_scale": (True, {}),
    "noise_every": (4, {"noise_scale": True}),
    "exact_steps": (False, {}),
}


def argv(values: dict[str, Any]) -> list[str]:
    """``study train``'s flags for ``values`` (by field), from the flag table."""
    words: list[str] = []
    for name, value in values.items():
        flag = TRIAL_FLAGS[name].flag
        if isinstance(value, bool):
            words += [flag] if value != getattr(DEFAULT, name) else []
        elif isinstance(value, dict):
            for key, option in value.items():
                words += [flag, f"{key}={option}"]
        else:
            words += [flag, str(value)]
    return words


def command_parser(command: str) -> argparse.ArgumentParser:
    """The parser of ``study COMMAND`` (argparse has no public walk: as docs/generate.py)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def dests(command: str) -> set[str]:
    return {a.dest for a in command_parser(command)._actions if a.dest != "help"}


def test_every_field_has_a_flag_and_every_flag_a_field() -> None:
    assert list(TRIAL_FLAGS) == FIELDS  # in the order --help lists them
    for command, left_out in LEFT_OUT.items():
        assert dests(command) - CLI_ONLY == set(FIELDS) - left_out, command


def test_every_field_is_a_keyword_of_study_train_with_the_same_default() -> None:
    parameters = inspect.signature(study.train).parameters
    assert set(parameters) - API_ONLY == set(FIELDS)
    for name in FIELDS:
        assert parameters[name].default == getattr(DEFAULT, name), name
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY


def test_a_name_that_is_no_field_is_named_with_the_nearest() -> None:
    with pytest.raises(UsageError, match=r"^lerning_rate: not a field of a trial \(did you mean "
                       r"learning_rate\?\)$"):  # fmt: skip
        study.train("tabular", lerning_rate=0.1)
    with pytest.raises(UsageError, match=r"^workload: given twice"):
        study.train("tabular", workload="digits")


@pytest.mark.extension("branch", "schedules")  # the schema and keys of study as shipped
def test_every_field_is_a_study_file_key_and_every_trial_key_a_field() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    keys = {name: study_file_key(item) for name, item in _fields().items()}
    sections = {"search_space": SPACE_KEYS, "budget": BUDGET_KEYS, "batch_schedule": SCHEDULE_KEYS}
    for name, key in keys.items():
        head, _, rest = key.partition(".")
        assert head in study_keys(), name
        if rest:
            assert rest.split(".")[0] in sections[head], name
        assert _schema_property(schema, key) is not None, name
    top = {key.partition(".")[0] for key in keys.values()}
    assert set(study_keys()) - STUDY_ONLY == top - {"search_space"}
    assert {f"search_space.{k}" for k in SPACE_KEYS} <= set(keys.values()) | {
        "search_space.optimizer",  # sampled instead of the fixed optimizer and schedule
        "search_space.schedule",
    }
    assert {f"budget.{k}" for k in BUDGET_KEYS} <= set(keys.values())
    assert set(SETTING_KEYS) - {"budget"} <= set(keys.values())


def test_every_field_of_the_settings_records_is_set_by_a_field() -> None:
    paths = {path for item in _fields().values() for path in field_paths(item)}
    wanted = {"optimizer", "schedule", "cadence", *_names(TrialSpec)}
    wanted |= {f"optimizer.{n}" for n in _names(OptimizerSpec) - {"name"}}
    wanted |= {f"schedule.{n}" for n in _names(ScheduleSpec) - {"name"}}
    wanted |= {f"budget.{n}" for n in _names(Budget)} | _names(TrialSettings)
    wanted -= {"settings", "budget"}  # records of records, set through their fields
    # fields only a trial outside a study has: the hold rule (a study file's target_hold is
    # read by the study), the inline schedule's scaling and stage warmup
    only_here = {"target_hold", "lr_alpha", "stage_warmup_steps", "cadence.every", "cadence.ratio"}
    assert paths - only_here == wanted


@pytest.mark.parametrize("name", FIELDS)
def test_each_field_reaches_the_spec_alike_from_flags_keywords_and_the_record(name: str) -> None:
    value, needs = CHANGES[name]
    values = {**needs, name: value}
    from_record = TrialDefinition(**values).spec(resolve_trial)
    from_flags = build_spec(build_parser().parse_args(["train", *argv(values)]))
    from_keywords = trial_definition(None, values).spec(resolve_trial)
    assert from_record == from_flags == from_keywords
    assert from_record != TrialDefinition(**needs).spec(resolve_trial)  # the field changed it


def test_the_study_file_takes_the_same_defaults() -> None:
    data = {
        "name": "faces",
        "workload": "mnist1d",
        "target": "val_accuracy>=0.6",
        "budget": {"max_steps": DEFAULT.settings().budget.max_steps},
        "trials_per_stratum": 1,
        "search_space": {"batch_size": [DEFAULT.batch_size], "learning_rate": {"low": 0.01,
                                                                                "high": 0.1}},
    }  # fmt: skip
    config = parse_study(data, "faces.yaml")
    assert config.settings == DEFAULT.settings()
    stratum = Stratum(DEFAULT.batch_size, DEFAULT.strategy)
    from_file = config.trial_spec(stratum, {"learning_rate": DEFAULT.learning_rate})
    spec = DEFAULT.spec(resolve_trial)
    assert from_file.model is None and spec.model == "mlp"  # the file's: the workload's default
    assert dataclasses.replace(from_file, model=spec.model) == spec


def test_the_schema_states_the_same_defaults() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    none_means = {  # a field left None takes its record's default
        "noise_every": default_of(TrialSettings, "noise_every"),
        "lr_alpha": default_of(BatchSchedule, "alpha"),
        "stage_warmup_steps": default_of(BatchSchedule, "stage_warmup_steps"),
    }
    checked = 0
    for name, item in _fields().items():
        found = _schema_property(schema, study_file_key(item))
        if found is not None and "default" in found:
            default = getattr(DEFAULT, name)
            default = none_means[name] if default is None else default
            if isinstance(found["default"], list):  # the search space's list of values
                default = [default]
            assert found["default"] == default, name
            checked += 1
    assert checked >= 6
    hold = schema["properties"]["target_hold"]["oneOf"][0]["properties"]
    assert (hold["fraction"]["default"], hold["min_steps"]["default"]) == (
        DEFAULT_HOLD.fraction,
        DEFAULT_HOLD.min_steps,
    )
    assert DEFAULT.target_hold == DEFAULT_HOLD.to_param()


def test_the_flags_show_the_records_defaults() -> None:
    text = command_parser("train").format_help()
    for flag, default in (("--lr", DEFAULT.learning_rate), ("--optimizer", DEFAULT.optimizer),
                          ("--eval-every", DEFAULT.eval_every), ("--noise-every", 16),
                          ("--max-steps", Budget().max_steps)):  # fmt: skip
        line = text[text.index("\n  " + flag + " ") :]
        assert f"default: {default}" in " ".join(line[:400].split()), flag
    args = build_parser().parse_args(["train"])
    assert isinstance(args, argparse.Namespace)
    assert all(getattr(args, name) == getattr(DEFAULT, name) for name in FIELDS
               if name != "workload_options")  # fmt: skip


def _fields() -> dict[str, dataclasses.Field[Any]]:
    return {item.name: item for item in dataclasses.fields(TrialDefinition)}


def _names(record: type) -> set[str]:
    return {item.name for item in dataclasses.fields(record)}


def _schema_property(schema: dict[str, Any], key: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for part in key.split("."):
        node = (node or {}).get("properties", {}).get(part)
    return node
