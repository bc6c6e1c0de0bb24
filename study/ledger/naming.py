"""How a ledger names its strata's Optuna studies, and which stored studies are its strata.

The search's strata are ``NAME/b{batch}/{strategy}`` (`SEARCH_STRATA`, what a `Ledger` uses
unless told otherwise); trials kept beside the search's, such as a study's schedule trials,
name theirs otherwise (`study.ext.schedules.ledger.SCHEDULE_STRATA`) and are handed to a
`Ledger` as its ``naming``, so no reader of the search's strata sees them.

Example: ``SEARCH_STRATA.name("mnist", Stratum(128, "default"))`` is ``"mnist/b128/default"``,
and ``SEARCH_STRATA.of("mnist", "mnist/b128/default", {})`` is that stratum again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from study.config.space import Stratum


class StratumNaming(Protocol):
    """How a ledger's strata are named in the storage: the search's (`SEARCH_STRATA`,
    ``NAME/b128/default``) or those of other trials kept beside them, e.g. schedule trials
    (`study.ext.schedules.ledger.SCHEDULE_STRATA`, ``schedule:NAME/{digest}/b32/default``)."""

    def name(self, study: str, stratum: Stratum) -> str:
        """The Optuna study name of ``stratum`` of the study named ``study``."""
        ...

    def of(self, study: str, study_name: str, attrs: Mapping[str, Any]) -> Stratum | None:
        """The stratum of the study ``study`` stored as the Optuna study ``study_name`` (its
        user attributes ``attrs``), or None when that Optuna study is none of its strata."""
        ...


@dataclass(frozen=True)
class SearchStrata:
    """The search's strata: ``NAME/b{batch}/{strategy}`` (`StratumNaming`)."""

    def name(self, study: str, stratum: Stratum) -> str:
        return f"{study}/{stratum}"

    def of(self, study: str, study_name: str, attrs: Mapping[str, Any]) -> Stratum | None:
        if not study_name.startswith(f"{study}/"):
            return None
        if "batch_size" in attrs and "strategy" in attrs:
            return Stratum(int(attrs["batch_size"]), str(attrs["strategy"]))
        return Stratum.parse(study_name.removeprefix(f"{study}/"))


#: How a `Ledger` names its strata unless it is given another `StratumNaming`.
SEARCH_STRATA = SearchStrata()
