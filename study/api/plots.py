"""The report's figures from Python: each drawn into a matplotlib `Axes` (the report's own
drawing functions, `study.report.figures.draw`), a new figure when none is given. A loaded
extension's figures are methods too (``fit.plot.cbs(ax)``: `study.extension.ReportFigure`).

Example::

    fig, (left, right) = plt.subplots(1, 2)
    fit.plot.steps(left)
    fit.plot.best_lr(right)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from study.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from study.report.record import ScalingReport

#: Figure name (file stem) of each method, and how big a new figure is (inches).
_FIGURES = {
    "steps": ("steps_to_result", (6.8, 4.4)),
    "examples": ("examples_to_result", (6.8, 4.4)),
    "best_lr": ("best_lr", (6.8, 4.4)),
    "trials": ("feasible_region", (7.4, 4.4)),
    "time": ("time_to_result", (6.8, 4.4)),
}


class Plots:
    """The figures of one report (``report_of`` computes it when a figure is drawn)."""

    def __init__(self, report_of: Callable[[], ScalingReport]) -> None:
        self._report_of = report_of

    def steps(self, ax: Axes | None = None) -> Axes:
        """Steps to result against batch size (log-log), the S(B) fit, B_noise, the regimes."""
        return self._draw("steps", ax)

    def examples(self, ax: Axes | None = None) -> Axes:
        """Examples to result against batch size, with E(B) = E_min (1 + B/B_noise)."""
        return self._draw("examples", ax)

    def best_lr(self, ax: Axes | None = None) -> Axes:
        """The best learning rate per batch size and the power-law fit lr* = c B^alpha."""
        return self._draw("best_lr", ax)

    def trials(self, ax: Axes | None = None) -> Axes:
        """Every trial on batch size x learning rate, coloured by steps to the target."""
        return self._draw("trials", ax)

    def time(self, ax: Axes | None = None) -> Axes:
        """Time to result per strategy (needs measured seconds per step)."""
        return self._draw("time", ax)

    def __getattr__(self, method: str) -> Callable[..., Axes]:
        """A loaded extension's figure, by its name (`study.extension.ReportFigure`: ``cbs``
        draws CBS(t) of ``study branch``)."""
        from study.report.figures import extension_figures

        if method.startswith("_") or method not in extension_figures():
            raise AttributeError(f"'Plots' object has no attribute {method!r}")
        return functools.partial(self._draw, method)

    def _draw(self, method: str, ax: Axes | None = None) -> Axes:
        from study.report.figures import draw, extension_figures, figure_names

        if method in _FIGURES:
            name, size = _FIGURES[method]
        else:
            name, size = method, extension_figures()[method][1].size
        report = self._report_of()
        if name not in figure_names(report):
            raise UsageError(
                f"plot.{method}: nothing to draw yet for target {report.target} "
                f"(drawable: {', '.join(_methods(figure_names(report))) or 'none'})"
            )
        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=size, layout="constrained")
        return draw(name, ax, report)


def _methods(names: list[str]) -> list[str]:
    """The methods that draw figures ``names`` (an extension's figure is its own method)."""
    from study.report.figures import extension_figures

    core = {name: method for method, (name, _) in _FIGURES.items()}
    return [core.get(name, name) for name in names if name in core or name in extension_figures()]
