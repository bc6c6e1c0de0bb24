"""Optuna backend: a sampler per stratum (TPE by default; random, QMC, grid) on the ledger.

The ledger is an Optuna storage, so the sampler is installed on it (`TunerState.use_sampler`) and
sees every ledger trial, whichever backend proposed it: proposals of other backends (and
confirmation trials) are stored as Optuna params (`adopt`).
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import optuna

from study.config.space import CategoricalParam, IntParam, Stratum
from study.config.study import Sampler, StudyConfig
from study.ledger import Ledger, Slot
from study.tuners.base import History, Proposal, TunerBackend
from study.tuners.optuna_space import to_optuna_distributions
from study.tuners.points import lr_range, settle

#: The ledger extra holding the learning-rate window a trial was drawn in.
LR_WINDOW = "lr_window"


class OptunaBackend(TunerBackend):
    """Proposes by asking the stratum's sampler (the one installed on the ledger) for each
    parameter, inside the stratum's learning-rate window, and records the settled values as the
    claimed trial's Optuna params.

    The first trial of a stratum whose other batch sizes already reached the target takes the
    rate predicted from them (`History.centre`, origin ``transfer``); the sampler proposes the
    rest. A proposal that repeats a point of the stratum is drawn again (`settle`).
    """

    name = "optuna"

    def __init__(self, config: StudyConfig, ledger: Ledger, *, transfer: bool = True) -> None:
        super().__init__(config, ledger)
        self.transfer = transfer
        self.distributions = to_optuna_distributions(config.space)
        ledger.tuning.use_sampler(self.sampler)

    def sampler(self, stratum: Stratum) -> optuna.samplers.BaseSampler:
        """The configured sampler, seeded per stratum (``tuner.seed``, else the study's)."""
        seed = (self.config.tuner_seed * 1_000_003 + zlib.crc32(str(stratum).encode())) % (2**31)
        kind = self.config.tuner.sampler
        if kind is Sampler.RANDOM:
            return optuna.samplers.RandomSampler(seed=seed)
        if kind is Sampler.QMC:
            with warnings.catch_warnings():  # experimental in Optuna; chosen on purpose here
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.samplers.QMCSampler(seed=seed, warn_independent_sampling=False)
        if kind is Sampler.GRID:
            return optuna.samplers.GridSampler(self.grid(), seed=seed)
        startup = max(2, min(5, self.config.trials_per_stratum // 3))
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True)

    def grid(self) -> dict[str, list[Any]]:
        """Grid values: ``trials_per_stratum`` points over each numeric range, every choice."""
        n = max(2, self.config.trials_per_stratum)
        grid: dict[str, list[Any]] = {}
        for param in self.config.space.params:
            if isinstance(param, CategoricalParam):
                grid[param.name] = list(param.choices)
                continue
            points = (
                np.geomspace(param.low, param.high, n)
                if param.log
                else np.linspace(param.low, param.high, n)
            )
            values = [float(p) for p in points]
            if isinstance(param, IntParam):
                values = sorted({round(v) for v in values})
            grid[param.name] = values
        return grid

    def propose(self, slot: Slot, history: History) -> Proposal:
        window = None if self.config.tuner.sampler is Sampler.GRID else history.window
        distributions = to_optuna_distributions(self.config.space, window)
        fixed: dict[str, Any] = {}
        centre = self._transfer_lr(history)
        if centre is not None:
            fixed["learning_rate"] = centre
        params = settle(
            self.ledger,
            slot,
            self._draw(slot, distributions, fixed),
            lambda attempt, taken: self._draw(slot, distributions),
            lr_range(self.config),
        )
        self.ledger.tuning.record_params(slot, params, distributions)
        origin = "sampler"
        if centre is not None and abs(math.log(params["learning_rate"] / centre)) < 0.05:
            origin = "transfer"
        extras: dict[str, Any] = {}
        if window is not None:
            extras[LR_WINDOW] = list(window)
            self.ledger.tuning.set_window(slot.stratum, window, history.centre or math.nan)
        return Proposal(tuner=self.name, params=params, origin=origin, extras=extras)

    def _draw(
        self,
        slot: Slot,
        distributions: Mapping[str, optuna.distributions.BaseDistribution],
        fixed: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One draw of every parameter from the stratum's sampler, as ``Trial.suggest_*`` would
        make it (relative sampling where the sampler's search space holds the parameter with
        the same distribution, else independent), without recording it; ``fixed`` values are
        kept. Each call draws anew (the sampler's random state moves on)."""
        study = slot.trial.study
        sampler = study.sampler
        frozen = self.ledger.tuning.frozen(slot)
        space = sampler.infer_relative_search_space(study, frozen)
        relative = sampler.sample_relative(study, frozen, space) if space else {}
        params = dict(fixed or {})
        for name, dist in distributions.items():
            if name in params:
                continue
            if name in relative and space.get(name) == dist:
                params[name] = relative[name]
            else:
                params[name] = sampler.sample_independent(study, frozen, name, dist)
        return params

    def adopt(self, slot: Slot, proposal: Proposal) -> None:
        self.ledger.tuning.record_params(slot, proposal.params, self.distributions)

    def _transfer_lr(self, history: History) -> float | None:
        """The predicted rate for the stratum's first trial (None once it has trials or a
        transfer trial, or without a prediction)."""
        if not self.transfer or self.config.tuner.sampler is Sampler.GRID or history.finished > 0:
            return None
        if any(t.origin == "transfer" and t.status.counts() for t in history.trials):
            return None
        value = history.centre
        return None if value is None or not math.isfinite(value) else float(value)


def suggest(trial: optuna.Trial, name: str, dist: optuna.distributions.BaseDistribution) -> Any:
    """Sample one parameter through the public ``suggest_*`` API."""
    if isinstance(dist, optuna.distributions.FloatDistribution):
        return trial.suggest_float(name, dist.low, dist.high, log=dist.log, step=dist.step)
    if isinstance(dist, optuna.distributions.IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, log=dist.log, step=dist.step)
    return trial.suggest_categorical(name, dist.choices)
