"""Scaling reports: compute the analysis of a study (`build_report`) and write it out
(`write_report`) as self-contained HTML, Markdown with PNG figures, CSV tables and JSON.

One module per job: `build` computes (`ScalingReport`, `build_report`), `about` says what the
study is about (`StudyFacts`: workload, model, optimizer, search, trial counts, package
versions, shown at the top of every format), `prose` writes the sentences (answer, notes,
summary lines), `formatting` writes numbers (three significant digits) and paths, `figures`
draws, `tables` lays out the tables HTML and Markdown share, `html`, `markdown`, `csv` and
`json` each write one format, and `write` dispatches by format.

Example::

    from study.report import StudyFacts, build_report, write_report
    report = build_report(table, target, study="quickstart", accelerators=None,
                          facts=StudyFacts(config=config, study_file="quickstart.yaml"))
    paths = write_report(report, "reports/quickstart", ["html", "json"])

Matplotlib is imported only when figures are drawn.
"""

from __future__ import annotations

from study.report.about import StudyFacts
from study.report.build import ScalingReport, build_report, measured_metrics
from study.report.figures import make_figures
from study.report.json import report_dict
from study.report.prose import answer, summary_lines
from study.report.write import FORMATS, write_report

__all__ = [
    "FORMATS",
    "ScalingReport",
    "StudyFacts",
    "answer",
    "build_report",
    "make_figures",
    "measured_metrics",
    "report_dict",
    "summary_lines",
    "write_report",
]
