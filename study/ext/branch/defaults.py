"""The ``branch:`` section's defaults taken from the finished study (`derive_defaults`).

Left to fixed defaults, branches measure CBS(t) at the wrong place and price: the reference
trains to the budget's end, the branches stop at ``16 x B0``, and CBS is censored at the
largest batch everywhere. A finished study knows better. With ``T`` the examples at which
``B0``'s best trial reached the target (held) and ``T1`` where it first met it (the unit the
reference's cost is told in: the reference counts its first crossing), for every key the
section leaves out:

- ``multipliers``: powers of two from ``B0`` to the first batch size past the study's B_noise
  and critical-batch-size intervals (at least its largest batch size), ``MAX_SIZES`` in all
  (``B0`` included), evenly spaced in log; capped where ``MIN_CHECKPOINTS`` checkpoints of
  one-largest-batch windows would not fit the budget;
- ``window`` and ``checkpoints``: for each count of checkpoints (``MIN_CHECKPOINTS`` to
  ``MAX_CHECKPOINTS``) the longest window (a multiple of the largest batch) with which the
  branches and the reference fit in ``RUNS x PLAN_SHARE`` runs of ``T1``; its last
  checkpoint at the target ``T`` when ``B0``'s progress over the window there stands clear
  of its validation loss's jitter (``progress >= RESOLVE x jitter``, read off its best
  trial's curve: a constant-rate run near its target barely moves, and there any batch size
  with less gradient noise looks as good), else at the latest point before ``T`` where it
  does (``T / 8`` at the earliest); the count whose last checkpoint lies nearest the target
  wins (the more checkpoints on a tie, the longer window where none resolves); the
  checkpoints a factor two apart;
- ``examples`` (the reference's length): one window past the last checkpoint, and on until
  the reference meets the target itself (at most ``UNTIL x T``; planned at ``T1``): its own
  examples to the target are the unit its cost is told in;
- ``max_replicates``, ``max_examples``: rounds of more replicates where CBS is unresolved,
  within what is left of the runs;
- the branches' rates: the study's fitted exponent when its interval is at most
  ``ALPHA_SPREAD`` wide, else ``PRIOR_ALPHA`` for its optimizer (``branch.alpha`` when given
  or for another optimizer), one rate per branch (`study.ext.branch.plan`).

Each value comes with the sentence that says where it came from (`BranchDefaults.why`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from study.ext.branch.section import BranchConfig

__all__ = [
    "PRIOR_ALPHA",
    "ROUNDS_SHARE",
    "RUNS",
    "BranchDefaults",
    "StudyEvidence",
    "derive_defaults",
    "loss_trend",
]

#: The runs of ``B0`` to the target (reference and branches together) the defaults spend.
RUNS = 3.0
#: The share of ``RUNS`` the first round is planned at: the reference's own run to the target
#: (the cost's unit) differs from the best trial's by its seed.
PLAN_SHARE = 0.95
#: The reference trains one window past its last checkpoint, and on until it meets the target
#: itself (up to ``UNTIL x T``): its own examples to the target are the cost's unit.
UNTIL = 1.5
#: Rounds of more replicates stop within this share of ``RUNS`` (and of the reference's own
#: runs once it ran: `study.ext.branch.rounds.round_cap`).
ROUNDS_SHARE = 0.95
MIN_CHECKPOINTS = 3
MAX_CHECKPOINTS = 4
#: Batch sizes, B0 included (three: the level as well as the trend; two read the level badly).
MAX_SIZES = 3
#: A checkpoint resolves when B0's progress over the window is at least this times the jitter
#: of its validation loss (on the MNIST-1D MLP: resolved at 0.9-1.1, not at 0.3-0.5).
RESOLVE = 0.75
#: The most extra replicates per checkpoint later rounds may add.
EXTRA_REPLICATES = 2
#: A fitted exponent whose interval is wider than this is not used for the branches' rates:
#: an exponent near 0 from a thin search runs large batches at B0's rate, whose lower gradient
#: noise drops the loss at once and reads as "as good" (CBS censored at the largest).
ALPHA_SPREAD = 1.5
#: The exponent the branches' rates take then, per optimizer (others: ``branch.alpha``): 1 for
#: SGD keeps ``lr / B``, the gradient noise's temperature, at B0's, so a branch differs from B0's
#: by its progress alone (at 0.5 on the MNIST-1D MLP every batch size up to 1,024 read as good as
#: B0 at every checkpoint; at 1 CBS was 130-137).
PRIOR_ALPHA = {"sgd": 1.0, "momentum": 1.0, "nesterov": 1.0}


@dataclass(frozen=True)
class StudyEvidence:
    """What the finished study says that the branch defaults need: ``B0``, the examples
    ``B0``'s best trial took to the target (``trial`` names it) and where it first met it, the
    study's B_noise and critical batch size (estimate, low, high), its largest batch size, the
    target (its text), and that trial's validation curve (examples, val_loss)."""

    b0: int
    examples_to_target: int | None
    trial: str = ""
    examples_to_first: int | None = None
    b_noise: tuple[float, float, float] | None = None
    critical: tuple[float, float, float] | None = None
    largest: int | None = None
    target: str = "the target"
    curve: tuple[tuple[float, float], ...] = ()
    #: The study's fitted exponent of the best rate (estimate, low, high; None: no fit).
    alpha: tuple[float, float, float] | None = None
    #: The study's optimizer (`study.config.trial.OPTIMIZERS`).
    optimizer: str = "nesterov"

    def alpha_undetermined(self) -> bool:
        """Whether the study has no fitted exponent, or one whose interval is wider than
        ``ALPHA_SPREAD`` (a search too thin to say how the best rate moves with batch size)."""
        if self.alpha is None:
            return True
        return not self.alpha[2] - self.alpha[1] <= ALPHA_SPREAD


