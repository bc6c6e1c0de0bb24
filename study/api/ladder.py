"""`study.fit_ladder`: finished studies at growing training-set sizes joined into a ladder, the
laws of the answers in the data size, and the answer at a data size no rung trained on
(`study.analysis.data_ladder`), as ``study ladder`` prints it::

    ladder = study.fit_ladder(["d5k", "d10k", "d20k"])     # sizes the trials recorded
    ladder.rungs              # one row per rung: data_size, b_noise, critical_batch, ... with intervals
    ladder.laws["b_noise"].text()          # "B_noise ~ D^0.52 (0.31 to 0.73)"
    ladder.law_table          # one row per quantity: the exponent and its interval
    ladder.predict(40_000).critical_batch  # an interval for the answer there; refused past the laws' support
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from study.api.arguments import in_arguments, level, positive_int, text
from study.errors import FieldError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from study.analysis.data_ladder import DataLadder, LadderPrediction
    from study.analysis.data_law import DataLaw
    from study.api.studies import Study
    from study.config.target import Target


@dataclass(frozen=True)
class Ladder:
    """The ladder (see the module): ``rungs`` (one row per rung, smallest first: ``study``,
    ``data_size``, ``ok``, ``reason``, ``training_steps``, ``training_examples`` and
    ``b_noise``, ``critical_batch``,
    ``recommended_batch``, ``recommended_lr`` with ``_low``/``_high``), ``laws`` (the
    `DataLaw` of each, by quantity), ``law_table`` (one row per law) and ``ladder`` (all of
    it, as ``study ladder`` reads it)."""

    ladder: DataLadder = field(repr=False)
    rungs: pd.DataFrame = field(repr=False, compare=False)
    laws: Mapping[str, DataLaw] = field(repr=False)
    law_table: pd.DataFrame = field(repr=False, compare=False)

    @classmethod
    def of(cls, ladder: DataLadder) -> Ladder:
        import pandas as pd

        rows = [
            {
                "quantity": q,
                "name": law.name,
                "ok": law.ok,
                "exponent": law.exponent.estimate if law.exponent else float("nan"),
                "exponent_low": law.exponent.low if law.exponent else float("nan"),
                "exponent_high": law.exponent.high if law.exponent else float("nan"),
                "scale": law.scale,
                "tau": law.tau,
                "rungs": len(law.sizes),
                "text": law.text(),
            }
            for q, law in ladder.laws.items()
        ]
        return cls(ladder, ladder.frame(), dict(ladder.laws), pd.DataFrame(rows))

    def predict(self, data_size: float) -> LadderPrediction:
        """The answers at ``data_size`` training examples with intervals for the answer there; past the
        laws' support ``ok`` is False and ``reason`` says why.

        Raises:
            UsageError: ``data_size`` is not a positive number.
        """
        if isinstance(data_size, bool) or not isinstance(data_size, (int, float)):
            raise FieldError("data_size", "must be a positive number of examples", data_size)
        if not data_size > 0:
            raise FieldError("data_size", "must be a positive number of examples", data_size)
        return self.ladder.predict(float(data_size))

    def __repr__(self) -> str:
        from study.report.ladder import ladder_lines

        return "\n".join(["Ladder", *(f"  {line}" for line in ladder_lines(self.ladder))])


def fit_ladder(
    studies: Sequence[str | Study],
    data_sizes: Sequence[float] | None = None,
    *,
    storage: str | os.PathLike[str] | None = None,
    target: str | Target | None = None,
    accelerators: int | None = None,
    confidence: float = 0.95,
) -> Ladder:
    """The ladder of the finished ``studies`` (names in ``storage``, or `Study` objects), each
    at its ``data_sizes`` entry (training examples, in the same order; default: the size its
    trials recorded), answering for ``target`` (default: the studies' own) with batch sizes
    for ``accelerators``. As ``study ladder STUDY ... [--data-size N ...]``.

    Raises:
        StudyNotFound: a study not in its storage.
        UsageError: a bad argument, named (``studies``: fewer than two, one unfinished, two
            at one size; ``data_sizes``; ``target``).
    """
    from study.api.studies import Study, as_target
    from study.report.ladder import stored_ladder

    if isinstance(studies, str) or not isinstance(studies, Sequence):
        raise FieldError("studies", "must be a sequence of study names or Study objects", studies)
    opened = [s if isinstance(s, Study) else Study(text("studies", s) or "", storage=storage)
              for s in studies]  # fmt: skip
    sizes = None if data_sizes is None else _sizes(data_sizes)
    try:
        ladder = stored_ladder(
            [s.ledger for s in opened],
            data_sizes=sizes,
            target=as_target(target),
            accelerators=positive_int("accelerators", accelerators, optional=True),
            confidence=level("confidence", confidence),
        )
    except UsageError as exc:
        raise in_arguments(exc) from None
    return Ladder.of(ladder)


def _sizes(values: Any) -> list[float]:
    rule = "must be a sequence of positive numbers of training examples, one per study"
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise FieldError("data_sizes", rule, values)
    if not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and v < float("inf")
        for v in values
    ):
        raise FieldError("data_sizes", rule, values)
    return [float(v) for v in values]
