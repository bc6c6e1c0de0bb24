"""Shallue et al.'s released measurements (the batch_science data) as ledger studies.

`study.ext.batch_science.release` reads the release's layout, `.ledger` stores a workload of it
as a study, and `.command` is ``study import-batch-science DIR``, the command this extension
adds; `study report`, `study status` and `study ls` read the imported studies like any other.
"""

from __future__ import annotations

from typing import Any

from study.extension import Extension, Lazy, register


@register
class BatchScience(Extension):
    """``study import-batch-science``: Shallue et al.'s data release into the ledger."""

    name = "batch_science"
    summary = "import Shallue et al.'s released measurements as a study"

    def add_commands(self, sub: Any, lazy: Lazy) -> None:
        from study.commands.flags import add_storage

        p = sub.add_parser(
            "import-batch-science",
            help=self.summary,
            description="Read the layout of Shallue et al.'s data release "
            "(dataset/model/optimizer/batch_size/study.json, .../trial_id/metadata.json and "
            "measurements.csv) into a study that `study ls`, `study status` and `study report` "
            "accept.",
        )
        p.add_argument(
            "dir", help="a directory in that layout (a workload directory or any parent of one)"
        )
        p.add_argument("--name", help="study name (default: dataset-model-optimizer)")
        add_storage(p)
        p.set_defaults(handler=lazy("study.ext.batch_science.command", "main"))