@dataclass(frozen=True)
class BranchDefaults:
    """The section with its left-out keys filled (``branch``), the reference's length
    (``examples``, None: the plan's own), the runs of ``T1`` the first round is planned at
    (None: nothing derived), one sentence per derived value (``why``) and the examples at
    which B0's best trial reached the target (``target``, held; ``first``, first met)."""

    branch: BranchConfig
    examples: int | None
    planned_runs: float | None
    why: tuple[str, ...]
    target: int | None = None
    #: Where B0's best trial first met the target (the unit the runs are planned in).
    first: int | None = None
    #: The reference trains on past its end until it meets the target, up to these examples.
    until: int | None = None


def loss_trend(curve: Sequence[tuple[float, float]], at: float) -> tuple[float, float] | None:
    """The validation loss's fall per e-fold of examples at ``at`` (a quadratic in log
    examples fitted to the curve from ``at / 8`` on) and its jitter (the residual standard
    deviation within a factor two of ``at``), or None with too few evaluations."""
    data = np.asarray([(x, y) for x, y in curve if x > 0 and math.isfinite(y)], dtype=float)
    if len(data) < 8:
        return None
    x, y = np.log(data[:, 0]), data[:, 1]
    keep = x >= math.log(at / 8)
    if keep.sum() < 8:
        return None
    coef = np.polyfit(x[keep], y[keep], 2)
    residual = y[keep] - np.polyval(coef, x[keep])
    near = np.abs(x[keep] - math.log(at)) <= math.log(2.0)
    if near.sum() < 4:
        near = np.ones(int(keep.sum()), dtype=bool)
    fall = -float(np.polyval(np.polyder(coef), math.log(at)))
    return fall, float(np.std(residual[near], ddof=1))


