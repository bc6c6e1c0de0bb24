"""Writing study files: a study as the mapping a study file holds, checked by the parser as
``study run`` reads it, then written as YAML.

``study noise-scale --write FILE`` writes the study its pilot suggests: the study file it came
from (or, without one, its trial's workload and `TrialSettings`) with a new batch-size grid and
learning-rate range::

    data = study_mapping(None, spec, batch_sizes=[8, 16, 32], learning_rate=(0.01, 0.3),
                         strategies=["default"])
    config = write_study(data, "suggested.yaml")   # a new file; the checked `StudyConfig`
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from study.config.study import StudyConfig
from study.config.studyfile import parse_study
from study.config.trial import TrialSettings, TrialSpec

__all__ = ["DEFAULT_TRIALS", "settings_mapping", "study_mapping", "study_text", "write_study"]

#: Trials per stratum of a study written from a trial (not from a study file).
DEFAULT_TRIALS = 8


def study_mapping(
    base: StudyConfig | None,
    spec: TrialSpec,
    *,
    batch_sizes: Sequence[int],
    learning_rate: tuple[float, float],
    strategies: Sequence[str],
    name: str | None = None,
) -> dict[str, Any]:
    """A study file's mapping: ``base`` as written (named ``NAME-suggested`` unless ``name``),
    else ``spec``'s workload, target, optimizer and settings with `DEFAULT_TRIALS` trials per
    stratum over ``strategies``; either way with ``batch_sizes`` and a log-scale
    ``learning_rate`` range, the search space's other keys kept after them."""
    low, high = learning_rate
    if base is not None:
        data = copy.deepcopy(dict(base.raw))
        data["name"] = name or f"{base.name}-suggested"
        space = dict(data["search_space"])
    else:
        data = {
            "name": name or f"{spec.workload}-{spec.model}-suggested".replace(":", "-"),
            "workload": spec.workload,
        }
        if spec.workload_options:
            data["workload_options"] = dict(spec.workload_options)
        data["model"] = spec.model
        data["target"] = str(spec.target)
        settings = settings_mapping(spec.settings)
        data["budget"] = settings.pop("budget")
        data["eval_every"] = settings.pop("eval_every")
        data["optimizer"] = spec.optimizer.name
        data["schedule"] = spec.schedule.name
        data.update(settings)
        data["trials_per_stratum"] = DEFAULT_TRIALS
        space = {"strategy": list(strategies)}
    space["batch_size"] = list(batch_sizes)
    space["learning_rate"] = {"low": low, "high": high, "scale": "log"}
    order = [
        "batch_size",
        "learning_rate",
        *[k for k in space if k not in ("batch_size", "learning_rate")],
    ]
    data["search_space"] = {k: space[k] for k in order}
    return data


def settings_mapping(settings: TrialSettings) -> dict[str, Any]:
    """The study-file keys of the settings a study written from one trial keeps: the budget's
    limits, ``eval_every``, ``seed``, ``loss`` (when set), ``precision`` and ``jit_compile``
    (what the trial measures, noise scale and exact steps, is left to the study's defaults)."""
    budget = dataclasses.asdict(settings.budget)
    cadence = settings.cadence
    data: dict[str, Any] = {
        "budget": {k: v for k, v in budget.items() if v is not None},
        "eval_every": cadence.every if cadence.kind == "fixed" else str(cadence),
        "seed": settings.seed,
    }
    if settings.loss is not None:
        data["loss"] = settings.loss
    data["precision"] = settings.precision
    data["jit_compile"] = settings.jit_compile
    return data


def study_text(data: dict[str, Any]) -> str:
    """The mapping as a study file's YAML, keys in their order."""
    return yaml.safe_dump(data, sort_keys=False)


def write_study(data: dict[str, Any], path: str | Path) -> StudyConfig:
    """Check ``data`` as ``study run`` reads a study file, then write it to ``path``.

    Raises:
        UsageError: the mapping breaks a rule of the format (nothing is written).
    """
    text = study_text(data)
    config = parse_study(yaml.safe_load(text), str(path), text=text)
    Path(path).write_text(text, encoding="utf-8")
    return config
