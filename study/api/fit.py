"""`Fit`: the analysis of a study for one target, as ``study report`` computes it.

Every headline attribute is the answer of the model of every trial (the number ``study
report``, ``report.json``, ``study status`` and MLflow state), with its interval in
``*_interval``; ``answers`` holds every answer with its interval; the best trial of each batch
size, read alone, is the diagnostic ``cross_check``; the whole record is ``report``
(`study.report.record.ScalingReport`)::

    fit = study.load("quickstart").fit()
    fit.b_noise, fit.b_noise_interval, fit.critical_batch_size, fit.recommended_batch_size
    fit.cross_check.noise_scale.b_noise   # the best trials alone: a diagnostic
    fit.steps                 # per batch size: steps to result, best learning rate, ...
    fit.plot.steps()
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from study.api.plots import Plots

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from study.analysis.answers import Answers
    from study.config.target import Target
    from study.report.record import CrossCheck, ScalingReport


@dataclass(frozen=True)
class Fit:
    """A study's analysis for one target (see the module docstring)."""

    report: ScalingReport

    @property
    def target(self) -> Target:
        return self.report.target

    @property
    def confidence(self) -> float:
        return self.report.confidence

    @property
    def answers(self) -> Answers:
        """Every answer of the model of every trial, each with its interval."""
        return self.report.answers

    @property
    def cross_check(self) -> CrossCheck:
        """The best trial of each batch size read without the model: a diagnostic."""
        return self.report.cross_check

    @property
    def b_noise(self) -> float:
        """B_noise (NaN when the model has no answer: see ``notes``)."""
        return self._estimate("b_noise")

    @property
    def b_noise_interval(self) -> tuple[float, float]:
        """B_noise's interval at ``confidence``."""
        return self._interval("b_noise")

    @property
    def s_min(self) -> float:
        """S_min, the fewest steps any batch size can reach the target in."""
        return self._estimate("s_min")

    @property
    def e_min(self) -> float:
        """E_min, the fewest examples any batch size can reach the target with."""
        return self._estimate("e_min")

    @property
    def critical_batch_size(self) -> float:
        """The batch size whose steps run ``answers.overhead`` above perfect scaling."""
        return self._estimate("critical_batch")

    @property
    def critical_batch_interval(self) -> tuple[float, float]:
        """The critical batch size's interval at ``confidence``."""
        return self._interval("critical_batch")

    @property
    def alpha(self) -> float:
        """The exponent of the best learning rate, lr* ~ B^alpha over the measured sizes."""
        return self._estimate("alpha")

    @property
    def perfect_scaling_end(self) -> float | None:
        """The largest batch size of perfect scaling (None without an answer)."""
        value = self._estimate("perfect_end")
        return None if math.isnan(value) else value

    @property
    def max_parallel_start(self) -> float | None:
        """The batch size from which more data parallelism buys nothing (None if not seen)."""
        value = self._estimate("max_parallel_start")
        return None if math.isnan(value) or math.isinf(value) else value

    @property
    def recommended_batch_size(self) -> int | None:
        """The batch size recommended for the report's accelerators."""
        return self.report.recommendation.batch_size

    @property
    def recommended_learning_rate(self) -> float:
        """The learning rate recommended with it."""
        return self.report.recommendation.learning_rate

    def _estimate(self, name: str) -> float:
        answer = getattr(self.report.answers, name)
        return math.nan if answer is None else float(answer.estimate)

    def _interval(self, name: str) -> tuple[float, float]:
        answer = getattr(self.report.answers, name)
        return (math.nan, math.nan) if answer is None else (float(answer.low), float(answer.high))

    @property
    def steps(self) -> pd.DataFrame:
        """Per batch size: steps and examples to result, the best learning rate, the fit."""
        return self.report.steps

    @property
    def trials(self) -> pd.DataFrame:
        """Per trial: steps to this target (``inf`` when not reached)."""
        return self.report.trials

    @property
    def notes(self) -> tuple[str, ...]:
        """What the report says about thin data, edges and disagreements."""
        return self.report.notes

    @property
    def plot(self) -> Plots:
        """The report's figures, each into a matplotlib `Axes` (`study.api.plots.Plots`)."""
        return Plots(lambda: self.report)

    def to_dict(self) -> dict[str, Any]:
        """Everything, as ``study report --format json`` writes it."""
        from study.report.json import report_dict

        return report_dict(self.report)

    def __repr__(self) -> str:
        from study.api.views import fit_text

        return fit_text(self.report)

    def _repr_html_(self) -> str:
        from study.api.views import fit_html

        return fit_html(self.report)
