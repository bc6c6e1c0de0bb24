"""The ledger repository on a real Optuna journal: claims within budget, records and their
Optuna view, recovery of trials whose process died, summaries, measurement rows, imports."""

from __future__ import annotations

import ast
import copy
import threading
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState as OptunaState

from study.config.space import Stratum
from study.config.target import Target
from study.errors import UsageError
from study.ext.schedules.ledger import ScheduleLedger
from study.ledger import Ledger, StudyRecord, list_studies, open_storage
from study.ledger.access import StorageAccess
from study.ledger.claims import Claims
from study.ledger.liveness import Liveness
from study.ledger.reading import TrialReader
from study.ledger.study_notes import StudyNotes
from study.ledger.tuning import TunerState
from study.results import Measurement, TrialResult, TrialState
from tests.fakes import finished_trial, rising_curve

S32 = Stratum(32, "default")
S64 = Stratum(64, "default")
TARGET = Target.parse("val_accuracy>=0.6")


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.open(str(tmp_path / "ledger.journal"), "s")
    ledger.create(StudyRecord("s", config_text="name: s", trials_total=4))
    return ledger


def optuna_trials(ledger: Ledger, stratum: Stratum) -> list[optuna.trial.FrozenTrial]:
    """The stratum's trials as Optuna (and optuna-dashboard) sees them."""
    return optuna.load_study(study_name=f"{ledger.name}/{stratum}", storage=ledger.storage).trials


def result(state: TrialState, steps: int = 50) -> TrialResult:
    curve = (Measurement(0, 0, 0.0, 2.0, {"val_accuracy": 0.1}),) + (
        (Measurement(steps, steps * 32, 0.1, 0.5, {"val_accuracy": 0.7}),) if steps else ()
    )
    return TrialResult(
        state=state,
        steps_run=steps,
        steps_to_target=steps if state is TrialState.REACHED else None,
        curve=curve,
    )


def run_one(ledger: Ledger, stratum: Stratum, lr: float, res: TrialResult, objective: float):
    slot = ledger.claim(stratum, budget=10)
    assert slot is not None
    slot.trial.suggest_float("learning_rate", 1e-3, 1.0, log=True)
    ledger.tuning.record_params(
        slot,
        {"learning_rate": lr},
        {"learning_rate": optuna.distributions.FloatDistribution(1e-3, 1.0, log=True)},
    )
    ledger.start(slot, tuner="optuna", origin="sampler")
    return ledger.finish(slot, res, objective)


def test_claims_never_exceed_the_budget_even_from_many_threads(ledger: Ledger) -> None:
    slots = []
    lock = threading.Lock()

    def claim() -> None:
        while (slot := ledger.claim(S32, budget=3)) is not None:
            with lock:
                slots.append(slot)

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(slots) == 3 and ledger.remaining(S32, 3) == 0
    statuses = [t.status for t in ledger.trials(S32)]
    assert statuses.count(TrialState.RUNNING) == 3
    assert set(statuses) <= {TrialState.RUNNING, TrialState.DISCARDED}
    assert all(not t.open for t in ledger.trials(S32) if t.status is TrialState.DISCARDED)


@pytest.mark.parametrize(
    ("state", "optuna_state"),
    [
        (TrialState.REACHED, OptunaState.COMPLETE),
        (TrialState.NOT_REACHED, OptunaState.COMPLETE),
        (TrialState.DIVERGED, OptunaState.COMPLETE),
        (TrialState.PRUNED, OptunaState.PRUNED),
        (TrialState.FAILED, OptunaState.FAIL),
        (TrialState.INFEASIBLE, OptunaState.FAIL),
    ],
)
def test_finished_trials_read_back_and_optuna_sees_them(
    ledger: Ledger, state: TrialState, optuna_state: OptunaState
) -> None:
    trial = run_one(ledger, S32, 0.1, result(state), 123.0)
    assert (trial.status, trial.open, trial.tuner, trial.origin) == (
        state,
        False,
        "optuna",
        "sampler",
    )
    assert trial.result is not None and trial.result.curve == result(state).curve
    (seen,) = optuna_trials(ledger, S32)
    assert seen.state is optuna_state and seen.params == {"learning_rate": 0.1}
    if optuna_state is OptunaState.COMPLETE:
        assert seen.value == 123.0
    if state is TrialState.PRUNED:  # the steps it ran, a lower bound (`optuna_view`)
        assert seen.value == 50.0 and seen.user_attrs["steps_more_than"] == 50
        assert seen.intermediate_values == {}  # no target given: no distances to it


