"""The loaded extensions' report sections as the writers show them (`study.extension`).

`shown_sections` gives each section that has something to show, in the extensions' order, for
report.html (`study.report.html`) and report.md (`study.report.markdown`); `sections_json` gives
report.json its keys (``cbs``, ``batch_schedules``, ...; a section without a value is still a
key, e.g. ``null``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from study.extension import Block, Place, report_sections

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import ScalingReport

__all__ = ["Shown", "sections_json", "shown_sections"]


@dataclass(frozen=True)
class Shown:
    """One extension section as a page shows it: under ``title`` (HTML id ``anchor``) at
    ``place``, its ``blocks``; ``markdown``: report.md shows it too."""

    anchor: str
    title: str
    place: str
    blocks: Sequence[Block]
    markdown: bool


def shown_sections(report: ScalingReport) -> list[Shown]:
    """The extensions' sections of ``report`` with something to show."""
    out = []
    for section in report_sections():
        value = report.section(section.key)
        blocks = list(section.blocks(value)) if value is not None else []
        if blocks:
            place = Place(section.place).value
            out.append(Shown(section.anchor, section.title, place, blocks, section.markdown))
    return out


def sections_json(report: ScalingReport) -> dict[str, Any]:
    """report.json's key of each loaded extension's section."""
    return {s.key: s.to_json(report.section(s.key)) for s in report_sections()}
