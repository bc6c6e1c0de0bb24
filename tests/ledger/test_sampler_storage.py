"""`study.ledger.sampler_storage`: inside a trial's set-up a stratum study's reads come from the
ledger's recent read and its writes to the trial being set up wait for the reservation;
outside it every call reaches the storage."""

from __future__ import annotations

from pathlib import Path

from study.config.space import Stratum
from study.ledger import Ledger

S32 = Stratum(32, "default")


def spied(ledger: Ledger) -> list[int]:
    calls: list[int] = []
    storage = ledger.storage
    read = storage.get_all_trials

    def counted(study_id, *args, **kwargs):
        calls.append(study_id)
        return read(study_id, *args, **kwargs)

    storage.get_all_trials = counted  # type: ignore[method-assign]
    return calls


def test_a_set_up_reads_once_and_holds_the_samplers_writes(tmp_path: Path) -> None:
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", "s")
    calls = spied(ledger)
    with ledger.recent():
        slot = ledger.claim(S32, budget=3, grace=60.0)
        assert slot is not None and len(calls) == 1  # the budget check
        study = slot.trial.study
        assert [t.number for t in study.get_trials(deepcopy=False)] == [slot.number]
        assert len(calls) == 1  # the sampler's read: the claim's
        study._storage.set_trial_system_attr(slot.trial._trial_id, "tpe:relative_params:0", "{}")
        stored = ledger.storage.get_trial(slot.trial._trial_id)
        assert "tpe:relative_params:0" not in stored.system_attrs  # held
        assert "tpe:relative_params:0" in ledger.tuning.frozen(slot).system_attrs  # and seen
        ledger.tuning.reserve(slot, {"learning_rate": 0.1, "seed": None})
    stored = ledger.storage.get_trial(slot.trial._trial_id)
    assert stored.system_attrs["tpe:relative_params:0"] == "{}"  # written with the reservation


def test_outside_a_set_up_every_call_reaches_the_storage(tmp_path: Path) -> None:
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", "s")
    slot = ledger.claim(S32, budget=3, grace=60.0)
    assert slot is not None
    calls = spied(ledger)
    study = slot.trial.study
    study.get_trials(deepcopy=False)
    study.get_trials(deepcopy=False)
    assert len(calls) == 2
    study._storage.set_trial_system_attr(slot.trial._trial_id, "k", 1)
    assert ledger.storage.get_trial(slot.trial._trial_id).system_attrs["k"] == 1
