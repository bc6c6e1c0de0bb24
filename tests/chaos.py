"""A chaos driver (issue 20): a 3-worker study on a real PostgreSQL and a real ``mlflow server``
while, at moments drawn from a seed, workers are SIGKILLed or SIGTERMed and started again,
PostgreSQL is restarted the hard way (immediate shutdown, a few seconds down) and the tracking
server is killed and started again on its port. Then the `Verdict`: finished trials against
the budget, trials and MLflow runs left RUNNING, finished trials missing from MLflow or in it
twice. Used by tests/runner/test_chaos.py (one small round) and benchmarks/chaos.py (many).

One round: three ``study run FILE`` start at once (racing to create the study); each event
fires once the ledger holds a drawn number of finished trials (so it lands mid-study), a drawn
fraction of a second later, one event at a time. A killed worker is started again as ``study
worker NAME``; so is one that exits non-zero on its own: ``refused`` when it was refused at its
start because a service was down at that moment (exit 2, by design: a command fails fast on a
storage or tracking server that does not answer when it starts), ``unexpected`` otherwise (a
finding). The round ends when every worker has exited 0, or at its deadline.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from study.results import TrialState
from tests.runner import outages
from tests.runner.conftest import (
    Background,
    Store,
    start_study,
    strata,
    tiny_study,
    trial_key,
    write_study,
)
from tests.services import MlflowServer, PostgresServer

#: What the driver does to the services and workers, one kind per event.
KILL, TERM, POSTGRES, TRACKING = "sigkill", "sigterm", "postgres", "tracking"
WORKERS = 3
#: What a command says when a service does not answer as it starts (exit 2).
REFUSALS = ("--storage: cannot open", "no MLflow tracking server answers")


@dataclass(frozen=True)
class Verdict:
    """What a chaos round left: numbers that must all be 0 except ``finished`` (= ``budget``)."""

    budget: int
    finished: int
    #: Budget slots with no finished trial, and finished trials beyond the budget.
    lost: int
    duplicated: int
    #: Ledger trials still open, and MLflow runs (trials or the parent) left RUNNING.
    running_trials: int
    running_runs: int
    #: Finished trials with no MLflow run, and runs beyond one per trial.
    missing_runs: int
    doubled_runs: int
    seconds: float
    events: tuple[str, ...] = ()
    #: Exit status of every worker process, in the order they ended (killed ones included).
    exits: tuple[int, ...] = ()
    #: Trials that failed (an error, not a training outcome): the last line of each error.
    failed: tuple[str, ...] = ()
    #: Starts refused because a service was down then (exit 2 naming it), started again.
    refused: int = 0
    #: Other exits nobody asked for (not 0, not after the driver's signal).
    unexpected: tuple[str, ...] = ()
    timed_out: bool = False

    @property
    def clean(self) -> bool:
        bad = (self.lost, self.duplicated, self.running_trials, self.running_runs)
        runs = self.missing_runs or self.doubled_runs
        return not any(bad) and not runs and not (self.failed or self.unexpected or self.timed_out)


def chaos_study(name: str, per_stratum: int = 4) -> dict[str, Any]:
    """The round's study: the runner tests' tabular MLP (a second or two per trial), two batch
    sizes, ``per_stratum`` trials each."""
    return tiny_study(name=name, trials_per_stratum=per_stratum)


@dataclass(frozen=True)
class Event:
    """One thing the driver does, drawn in advance from the round's seed: ``kind`` once
    ``after`` trials have finished, ``lag`` seconds later; ``down`` seconds of absence (a
    worker's or a service's); ``pick`` chooses the worker among those alive then."""

    kind: str
    after: int
    lag: float
    down: float
    pick: float

    @classmethod
    def draw(cls, rng: random.Random, kind: str, budget: int) -> Event:
        low, high = {KILL: (0.2, 1.5), TERM: (0.2, 1.5), POSTGRES: (2.0, 5.0)}.get(kind, (1.0, 4.0))
        return cls(
            kind,
            rng.randint(1, max(1, budget * 2 // 3)),
            rng.uniform(0.0, 1.0),
            rng.uniform(low, high),
            rng.random(),
        )


@dataclass
class Round:
    """One chaos round's processes and what happened to them. Events run on threads of their
    own, so they overlap as they would in a fleet (a worker restarted while PostgreSQL is down
    is refused and started again once it is back)."""

    pg: PostgresServer
    tracking: MlflowServer
    cwd: Path
    data: dict[str, Any]
    url: str = ""
    store: Store = field(init=False)
    workers: list[Background] = field(default_factory=list)
    signalled: set[int] = field(default_factory=set)
    done: set[int] = field(default_factory=set)
    exits: list[int] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    refused: int = 0
    events: list[str] = field(default_factory=list)
    started: int = 0
    #: When to start a refused worker again (monotonic seconds), one entry per worker.
    restarts: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.store = Store(self.cwd, storage_url=self.url, uri=self.tracking.url)

    def flags(self) -> tuple[str, ...]:
        return ("--storage", self.url, "--tracking-uri", self.tracking.url)

    def start(self, *args: str) -> Background:
        with self.lock:
            self.started += 1
            tag = f"w{self.started}"
        job = start_study(*args, *self.flags(), cwd=self.cwd, tag=tag)
        with self.lock:
            self.workers.append(job)
        return job

    def join(self) -> Background:
        return self.start("worker", self.data["name"])

    def alive(self) -> list[Background]:
        with self.lock:
            return [w for w in self.workers if w.process.poll() is None]

    def reap(self) -> None:
        """Note the workers that ended; start again one that died unasked (one refused at
        its start 2 s later)."""
        with self.lock:
            ended = [w for w in self.workers if w.process.poll() is not None]
        for w in ended:
            if w.pid in self.done:
                continue
            code = int(w.process.returncode)
            self.done.add(w.pid)
            self.exits.append(code)
            if "Traceback" in w.output()[1]:  # a crash, even one a signal's exit status hides
                self.unexpected.append(f"{w.stderr.name}: exit {code} after a traceback")
                if w.pid not in self.signalled:  # a victim is started again by its event
                    self.restarts.append(time.monotonic() + 2.0)
                continue
            if w.pid in self.signalled or code == 0:
                continue
            last = (w.output()[1].strip().splitlines() or [""])[-1]
            if code == 2 and any(r in last for r in REFUSALS):
                self.refused += 1
            else:
                self.unexpected.append(f"{w.stderr.name}: exit {code}: {last[:200]}")
            self.restarts.append(time.monotonic() + 2.0)
        due = [t for t in self.restarts if t <= time.monotonic()]
        for t in due:
            self.restarts.remove(t)
            self.join()

    def finished(self) -> int:
        return outages.finished(self.store, self.data)

    # -- the events ---------------------------------------------------------------------
    def fire(self, event: Event, at: int) -> None:
        """Do ``event`` (``at``: trials finished when it fired)."""
        self.events.append(f"{event.kind}@{at}")
        if event.kind in (KILL, TERM):
            alive = self.alive()
            if not alive:
                return
            victim = alive[int(event.pick * len(alive))]
            self.signalled.add(victim.pid)
            if event.kind == KILL:
                with contextlib.suppress(ProcessLookupError):
                    victim.signal_group(signal.SIGKILL)
            else:
                os.kill(victim.pid, signal.SIGTERM)
            try:
                victim.wait(120)
            except Exception:  # a worker that does not stop on SIGTERM: a finding
                self.unexpected.append(f"{victim.stderr.name}: still running 120 s after SIGTERM")
                victim.signal_group(signal.SIGKILL)
                victim.wait(30)
            time.sleep(event.down)  # how long the worker stays down
            self.join()
        elif event.kind == POSTGRES:
            self.pg.restart_after(lambda: time.sleep(event.down))
        elif event.kind == TRACKING:
            self.tracking.stop(signal.SIGKILL)
            time.sleep(event.down)
            self.tracking.start()


def chaos_round(
    pg: PostgresServer,
    tracking: MlflowServer,
    cwd: Path,
    seed: int,
    *,
    per_stratum: int = 4,
    kinds: tuple[str, ...] = (KILL, TERM, POSTGRES, TRACKING),
    deadline_s: float = 600.0,
) -> Verdict:
    """Run one chaos round in ``cwd`` (a fresh database on ``pg``, a study of its own on the
    ``tracking`` server) with the events ``kinds`` at moments drawn from ``seed``; return its
    `Verdict`."""
    rng = random.Random(seed)
    data = chaos_study(f"chaos-{seed}", per_stratum)
    budget = per_stratum * len(strata(data))
    pending = sorted((Event.draw(rng, k, budget) for k in kinds), key=lambda e: e.after)
    chaos = Round(pg, tracking, cwd, data, url=pg.create_database())
    began = time.monotonic()
    file = write_study(cwd, data).name
    for _ in range(WORKERS):
        chaos.start("run", file)
    try:
        return _drive(chaos, pending, budget, began, deadline_s)
    finally:  # interrupted (Ctrl-C): no worker outlives the driver
        for w in chaos.alive():
            w.stop()


def _drive(
    chaos: Round, pending: list[Event], budget: int, began: float, deadline_s: float
) -> Verdict:
    """Fire the ``pending`` events as the trials finish; the round's `Verdict` once every
    worker has exited 0 and no event runs (or at the deadline)."""
    threads: list[threading.Thread] = []
    timed_out = False
    while True:
        chaos.reap()
        done = chaos.finished()
        while pending and done >= pending[0].after:
            event = pending.pop(0)
            time.sleep(event.lag)
            threads.append(threading.Thread(target=chaos.fire, args=(event, done), daemon=True))
            threads[-1].start()
        busy = any(t.is_alive() for t in threads) or chaos.restarts
        if not busy and not chaos.alive():
            break
        if time.monotonic() - began > deadline_s:
            timed_out = True
            for w in chaos.alive():
                w.stop()
            break
        time.sleep(0.2)
    for t in threads:
        t.join(60)
    chaos.reap()
    result = verdict(chaos, budget, time.monotonic() - began, timed_out)
    (chaos.cwd / "verdict.txt").write_text(describe(result) + "\n")
    return result


def verdict(chaos: Round, budget: int, seconds: float, timed_out: bool) -> Verdict:
    """Count what the round left in the ledger and in MLflow."""
    name = chaos.data["name"]
    by_stratum = chaos.store.trials(chaos.data)
    finished = {
        trial_key(name, s, t.number): t
        for s, ts in by_stratum.items()
        for t in ts
        if t.status.counts()
    }
    per_stratum = Counter(key.partition("#")[0] for key in finished)
    lost = sum(max(0, budget // len(by_stratum) - per_stratum[f"{name}/{s}"]) for s in by_stratum)
    duplicated = sum(max(0, n - budget // len(by_stratum)) for n in per_stratum.values())
    running = sum(1 for ts in by_stratum.values() for t in ts if t.open)
    failed = [
        f"{trial_key(name, s, t.number)}: {(t.result.error or '').strip().splitlines()[-1:]}"
        for s, ts in by_stratum.items()
        for t in ts
        if t.status is TrialState.FAILED and t.result is not None
    ]
    runs = mlflow_runs(chaos.store, name)
    keys = Counter(r.data.tags.get("study.trial") for r in runs if r.data.tags.get("study.trial"))
    return Verdict(
        budget=budget,
        finished=len(finished),
        lost=lost,
        duplicated=duplicated,
        running_trials=running,
        running_runs=sum(1 for r in runs if r.info.status == "RUNNING"),
        missing_runs=sum(1 for key in finished if keys[key] == 0),
        doubled_runs=sum(n - 1 for n in keys.values() if n > 1),
        seconds=seconds,
        events=tuple(chaos.events),
        exits=tuple(chaos.exits),
        failed=tuple(failed),
        refused=chaos.refused,
        unexpected=tuple(chaos.unexpected),
        timed_out=timed_out,
    )


def mlflow_runs(store: Store, name: str) -> list[Any]:
    """The study's active MLflow runs (a missing experiment: none)."""
    client = store.mlflow()
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        return []
    return list(client.search_runs([experiment.experiment_id], max_results=5000))


def describe(v: Verdict) -> str:
    """One line per verdict, e.g. ``8/8 finished, lost 0, duplicated 0, RUNNING 0+0, ...``."""
    return (
        f"{v.finished}/{v.budget} finished, lost {v.lost}, duplicated {v.duplicated}, RUNNING "
        f"{v.running_trials} trial(s) + {v.running_runs} run(s), MLflow missing "
        f"{v.missing_runs} doubled {v.doubled_runs}, {v.seconds:.0f} s; events "
        f"{' '.join(v.events)}; exits {list(v.exits)}"
        + (f"; failed trials: {list(v.failed)}" if v.failed else "")
        + (f"; {v.refused} start(s) refused while a service was down" if v.refused else "")
        + (f"; unexpected: {list(v.unexpected)}" if v.unexpected else "")
        + ("; TIMED OUT" if v.timed_out else "")
    )