def derive_defaults(
    branch: BranchConfig, evidence: StudyEvidence, *, runs: float = RUNS, rates: int = 1
) -> BranchDefaults:
    """The ``branch:`` section ``branch`` with each key it left out (``branch.given``) taken
    from the finished study (see the module docstring), for branches at ``rates`` learning
    rates each (a rate search: several); the section as it is when ``B0``'s trials never
    reached the target."""
    given = branch.given
    b0, t = evidence.b0, evidence.examples_to_target
    if not t:
        why = f"no trial at batch {b0} reached {evidence.target}: the section's own defaults"
        return BranchDefaults(branch, None, None, (why,))
    t = math.ceil(t / b0) * b0
    unit = min(t, evidence.examples_to_first or t)
    budget = runs * PLAN_SHARE * unit
    floor = math.ceil(unit / b0) * b0  # the reference's expected length: on to the target
    found = f"B0's best trial ({evidence.trial or f'batch {b0}'}) reached {evidence.target}"
    in_runs = (
        f"{runs:g} runs of B0 to the target less {1 - PLAN_SHARE:.0%} (the reference's own "
        f"run differs by its seed; a run: {unit:,} examples, {found} first there)"
    )
    values: dict[str, object] = {}
    why: list[str] = []
    r = branch.replicates * rates  # branches per (checkpoint, batch size)
    if "multipliers" in given:
        multipliers = tuple(branch.multipliers)
    else:
        multipliers, said = _multipliers(evidence, budget - floor, r)
        values["multipliers"] = multipliers
        why.append(said)
    largest, sizes = b0 * multipliers[-1], 1 + len(multipliers)
    # window, the number of checkpoints and the last one
    given_count = None
    if "checkpoints" in given:
        given_count = len(branch.checkpoint_examples(branch.examples or t))
    fixed_last = None
    if "checkpoints" in given or ("examples" in given and branch.examples is not None):
        fixed_last = branch.checkpoint_examples(branch.examples or t)[-1]
    fixed_window = None
    if "window" in given and branch.window is not None:
        fixed_window = math.ceil(branch.window / largest) * largest
    count, window, last, said = _design(
        evidence, t, budget, floor, largest, r * sizes,
        count=given_count, window=fixed_window, last=fixed_last,
    )  # fmt: skip
    if fixed_window is None:
        values["window"] = window
        why.append(
            f"window {window:,} examples ({window // largest} steps of batch {largest:,}): the "
            f"longest with which {count} checkpoints x {branch.replicates} replicates "
            f"{f'x {rates} rates ' if rates > 1 else ''}x {sizes} batch sizes and the "
            f"reference fit in {in_runs}"
        )
    if fixed_last is None:
        first = last / 2 ** (count - 1)
        if "first_checkpoint" in given:
            first = last * branch.first_checkpoint
        points = _geometric(first, last, count, b0)
        values["checkpoints"] = points
        why.append(f"checkpoints at {points[0]:,}..{points[-1]:,} examples ({count}): {said}")
    examples = None
    if "examples" not in given or branch.examples is None:
        examples = math.ceil((last + window) / b0) * b0
        why.append(
            f"reference run at batch {b0} to {examples:,} examples (one window past the last "
            f"checkpoint) and on until it meets the target itself, at most "
            f"{math.ceil(UNTIL * t / b0) * b0:,} ({found} at {t:,}, first at {unit:,})"
        )
    reference = max(floor, examples or 0, last + window)
    spent = reference + count * r * sizes * window
    if spent > runs * unit:
        why.append(
            f"these take {spent / unit:.2g} runs of B0 to the target, more than {runs:g}: one "
            f"step of batch {largest:,} per window at {count} checkpoints is the least there is"
        )
    left = int(ROUNDS_SHARE * runs * unit - reference)
    if (
        "max_examples" not in given
        and "max_replicates" not in given
        and left >= (count * r + rates) * sizes * window
    ):
        most = branch.replicates + EXTRA_REPLICATES
        values["max_replicates"] = most
        values["max_examples"] = left
        why.append(
            f"rounds: up to {most} replicates where CBS is unresolved, the branches within "
            f"{left:,} examples ({ROUNDS_SHARE:.0%} of the runs, and of the reference's own "
            "once it ran)"
        )
    derived = dataclasses.replace(branch, **values)  # type: ignore[arg-type]
    until = math.ceil(UNTIL * t / b0) * b0 if examples is not None else None
    return BranchDefaults(derived, examples, spent / unit, tuple(why), t, unit, until)


def _multipliers(
    evidence: StudyEvidence, room: float, replicates: int
) -> tuple[tuple[int, ...], str]:
    """Powers of two from B0 to the first past the study's B_noise (and critical batch size)
    interval, capped where ``MIN_CHECKPOINTS`` checkpoints of windows of one step of the
    largest would not fit in ``room`` examples."""
    b0 = evidence.b0
    reach, source = _reach(evidence)
    top = max(2, math.ceil(math.log2(max(reach, 4 * b0) / b0)))
    afford = room / (MIN_CHECKPOINTS * replicates * MAX_SIZES)
    cap = max(2, math.floor(math.log2(max(afford, 4 * b0) / b0)))
    capped = top > cap
    top = min(top, cap)
    count = min(MAX_SIZES - 1, top)
    multipliers = tuple(sorted({2 ** round(top * i / count) for i in range(1, count + 1)}))
    largest = b0 * multipliers[-1]
    said = f"batch sizes {', '.join(f'{b0 * k:,}' for k in (1, *multipliers))}: "
    if capped:
        return multipliers, said + f"{largest:,}, the largest the runs allow ({source})"
    verb = "reaches" if source.startswith("the study's largest") else "lies past"
    return multipliers, said + f"{largest:,} {verb} {source}"


def _reach(evidence: StudyEvidence) -> tuple[float, str]:
    """The batch size the branches should reach past, and what it is: the highest of the study's
    B_noise and critical-batch-size intervals' ends and its largest batch size (a poorly
    determined fit can put B_noise far below where the branches find CBS)."""
    highs = []
    for name, answer in (("B_noise", evidence.b_noise), ("critical batch size", evidence.critical)):
        if answer is not None and math.isfinite(answer[2]) and answer[2] > 0:
            highs.append((answer[2], f"the study's {name} interval (to {answer[2]:,.0f})"))
    if highs:
        if evidence.largest and evidence.largest >= max(highs)[0]:
            return float(evidence.largest), (
                f"the study's largest batch size {evidence.largest:,}, past {max(highs)[1]}"
            )
        return max(highs)
    for name, answer in (("B_noise", evidence.b_noise), ("critical batch size", evidence.critical)):
        if answer is not None and math.isfinite(answer[0]) and answer[0] > 0:
            return 4 * answer[0], f"4 x the study's {name} {answer[0]:,.0f} (its interval is open)"
    largest = evidence.largest or 16 * evidence.b0
    return float(largest), f"the study's largest batch size {largest:,} (it has no B_noise)"


