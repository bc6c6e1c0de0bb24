"""Live progress of a study: trials done of total, best steps per stratum, elapsed time and ETA.

A rich live table on a terminal; one plain line per finished trial otherwise (logs, CI).
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from study.config.space import Stratum
from study.ledger import Ledger, LedgerTrial
from study.results import TrialResult, TrialState


@dataclass
class StratumProgress:
    """Trials done of a stratum's budget, its best so far and how many run now."""

    done: int = 0
    budget: int = 0
    best_steps: float = math.inf
    best_lr: float | None = None
    running: int = 0

    def record_best(self, trial: LedgerTrial) -> None:
        """Keep ``trial`` as the best if it reached the target in fewer steps."""
        steps = trial.steps_to_target
        if steps is not None and steps < self.best_steps:
            self.best_steps, self.best_lr = float(steps), trial.learning_rate


@dataclass
class ProgressState:
    total: int
    done_before: int
    started: float = field(default_factory=time.monotonic)
    done_now: int = 0
    strata: dict[Stratum, StratumProgress] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return self.done_before + self.done_now

    def eta_seconds(self) -> float | None:
        if self.done_now == 0:
            return None
        rate = (time.monotonic() - self.started) / self.done_now
        return rate * max(0, self.total - self.done)


def format_seconds(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class ProgressDisplay:
    """Renders `ProgressState`; `trial_finished` prints a line when not on a terminal."""

    def __init__(self, title: str, state: ProgressState, live: bool | None = None) -> None:
        self.title = title
        self.state = state
        self.live = sys.stdout.isatty() if live is None else live
        self._lock = threading.Lock()
        self._live: Any = None

    def __enter__(self) -> ProgressDisplay:
        if self.live:
            from rich.live import Live

            self._live = Live(self._render(), refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(None, None, None)

    def refresh(self) -> None:
        if self._live is not None:
            with self._lock:
                self._live.update(self._render())

    def trial_finished(self, line: str) -> None:
        with self._lock:
            if self._live is not None:
                self._live.console.print(line)
                self._live.update(self._render())
            else:
                s = self.state
                elapsed = format_seconds(time.monotonic() - s.started)
                print(
                    f"[{s.done}/{s.total} {elapsed} eta {format_seconds(s.eta_seconds())}] {line}",
                    flush=True,
                )

    def _render(self) -> Any:
        from rich.table import Table

        s = self.state
        elapsed = format_seconds(time.monotonic() - s.started)
        table = Table(
            title=f"{self.title}: {s.done}/{s.total} trials, elapsed {elapsed}, "
            f"ETA {format_seconds(s.eta_seconds())}",
            title_justify="left",
        )
        for column in ("stratum", "trials", "running", "best steps", "best lr"):
            table.add_column(column, justify="right" if column != "stratum" else "left")
        for stratum, p in s.strata.items():
            table.add_row(
                str(stratum),
                f"{p.done}/{p.budget}",
                str(p.running) if p.running else "",
                f"{p.best_steps:.0f}" if math.isfinite(p.best_steps) else "-",
                f"{p.best_lr:.3g}" if p.best_lr else "-",
            )
        return table


def summarize(strata: Mapping[Stratum, StratumProgress]) -> str:
    """A plain-text table of strata (for the end of a run)."""
    lines = [f"{'stratum':<24}{'trials':>8}{'best steps':>12}{'best lr':>10}"]
    for stratum, p in strata.items():
        name = str(stratum)
        best = f"{p.best_steps:.0f}" if math.isfinite(p.best_steps) else "-"
        lr = f"{p.best_lr:.3g}" if p.best_lr else "-"
        lines.append(f"{name:<24}{p.done:>4}/{p.budget:<3}{best:>12}{lr:>10}")
    return "\n".join(lines)


class Progress:
    """The progress of a run: its `ProgressState`, updated by the engine, and its display."""

    def __init__(self, state: ProgressState, display: ProgressDisplay) -> None:
        self.state = state
        self.display = display
        self._lock = threading.Lock()

    @classmethod
    def from_ledger(
        cls, ledger: Ledger, budgets: Mapping[Stratum, int], title: str, live: bool | None
    ) -> Progress:
        """Start from what the ledger holds: finished trials and the best of each stratum."""
        strata = {}
        for stratum, budget in budgets.items():
            p = StratumProgress(budget=budget)
            for t in ledger.counted(stratum):
                if t.status.is_outcome():
                    p.done += 1
                    p.record_best(t)
            strata[stratum] = p
        state = ProgressState(
            total=sum(budgets.values()),
            done_before=sum(p.done for p in strata.values()),
            strata=strata,
        )
        return cls(state, ProgressDisplay(title, state, live))

    def running(self, stratum: Stratum, delta: int) -> None:
        with self._lock:
            self.state.strata[stratum].running += delta
        self.display.refresh()

    def finished(self, trial: LedgerTrial, result: TrialResult) -> None:
        """Count a trial this run finished (``result``: how it ended)."""
        with self._lock:
            p = self.state.strata[trial.stratum]
            p.done += 1
            self.state.done_now += 1
            if result.state is TrialState.REACHED:
                p.record_best(trial)
