"""Optuna backend: a sampler per stratum (TPE by default; random, QMC, grid) on the ledger study."""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
import optuna

from study.config.space import CategoricalParam, FloatParam, IntParam
from study.config.study import Sampler, StudyConfig
from study.ledger import Ledger, Stratum, record_params
from study.tuners.base import (
    Proposal,
    TunerBackend,
    centred_window,
    clean_params,
    finished_count,
    lr_window,
    neighbour_best,
    transfer_learning_rate,
)
from study.tuners.optuna_space import to_optuna_distributions


class OptunaBackend(TunerBackend):
    """Proposes by calling ``trial.suggest_*`` on the claimed ledger trial.

    The first trial of a stratum whose neighbouring batch sizes already reached the target takes
    its learning rate from them (`transfer_learning_rate`); the sampler proposes the rest.
    """

    name = "optuna"

    def __init__(self, config: StudyConfig, ledger: Ledger, *, transfer: bool = True) -> None:
        super().__init__(config, ledger)
        self.transfer = transfer
        self.distributions = clean_params(to_optuna_distributions(config.space))

    def sampler(self, stratum: Stratum) -> optuna.samplers.BaseSampler:
        """The configured sampler, seeded per stratum."""
        seed = (self.config.seed * 1_000_003 + zlib.crc32(str(stratum).encode())) % (2**31)
        kind = self.config.tuner.sampler
        if kind is Sampler.RANDOM:
            return optuna.samplers.RandomSampler(seed=seed)
        if kind is Sampler.QMC:
            return optuna.samplers.QMCSampler(seed=seed, warn_independent_sampling=False)
        if kind is Sampler.GRID:
            return optuna.samplers.GridSampler(self.grid(), seed=seed)
        startup = max(2, min(5, self.config.trials_per_stratum // 3))
        return optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=startup, multivariate=True, warn_independent_sampling=False
        )

    def grid(self) -> dict[str, list[Any]]:
        """Grid values: ``trials_per_stratum`` points over each numeric range, every choice."""
        n = max(2, self.config.trials_per_stratum)
        grid: dict[str, list[Any]] = {}
        for param in self.config.space.params:
            if isinstance(param, CategoricalParam):
                grid[param.name] = list(param.choices)
            elif isinstance(param, (FloatParam, IntParam)):
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

    def propose(self, stratum: Stratum, study: optuna.Study, trial: optuna.Trial) -> Proposal:
        params: dict[str, Any] = {}
        origin = "sampler"
        fixed_lr = self._transfer_lr(stratum, study) if self.transfer else None
        if fixed_lr is not None:
            lr = self.config.space.param("learning_rate")
            study.set_user_attr("lr_window", list(centred_window(fixed_lr, lr.low, lr.high)))
            study.set_user_attr("lr_centre", fixed_lr)
            params["learning_rate"] = fixed_lr
            record_params(self.ledger.storage, trial, params, self.distributions)
            origin = "transfer"
        window = lr_window(self.ledger, stratum)
        for name, dist in self.distributions.items():
            if name in params:
                continue
            if name == "learning_rate" and window is not None:
                dist = optuna.distributions.FloatDistribution(window[0], window[1], log=dist.log)
            params[name] = suggest(trial, name, dist)
        return Proposal(tuner=self.name, params=params, origin=origin)

    def _transfer_lr(self, stratum: Stratum, study: optuna.Study) -> float | None:
        if self.config.tuner.sampler is Sampler.GRID:
            return None
        if finished_count(self.ledger.trials(stratum)) > 0:
            return None
        if any(t.user_attrs.get("origin") == "transfer" for t in self.ledger.trials(stratum)):
            return None
        lr = self.config.space.param("learning_rate")
        value = transfer_learning_rate(
            neighbour_best(self.ledger, self.config, stratum), stratum.batch_size, lr.low, lr.high
        )
        return None if value is None or not math.isfinite(value) else value


def suggest(trial: optuna.Trial, name: str, dist: optuna.distributions.BaseDistribution) -> Any:
    """Sample one parameter through the public ``suggest_*`` API."""
    if isinstance(dist, optuna.distributions.FloatDistribution):
        return trial.suggest_float(name, dist.low, dist.high, log=dist.log, step=dist.step)
    if isinstance(dist, optuna.distributions.IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, log=dist.log, step=dist.step)
    return trial.suggest_categorical(name, dist.choices)