def test_best_and_summary(ledger: Ledger) -> None:
    run_one(ledger, S32, 0.3, result(TrialState.REACHED, 40), 40)
    run_one(ledger, S32, 0.1, result(TrialState.REACHED, 40), 40)
    run_one(ledger, S32, 0.2, result(TrialState.PRUNED, 40), 5000)
    run_one(ledger, S64, 0.5, result(TrialState.NOT_REACHED, 100), 4000)
    best = ledger.best(S32)
    assert best is not None and (best.number, best.learning_rate) == (1, 0.1)
    assert ledger.best(S64) is None
    summary = ledger.summary()
    assert (summary.state, summary.trials_done, summary.trials_total) == ("complete", 4, 4)
    rows = {str(s.stratum): s.to_dict() for s in summary.strata}
    assert rows["b32/default"]["statuses"] == {"reached": 2, "pruned": 1}
    assert (rows["b32/default"]["best_steps"], rows["b32/default"]["best_trial"]) == (40, 1)
    assert rows["b64/default"]["best_steps"] is None


def test_an_allocation_that_ended_early_makes_the_trials_it_gave_the_total(
    ledger: Ledger,
) -> None:
    from study.ledger import AllocationState, Decision

    run_one(ledger, S32, 0.3, result(TrialState.REACHED, 40), 40)
    assert ledger.summary().state == "incomplete"  # 1 of the record's 4
    reason = "the study's 100 training steps are spent (140 so far): no more trials"
    ledger.notes.set_allocation(
        AllocationState(
            4, 1, 3, {S32: 1, S64: 0}, (Decision(1, "b64/default", -3, reason),), closed=reason
        )
    )
    summary = ledger.summary()
    assert (summary.state, summary.trials_done, summary.trials_total) == ("complete", 1, 1)
    assert summary.to_dict()["ended"] == reason


def test_interrupted_and_stale_trials_free_their_slot(ledger: Ledger) -> None:
    slot = ledger.claim(S32, budget=2)
    assert slot is not None
    ledger.interrupt(slot)
    assert ledger.trials(S32)[0].status is TrialState.INTERRUPTED
    assert ledger.remaining(S32, 2) == 2
    # a trial claimed by a process that is gone: a pid that cannot exist on this host
    stale = ledger.claim(S32, budget=2)
    assert stale is not None
    stale.trial.set_user_attr("owner", f"{stale.owner.split(':')[0]}:999999999:0")
    assert ledger.summary().strata[0].running == 0  # not counted as running
    (recovered,) = ledger.liveness.recover_stale([S32])
    assert recovered.number == stale.number
    after = ledger.trials(S32)[stale.number]
    assert (after.status, after.open) == (TrialState.INTERRUPTED, False)
    assert optuna_trials(ledger, S32)[stale.number].state is OptunaState.FAIL
    assert ledger.liveness.recover_stale([S32]) == []


def test_a_slot_whose_proposal_failed_is_closed_once(ledger: Ledger) -> None:
    slot = ledger.claim(S32, budget=2)
    assert slot is not None
    trial = ledger.fail(slot, "Traceback ...\nValueError: bad proposal")
    assert trial.status is TrialState.FAILED and not trial.open
    assert ledger.fail(slot, "again").status is TrialState.FAILED  # idempotent


def test_window_is_kept_per_stratum(ledger: Ledger) -> None:
    assert ledger.tuning.window(S32) is None
    ledger.tuning.set_window(S32, (0.01, 1.0), 0.1)
    assert ledger.tuning.window(S32) == (0.01, 1.0) and ledger.tuning.window(S64) is None


def test_measurement_rows_in_start_order_without_uncounted_trials(ledger: Ledger) -> None:
    run_one(ledger, S64, 0.5, result(TrialState.REACHED, 30), 30)
    discarded = ledger.claim(S32, budget=0)
    assert discarded is None
    running = ledger.claim(S32, budget=5)
    assert running is not None
    run_one(ledger, S32, 0.1, result(TrialState.REACHED, 40), 40)
    rows = ledger.measurement_rows()
    assert [(str(t.stratum), t.status.value) for t, _ in rows] == [
        ("b64/default", "reached"),
        ("b32/default", "running"),
        ("b32/default", "reached"),
    ]
    assert rows[0][1][-1]["val_accuracy"] == 0.7 and rows[1][1] == []
    assert len(ledger.measurement_rows(include_running=False)) == 2


