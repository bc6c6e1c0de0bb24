"""The designer: the backend that proposes a stratum's designed trials (`study.tuners.design`:
the learning rate whose outcome narrows the answer most), from the model of every trial fitted
ahead (`study.tuners.fit_ahead`: the fit of the trials before the latest one, made while that
trained)."""

from __future__ import annotations

import math

import numpy as np

from study.analysis.table import BATCH_SIZE
from study.config.space import Stratum
from study.ledger import LedgerTrial, Slot
from study.tuners.base import History, Proposal, TunerBackend, clean_params
from study.tuners.design import DESIGN, GAIN, design_rate, designed
from study.tuners.fit_ahead import fit_next, lagged_fit, lagged_frame
from study.tuners.points import lr_range, settle


class Designer(TunerBackend):
    """Proposes the designed trials of a stratum (see the module); None for the others."""

    name = DESIGN

    def propose(self, slot: Slot, history: History) -> Proposal | None:
        ahead = self.config.tuner.fit_ahead  # the model lags one trial (`study.tuners.fit_ahead`)
        if not self.config.tuner.design or not (
            designed(slot.number) or (ahead and designed(slot.number + 1))
        ):
            return None
        strategy = slot.stratum.strategy
        trials = [
            t
            for batch in self.config.space.batch_sizes
            for t in self.ledger.trials(Stratum(batch, strategy))
        ]
        frame = lagged_frame(trials, ahead=ahead)
        reached = frame.loc[np.isfinite(frame["steps_to_target"]), BATCH_SIZE].nunique()
        if reached < 3:
            return None
        if not designed(slot.number):
            fit_next(trials, ahead=ahead)  # what the stratum's next (designed) trial needs
            return None
        others = self._other_params(history)
        if others is None:
            return None
        limit = self.config.settings.budget.step_limit(slot.stratum.batch_size)
        budget = float(limit) if limit else math.inf
        if self.config.tuner.pruning:  # stopped once it takes the stratum's best steps so far
            best = [t.steps_to_target for t in history.trials if t.steps_to_target is not None]
            budget = min([budget, *map(float, best)])
        design = design_rate(
            frame,
            slot.stratum.batch_size,
            lr_range(self.config),
            budget=budget,
            fit=lagged_fit(trials, ahead=ahead),
        )
        fit_next(trials, ahead=ahead)  # the next decision's model, fitted while this trains
        if design is None:
            return None
        params = settle(
            self.ledger,
            slot,
            {**others, "learning_rate": design.learning_rate},
            None,
            lr_range(self.config),
        )
        return Proposal(tuner=self.name, params=params, origin=DESIGN, extras={GAIN: design.gain})

    def _other_params(self, history: History) -> dict[str, object] | None:
        """The stratum's best trial's values of every parameter but the learning rate ({} when
        the space has no others; None when it has others and no trial reached the target)."""
        names = [p for p in self.config.space.param_names if p not in ("learning_rate",)]
        names = [n for n in names if n not in ("batch_size", "strategy")]
        if not names:
            return {}
        reached = [t for t in history.trials if t.steps_to_target is not None]
        if not reached:
            return None
        best = min(reached, key=LedgerTrial.rank)
        params = clean_params(best.params)
        return {n: params[n] for n in names if n in params}
