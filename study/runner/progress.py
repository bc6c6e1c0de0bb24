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


@dataclass
class StratumProgress:
    done: int = 0
    budget: int = 0
    best_steps: float = math.inf
    best_lr: float | None = None
    running: int = 0


@dataclass
class ProgressState:
    total: int
    done_before: int
    started: float = field(default_factory=time.monotonic)
    done_now: int = 0
    strata: dict[str, StratumProgress] = field(default_factory=dict)

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
        for name, p in s.strata.items():
            table.add_row(
                name,
                f"{p.done}/{p.budget}",
                str(p.running) if p.running else "",
                f"{p.best_steps:.0f}" if math.isfinite(p.best_steps) else "-",
                f"{p.best_lr:.3g}" if p.best_lr else "-",
            )
        return table


def summarize(strata: Mapping[str, StratumProgress]) -> str:
    """A plain-text table of strata (for the end of a run)."""
    lines = [f"{'stratum':<24}{'trials':>8}{'best steps':>12}{'best lr':>10}"]
    for name, p in strata.items():
        best = f"{p.best_steps:.0f}" if math.isfinite(p.best_steps) else "-"
        lr = f"{p.best_lr:.3g}" if p.best_lr else "-"
        lines.append(f"{name:<24}{p.done:>4}/{p.budget:<3}{best:>12}{lr:>10}")
    return "\n".join(lines)
