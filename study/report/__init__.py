"""Scaling reports: compute the analysis of a study (`build_report`) and write it out
(`write_report`) as self-contained HTML, Markdown with PNG figures, CSV tables and JSON.

One module per job: `record` is the report's record (`ScalingReport` and `StudyFacts`, frozen;
every writer reads them), `build` computes it from the analysis (`build_report`), `notes`
writes its notes on thin data, `about` says what the study is about (workload, model,
optimizer, search, trial counts, package versions, shown at the top of every format), `prose`
writes the answer, the summary lines and the fixed text, `noise_prose` and `time_prose` the
predicted-noise and time-to-result sections, `formatting` writes numbers (three significant
digits), lists and paths, `figures` draws, `tables` lays out the tables HTML and Markdown
share, `html`, `markdown`, `csv` and `json` each write one format, and `write` dispatches by
format.

Example::

    from study.report import StudyFacts, build_report, write_report
    report = build_report(table, target, study="quickstart", accelerators=None,
                          facts=StudyFacts(config=config, study_file="quickstart.yaml"))
    paths = write_report(report, "reports/quickstart", ["html", "json"])

Matplotlib is imported only when figures are drawn.
"""

from __future__ import annotations

from study.report.build import build_report, measured_metrics
from study.report.figures import make_figures
from study.report.json import report_dict
from study.report.prose import answer, summary_lines
from study.report.record import ScalingReport, StudyFacts
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
