"""Pure analysis of a scaling study: the measurement table, measures, fits and plots.

No TensorFlow, MLflow or Optuna here: everything reads the standard measurement table (see
`study.analysis.table`). One module per job: `table` (the table and its vocabulary), `measures`
(steps, examples and seconds to a result), `crossings` (where each trial's crossing lies on its
evaluation grid), one module per fitted model (`noise_scale`, `regimes`, `lr_scaling`, sharing
`fitting`), `recommend` (the decision policy on top of the fits), `seeds` (steps to result over seeds, for
confirmation trials) and `plots` (each draws into a
given ``ax``); `load` shapes a study's ledger records into the table. (Synthetic studies with
a known truth, to check the fits' intervals, live with the benchmarks: ``benchmarks/sim``.)
The plot functions are re-exported lazily: matplotlib is imported only when one of them is
first used.

Example::

    from study.analysis import fit_noise_scale_from_trials, trial_crossings
    trials = trial_crossings(df, Target.parse("val_accuracy>=0.6"))
    fit = fit_noise_scale_from_trials(trials)  # profile-likelihood intervals at 95%
"""

from __future__ import annotations

from study.analysis.crossings import PREVIOUS_STEP, crossing_estimate, trial_crossings
from study.analysis.fitting import CONFIDENCE, MIN_BATCH_SIZES
from study.analysis.lr_scaling import LrPowerLawFit, fit_lr_power_law
from study.analysis.measures import (
    steps_to_result,
    strategy_table,
    summarize_trials,
    target_holds,
    throughput_by_strategy,
    trial_steps_to_target,
)
from study.analysis.noise_scale import (
    SEARCH_FACTOR,
    NoiseScaleFit,
    fit_noise_scale,
    fit_noise_scale_from_trials,
)
from study.analysis.recommend import Recommendation, recommend
from study.analysis.regimes import Regimes, scaling_efficiency, scaling_regimes
from study.analysis.seeds import SeedEstimate, best_over_seeds, robust_steps
from study.analysis.table import (
    BATCH_SIZE,
    COLUMNS,
    EXAMPLES,
    HP_PREFIX,
    INDEX,
    LEARNING_RATE,
    ORIGIN,
    REPLICAS,
    SEED,
    STATE,
    STEP,
    STRATEGY,
    STUDY,
    TRAIN_LOSS,
    TRAIN_SECONDS,
    TRIAL,
    TUNER,
    export_table,
    flatten_table,
    hp_columns,
    index_table,
    metric_columns,
    read_table,
    to_csv,
    to_parquet,
    validate_table,
)

_PLOTS = (
    "plot_best_lr",
    "plot_examples_to_result",
    "plot_feasible_region",
    "plot_steps_to_result",
    "plot_time_to_result",
)


def __getattr__(name: str) -> object:
    if name in _PLOTS:
        from study.analysis import plots

        return getattr(plots, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    *_PLOTS,
    "BATCH_SIZE",
    "COLUMNS",
    "CONFIDENCE",
    "EXAMPLES",
    "HP_PREFIX",
    "INDEX",
    "LEARNING_RATE",
    "MIN_BATCH_SIZES",
    "ORIGIN",
    "PREVIOUS_STEP",
    "REPLICAS",
    "SEARCH_FACTOR",
    "SEED",
    "STATE",
    "STEP",
    "STRATEGY",
    "STUDY",
    "TRAIN_LOSS",
    "TRAIN_SECONDS",
    "TRIAL",
    "TUNER",
    "LrPowerLawFit",
    "NoiseScaleFit",
    "Recommendation",
    "Regimes",
    "SeedEstimate",
    "crossing_estimate",
    "export_table",
    "fit_lr_power_law",
    "fit_noise_scale",
    "fit_noise_scale_from_trials",
    "best_over_seeds",
    "flatten_table",
    "hp_columns",
    "index_table",
    "metric_columns",
    "read_table",
    "recommend",
    "robust_steps",
    "scaling_efficiency",
    "scaling_regimes",
    "steps_to_result",
    "strategy_table",
    "summarize_trials",
    "target_holds",
    "throughput_by_strategy",
    "to_csv",
    "to_parquet",
    "trial_crossings",
    "trial_steps_to_target",
    "validate_table",
]
