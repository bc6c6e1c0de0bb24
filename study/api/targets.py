"""`TargetFit`: a study's answers across target levels, their law and a prediction
(`Study.fit_targets`).

::

    fits = study.load("quickstart").fit_targets(predict=0.6)
    fits.table            # one row per level: B_noise, critical batch size, ... with intervals
    fits.levels[0.5]              # one level's answers, one row each
    fits.law.kind, fits.law.exponent
    fits.prediction.critical_batch, fits.assumption   # "for val_accuracy >= 0.6, extrapolated ..."
    fits.plot()                   # into a matplotlib Axes
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.axes import Axes

    from study.analysis.target_law import TargetLaw
    from study.analysis.target_prediction import TargetPrediction, TargetScaling


@dataclass(frozen=True)
class TargetFit:
    """The answers across target levels (see the module).

    ``table``: one row per level (``threshold``, ``axis``, ``trials_reached``, ``ok``, and
    ``b_noise``, ``critical_batch``, ``alpha``, ``recommended_batch``, ``recommended_lr`` with
    ``_low``/``_high``); ``levels``: each level's answers as a frame, by threshold; ``laws``:
    the law of ``b_noise`` and of ``critical_batch`` across levels; ``prediction``: the answer at
    the level asked for (None when none was; ``ok`` False with the ``reason`` when refused);
    ``scaling``: everything, as the report reads it.
    """

    scaling: TargetScaling = field(repr=False)
    table: pd.DataFrame = field(repr=False, compare=False)
    levels: Mapping[float, pd.DataFrame] = field(repr=False, compare=False)
    laws: Mapping[str, TargetLaw] = field(repr=False)
    prediction: TargetPrediction | None = None

    @classmethod
    def of(cls, scaling: TargetScaling) -> TargetFit:
        sweep = scaling.sweep
        levels = {lv.threshold: sweep.answers_frame(lv.threshold) for lv in sweep.levels}
        return cls(scaling, scaling.frame(), levels, dict(scaling.laws), scaling.prediction)

    @property
    def law(self) -> TargetLaw:
        """The law of the critical batch size across levels (the recommendation follows it)."""
        return self.laws["critical_batch"]

    @property
    def assumption(self) -> str | None:
        """What the prediction assumed, e.g. ``"for val_accuracy >= 0.7, extrapolated from
        0.5-0.62"`` (None without one)."""
        return None if self.prediction is None else self.prediction.assumption

    def plot(self, ax: Axes | None = None) -> Axes:
        """The levels, the laws and the prediction (`draw_target_laws`) into ``ax`` (default:
        a new figure)."""
        from study.report.levels import draw_target_laws

        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(6.8, 4.4), layout="constrained")
        return draw_target_laws(ax, self.scaling)

    def __repr__(self) -> str:
        from study.report.levels import levels_lines

        return "\n".join(["TargetFit", *(f"  {line}" for line in levels_lines(self.scaling))])
