"""`study.load` and `Study`: a study in its ledger, read from Python (nothing is written).

Each method reads the ledger again, so a `Study` of a running study shows its latest trials::

    s = study.load("quickstart")
    s.table()                 # the measurement table, as `study export` writes it
    s.trials()                # one row per trial
    fit = s.fit()             # the report's analysis for the study's target (`Fit`)
    s.fit("val_accuracy>=0.7").b_noise
    s.fit_targets(predict=0.6).prediction   # the answer at a target not reached, by a law
    s.plot.steps()            # steps to result against batch size, into a matplotlib Axes
    s.cbs()                   # an extension's method (`study.extension`): CBS(t)
    s.schedule("double-at-half")   # another: a batch schedule derived from the study
    s.report("reports/quickstart", formats=("html", "json"))
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from study.api.arguments import in_arguments, level, positive_int, text
from study.api.plots import Plots
from study.errors import FieldError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from study.api.fit import Fit
    from study.api.targets import TargetFit
    from study.config.target import Target
    from study.ledger import Ledger


def load(
    name: str, *, storage: str | os.PathLike[str] | None = None, tracking_uri: str | None = None
) -> Study:
    """The study ``name`` in ``storage`` (default ``mlruns/optuna.journal``), read only.

    ``tracking_uri`` is the MLflow store `Study.runs` reads and `Study.report` attaches to
    (default ``MLFLOW_TRACKING_URI``, else ``mlruns/mlflow.db``).

    Raises:
        StudyNotFound: no study of that name in the storage (nothing is created).
        UsageError: a bad argument, named (``name``, ``storage``).
    """
    from study.paths import study_name

    name = study_name(text("name", name)) or ""
    found = Study(name, storage=storage, tracking_uri=tracking_uri)
    found.ledger.require()  # StudyNotFound
    return found


class Study:
    """A study in its ledger (see the module docstring); `load` opens one."""

    def __init__(
        self,
        name: str,
        *,
        storage: str | os.PathLike[str] | None = None,
        tracking_uri: str | None = None,
    ) -> None:
        _quiet_tqdm()
        from study.ledger import Ledger

        self.name = name
        self.storage = text("storage", storage, optional=True)
        self.tracking_uri = text("tracking_uri", tracking_uri, optional=True)
        self.ledger: Ledger = Ledger.open(self.storage, name, create=False)

    def __getattr__(self, name: str) -> Any:
        """A method a loaded extension adds (`study.extension.Extension.study_methods`), e.g.
        ``cbs()`` of the branch extension: CBS(t) of ``study branch``."""
        if name.startswith("_"):
            raise AttributeError(name)
        from study.extension import declaring, needs, study_method

        method = study_method(name)
        if method is not None:
            return functools.partial(method, self)
        owner = declaring(method=name)
        hint = f" ({needs(f'Study.{name}', owner)})" if owner is not None else ""
        raise AttributeError(f"'Study' object has no attribute {name!r}{hint}")

    # -- what the ledger holds ----------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """Trials done of total, the state and per-stratum counts and bests, as
        ``study status --json`` gives them (without the answers)."""
        return self.ledger.summary().to_dict()

    @property
    def state(self) -> str:
        """``complete``, ``running``, ``incomplete`` or ``imported``."""
        return self.ledger.summary().state

    def table(self) -> pd.DataFrame:
        """The measurement table (flat, one row per evaluation), as ``study export`` writes
        it."""
        from study.report.stored import stored_table

        return stored_table(self.ledger)

    def trials(self) -> pd.DataFrame:
        """One row per trial (`study.analysis.load.trials_frame`): batch size, strategy,
        learning rate and other parameters, state, steps to target, seed and times."""
        from study.analysis.load import trials_frame

        return trials_frame(self.name, [t for t, _ in self.ledger.measurement_rows()])

    def runs(self) -> pd.DataFrame:
        """The study's MLflow runs, parent and trials, one row each as `mlflow.search_runs`
        lays them out (``run_id``, ``status``, ``start_time``, ``params.*``, ``metrics.*``,
        ``tags.*``); empty when the study was never tracked. A local store that does not
        exist is not created."""
        from study.tracking.runs_frame import study_runs

        return study_runs(self.name, self.tracking_uri)

    # -- analysis -------------------------------------------------------------------------
    def fit(
        self,
        target: str | Target | None = None,
        confidence: float = 0.95,
        *,
        accelerators: int | None = None,
    ) -> Fit:
        """The report's analysis (`Fit`) for ``target`` (default: the study file's), with
        ``confidence`` intervals, recommending for ``accelerators`` (default: as
        ``study report``)."""
        from study.api.fit import Fit
        from study.report.stored import stored_report

        try:
            report = stored_report(
                self.ledger,
                target=as_target(target),
                accelerators=positive_int("accelerators", accelerators, optional=True),
                confidence=level("confidence", confidence),
            )
        except UsageError as exc:
            raise in_arguments(exc) from None
        return Fit(report)

    def fit_targets(
        self,
        levels: Sequence[float] | str = "auto",
        predict: float | None = None,
        *,
        target: str | Target | None = None,
        confidence: float = 0.95,
        accelerators: int | None = None,
    ) -> TargetFit:
        """The answers at several levels of the target's metric (``levels``: thresholds, or
        ``"auto"``: from the level nearly every trial reached to ``target``, default the study
        file's), the law of B_noise and the critical batch size across them and, with
        ``predict`` (a level the study did not reach), the answers there with prediction
        intervals (`TargetFit`; a prediction past the law's support comes back refused, with
        its ``reason``). As ``study report --targets LEVELS --predict-target LEVEL``.

        Raises:
            UsageError: a bad argument, named (``levels``, ``predict``, ``target``).
        """
        from study.api.targets import TargetFit
        from study.report.stored import stored_targets

        try:
            scaling = stored_targets(
                self.ledger,
                target=as_target(target),
                levels=_levels(levels),
                predict=_predict(predict),
                accelerators=positive_int("accelerators", accelerators, optional=True),
                confidence=level("confidence", confidence),
            )
        except UsageError as exc:
            raise in_arguments(exc) from None
        return TargetFit.of(scaling)

    def report(
        self,
        out: str | os.PathLike[str],
        formats: Sequence[str] = ("html",),
        *,
        target: str | Target | None = None,
        confidence: float = 0.95,
        accelerators: int | None = None,
        attach: bool = False,
    ) -> dict[str, Path]:
        """Write the scaling report into the folder ``out`` in ``formats`` (``html``,
        ``markdown``, ``csv``, ``json``) and return the files written by file name
        (``report.html``, ...); ``attach`` also logs
        them to the study's MLflow parent run, as ``study report`` does."""
        from study.report import FORMATS, write_report

        folder = Path(text("out", out) or "")
        if isinstance(formats, str) or not formats or any(f not in FORMATS for f in formats):
            raise FieldError(
                "formats", f"must be a non-empty sequence of {', '.join(FORMATS)}", formats
            )
        fit = self.fit(target, confidence, accelerators=accelerators)
        paths = write_report(fit.report, folder, list(dict.fromkeys(formats)))
        if attach:
            from study.report.answer_prose import answer_line
            from study.tracking.report_run import attach_report

            answers = fit.report.answers
            attach_report(
                self.name,
                list(paths.values()),
                self.tracking_uri,
                metrics=answers.to_metrics() if answers is not None else None,
                answer=answer_line(answers) if answers is not None else None,
                who="Study.report",
            )
        return paths

    @property
    def plot(self) -> Plots:
        """The report's figures for the study's own target, each drawn into a matplotlib
        `Axes` (``ax``, default a new figure): ``steps``, ``examples``, ``best_lr``,
        ``trials`` and ``time``. For another target: ``study.fit(target).plot``."""
        return Plots(lambda: self.fit().report)

    # -- display --------------------------------------------------------------------------
    def __repr__(self) -> str:
        from study.api.views import study_text

        return study_text(self.name, self.summary())

    def _repr_html_(self) -> str:
        from study.api.views import study_html

        return study_html(self.name, self.summary())


