"""How a ledger names its strata (`StratumNaming`): every naming round-trips its strata and
claims no other study's; a ledger given a naming keeps its strata apart from the search's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from study.config.space import Stratum
from study.ext.schedules.ledger import SCHEDULE_ATTR, SCHEDULE_STRATA, ScheduleStratum
from study.ledger import Ledger, StudyRecord
from study.ledger.naming import SEARCH_STRATA, StratumNaming

#: Each naming with a stratum of its own and the attributes its stratum study carries.
NAMINGS: dict[str, tuple[StratumNaming, Stratum, dict[str, Any]]] = {
    "search": (SEARCH_STRATA, Stratum(128, "default"), {"batch_size": 128, "strategy": "default"}),
    "schedule": (
        SCHEDULE_STRATA,
        ScheduleStratum(32, "mirrored:2", "1a2b3c4d"),
        {"batch_size": 32, "strategy": "mirrored:2", "digest": "1a2b3c4d", SCHEDULE_ATTR: "{}"},
    ),
}


@pytest.mark.parametrize("kind", NAMINGS)
def test_a_naming_reads_its_strata_back_and_no_other_study(kind: str) -> None:
    naming, stratum, attrs = NAMINGS[kind]
    name = naming.name("mnist", stratum)
    assert naming.of("mnist", name, attrs) == stratum
    others = [
        "mnist",  # the study's root
        "mnist2/b128/default",  # another study whose name starts alike
        "schedule:mnist2/1a2b3c4d/b32/mirrored:2",
        "branches:mnist/tasks",
        "allocation:mnist#0/round-1",
        *(n.name("mnist", s) for n, s, _ in NAMINGS.values() if n is not naming),
    ]
    assert [naming.of("mnist", other, attrs) for other in others] == [None] * 6


def test_the_search_reads_a_stratum_without_attributes_from_its_name() -> None:
    assert SEARCH_STRATA.name("s", Stratum(64, "mirrored:2")) == "s/b64/mirrored:2"
    assert SEARCH_STRATA.of("s", "s/b64/mirrored:2", {}) == Stratum(64, "mirrored:2")


def test_a_schedule_cell_counts_once_its_schedule_is_stored() -> None:
    _, cell, attrs = NAMINGS["schedule"]
    name = SCHEDULE_STRATA.name("mnist", cell)
    assert name == "schedule:mnist/1a2b3c4d/b32/mirrored:2"
    bare = {k: v for k, v in attrs.items() if k != SCHEDULE_ATTR}
    assert SCHEDULE_STRATA.of("mnist", name, bare) is None


@dataclass(frozen=True)
class Pilots:
    """A naming of the test's own: ``pilot:NAME/b{batch}/{strategy}``."""

    def name(self, study: str, stratum: Stratum) -> str:
        return f"pilot:{study}/{stratum}"

    def of(self, study: str, study_name: str, attrs: Mapping[str, Any]) -> Stratum | None:
        prefix = f"pilot:{study}/"
        return Stratum.parse(study_name[len(prefix) :]) if study_name.startswith(prefix) else None


def test_a_ledger_given_a_naming_keeps_its_trials_apart_from_the_search(tmp_path: Path) -> None:
    url = str(tmp_path / "ledger.journal")
    search = Ledger.open(url, "s")
    search.create(StudyRecord("s", config_text="name: s", trials_total=2))
    pilots = Ledger(search.storage, "s", search.clock, Pilots())
    stratum = Stratum(32, "default")
    assert [pilots.claim(stratum, budget=1) is not None for _ in range(2)] == [True, False]
    assert search.claim(stratum, budget=1) is not None  # a budget of its own
    assert pilots.strata() == search.strata() == [stratum]
    assert [t.status.value for t in pilots.trials(stratum)] == ["running", "discarded"]
    assert [t.status.value for t in search.trials(stratum)] == ["running"]
    assert "pilot:s/b32/default" in [s.study_name for s in search.storage.get_all_studies()]
