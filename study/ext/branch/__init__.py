"""CBS over training: the critical batch size at checkpoints of one run, from branch trials.

``study branch FILE`` (`study.ext.branch.command`) runs a study file's ``branch:`` section
(`study.ext.branch.section`): a reference run at ``B0`` stores checkpoints, and from each,
branches at ``k x B0`` train a window of examples (`study.ext.branch.branching`: the plan,
`.plan` and `.defaults`; the ledger of branches, `.ledger`; the trainer, `.trainer`; MLflow,
`.tracking`); `.cbs` reads CBS(t) off them and `.report` shows it: report.json's ``cbs``, the
HTML report's section and figure, ``Study.cbs()`` and ``fit().plot.cbs(ax)``.

This module registers the extension and imports nothing heavy: each part is imported when it
is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from study.extension import Extension, Lazy, ReportSection, Section, register


def _read(reader: Any, value: Any, config: Any) -> Any:
    from study.ext.branch.section import read_branch

    return read_branch(reader, value)


def _cbs(study: Any) -> Any:
    from study.ext.branch.report import study_cbs

    return study_cbs(study)


@register
class Branch(Extension):
    """``study branch``, the ``branch:`` section and CBS(t) in the report."""

    name = "branch"
    summary = "the critical batch size over training, CBS(t), from branches of a reference run"

    def add_commands(self, sub: Any, lazy: Lazy) -> None:
        from study.commands.flags import add_storage

        p = sub.add_parser(
            "branch",
            help=self.summary,
            description="Run a study file's branch: section: a reference run at batch B0 "
            "stores checkpoints (in the MLflow artifact store); from each, branches at k x B0 "
            "train a window of examples, each a ledger trial any process running this command "
            "on the same --storage and --tracking-uri can claim; CBS(t) is the largest batch "
            "within tolerance of the B0 branch, with an interval from the branch-to-branch "
            "noise, next to B_simple(t).",
        )
        p.add_argument("file", help="a study file with a branch: section")
        p.add_argument("--workers", type=int, default=1, help="branches run at once (default: 1)")
        p.add_argument(
            "--schedule-out",
            metavar="FILE",
            help="write the batch-size schedule derived from CBS(t) as a study-file snippet",
        )
        p.add_argument(
            "--restart", action="store_true", help="forget earlier branches and the reference run"
        )
        p.add_argument(
            "--max-branches",
            type=int,
            metavar="N",
            help="leave after N branches of this process (0: only the reference run)",
        )
        p.add_argument("--json", action="store_true", help="print CBS(t) as JSON")
        add_storage(p, tracking=True)
        p.set_defaults(handler=lazy("study.ext.branch.command", "main"))

    def sections(self) -> Sequence[Section]:
        from study.ext.branch.schema import SCHEMA
        from study.ext.branch.section import SECTION

        return (Section(SECTION, _read, SCHEMA),)

    def report_sections(self) -> Sequence[ReportSection]:
        from study.ext.branch.report import SECTION

        return (SECTION,)

    def study_methods(self) -> Mapping[str, Callable[..., Any]]:
        return {"cbs": _cbs}
