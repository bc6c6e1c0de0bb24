"""The designer: the backend that proposes a stratum's designed trials (`study.tuners.design`:
the rate that brackets the stratum's best while the model is not trusted there, else the
learning rate whose outcome narrows the answer most), from the model of every trial fitted
ahead (`study.tuners.fit_ahead`: the fit of the trials before the latest one, made while that
trained)."""

from __future__ import annotations

import math

import numpy as np

from study.analysis.table import BATCH_SIZE
from study.config.space import Stratum
from study.ledger import LedgerTrial, Slot
from study.tuners.base import History, Proposal, TunerBackend, clean_params
from study.tuners.design import DESIGN, GAIN, PROBE, bracket_rate, design_rate, designed
from study.tuners.fit_ahead import fit_next, lagged_fit, lagged_frame
from study.tuners.history import SCALING_SLACK, step_bound
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
        if self.config.tuner.pruning:  # stopped at its slack times the stratum's best so far
            best = [t.steps_to_target for t in history.trials if t.steps_to_target is not None]
            slack = self.config.prune_slack
            budget = min([budget, *(slack * float(b) for b in best)])
        probe, kind = self._bracket(history)
        if probe is not None:  # the model is not trusted here yet (`study.tuners.design`)
            fit_next(trials, ahead=ahead)
            params = settle(
                self.ledger, slot, {**others, "learning_rate": probe}, None, lr_range(self.config)
            )
            return Proposal(tuner=self.name, params=params, origin=DESIGN, extras={PROBE: kind})
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

    def _bracket(self, history: History) -> tuple[float | None, str]:
        """`bracket_rate` at the stratum's best trial when it is as fast as the other batch
        sizes allow (`step_bound`, with the pruning's slack; ``"bracket"``), else over the
        whole range (``"gap"``)."""
        reached = [t for t in history.trials if t.steps_to_target is not None]
        best = min(reached, key=LedgerTrial.rank) if reached else None
        bound = step_bound(history.stratum.batch_size, history.neighbour_steps, SCALING_SLACK)
        if best is not None and best.steps_to_target > bound:
            best = None  # slower than its batch size can be: its optimum is not found yet
        tried = [t.learning_rate for t in history.trials]
        rate = None if best is None else best.learning_rate
        kind = "gap" if best is None else "bracket"
        return bracket_rate(rate, tried, lr_range(self.config)), kind

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
