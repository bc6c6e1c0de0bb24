"""What a study is about, shown at the top of every report: the workload, model, optimizer,
schedule, target, budget, search space, strategies, tuners, trial counts and package versions.

`StudyFacts` (`study.report.record`) holds what the measurement table cannot tell: the parsed
study file (None for an imported study, which names its dataset, model and optimizer instead),
the study file's path as shown, the trials planned and the package versions. `about_rows`
writes those facts, with what the report itself knows (target, batch sizes, strategies, trial
counts), as (label, value) pairs for the HTML and Markdown writers; `headline` sums the
workload up in one line; `about_dict` gives the JSON writer the same facts as data.

Example::

    facts = StudyFacts(config=config, study_file="search_spaces/quickstart.yaml")
    report = build_report(table, config.target, study="quickstart", accelerators=None,
                          facts=facts)
    headline(report)  # "mnist1d · mlp · nesterov"
    dict(about_rows(report))["budget per trial"]  # "2000 steps"
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from study.analysis.answers import ANSWER_MODEL
from study.analysis.fitting import as_number
from study.analysis.table import BATCH_SIZE, ORIGIN, STATE, STRATEGY, TUNER
from study.config.space import CategoricalParam, Param
from study.config.study import StudyConfig
from study.report.formatting import display_path, fmt, join_words
from study.report.record import ScalingReport, StudyFacts

_STATE_WORDS = {
    "reached": "reached the target",
    "not_reached": "not reached",
    "pruned": "pruned",
    "diverged": "diverged",
    "failed": "failed",
    "infeasible": "infeasible",
    "running": "running",
}
"""How the trial counts name each state, in the order they are listed."""


def headline(report: ScalingReport) -> str:
    """The workload in one line: ``"mnist1d · mlp · nesterov"`` (empty when unknown)."""
    facts = report.facts
    return " · ".join(n for n in (facts.workload_name, facts.model_name, facts.optimizer_name) if n)


def about_rows(report: ScalingReport) -> list[tuple[str, str]]:
    """What the study is about, as (label, value) pairs; unknown facts are left out.

    Example (the quickstart study): ``("workload", "mnist1d (samples=4000)")``, ``("model",
    "mlp")``, ``("optimizer", "nesterov")``, ``("target", "val_accuracy>=0.5")``, ``("budget per
    trial", "2000 steps")``, ..., ``("trials", "24 of 24 planned: 13 reached the target, 10
    pruned, 1 not reached")``, ..., ``("packages", "scaling-study 0.1.0, keras 3.15.1, ...")``.
    """
    facts, config = report.facts, report.facts.config
    rows = [
        ("workload", _workload(facts)),
        ("model", _model(facts)),
        ("optimizer", facts.optimizer_name),
        ("learning-rate schedule", facts.schedule_name),
        ("target", str(report.target)),
        ("budget per trial", _budget(config)),
        ("evaluations", _cadence(config)),
        ("batch sizes", join_words(_batch_sizes(report))),
        ("learning rates searched", _range(config.space.params[0]) if config else ""),
        ("also searched", _other_params(config)),
        ("strategies", join_words(_strategies(report))),
        ("tuners", _tuners(report)),
        ("trials", _trials(report)),
        ("seed", str(config.settings.seed) if config else ""),
        ("study file", facts.study_file),
        ("imported from", facts.imported_from),
        ("trials ran with", _versions(facts.trained_with)),
        ("packages", _versions(facts.packages)),
    ]
    return [(label, value) for label, value in rows if value]


def about_dict(report: ScalingReport) -> dict[str, Any]:
    """The facts as data for ``report.json``: names, full-precision settings, trial counts by
    state, package versions, and the rows as shown."""
    facts, config = report.facts, report.facts.config
    return {
        "workload": facts.workload_name or None,
        "workload_options": _shown_options(config.workload_options) if config else {},
        "model": facts.model_name or None,
        "optimizer": facts.optimizer_name or None,
        "schedule": facts.schedule_name or None,
        "budget": _budget_limits(config),
        "search_space": _space_dict(config),
        "batch_sizes": [as_number(b) for b in _batch_sizes(report)],
        "strategies": _strategies(report),
        "tuners": _tuner_names(report),
        "trials": sum(trial_states(report).values()),
        "trials_planned": facts.trials_planned or None,
        "trial_states": trial_states(report),
        "seed": config.settings.seed if config else None,
        "study_file": facts.study_file or None,
        "imported_from": facts.imported_from or None,
        "trained_with": dict(facts.trained_with),
        "packages": dict(facts.packages),
        "answer_model": ANSWER_MODEL,
        "shown": [list(row) for row in about_rows(report)],
    }


def trial_states(report: ScalingReport) -> dict[str, int]:
    """How many of the report's trials ended in each state, e.g. ``{"reached": 13, ...}``.

    The states are those of the report's target: a trial that met it is ``reached`` even if
    the study ran with another target. Without per-trial rows (the target metric was never
    measured) the measurement table's recorded states are counted.
    """
    trials = report.trials
    if trials.empty and not report.table.empty and STATE in report.table.columns:
        key = [c for c in ("study", "trial") if c in report.table.columns]
        trials = report.table.drop_duplicates(subset=key or None)
    if trials.empty or STATE not in trials.columns:
        return {}
    counts = Counter(str(s) for s in trials[STATE])
    order = [s for s in _STATE_WORDS if s in counts] + sorted(set(counts) - set(_STATE_WORDS))
    return {state: counts[state] for state in order}


# ------------------------------------------------------------------------------------ pieces


def _workload(facts: StudyFacts) -> str:
    name = facts.workload_name
    if not name or facts.config is None or not facts.config.workload_options:
        return name
    options = _shown_options(facts.config.workload_options)
    return f"{name} ({', '.join(f'{k}={fmt(v)}' for k, v in options.items())})"


def _shown_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Workload options as shown: a path among them relative or bare (`display_path`)."""
    return {
        k: display_path(v) if isinstance(v, str) and ("/" in v or "\\" in v) else v
        for k, v in options.items()
    }


def _model(facts: StudyFacts) -> str:
    if facts.config is not None and facts.config.model is None:
        return f"{facts.default_model} (the workload's default)" if facts.default_model else ""
    return facts.model_name


def _budget(config: StudyConfig | None) -> str:
    limits = _budget_limits(config)
    units = {"max_steps": "steps", "max_examples": "examples", "max_seconds": "seconds"}
    parts = [f"{fmt(v)} {units[k]}" for k, v in limits.items()]
    if len(parts) > 1:
        return join_words(parts, last=" or ") + ", whichever comes first"
    return "".join(parts)


def _budget_limits(config: StudyConfig | None) -> dict[str, float]:
    if config is None:
        return {}
    budget = config.settings.budget
    limits = {
        "max_steps": budget.max_steps,
        "max_examples": budget.max_examples,
        "max_seconds": budget.max_seconds,
    }
    return {k: v for k, v in limits.items() if v is not None}


def _cadence(config: StudyConfig | None) -> str:
    if config is None:
        return ""
    cadence = config.settings.cadence
    if cadence.kind == "fixed":
        return f"every {cadence.every} steps"
    return f"at step 0, then each at least {fmt(cadence.ratio)} x the last"


def _range(param: Param) -> str:
    if isinstance(param, CategoricalParam):
        return join_words([fmt(c) for c in param.choices], last=" or ")
    return f"{fmt(param.low)} to {fmt(param.high)}, {'log' if param.log else 'linear'} scale"


def _other_params(config: StudyConfig | None) -> str:
    if config is None:
        return ""
    return "; ".join(
        f"{p.name} {_range(p)}"
        for p in config.space.params[1:]
        if p.name not in ("optimizer", "schedule")
    )


def _space_dict(config: StudyConfig | None) -> dict[str, Any]:
    if config is None:
        return {}
    out: dict[str, Any] = {}
    for p in config.space.params:
        if isinstance(p, CategoricalParam):
            out[p.name] = {"choices": list(p.choices)}
        else:
            out[p.name] = {"low": p.low, "high": p.high, "scale": "log" if p.log else "linear"}
    return out


def _batch_sizes(report: ScalingReport) -> list[Any]:
    config = report.facts.config
    if config is not None:
        return list(config.space.batch_sizes)
    column = report.table.get(BATCH_SIZE)
    return sorted(as_number(b) for b in column.dropna().unique()) if column is not None else []


def _strategies(report: ScalingReport) -> list[str]:
    config = report.facts.config
    if config is not None:
        return list(config.space.strategies)
    column = report.table.get(STRATEGY)
    return sorted(str(s) for s in column.dropna().unique()) if column is not None else []


def _tuner_names(report: ScalingReport) -> list[str]:
    column = report.table.get(TUNER)
    names = sorted(str(t) for t in column.dropna().unique()) if column is not None else []
    if not names and report.facts.tuner:
        names = ["optuna", "keras-tuner"] if report.facts.tuner == "both" else [report.facts.tuner]
    return names


def _tuners(report: ScalingReport) -> str:
    config = report.facts.config
    names = _tuner_names(report)
    if config is None:
        return join_words(names)
    settings = config.tuner
    detail = {
        "optuna": f"optuna ({settings.sampler.value} sampler)",
        "keras-tuner": f"keras-tuner ({settings.oracle.value} oracle)",
    }
    text = join_words([detail.get(n, n) for n in names])
    slack = "" if config.prune_slack == 1 else f"{config.prune_slack:g}x "
    pruning = (
        f"pruning at {slack}each batch size's best steps" if settings.pruning else "pruning off"
    )
    text = f"{text}; {pruning}" if text else ""
    if settings.warm_start is not None and text:
        text += f"; {_warm_start(report, settings.warm_start.study)}"
    return text


def _warm_start(report: ScalingReport, study: str) -> str:
    """How many first trials the warm start proposed, from which study."""
    column = report.table.get(ORIGIN)
    warm = int((column == "warm").sum()) if column is not None else 0
    first = "first trial" if warm == 1 else "first trials"
    return f"warm start from study {study!r} ({warm} {first} at its best rates)"


def _trials(report: ScalingReport) -> str:
    states = trial_states(report)
    total = sum(states.values())
    planned = report.facts.trials_planned
    head = f"{total} of {planned} planned" if planned else str(total)
    counts = ", ".join(f"{n} {_STATE_WORDS.get(s, s.replace('_', ' '))}" for s, n in states.items())
    return f"{head}: {counts}" if counts else head


def _versions(versions: Mapping[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())
