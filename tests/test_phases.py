"""Phases add the seconds of each block and count them; a mark keeps its first time."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from study import phases as phases_module
from study.phases import Mark, Phase, Phases


def test_phases_add_and_marks_keep_the_first_time(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([100.0, 100.25])  # a block of 0.25 s on a fake clock
    monkeypatch.setattr(phases_module, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    phases = Phases()
    with phases.timing(Phase.FITS):
        pass
    monkeypatch.undo()
    phases.add(Phase.FITS, 1.0)
    phases.add(Phase.DECISIONS, 2.0, count=0)
    phases.mark(Mark.FIRST_TRIAL)
    first = phases.marks[Mark.FIRST_TRIAL.value]
    phases.mark(Mark.FIRST_TRIAL)
    shot = phases.snapshot()
    assert shot["seconds"]["fits"] == 1.25 and shot["counts"]["fits"] == 2
    assert shot["seconds"]["decisions"] == 2.0 and shot["counts"]["decisions"] == 0
    assert shot["marks"] == {"first_trial": first}
