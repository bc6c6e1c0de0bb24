"""`Fit`: the analysis of a study for one target, as ``study report`` computes it.

The headline numbers are properties (``b_noise`` is the report's best-trial fit of
S(B) = S_min (1 + B_noise/B), the number ``study report --format json`` gives as
``noise_scale.b_noise``); ``answers`` holds the model of every trial with its intervals; the
whole record is ``report`` (`study.report.record.ScalingReport`)::

    fit = study.load("quickstart").fit()
    fit.b_noise, fit.b_noise_interval, fit.answers.recommended_batch.estimate
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
    from study.report.record import ScalingReport


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
    def b_noise(self) -> float:
        """B_noise of the S(B) fit (NaN when the fit failed: see ``notes``)."""
        fit = self.report.noise_scale
        return fit.b_noise if fit.ok else math.nan

    @property
    def b_noise_interval(self) -> tuple[float, float]:
        """B_noise's interval at ``confidence``."""
        interval = self.report.noise_scale.b_noise_ci
        return (
            (math.nan, math.nan) if interval is None else (float(interval[0]), float(interval[1]))
        )

    @property
    def s_min(self) -> float:
        """S_min of the S(B) fit, the fewest steps any batch size can reach the target in."""
        fit = self.report.noise_scale
        return fit.s_min if fit.ok else math.nan

    @property
    def alpha(self) -> float:
        """The exponent of the best learning rate's power law lr* = c B^alpha."""
        return self.report.lr_fit.alpha

    @property
    def perfect_scaling_end(self) -> float | None:
        """The largest batch size of perfect scaling (None without regimes)."""
        regimes = self.report.regimes
        return regimes.perfect_end if regimes.ok else None

    @property
    def max_parallel_start(self) -> float | None:
        """The batch size from which more data parallelism buys nothing (None if not seen)."""
        regimes = self.report.regimes
        return regimes.max_parallel_start if regimes.ok else None

    @property
    def recommended_batch_size(self) -> int | None:
        """The batch size recommended for the report's accelerators."""
        return self.report.recommendation.batch_size

    @property
    def answers(self) -> Answers | None:
        """The model of every trial's answers, each with its interval."""
        return self.report.answers

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
