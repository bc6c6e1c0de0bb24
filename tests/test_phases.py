"""Phases add the seconds of each block and count them; a mark keeps its first time."""

from __future__ import annotations

import time

from study.phases import Mark, Phase, Phases


def test_phases_add_and_marks_keep_the_first_time() -> None:
    phases = Phases()
    with phases.timing(Phase.FITS):
        time.sleep(0.01)
    phases.add(Phase.FITS, 1.0)
    phases.add(Phase.DECISIONS, 2.0, count=0)
    phases.mark(Mark.FIRST_TRIAL)
    first = phases.marks[Mark.FIRST_TRIAL.value]
    phases.mark(Mark.FIRST_TRIAL)
    shot = phases.snapshot()
    assert 1.01 <= shot["seconds"]["fits"] < 1.5 and shot["counts"]["fits"] == 2
    assert shot["seconds"]["decisions"] == 2.0 and shot["counts"]["decisions"] == 0
    assert shot["marks"] == {"first_trial": first}
