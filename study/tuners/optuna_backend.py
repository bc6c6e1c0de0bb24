"""Optuna backend: a sampler per stratum (TPE by default; random, QMC, grid) on the ledger.

The ledger is an Optuna storage, so the sampler is installed on it (`Ledger.use_sampler`) and
sees every ledger trial, whichever backend proposed it: proposals of other backends are stored
as Optuna params (`adopt`).
"""

from __future__ import annotations

import math
import warnings
import zlib
from typing import Any

import numpy as np
import optuna

from study.config.space import CategoricalParam, FloatParam, IntParam, Stratum
from study.config.study import Sampler, StudyConfig
from study.ledger import Ledger, Slot
from study.tuners.base import History, Proposal, TunerBackend
from study.tuners.optuna_space import to_optuna_distributions
from study.tuners.transfer import centred_window, transfer_learning_rate


class OptunaBackend(TunerBackend):
    """Proposes by calling ``trial.suggest_*`` on the claimed ledger trial.

    The first trial of a stratum whose neighbouring batch sizes already reached the target takes
    its learning rate from them (`transfer_learning_rate`), and the stratum's learning-rate
    search is centred on it from then on; the sampler proposes the rest.
    """

    name = "optuna"

    def __init__(self, config: StudyConfig, ledger: Ledger, *, transfer: bool = True) -> None:
        super().__init__(config, ledger)
        self.transfer = transfer
        self.distributions = to_optuna_distributions(config.space)
        ledger.use_sampler(self.sampler)

    def sampler(self, stratum: Stratum) -> optuna.samplers.BaseSampler:
        """The configured sampler, seeded per stratum."""
        seed = (self.config.seed * 1_000_003 + zlib.crc32(str(stratum).encode())) % (2**31)
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
        params: dict[str, Any] = {}
        origin = "sampler"
        window = history.window
        fixed_lr = self._transfer_lr(history) if self.transfer else None
        if fixed_lr is not None:
            lr = self.config.space.param("learning_rate")
            window = centred_window(fixed_lr, lr.low, lr.high)
            self.ledger.set_window(slot.stratum, window, fixed_lr)
            params["learning_rate"] = fixed_lr
            self.ledger.record_params(slot, params, self.distributions)
            origin = "transfer"
        for name, dist in to_optuna_distributions(self.config.space, window).items():
            if name not in params:
                params[name] = suggest(slot.trial, name, dist)
        return Proposal(tuner=self.name, params=params, origin=origin)

    def adopt(self, slot: Slot, proposal: Proposal) -> None:
        self.ledger.record_params(slot, proposal.params, self.distributions)

    def _transfer_lr(self, history: History) -> float | None:
        if self.config.tuner.sampler is Sampler.GRID or history.finished > 0:
            return None
        if any(t.origin == "transfer" for t in history.trials):
            return None
        lr = self.config.space.param("learning_rate")
        assert isinstance(lr, FloatParam)
        value = transfer_learning_rate(
            history.neighbours, history.stratum.batch_size, lr.low, lr.high
        )
        return None if value is None or not math.isfinite(value) else value


def suggest(trial: optuna.Trial, name: str, dist: optuna.distributions.BaseDistribution) -> Any:
    """Sample one parameter through the public ``suggest_*`` API."""
    if isinstance(dist, optuna.distributions.FloatDistribution):
        return trial.suggest_float(name, dist.low, dist.high, log=dist.log, step=dist.step)
    if isinstance(dist, optuna.distributions.IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, log=dist.log, step=dist.step)
    return trial.suggest_categorical(name, dist.choices)
