"""KerasTuner's oracle in a process of its own, so a study's host never imports TensorFlow.

KerasTuner imports Keras, and Keras TensorFlow: about 4 CPU-seconds and a few hundred MB that
a host, which only proposes and records, would pay on top of its trainer workers' TensorFlow.
`OracleProcess` (a `study.tuners.keras_tuner_backend.OracleClient`) runs a
`study.tuners.keras_tuner_oracle.OracleWorker` in a worker process started like the trainer
workers (`study.runner.spawning`: on Linux forked from the server that imported TensorFlow
already, so it is ready in a fraction of a second). `study run` starts it in the background
before its preflight (`warm`: KerasTuner's import, about a second, then overlaps the preflight
instead of holding up the first KerasTuner proposal, which waited 0.8 s for it when the start
came after the preflight); otherwise the first call starts it. It ends with
the run (or with the host: its end of the pipe closes). A call whose process died
(killed with the host's process group, say) starts another and is asked once more; a redraw,
which needs the draw the dead process held, fails naming the process's end.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any

from study.config.study import StudyConfig
from study.runner import spawning

#: Seconds to wait for the oracle process to end once its pipe is closed.
_STOP_TIMEOUT_S = 5.0


class OracleProcess:
    """The oracle of ``config``'s study in a process of its own, started by `warm` or on the
    first call."""

    def __init__(self, config: StudyConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._conn: Any = None
        self._process: Any = None
        self._closed = False
        self._answered = False  # the process has answered a call

    def call(self, method: str, *args: Any) -> Any:
        """``OracleWorker.<method>(*args)`` in the oracle process.

        Raises:
            RuntimeError: the oracle raised (its message), or its process ended (twice for a
                draw, once for a redraw).
        """
        # Only a draw is asked again: a new process holds no draw for a redraw to repeat.
        attempts = 2 if method == "draw" else 1
        with self._lock:
            for attempt in range(attempts):
                try:
                    conn = self._started()
                    conn.send((method, args))
                    ok, value = conn.recv()
                    self._answered = True
                except (EOFError, OSError) as exc:
                    self._stop()
                    if attempt == attempts - 1:
                        raise RuntimeError(
                            f"KerasTuner's oracle process ended ({type(exc).__name__}: {exc})"
                        ) from exc
                    continue
                if not ok:
                    raise RuntimeError(f"KerasTuner's oracle failed: {value}")
                return value
        raise AssertionError("unreachable")  # pragma: no cover

    def warm(self) -> None:
        """Start the process now, from a thread of its own, without waiting for it: the first
        call then finds it ready (or waits for the start under way). A start that fails here is
        made again by the first call, which says why."""
        threading.Thread(target=self._warm, name="study-oracle-warm", daemon=True).start()

    def _warm(self) -> None:
        with self._lock, contextlib.suppress(Exception):
            if not self._closed:  # a run that ended before this thread got the lock
                self._started()

    def close(self) -> None:
        """End the oracle process (if it was started)."""
        with self._lock:
            self._closed = True
            self._stop()

    @property
    def pid(self) -> int | None:
        """The oracle process's id while it runs."""
        return None if self._process is None else self._process.pid

    def _started(self) -> Any:
        if self._conn is None:
            ours, theirs = spawning.context().Pipe()
            process = spawning.process(serve, (theirs, self.config), name="study-oracle")
            spawning.start(process)  # from the process-wide spawner thread
            theirs.close()
            self._conn, self._process = ours, process
        return self._conn

    def _stop(self) -> None:
        """End the process: once it has answered, by closing its pipe and waiting for it; one
        that never answered (started by `warm`, maybe still importing KerasTuner) holds nothing
        and is killed at once, so a run with nothing to propose does not wait for its import."""
        conn, process, answered = self._conn, self._process, self._answered
        self._conn = self._process = None
        self._answered = False
        if conn is not None:
            conn.close()  # the process sees the end of its pipe and returns
        if process is not None and not answered and process.is_alive():
            process.kill()
        if process is not None:
            process.join(_STOP_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join(_STOP_TIMEOUT_S)


def serve(conn: Any, config: StudyConfig) -> None:
    """The oracle process: answer ``(method, args)`` requests with ``(True, result)`` or
    ``(False, "Error: message")`` until the pipe closes (Ctrl-C is ignored: the host stops
    and closes the pipe)."""
    from study.analysis.threads import find_blas
    from study.deps import quiet_stderr, without_keras_extras

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the host's to handle; it closes us
    # Forked from the server, TensorFlow is imported already; spawned, it is imported here.
    with quiet_stderr(), without_keras_extras(("matplotlib",)):
        from study.tuners.keras_tuner_oracle import OracleWorker
    find_blas()  # before the first draw, which runs on one BLAS thread
    worker = OracleWorker(config)
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer = (True, getattr(worker, method)(*args))
        except Exception as exc:  # the host raises it as a RuntimeError naming it
            answer = (False, f"{type(exc).__name__}: {exc}")
        try:
            conn.send(answer)
        except (EOFError, OSError):
            return
