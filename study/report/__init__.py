"""Scaling reports: assemble the analysis of a study (`build_report`) and write it out
(`write_report`) as self-contained HTML, Markdown with PNG figures, CSV tables and JSON.

Example::

    from study.report import build_report, write_report
    report = build_report(table, target, study="quickstart", accelerators=None)
    paths = write_report(report, "reports/quickstart", ["html", "json"])

Matplotlib is imported only when figures are drawn.
"""

from __future__ import annotations

from study.report.build import ScalingReport, answer, build_report, summary_lines
from study.report.render import FORMATS, make_figures, report_dict, write_report

__all__ = [
    "FORMATS",
    "ScalingReport",
    "answer",
    "build_report",
    "make_figures",
    "report_dict",
    "summary_lines",
    "write_report",
]
