"""Re-make the shipped example reports with this code, so none states another model's answer.

Each example's report (``examples/<name>/report.*``, its figures and CSV files) is written from
what the example ships, with the analysis of this checkout:

* ``quickstart``: the study's ledger, ``examples/quickstart/optuna.journal``;
* ``mnist1d_mlp`` and ``shapes_resnet``: their measurement tables (``measurements.csv``) with
  their study files (``search_spaces/*.yaml``) and, for ``shapes_resnet``, the throughput
  probe's rows (``probe.json``). Their trials were recorded before the target's hold rule, so
  steps to result are read at the first evaluation that met the target, as they were measured,
  and before pruning's slack (``tuner.prune_slack``), so they say it was 1.

Every report.json says which answer model made it (``about.answer_model``,
`study.analysis.answers.ANSWER_MODEL`); ``tests/examples`` fails when an example was made by
another one than the code's.

On x86-64 the reports are computed with OpenBLAS's AVX2 kernels (``OPENBLAS_CORETYPE=Haswell``,
as ``tests/conftest.py`` pins them), so that the shipped numbers are what the tests compute to
their last digit on any CPU; another CPU's kernels move them by a few parts in 10,000.

Usage: python examples/make_reports.py [quickstart mnist1d_mlp shapes_resnet]
"""

from __future__ import annotations

import os
import platform

if platform.machine() in ("x86_64", "AMD64"):  # before NumPy loads: see above
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import argparse
import dataclasses
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FROM_TABLES = {
    "mnist1d_mlp": ("mnist1d-mlp", "search_spaces/mnist1d_mlp.yaml"),
    "shapes_resnet": ("shapes-resnet", "search_spaces/shapes_resnet.yaml"),
}
EXAMPLES = ("quickstart", *FROM_TABLES)


def make(name: str) -> Path:
    """Write the report of example ``name`` into its folder; return the folder."""
    from study.report import write_report

    out = HERE / name
    report = _quickstart(out) if name == "quickstart" else _from_table(name, out)
    write_report(report, out)
    return out


def _quickstart(out: Path):
    from study.ledger import Ledger
    from study.report.stored import stored_report

    journal = out / "optuna.journal"
    ledger = Ledger.open(str(journal.relative_to(ROOT)), "quickstart", create=False)
    storage = "examples/quickstart/optuna.journal"
    return stored_report(
        ledger,
        command=f"study report quickstart --storage {storage}",
        context={"storage": storage},
    )


def _from_table(name: str, out: Path):
    import pandas as pd

    from study.config.hold import Hold
    from study.config.studyfile import load_study_file
    from study.host import environment_info
    from study.report.build import build_report
    from study.report.record import StudyFacts

    study, file = FROM_TABLES[name]
    config = load_study_file(file)
    # recorded before pruning's slack: a trial was stopped at its batch size's best itself
    config = dataclasses.replace(config, tuner=dataclasses.replace(config.tuner, prune_slack=1.0))
    table = pd.read_csv(out / "measurements.csv")
    probe_file = out / "probe.json"
    probe = json.loads(probe_file.read_text()) if probe_file.exists() else None
    environment = environment_info()
    facts = StudyFacts(
        config=config,
        study_file=file,
        default_model=config.model or "",
        trials_planned=config.total_trials,
        packages={**environment["packages"], "python": environment["python"]},
    )
    target = dataclasses.replace(config.target, hold=Hold.OFF)  # recorded before the rule
    return build_report(
        table,
        target,
        study=study,
        accelerators=None,
        overhead=config.overhead,
        command=f"python examples/make_reports.py {name}",
        context={"measurements": f"examples/{name}/measurements.csv"},
        facts=facts,
        probe=probe,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"of {', '.join(EXAMPLES)}")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(EXAMPLES))
    if unknown:
        parser.error(f"unknown example(s) {', '.join(unknown)}; known: {', '.join(EXAMPLES)}")
    os.chdir(ROOT)  # the study files and storages are named relative to the checkout
    for name in args.names or EXAMPLES:
        print(f"wrote {make(name).relative_to(ROOT)}/report.*", flush=True)


if __name__ == "__main__":
    main()
