"""Write a `ScalingReport` in the formats asked for: the one place that knows every format.

``html`` (`study.report.html`), ``md`` (`study.report.markdown`, with PNG figures),
``csv`` (`study.report.csv`) and ``json`` (`study.report.json`). Figures are drawn once, only
when HTML or Markdown is asked for, and shared by both.

Example::

    paths = write_report(report, "reports/quickstart", ["html", "json"])
    paths["report.html"]
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from study.report.csv import write_csv
from study.report.figures import figure_png, make_figures
from study.report.html import render_html
from study.report.json import render_json
from study.report.markdown import render_markdown

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import ScalingReport

FORMATS = ("html", "md", "csv", "json")
"""Every output format, in the order they are written."""


def write_report(
    report: ScalingReport, out_dir: str | Path, formats: Iterable[str] = FORMATS
) -> dict[str, Path]:
    """Write the report in ``formats`` into ``out_dir`` (created if missing).

    Returns:
        Every file written, keyed by its file name, e.g. ``{"report.html": Path(...), ...}``.

    Raises:
        ValueError: for an unknown format.
    """
    wanted = list(dict.fromkeys(formats))
    unknown = [f for f in wanted if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown}; choose from {', '.join(FORMATS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pngs: dict[str, bytes] = {}
    if {"html", "md"} & set(wanted):
        pngs = {name: figure_png(fig) for name, fig in make_figures(report).items()}
    paths: dict[str, Path] = {}
    for kind in FORMATS:
        if kind not in wanted:
            continue
        if kind == "html":
            paths["report.html"] = _write(out / "report.html", render_html(report, pngs))
        elif kind == "md":
            for name, data in pngs.items():
                path = out / f"{name}.png"
                path.write_bytes(data)
                paths[path.name] = path
            paths["report.md"] = _write(out / "report.md", render_markdown(report, list(pngs)))
        elif kind == "csv":
            paths.update(write_csv(report, out))
        else:
            paths["report.json"] = _write(out / "report.json", render_json(report))
    return paths


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
