"""The analysis runs its linear algebra on one BLAS thread and gives the caller's setting back."""

from __future__ import annotations

from typing import Any

import pytest
import threadpoolctl

from study.analysis.surrogate import fit_surrogate
from study.analysis.threads import one_blas_thread
from tests.analysis.test_descents import trials_frame


def blas_threads() -> set[int]:
    return {
        lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"
    }


def test_a_decorated_function_runs_on_one_blas_thread_and_the_setting_comes_back() -> None:
    seen: list[set[int]] = []

    @one_blas_thread
    def inner() -> str:
        seen.append(blas_threads())
        return "done"

    @one_blas_thread
    def outer() -> str:
        seen.append(blas_threads())
        result = inner()
        seen.append(blas_threads())
        return result

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        assert outer() == "done"
        assert seen == [{1}, {1}, {1}]
        assert blas_threads() == {2}


def test_the_surrogate_fit_runs_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import study.analysis.surrogate as surrogate

    seen: list[set[int]] = []
    fit = surrogate._fit

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(blas_threads())
        return fit(*args, **kwargs)

    monkeypatch.setattr(surrogate, "_fit", watched)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        result = fit_surrogate(trials_frame())
        assert blas_threads() == {2}
    assert result.ok and seen and all(s == {1} for s in seen)


def test_the_limit_set_from_the_main_thread_holds_in_every_thread() -> None:
    import threading

    from study.analysis.threads import one_blas_thread_everywhere

    seen: list[set[int]] = []
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        with one_blas_thread_everywhere():
            worker = threading.Thread(target=lambda: seen.append(blas_threads()))
            worker.start()
            worker.join(10)
        assert blas_threads() == {2}
    assert seen == [{1}]


def test_kerastuners_draws_run_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the oracle's process nothing else limits BLAS: its GP's fits spun OpenBLAS' threads
    (the MLP question's draws took 48-450 CPU-ms each instead of 21-74)."""
    import study.tuners.keras_tuner_oracle as kt_oracle
    from study.config.studyfile import parse_study
    from study.tuners.keras_tuner_records import DrawRequest
    from tests.runner.test_oracle_process import STRATUM, STUDY

    seen: list[set[int]] = []
    derive = kt_oracle.derive

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(blas_threads())
        return derive(*args, **kwargs)

    monkeypatch.setattr(kt_oracle, "derive", watched)
    worker = kt_oracle.OracleWorker(parse_study(STUDY, "oracle.yaml"))
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        draw = worker.draw(DrawRequest(STRATUM, None, 0, ()))
        seen.append(blas_threads())
        worker.redraw(1)
        assert blas_threads() == {2}
    assert draw is not None and seen == [{1}, {2}]
