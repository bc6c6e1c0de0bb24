"""Fuzzing at scale: the suite's fuzz surfaces (tests/config/test_studyfile_fuzz.py,
tests/test_cli_fuzz.py, tests/workloads/test_options_fuzz.py, tests/workloads/test_data_fuzz.py)
run with Hypothesis' ``benchmark`` profile, every case counted instead of the first bad one
failing the run.

Per surface: cases, results (exit 0, or the command got to where it would train, load or
serve), one-line exit-2 errors, tracebacks, exit-2 errors that are not one line, other exit
statuses, and cases after which a file of the store changed. The rule wants the last four at 0.

Usage: nice -n 10 python benchmarks/fuzz.py [--cases 10000] [--surface NAME ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("STUDY_FUZZ_PROFILE", "benchmark")

from hypothesis import given, settings  # noqa: E402

from tests.fuzzing import Arena, Case, Outcome, Tally  # noqa: E402

#: The columns of the table, after the surface and its case count.
COLUMNS = (
    ("results", (Outcome.RESULT,)),
    ("exit 2, one line", (Outcome.USAGE,)),
    ("tracebacks", (Outcome.TRACEBACK,)),
    ("exit 2, not one line", (Outcome.NOT_ONE_LINE,)),
    ("other exit status", (Outcome.OTHER_STATUS,)),
    ("changed records", (Outcome.CHANGED,)),
)


def surfaces(root: Path) -> dict[str, Callable[[int, Tally], None]]:
    """Each surface: a function running ``n`` cases into a tally."""
    from hypothesis import strategies as st

    from tests.config.test_studyfile_fuzz import COMMANDS, run_file, tiny_store

    def study_files(n: int, tally: Tally) -> None:
        from tests.fuzz_files import study_file_bytes

        arena = Arena(root / "study_files", tiny_store)

        @settings(max_examples=n)
        @given(data=study_file_bytes(), command=st.sampled_from(COMMANDS))
        def one(data: bytes, command: tuple[str, ...]) -> None:
            tally.add(run_file(arena, data, command))

        one()

    def flags(n: int, tally: Tally) -> None:
        from tests.test_cli_fuzz import argvs

        arena = Arena(root / "flags", tiny_store)

        @settings(max_examples=n)
        @given(argv=argvs())
        def one(argv: list[str]) -> None:
            tally.add(arena.run(argv))

        one()

    def options(n: int, tally: Tally) -> None:
        from tests.workloads.test_options_fuzz import option_cases

        arena = Arena(root / "options", tiny_store)

        @settings(max_examples=n)
        @given(case=option_cases())
        def one(case: Any) -> None:
            tally.add(case(arena))

        one()

    def data(n: int, tally: Tally) -> None:
        from tests.workloads.test_data_fuzz import DataArena, data_cases

        arena = DataArena(root / "data")

        @settings(max_examples=n)
        @given(case=data_cases())
        def one(case: Any) -> None:
            tally.add(arena.run(case))

        one()

    return {"study files": study_files, "flags": flags, "workload options": options,
            "data files": data}  # fmt: skip


def row(name: str, tally: Tally, seconds: float) -> dict[str, Any]:
    counts = {label: sum(tally.counts[o] for o in outcomes) for label, outcomes in COLUMNS}
    return {"surface": name, "cases": tally.cases, **counts, "seconds": round(seconds, 1)}


def table(rows: list[dict[str, Any]]) -> str:
    head = ["surface", "cases", *(label for label, _ in COLUMNS), "seconds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [
            r["surface"],
            *(f"{r[k]:,}" if isinstance(r[k], int) else str(r[k]) for k in head[1:]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def show_failures(name: str, failures: list[Case]) -> None:
    for case in failures[:5]:
        print(f"--- {name}: {case.explain()[-1500:]}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases per surface")
    parser.add_argument("--surface", action="append", help="only these surfaces")
    parser.add_argument("--json", type=Path, help="write the rows to FILE")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="study-fuzz-") as scratch:
        for name, run in surfaces(Path(scratch)).items():
            if args.surface and name not in args.surface:
                continue
            tally, start = Tally(), time.perf_counter()
            run(args.cases, tally)
            rows.append(row(name, tally, time.perf_counter() - start))
            print(table(rows[-1:]), flush=True)
            show_failures(name, tally.failures)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    bad = sum(r[label] for r in rows for label, _ in COLUMNS[2:])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