def test_import_then_delete_leaves_nothing(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "j.journal"), "imported")
    ledger.create(StudyRecord("imported", kind="imported", source="x", trials_total=2))
    curve = rising_curve(32, 20)
    trials = [finished_trial(S32, n, lr, curve, TARGET) for n, lr in enumerate((0.1, 0.2))]
    ledger.import_trials(S32, trials)
    assert [t.learning_rate for t in ledger.trials(S32)] == [0.1, 0.2]
    assert ledger.summary().state == "imported"
    assert [t.state for t in optuna_trials(ledger, S32)] == [OptunaState.COMPLETE] * 2
    ledger.delete()
    assert ledger.storage.get_all_studies() == []


def test_delete_takes_the_adaptive_allocations_round_claims_with_it(tmp_path: Path) -> None:
    """The claims `StudyNotes.claim_round` leaves in the storage go with their study, not
    another's (a study whose name extends this one's keeps its own), and a study made anew
    claims afresh."""
    journal = str(tmp_path / "j.journal")
    ledgers = {name: Ledger.open(journal, name) for name in ("s", "s#1")}
    for name, ledger in ledgers.items():
        ledger.create(StudyRecord(name))
        assert ledger.notes.claim_round(0) and ledger.notes.claim_round(1)
    other = ledgers["s#1"].storage.get_study_id_from_name("s#1")
    ledgers["s"].delete()
    left = sorted(s.study_name for s in open_storage(journal).get_all_studies())
    assert left == [f"allocation:s#1#{other}/round-{k}" for k in (0, 1)] + ["s#1"]
    again = Ledger.open(journal, "s")
    again.create(StudyRecord("s"))
    assert again.notes.claim_round(0)


def test_unknown_study_is_bad_input(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "j.journal"), "nope")
    assert ledger.record() is None
    with pytest.raises(UsageError, match=r"no study named 'nope'.*study ls"):
        ledger.summary()


def test_studies_are_listed_without_their_strata(ledger: Ledger) -> None:
    run_one(ledger, S32, 0.1, result(TrialState.REACHED), 50)
    assert list_studies(ledger.storage) == ["s"]


def test_unusable_storage_url_is_bad_input() -> None:
    with pytest.raises(UsageError, match=r"^storage: cannot open 'nosuchdb://x/y'"):
        open_storage("nosuchdb://x/y")


def test_sqlite_storage_url_opens(tmp_path: Path) -> None:
    storage = open_storage(f"sqlite:///{tmp_path}/o.db")
    assert storage.get_all_studies() == []


def test_a_closed_trial_is_decoded_once_and_a_running_one_at_every_read(ledger: Ledger) -> None:
    stratum = Stratum(32, "default")
    run_one(ledger, stratum, 0.1, result(TrialState.REACHED), 50.0)
    running = ledger.claim(stratum, 5)
    assert running is not None
    first, second = ledger.trials(stratum), ledger.trials(stratum)
    assert first[0] is second[0] and first[0].status is TrialState.REACHED
    assert first[1] is not second[1] and first[1].status is TrialState.RUNNING
    ledger.finish(running, result(TrialState.NOT_REACHED), 900.0)
    assert ledger.trials(stratum)[1].status is TrialState.NOT_REACHED  # closed since: read anew


