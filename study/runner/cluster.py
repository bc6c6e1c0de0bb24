"""Worker groups: one trial on W trainer processes (``multi_worker_mirrored:W``).

A `WorkerGroup` starts W trainer workers on this host. Each gets a ``TF_CONFIG`` naming all W
on free loopback ports and its own task index, and builds its `MultiWorkerMirroredStrategy`
before TensorFlow initialises; together they are one TensorFlow cluster whose gradients are
summed by collective ops. Every trial (and preflight check) goes to all W in lock-step: they
train together and evaluate the same variables, so their measurements agree. The chief (task
index 0) is the one whose measurements reach the caller's hook and whose result is returned,
with ``workers``, ``cluster`` and ``workers_agree`` (every member's curve and outcome equal to
the chief's, as they must be) added to its environment; the others get the chief's pruning
decision.

A group serves consecutive trials of the same W (its cluster is set up once, ~10 s here). A
member that dies fails the trial at once; one out of step (it reports while the others stay
silent for ``grace`` seconds, or ends the trial while they go on) fails it too. Either way the
message names the member, and the group is stopped: the next trial starts a fresh one.

Example::

    group = WorkerGroup.start(2)
    result, healthy = group.run(spec, hook)   # result: the chief's `TrialResult`
    group.stop()
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait
from typing import Any

from study.config.trial import TrialSpec
from study.results import Measurement, TrialResult, TrialState
from study.runner import spawning

#: Seconds a group may take to start: W TensorFlow imports sharing the cores, then the cluster.
START_TIMEOUT_S = 300.0
#: Seconds the other members may lag behind the first that reports a measurement or a result.
GRACE_S = 120.0
#: Seconds the others may take to follow a member whose trial failed.
FAILURE_GRACE_S = 10.0
_LOOPBACK = "localhost"
#: What a member's start-up error says when its port was taken (then the group is retried).
_PORT_TROUBLE = ("could not start grpc server", "address already in use", "failed to bind")
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


class GroupError(RuntimeError):
    """A member of a worker group could not start, died or fell out of step."""


def free_ports(count: int) -> tuple[int, ...]:
    """``count`` distinct TCP ports free on the loopback interface right now.

    All sockets are held open until every port is chosen, so the ports differ; another process
    may still take one before the group binds it (the group then fails to start, and is retried).
    """
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return tuple(sock.getsockname()[1] for sock in sockets)


def tf_config(addresses: Sequence[str], index: int) -> str:
    """The ``TF_CONFIG`` of worker ``index`` in a cluster of ``addresses`` (index 0: the chief).

    Example: ``tf_config(["localhost:5000", "localhost:5001"], 1)`` is
    ``{"cluster": {"worker": ["localhost:5000", "localhost:5001"]}, "task": {"type": "worker",
    "index": 1}}``.
    """
    cluster = {"worker": list(addresses)}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


def follower_spec(spec: TrialSpec) -> TrialSpec:
    """The trial as a non-chief member runs it: without its own clock limit.

    Members measure their own training seconds, so a time budget could stop one member and not
    another; only the chief's clock counts, and its decision reaches the others (`out_of_time`).
    """
    if spec.settings.budget.max_seconds is None:
        return spec
    return spec.with_settings(budget=replace(spec.settings.budget, max_seconds=math.inf))


def out_of_time(spec: TrialSpec, measurement: Measurement) -> bool:
    """Whether the chief ends the trial on its time budget after this measurement (the rule of
    `study.trainer.loop`)."""
    limit = spec.settings.budget.max_seconds
    return limit is not None and measurement.train_seconds >= limit


def _same_outcome(chief: TrialResult, other: TrialResult) -> bool:
    """Whether a member saw what the chief saw: every measurement (step, training loss,
    validation metrics) and the steps to target. The clocks and the state may differ (a time
    budget only the chief applies)."""

    def row(m: Measurement) -> list[Any]:  # NaN (no loss yet at step 0) compares equal as text
        values = [m.step, m.train_loss, *(x for item in sorted(m.metrics.items()) for x in item)]
        return [repr(v) if isinstance(v, float) and math.isnan(v) else v for v in values]

    rows, others = [row(m) for m in chief.curve], [row(m) for m in other.curve]
    return rows == others and chief.steps_to_target == other.steps_to_target


@dataclass
class WorkerGroup:
    """W trainer processes forming one TensorFlow cluster on loopback ports; see the module."""

    key: str
    processes: list[Any]
    conns: list[Any]
    addresses: tuple[str, ...]
    strategy: str
    grace: float = GRACE_S
    busy: bool = False
    trials: int = 0
    info: dict = field(default_factory=dict)

    @classmethod
    def start(
        cls,
        workers: int,
        threads: int = 0,
        *,
        grace: float = GRACE_S,
        timeout: float = START_TIMEOUT_S,
    ) -> WorkerGroup:
        """Start a group of ``workers`` processes and wait until all have joined the cluster.

        Raises:
            GroupError: a member failed to start (its error's last line), died or timed out.
        """
        try:
            return cls._start(workers, threads, grace, timeout)
        except GroupError as exc:  # a port taken between choosing and binding it: retry once
            if not any(hint in str(exc).lower() for hint in _PORT_TROUBLE):
                raise
        return cls._start(workers, threads, grace, timeout)

    @classmethod
    def _start(cls, workers: int, threads: int, grace: float, timeout: float) -> WorkerGroup:
        from study.runner.worker import worker_main

        strategy = f"multi_worker_mirrored:{workers}"
        addresses = tuple(f"{_LOOPBACK}:{port}" for port in free_ports(workers))
        processes, conns = [], []
        for index in range(workers):
            parent, child = spawning.context().Pipe()
            process = spawning.process(
                worker_main,
                (child, 1, threads, strategy, tf_config(addresses, index)),
                name=f"study-mwm{workers}-{index}",
            )
            spawning.start(process)  # not from this thread: see `study.runner.spawning`
            child.close()
            processes.append(process)
            conns.append(parent)
        group = cls(f"mwm{workers}", processes, conns, addresses, strategy, grace)
        try:
            ready = group._gather(time.monotonic() + timeout, "starting")
        except GroupError:
            group.kill()
            raise
        errors = [(i, info["error"]) for i, (_kind, info) in enumerate(ready) if info.get("error")]
        if errors:
            group.kill()
            index, error = errors[0]
            raise GroupError(f"{group._member(index)} failed to start: {_last_line(error)}")
        group.info = {**ready[0][1], "cluster": ",".join(addresses)}
        return group

    @property
    def size(self) -> int:
        return len(self.processes)

    def alive(self) -> bool:
        return all(process.is_alive() for process in self.processes)

    def kill(self) -> None:
        """Kill every member at once (its peers may be blocked in a collective op)."""
        for process in self.processes:
            if process.is_alive():
                process.kill()
        for process in self.processes:
            process.join(5)
        for conn in self.conns:
            conn.close()

    def stop(self, timeout: float = 1.0) -> None:
        """Ask every member to exit; kill those still running after ``timeout`` seconds (the
        chief's cluster service waits for its peers to leave: killing them loses nothing)."""
        for conn in self.conns:
            with contextlib.suppress(OSError, ValueError):
                conn.send(("exit", None))
        deadline = time.monotonic() + timeout
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        self.kill()

    def check(self, spec: TrialSpec) -> tuple[str | None, bool]:
        """Check a trial on every member (model variables are built collectively).

        Returns the first problem any member found (None if the trial can run) and whether the
        group is still healthy.
        """
        try:
            self._send_all("check", [spec] * self.size, "before checking the trial")
            answers = self._gather(None, "checking the trial")
        except GroupError as exc:
            return str(exc), False
        if {kind for kind, _ in answers} != {"checked"}:
            return "workers of the group fell out of step while checking the trial", False
        return next((problem for _, problem in answers if problem is not None), None), True

    def run(
        self, spec: TrialSpec, hook: Callable[[Measurement], bool] | None = None
    ) -> tuple[TrialResult, bool]:
        """Run one trial on every member in lock-step; never raises.

        Returns the chief's result (a ``failed`` one if a member failed, died or fell out of
        step) and whether the group can serve the next trial (not after a failure).
        """
        started = time.monotonic()
        try:
            specs = [spec] + [follower_spec(spec)] * (self.size - 1)
            self._send_all("trial", specs, "before the trial")
            while True:
                messages = self._gather(None, "during the trial")
                kinds = [kind for kind, _ in messages]
                if all(kind == "measurement" for kind in kinds):
                    self._decide(spec, [m for _, m in messages], hook)
                    continue
                if all(kind == "result" for kind in kinds):
                    result = self._outcome([r for _, r in messages])
                    # A failure may have aborted the collective runtime: start afresh.
                    return result, result.state is not TrialState.FAILED
                ended = [self._member(i) for i, kind in enumerate(kinds) if kind == "result"]
                raise GroupError(
                    f"{', '.join(ended)} ended the trial while the others went on training "
                    "(out of step)"
                )
        except GroupError as exc:
            seconds = time.monotonic() - started
            error = f"{exc} after {seconds:.1f} s; the group is stopped and the next trial "
            return TrialResult(TrialState.FAILED, error=error + "starts a new one"), False

    def _decide(
        self,
        spec: TrialSpec,
        measurements: list[Measurement],
        hook: Callable[[Measurement], bool] | None,
    ) -> None:
        """Pass the chief's measurement to ``hook`` and its decision to every member."""
        chief = measurements[0]
        for index, m in enumerate(measurements[1:], start=1):
            if m.step != chief.step:
                raise GroupError(
                    f"{self._member(index)} measured step {m.step} while the chief measured "
                    f"step {chief.step} (out of step)"
                )
        keep_going = True if hook is None else bool(hook(chief))
        go_on = keep_going and not out_of_time(spec, chief)
        self._send_all("prune", [keep_going] + [go_on] * (self.size - 1), "after a measurement")

    def _outcome(self, results: list[TrialResult]) -> TrialResult:
        """The chief's result with the group in its environment, or a member's failure."""
        for index, result in enumerate(results):
            if result.state is TrialState.FAILED:
                if index == 0:
                    return result
                return replace(result, error=f"{self._member(index)}: {result.error}")
        chief = results[0]
        agree = all(_same_outcome(chief, other) for other in results[1:])
        environment = {
            **chief.environment,
            "workers": self.size,
            "cluster": self.info["cluster"],
            "workers_agree": agree,
        }
        return replace(chief, environment=environment)

    def _member(self, index: int) -> str:
        role = "the chief" if index == 0 else "a worker"
        return f"worker {index} ({role}) of {self.strategy} on {self.addresses[index]}"

    def _send_all(self, kind: str, payloads: list[Any], when: str) -> None:
        for index, (conn, payload) in enumerate(zip(self.conns, payloads, strict=True)):
            try:
                conn.send((kind, payload))
            except (OSError, ValueError) as exc:
                raise self._died(index, when) from exc

    def _died(self, index: int, when: str) -> GroupError:
        process = self.processes[index]
        process.join(1)
        return GroupError(f"{self._member(index)} died {when} (exit code {process.exitcode})")

    def _gather(self, deadline: float | None, when: str) -> list[tuple[str, Any]]:
        """One message from every member, in task order.

        Waits without limit for the first (training takes as long as it takes) unless
        ``deadline`` is given, then at most ``grace`` seconds for the rest, or `FAILURE_GRACE_S`
        once a member reported a failed trial (its peers fail alike at once, or hang in a
        collective op). A member that dies meanwhile ends the wait at once.

        Raises:
            GroupError: naming the member that died or stayed silent.
        """
        got: dict[int, tuple[str, Any]] = {}
        sentinels = {process.sentinel: i for i, process in enumerate(self.processes)}
        reason = "the others reported"
        while len(got) < self.size:
            waiting = {self.conns[i]: i for i in range(self.size) if i not in got}
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait([*waiting, *sentinels], timeout)
            if not ready:
                silent = ", ".join(self._member(i) for i in sorted(waiting.values()))
                if not got:
                    raise GroupError(f"{silent}: no answer in time {when}")
                raise GroupError(f"{silent} sent nothing {when} after {reason} (out of step)")
            for obj in ready:
                if obj in waiting:
                    index = waiting[obj]
                    try:
                        got[index] = message = obj.recv()
                    except (EOFError, OSError) as exc:
                        raise self._died(index, when) from exc
                    grace, error = self.grace, _failure(message)
                    if error is not None:
                        grace = min(grace, FAILURE_GRACE_S)
                        reason = f"{self._member(index)} failed ({_last_line(error)})"
                    elif len(got) > 1:
                        continue
                    deadline = min(deadline or math.inf, time.monotonic() + grace)
            for obj in ready:
                if obj in sentinels and sentinels[obj] not in got:
                    raise self._died(sentinels[obj], when)
                sentinels.pop(obj, None)  # its message came first: reported by the next wait
        return [got[i] for i in range(self.size)]


def _failure(message: tuple[str, Any]) -> str | None:
    """The error of a member's message that reports a failure: a failed trial, or a start that
    failed; None otherwise."""
    kind, payload = message
    if kind == "result" and payload.state is TrialState.FAILED:
        return payload.error or ""
    if kind == "ready" and payload.get("error"):
        return payload["error"]
    return None


def _last_line(text: str | None) -> str:
    """The line of an error that names it: a traceback's last ``SomeError: message`` line (a
    TensorFlow error's message goes on for lines), else its last line."""
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    named = [line for line in lines if _ERROR_LINE.match(line)]
    line = (named or lines or ["no error text"])[-1]
    return line if len(line) <= 300 else line[:297] + "..."
