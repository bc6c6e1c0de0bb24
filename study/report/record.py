"""The report's record: what a scaling report shows, computed once and read by every writer.

`ScalingReport` holds the tables, fits, notes and facts `study.report.build.build_report`
computes; `StudyFacts` holds what the measurement table cannot tell (the parsed study file, its
path, the trials planned, package versions). Both are frozen; the writers (`html`, `markdown`,
`json`, `csv`) and the sentences (`prose`, `noise_prose`, `time_prose`, `about`) only read them.

Example::

    facts = StudyFacts(config=config, study_file="search_spaces/quickstart.yaml")
    facts.model_name  # "mlp" (the workload's default when the file names none)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from study.analysis.answers import Answers
from study.analysis.fitting import CONFIDENCE
from study.analysis.lr_scaling import LrPowerLawFit
from study.analysis.model_views import ModelCurve
from study.analysis.noise_scale import NoiseScaleFit
from study.analysis.predicted_noise import NoiseAgreement, PredictedNoise
from study.analysis.recommend import Recommendation
from study.analysis.regimes import Regimes
from study.analysis.seeds import SeedNoise
from study.analysis.time_model import TimeModel
from study.config.space import CategoricalParam
from study.config.study import StudyConfig
from study.config.target import Target
from study.ledger.summary import StudyState
from study.report.formatting import join_words


@dataclass(frozen=True)
class StudyFacts:
    """The facts about a study that its measurements do not hold.

    ``config``: the study file, parsed (None for an imported study). ``study_file``: its path
    as the report shows it (`display_path`). ``default_model``: the workload's default model,
    for a study file that names none. ``dataset``, ``model`` and ``optimizer``: what an
    imported study says it trained. ``imported_from``: where it came from, as shown.
    ``tuner``: the tuner(s) the study was run with, e.g. ``both``. ``trials_planned``: the
    study's trial budget (0: unknown). ``packages``: package versions where the report was made,
    e.g. ``{"scaling-study": "0.1.0", "tensorflow-cpu": "2.21.0", "python": "3.11.2"}``;
    ``trained_with``: the versions the trials recorded, e.g. ``{"tensorflow": "2.21.0"}``.
    """

    config: StudyConfig | None = field(default=None, repr=False)
    study_file: str = ""
    default_model: str = ""
    dataset: str = ""
    model: str = ""
    optimizer: str = ""
    imported_from: str = ""
    tuner: str = ""
    trials_planned: int = 0
    packages: Mapping[str, str] = field(default_factory=dict)
    trained_with: Mapping[str, str] = field(default_factory=dict)

    @property
    def workload_name(self) -> str:
        """The workload (or an imported study's dataset), e.g. ``mnist1d``."""
        return self.config.workload if self.config else self.dataset

    @property
    def model_name(self) -> str:
        """The model trained, e.g. ``mlp`` (the workload's default when the file names none)."""
        if self.config is None:
            return self.model
        return self.config.model or self.default_model

    @property
    def optimizer_name(self) -> str:
        """The optimizer, e.g. ``nesterov``; ``adam or sgd`` when the search chose among them."""
        if self.config is None:
            return self.optimizer
        return _fixed_or_searched(self.config, "optimizer", self.config.optimizer)

    @property
    def schedule_name(self) -> str:
        """The learning-rate schedule, e.g. ``constant`` (empty for an imported study)."""
        if self.config is None:
            return ""
        return _fixed_or_searched(self.config, "schedule", self.config.schedule)


@dataclass(frozen=True)
class CrossCheck:
    """The best trial of each batch size read without the model of every trial: a diagnostic
    beside the answer, never the answer.

    ``noise_scale``: McCandlish et al.'s S(B) fitted to each batch size's best trial (profile
    likelihood); ``regimes``: Shallue et al.'s rules on the measured steps to result;
    ``lr_fit``: the power law of the measured best rates; ``recommendation``: the batch size
    for N accelerators by those fits; ``model_free``: readings of the measured steps alone (the
    overhead point by interpolation, regimes from measured efficiency; None when not read);
    ``disagreements``: where these differ from the model beyond their intervals, one sentence
    each.
    """

    noise_scale: NoiseScaleFit = field(repr=False)
    regimes: Regimes = field(repr=False)
    lr_fit: LrPowerLawFit = field(repr=False)
    recommendation: Recommendation = field(repr=False)
    model_free: Any = field(default=None, repr=False)
    disagreements: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScalingReport:
    """Everything a scaling report shows, computed once.

    Tables (DataFrames): ``trials`` (one row per trial, `trial_crossings`); ``steps``
    (one row per batch size, pooled over strategies, `summarize_trials` plus ``regime``,
    ``fit_steps`` and ``fit_examples``: the model's S(B) and E(B)); ``steps_by_strategy``
    (one row per batch size and strategy); ``throughput`` (`throughput_by_strategy` with the
    target); ``strategies`` (`strategy_table`: the seed experiments' table); ``table`` (the
    measurement table itself).

    The answer, one model of every trial (`study.analysis.answers`): ``answers`` (every answer
    with its interval at ``confidence``), and its views the writers draw and decide with:
    ``noise_scale`` (the model's S(B), `ModelCurve`), ``regimes`` (the model's regimes) and the
    ``recommendation`` for ``accelerators`` devices. ``cross_check``: the best trial of each
    batch size read without the model (`CrossCheck`), a diagnostic. ``predicted_noise``: the
    B_simple measured during training (a pilot run or the trials, `predict_noise_scale`) and
    ``noise_agreement``, how it compares with the model's B_noise. ``time_model``: time to
    result per (batch size, strategy) from the throughput probe (`time_to_result`; not ok
    without a probe), with ``accelerators`` replicas extrapolated, flagged, when the probe
    measured fewer. ``notes``: plain sentences
    about thin data. ``state``: the study's state when the report was made (``complete``,
    ``running``, ``incomplete``, ``imported``). ``facts``: what the study trained and how it
    searched (`StudyFacts`: study file, packages), shown at the top of the report. ``command``
    and ``context`` say how the report was made. ``sections``: what the loaded extensions
    add (`study.extension.ReportSection`), by key.
    """

    study: str
    target: Target
    state: StudyState
    accelerators: int
    trials: pd.DataFrame = field(repr=False, compare=False)
    steps: pd.DataFrame = field(repr=False, compare=False)
    steps_by_strategy: pd.DataFrame = field(repr=False, compare=False)
    answers: Answers = field(repr=False)
    noise_scale: ModelCurve = field(repr=False)
    regimes: Regimes = field(repr=False)
    recommendation: Recommendation = field(repr=False)
    cross_check: CrossCheck = field(repr=False)
    throughput: pd.DataFrame = field(repr=False, compare=False)
    strategies: pd.DataFrame = field(repr=False, compare=False)
    notes: tuple[str, ...] = ()
    table: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False, compare=False)
    confidence: float = CONFIDENCE
    command: str = ""
    context: Mapping[str, str] = field(default_factory=dict, compare=False)
    created: str = ""
    facts: StudyFacts = field(default_factory=StudyFacts, compare=False)
    predicted_noise: PredictedNoise = field(
        default_factory=lambda: PredictedNoise(ok=False, reason="not computed"), repr=False
    )
    noise_agreement: NoiseAgreement = field(
        default_factory=lambda: NoiseAgreement(ok=False, reason="not computed"), repr=False
    )
    time_model: TimeModel = field(
        default_factory=lambda: TimeModel(ok=False, reason="not computed"), repr=False
    )
    #: How much steps to target move between training seeds at one point (`seed_noise`).
    seed_noise: SeedNoise = field(default_factory=lambda: SeedNoise(math.nan, 0, 0), repr=False)
    #: The extensions' report sections by key (`study.extension.ReportSection`; `section`
    #: reads one), e.g. ``cbs``.
    sections: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: The answer across target levels, its laws and any prediction
    #: (`study.analysis.target_prediction.TargetScaling`; None: not asked for, ``--targets``).
    targets: Any = field(default=None, repr=False, compare=False)

    def section(self, key: str) -> Any:
        """The extension report section ``key`` (None: none was made)."""
        return self.sections.get(key)


def _fixed_or_searched(config: StudyConfig, name: str, fixed: str) -> str:
    """The fixed setting, or the choices when the search space chooses it."""
    if name not in config.space.param_names:
        return fixed
    param = config.space.param(name)
    if isinstance(param, CategoricalParam):
        return join_words([str(c) for c in param.choices], last=" or ")
    return fixed