def as_target(target: str | Target | None) -> Target | None:
    """``target`` as a `Target` (a string such as ``val_accuracy>=0.9`` parsed; None kept)."""
    from study.config.target import Target

    if target is None or isinstance(target, Target):
        return target
    if not isinstance(target, str):
        raise FieldError("target", "must be a string such as 'val_accuracy>=0.9'", target)
    return Target.parse(target, option="target")


def _levels(levels: Sequence[float] | str) -> Sequence[float] | Literal["auto"]:
    """``levels`` checked: ``"auto"`` or a non-empty sequence of finite numbers."""
    if levels == "auto":
        return "auto"
    rule = "must be 'auto' or a non-empty sequence of levels of the target's metric"
    if isinstance(levels, str) or not isinstance(levels, Sequence) or not levels:
        raise FieldError("levels", rule, levels)
    if not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in levels
    ):
        raise FieldError("levels", rule, levels)
    return [float(x) for x in levels]


def _predict(predict: float | None) -> float | None:
    if predict is None:
        return None
    if isinstance(predict, bool) or not isinstance(predict, (int, float)):
        raise FieldError("predict", "must be a level of the target's metric, e.g. 0.7", predict)
    if not math.isfinite(predict):
        raise FieldError("predict", "must be a finite level of the target's metric", predict)
    return float(predict)


def _quiet_tqdm() -> None:
    """Import ``tqdm.auto`` (Optuna's progress bars) without its warning in a Jupyter kernel
    that lacks ipywidgets ("IProgress not found"): `study` never shows those bars."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        import tqdm.auto  # noqa: F401