def _design(
    evidence: StudyEvidence,
    t: int,
    budget: float,
    floor: int,
    largest: int,
    per: int,
    *,
    count: int | None,
    window: int | None,
    last: int | None,
) -> tuple[int, int, int, str]:
    """(checkpoints, window, last checkpoint, why the last): of the checkpoint counts allowed
    (``count``, else ``MIN_CHECKPOINTS`` to ``MAX_CHECKPOINTS``) each with the longest window
    (a multiple of ``largest``; ``window`` when given) that fits with the reference in
    ``budget``, the one whose last checkpoint (`_last`; ``last`` when given) lies nearest the
    target, the more checkpoints on a tie (the longer window where none resolves)."""
    best: tuple[tuple[int, int, int], int, int, int, str] | None = None
    counts = [count] if count else list(range(MAX_CHECKPOINTS, MIN_CHECKPOINTS - 1, -1))
    for n in counts:
        w = window or _longest(budget, floor, largest, n * per)
        if not w:
            if n != counts[-1] or best is not None:
                continue
            w = largest  # nothing fits: the least there is
        point, said = (last, "as given") if last else _last(evidence, t, w)
        room = int((max(floor, budget - n * per * w) - w) // evidence.b0) * evidence.b0
        if not last and point > room >= evidence.b0:  # the reference must fit too
            point = room
            said = (
                f"the last at {room:,}, before the target ({t:,}, where B0's best trial reached "
                "it): there the runs end it (the reference trains one window past it)"
            )
        wide = "CBS will be wide" in said  # unresolved anywhere: the longest window helps most
        key = (point, 0, w) if wide else (point, 1, n)
        if best is None or key > best[0]:
            best = (key, n, w, point, said)
    assert best is not None
    return best[1], best[2], best[3], best[4]


def _longest(budget: float, floor: int, largest: int, branches: int) -> int:
    """The longest window (a multiple of ``largest``) for which ``branches`` windows and the
    reference (``floor`` long, or one window past its last checkpoint when that is further)
    fit in ``budget``; 0 when not even one does."""
    k = max(1, int(budget // (branches * largest)))
    while k > 0 and floor + k * largest + branches * k * largest > budget:
        k -= 1
    return k * largest


def _last(evidence: StudyEvidence, t: int, window: int) -> tuple[int, str]:
    """The last checkpoint: ``t`` where B0's progress over ``window`` stands clear of its
    loss's jitter there, else the latest point before it where it does (``t / 8`` at the
    earliest), with the sentence saying why."""
    target = f"the target ({t:,}, where B0's best trial reached it)"
    for k in range(0, 31):
        at = t * 0.93**k
        if at < t / 8:
            break
        trend = loss_trend(evidence.curve, at)
        if trend is None:
            return t, f"the last at {target}; no loss curve to check its progress against"
        fall, jitter = trend
        progress = fall * math.log1p(window / at)
        if progress >= RESOLVE * jitter:
            point = math.ceil(at / evidence.b0) * evidence.b0
            if k == 0:
                return point, (
                    f"the last at {target}, where B0's progress over the window "
                    f"({progress:.3f} in loss) is {progress / jitter:.2g} x its loss's jitter"
                )
            return point, (
                f"the last at {point:,}, before {target}: only there does B0's progress over "
                f"the window ({progress:.3f} in loss) reach {RESOLVE:g} x its loss's jitter "
                f"({jitter:.3f}); nearer the target the window shows noise, not progress"
            )
    point = math.ceil(t / 8 / evidence.b0) * evidence.b0
    return point, (
        f"the last at {point:,}, an eighth of {target}: B0's progress over the window stays "
        f"below {RESOLVE:g} x its loss's jitter everywhere (CBS will be wide)"
    )


def _geometric(first: float, last: int, count: int, b0: int) -> tuple[int, ...]:
    """``count`` example counts geometric from ``first`` to ``last``, multiples of ``b0``,
    increasing."""
    out: list[int] = []
    for i in range(count):
        x = first * (last / first) ** (i / (count - 1)) if count > 1 else last
        point = max(b0, math.ceil(round(x) / b0) * b0)
        out.append(max(point, out[-1] + b0) if out else point)
    return tuple(out)
