"""The JSON report: ``report.json`` with every fitted number and table of the report.

``inf`` and NaN (which are not JSON) become ``null``; numpy and pandas scalars become plain
numbers, tuples lists, DataFrames lists of records and dataclasses objects.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from study.analysis.answers import Answer, Answers
from study.analysis.model_views import METHOD
from study.analysis.regimes import Regimes
from study.analysis.surrogate import PARAMS
from study.report.about import about_dict
from study.report.answer_prose import answer_line
from study.report.cross_check_prose import cross_check_sentences
from study.report.levels import levels_dict
from study.report.noise_prose import noise_sentences
from study.report.prose import answer, method_text
from study.report.sections import sections_json
from study.report.time_prose import time_sentences

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import ScalingReport


def render_json(report: ScalingReport) -> str:
    """``report.json``: `report_dict`, indented; a non-finite number left over is an error."""
    return json.dumps(report_dict(report), indent=2, allow_nan=False) + "\n"


def report_dict(report: ScalingReport) -> dict[str, Any]:
    """Every fitted number and table of the report as plain data (inf/NaN become None), and
    what the study is about (``about``: workload, model, optimizer, search space, trial counts,
    package versions).

    The top level states the answer, the model of every trial's: ``answers`` (each with its
    interval), and ``noise_scale``, ``regimes``, ``lr_scaling`` and ``recommendation`` read
    from it. The best trial of each batch size, read alone, is ``cross_check``.
    """
    answers = report.answers
    return plain(
        {
            "study": report.study,
            "about": about_dict(report),
            "target": {
                "text": str(report.target),
                "metric": report.target.metric,
                "op": report.target.op,
                "threshold": report.target.threshold,
            },
            "state": report.state,
            "created": report.created,
            "command": report.command,
            "context": dict(report.context),
            "accelerators": report.accelerators,
            "intervals": {"method": METHOD, "confidence": report.confidence},
            "summary": answer(report),
            "method": method_text(report),
            "answers": answers_dict(answers),
            "noise_scale": _noise_scale(report),
            "regimes": _regimes(report.regimes, answers),
            "lr_scaling": _lr_scaling(answers),
            "recommendation": _fields(report.recommendation),
            "cross_check": _cross_check(report),
            "batch_sizes": report.steps,
            "by_strategy": report.steps_by_strategy,
            "strategies": report.strategies,
            "throughput": report.throughput,
            "predicted_noise": _predicted_noise(report),
            "time_to_result": _time_to_result(report),
            "seed_noise": {
                **_fields(report.seed_noise),
                "ok": report.seed_noise.ok,
                "factor": report.seed_noise.factor,
            },
            "notes": list(report.notes),
            **sections_json(report),  # the extensions' (cbs, ...)
            "targets": levels_dict(report.targets) if report.targets is not None else None,
        }
    )


def _noise_scale(report: ScalingReport) -> dict[str, Any]:
    """The model's B_noise, S_min, E_min, knee and critical batch size, with intervals."""
    curve, answers = report.noise_scale, report.answers
    out = {f.name: getattr(curve, f.name) for f in dataclasses.fields(curve)
           if f.name not in ("theta", "draws", "notes", "batch_sizes")}  # fmt: skip
    if answers.ok:
        out["overhead"] = answers.overhead
        out["critical_batch"] = answers.critical_batch.estimate
        out["critical_batch_ci"] = (answers.critical_batch.low, answers.critical_batch.high)
    return out


def _regimes(regimes: Regimes, answers: Answers) -> dict[str, Any]:
    """The model's regimes, with the answers' intervals of their bounds."""
    out = {
        **_fields(regimes, ("table",)),
        "perfect": regimes.perfect,
        "diminishing": regimes.diminishing,
        "maximal": regimes.maximal,
        "efficiency": regimes.table,
    }
    if answers.ok:
        for name in ("perfect_end", "max_parallel_start"):
            answer = getattr(answers, name)
            out[f"{name}_ci"] = (answer.low, answer.high)
    return out


def _lr_scaling(answers: Answers) -> dict[str, Any]:
    """The model's best-rate exponent alpha and the shape of lr*(B)."""
    if not answers.ok:
        return {"ok": False, "reason": answers.reason}
    alpha = answers.alpha
    return {
        "ok": True,
        "alpha": alpha.estimate,
        "alpha_ci": (alpha.low, alpha.high),
        "shape": answers.surrogate.shape,
    }


def _cross_check(report: ScalingReport) -> dict[str, Any]:
    """The best trial of each batch size read without the model (a diagnostic)."""
    check = report.cross_check
    free = check.model_free
    return {
        "noise_scale": _fields(check.noise_scale),
        "regimes": {**_fields(check.regimes, ("table",)), "efficiency": check.regimes.table},
        "lr_power_law": _fields(check.lr_fit),
        "recommendation": _fields(check.recommendation),
        "model_free": None if free is None else free.to_dict(),
        "agrees": not check.disagreements,
        "disagreements": list(check.disagreements),
        "sentences": cross_check_sentences(report),
    }


def plain(value: Any) -> Any:
    """``value`` as JSON-ready Python: finite floats or None, ints, str, lists and dicts.

    Example: ``plain({"b": np.int64(8), "s": (math.inf, 1.5)}) == {"b": 8, "s": [None, 1.5]}``.
    """
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.DataFrame):
        return [plain(r) for r in value.to_dict("records")]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray, pd.Series)):
        return [plain(v) for v in list(value)]
    if dataclasses.is_dataclass(value):
        return plain({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    return str(value)


def answers_dict(answers: Answers) -> dict[str, Any]:
    """The model of every trial and its answers, each ``{estimate, low, high}``."""
    if not answers.ok:
        return {"ok": False, "reason": answers.reason, "line": answer_line(answers)}
    names = [f.name for f in dataclasses.fields(answers)]
    model = answers.surrogate
    return {
        "ok": True,
        "confidence": answers.confidence,
        "accelerators": answers.accelerators,
        "overhead": answers.overhead,
        "line": answer_line(answers),
        **{
            n: getattr(answers, n).to_dict()
            for n in names
            if isinstance(getattr(answers, n), Answer)
        },
        "model": {
            "trials": model.trials,
            "censored": model.censored,
            "lr_shape": model.shape,
            "bend_p_value": model.bend_p_value,
            "lr_bottom": model.bottom,
            "sharp_p_value": model.sharp_p_value,
            "misfit_p_value": model.misfit_p_value,
            "misfits": model.misfits,
            "parameters": dict(zip(PARAMS, model.theta.tolist())),
        },
    }


def _predicted_noise(report: ScalingReport) -> dict[str, Any]:
    """The predicted B_simple, the fitted B_noise it is compared with, and the verdict."""
    predicted, agreement, fit = report.predicted_noise, report.noise_agreement, report.noise_scale
    return {
        **_fields(predicted),
        "b_noise": fit.b_noise if fit.ok else None,
        "b_noise_ci": fit.b_noise_ci if fit.ok else None,
        "agreement": _fields(agreement),
        "sentences": noise_sentences(report),
    }


def _time_to_result(report: ScalingReport) -> dict[str, Any]:
    """The time-to-result model of the throughput probe, and what it says."""
    return {**_fields(report.time_model), "sentences": time_sentences(report.time_model)}


def _fields(obj: Any, skip: Sequence[str] = ()) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name not in skip}
