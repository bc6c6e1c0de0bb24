"""The study's notes as typed records: each stored form is JSON-safe and reads back, and what
older ledgers stored (fewer keys, numpy numbers, NaN) still reads."""

from __future__ import annotations

import json
import math

import numpy as np

from study.config.space import Stratum
from study.ledger.notes import PILOT_KEYS, AllocationState, Decision, Pilot, ThroughputRow
from tests.fakes import PILOT


def test_a_pilots_stored_form_is_json_safe_and_reads_back() -> None:
    stored = PILOT.to_stored()
    assert tuple(stored) == PILOT_KEYS
    assert stored["b_simple_high"] is None and stored["curve"][1] == [480, 25.0, 18.0, None]
    json.dumps(stored, allow_nan=False)
    back = Pilot.from_stored(stored)
    assert back.b_simple == 25.0 and math.isnan(back.b_simple_high)
    assert back.curve[1][:3] == (480, 25.0, 18.0) and back.measured
    assert not Pilot.from_stored({**stored, "b_simple": None}).measured


def test_a_throughput_row_stores_its_measurement_always_and_the_rest_where_known() -> None:
    row = ThroughputRow(128, "mirrored:2", 2, 0.0021, samples=(0.002, 0.0021))
    assert row.to_stored() == {
        "batch_size": 128,
        "strategy": "mirrored:2",
        "replicas": 2,
        "seconds_per_step": 0.0021,
        "seconds_low": None,
        "seconds_high": None,
        "samples": [0.002, 0.0021],
    }
    full = ThroughputRow(64, "default", 1, 0.5, hardware="2 x CPU", steps=100, error=None)
    assert ThroughputRow.from_stored(full.to_stored()) == full
    assert row.key == (128, "mirrored:2")


def test_an_older_probes_row_reads_with_its_unknown_keys_kept() -> None:
    old = {"batch_size": np.int64(64), "strategy": "default", "seconds_per_step": np.nan, "v": 1}
    row = ThroughputRow.from_stored(old)
    assert (row.batch_size, row.seconds_per_step, row.replicas) == (64, None, None)
    assert type(row.batch_size) is int and row.extras == {"v": 1}
    assert row.to_stored()["v"] == 1
    numpy = ThroughputRow(64, "default", 1, np.float64(math.inf)).to_stored()
    assert numpy["seconds_per_step"] is None  # non-finite: None, never NaN in JSON


def test_an_allocation_state_reads_back_and_its_decisions_say_why() -> None:
    state = AllocationState(
        total=20,
        round=1,
        rounds=3,
        budgets={Stratum(64, "default"): 5},
        decisions=(Decision(1, "b64/default", 2, "the widest interval"),),
    )
    stored = state.to_stored()
    assert stored["budgets"] == {"b64/default": 5}
    assert stored["decisions"] == [
        {"round": 1, "stratum": "b64/default", "trials": 2, "reason": "the widest interval"}
    ]
    assert AllocationState.from_stored(json.loads(json.dumps(stored))) == state
    assert state.decisions[0].line() == "allocation round 1: b64/default +2: the widest interval"


def test_an_allocation_that_ended_early_keeps_why_and_its_cuts_read_as_minus() -> None:
    reason = "the study's 1,000 training steps are spent (1,110 so far): no more trials"
    state = AllocationState(
        total=16,
        round=1,
        rounds=3,
        budgets={Stratum(16, "default"): 1},
        decisions=(Decision(1, "b16/default", -2, reason),),
        closed=reason,
    )
    stored = state.to_stored()
    assert stored["closed"] == reason and "closed" not in AllocationState(1, 0, 1).to_stored()
    assert AllocationState.from_stored(json.loads(json.dumps(stored))) == state
    assert state.decisions[0].line() == f"allocation round 1: b16/default -2: {reason}"