def test_a_recent_read_again_is_decoded_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside `recent` a stratum read again is the same stored list: its trials, the running one
    too, are decoded once; a copy of the list is returned, so a caller may change its own."""
    run_one(ledger, S32, 0.1, result(TrialState.REACHED), 50.0)
    assert ledger.claim(S32, 5) is not None
    decoded = []
    real = StorageAccess._decode_now
    monkeypatch.setattr(
        StorageAccess, "_decode_now", staticmethod(lambda s, f: decoded.append(f) or real(s, f))
    )
    ledger.access._decoded.clear()
    with ledger.recent():
        first = ledger.trials(S32)
        first.clear()
        second, third = ledger.trials(S32), ledger.trials(S32)
    assert len(decoded) == 2 and len(second) == 2
    assert all(a is b for a, b in zip(second, third, strict=True))
    assert second[1].status is TrialState.RUNNING
    ledger.trials(S32)  # outside `recent`: read again, the running trial decoded again
    assert len(decoded) == 3


def test_strata_not_made_yet_read_every_study_once_a_recent_window(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside `recent`, a stratum with no study yet (the first pass's) does not read every
    study of the storage at each read; outside it, or once `RECENT_S` passed, it does."""
    run_one(ledger, S32, 0.1, result(TrialState.REACHED), 50.0)
    reads = []
    real = ledger.storage.get_all_studies
    monkeypatch.setattr(ledger.storage, "get_all_studies", lambda: reads.append(1) or real())
    unmade = [Stratum(b, "default") for b in (64, 128, 256)]
    ledger.access._learnt_at -= 11.0  # the last read of every study: RECENT_S ago
    with ledger.recent():
        for _ in range(3):
            assert [ledger.trials(s) for s in unmade] == [[], [], []]
        assert len(ledger.trials(S32)) == 1
    assert len(reads) == 1
    assert ledger.trials(S64) == []  # outside `recent`: read again
    assert len(reads) == 2
    with ledger.recent():
        ledger.access._learnt_at -= 11.0  # RECENT_S ago
        assert ledger.trials(S64) == []
    assert len(reads) == 3


def test_the_ledger_is_its_parts_not_a_chain_of_classes(ledger: Ledger) -> None:
    """`Ledger` and each of its parts inherit nothing; a ledger of other trials
    (`ScheduleLedger`) overrides nothing (how it names its strata is a `StratumNaming`)."""
    parts = (StorageAccess, TrialReader, Claims, Liveness, TunerState, StudyNotes)
    assert [cls.__bases__ for cls in (Ledger, *parts)] == [(object,)] * 7
    held = (ledger.access, ledger.reader, ledger.claims, ledger.liveness, ledger.tuning)
    assert [type(part) for part in (*held, ledger.notes)] == list(parts)
    inherited = {name for name in dir(Ledger) if not name.startswith("__")}
    assert set(vars(ScheduleLedger)) & inherited == set()


def test_the_parts_reach_one_another_through_public_names_only() -> None:
    """No module of the ledger reads or writes another object's ``_name`` (its own, on
    ``self``, are its business)."""
    package = Path(__file__).resolve().parents[2] / "study" / "ledger"
    reaches = [
        f"{path.name}:{node.lineno}: {ast.unparse(node)}"
        for path in sorted(package.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]
    assert reaches == []


def test_a_claim_through_the_claims_part_is_read_by_the_reader(ledger: Ledger) -> None:
    slot = ledger.claims.claim(S32, budget=1)
    assert slot is not None and ledger.claims.claim(S32, budget=1) is None
    assert [t.number for t in ledger.reader.counted(S32)] == [slot.number]
    assert ledger.taken(S32, 1) == 1 and ledger.remaining(S32, 1) == 0


def test_a_read_under_way_when_this_process_closes_a_trial_is_not_kept(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One thread reads a stratum inside `recent` while another closes a trial of it: the
    read, begun before the close, is not kept for the readers after it, who see the trial
    closed (kept, it read as running for `RECENT_S`: a round by steps counted its steps as
    still to come and ended a two-worker study early)."""
    run_one(ledger, S32, 0.1, result(TrialState.REACHED), 50.0)
    running = ledger.claim(S32, 5)
    assert running is not None
    read, resume = threading.Event(), threading.Event()
    real = ledger.storage.get_all_trials

    def slow_read(*args, **kwargs):
        trials = copy.deepcopy(real(*args, **kwargs))  # as stored before the close
        if threading.current_thread().name == "reader":
            read.set()
            assert resume.wait(10)
        return trials

    monkeypatch.setattr(ledger.storage, "get_all_trials", slow_read)
    ledger.access.forget_read(S32)  # the claim's own read: the reader reads the storage
    seen = []

    def reader() -> None:
        with ledger.recent():
            seen.append(ledger.trials(S32)[1].status)

    thread = threading.Thread(target=reader, name="reader")
    thread.start()
    assert read.wait(10)
    ledger.finish(running, result(TrialState.NOT_REACHED), 900.0)
    resume.set()
    thread.join(10)
    assert seen == [TrialState.RUNNING]  # its own read: taken before the close
    with ledger.recent():
        assert ledger.trials(S32)[1].status is TrialState.NOT_REACHED
