"""A batch-size schedule in the training loop: which stage each compiled call trains in.

The loop asks `Stages.enter` before every compiled call: it sets the feed's global batch and
the optimizer's base rate for the stage of the call's first step (only when the stage changed,
or after a restore) and cuts the call at the next stage's first step, so every step takes the
batch its examples seen call for (`study.config.schedule.BatchSchedule`). Everything is a
function of the step, so a trial restored to a saved step (exact steps' replay) resumes in
that step's stage. On data in memory the batch is the index array's second dimension, which
the one traced function leaves unknown: no stage retraces it.

Example: stages (0, 32), (4096, 128) at rate 0.05, alpha 0.5: steps 0..127 train at 32 and
0.05, from step 128 on at 128 and 0.1 (a call from step 120 to the evaluation at 150 is cut
in two: 8 steps, then 22). With ``stage_warmup_steps: 4`` steps 128..131 train at 128 and
0.06, 0.07, 0.08, 0.09 (one step a call while the rate ramps), 0.1 from step 132 on.
"""

from __future__ import annotations

from study.config.trial import TrialSpec
from study.trainer.session import Session

__all__ = ["Stages"]


class Stages:
    """The stage applied to ``session`` for ``spec`` (a fixed batch: nothing to do)."""

    def __init__(self, spec: TrialSpec, session: Session) -> None:
        self.schedule = spec.batch_schedule
        self.session = session
        self.batch_size = spec.batch_size
        self._applied: tuple[int, float] | None = None

    def forget(self) -> None:
        """The session was restored: apply the stage again before the next call."""
        self._applied = None

    def enter(self, step: int, stop: int) -> int:
        """Apply ``step``'s stage; the steps of the next call (toward ``stop``, never past the
        next stage's first step nor the feed's most steps per call)."""
        if self.schedule is not None:
            index = self.schedule.stage_of_step(step)
            rate, ramping = self.rate(index, step)
            if (index, rate) != self._applied:
                self.batch_size = self.schedule.stages[index].batch_size
                self.session.set_batch(self.batch_size, rate)
                self._applied = (index, rate)
            following = self.schedule.next_start(step)
            if following is not None:
                stop = min(stop, following)
            if ramping:
                stop = min(stop, step + 1)
        return max(1, min(stop - step, self.session.feed.max_steps_per_call))

    def rate(self, index: int, step: int) -> tuple[float, bool]:
        """The base rate of step ``step`` in stage ``index``, and whether it is still ramping
        (within the stage's first ``stage_warmup_steps``: the previous stage's rate plus
        ``(k + 1) / (N + 1)`` of the way to this stage's at the stage's step k)."""
        assert self.schedule is not None
        stages = self.schedule.stages
        rate = self.schedule.learning_rate_for(stages[index].batch_size)
        n = self.schedule.stage_warmup_steps
        start = self.schedule.stage_starts()[index][0]
        if index == 0 or not n or step - start >= n:
            return rate, False
        previous = stages[self.schedule.stage_of_step(start - 1)].batch_size  # skips empty stages
        before = self.schedule.learning_rate_for(previous)
        return before + (rate - before) * (step - start + 1) / (n + 1), True
