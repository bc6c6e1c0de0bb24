"""What a new local MLflow store costs: MLflow's own creation (every schema migration) against
a copy of the migrated template (`study.tracking.store_template`), as `MlflowLogger` makes it.

Each round makes one store each way in a fresh folder, in turn, in this one process (imports
already paid; the template itself is made before the first round and not counted). Prints the
median CPU and wall seconds over ``--rounds`` per way and writes them to
``benchmarks/results/store_template.json`` (or ``--out``).

Usage: python benchmarks/store_template.py [--rounds 5] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mlflow.tracking import MlflowClient  # noqa: E402

from study.tracking.mlflow_logger import MlflowLogger  # noqa: E402
from study.tracking.store_template import template_path  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "store_template.json"


def make(way: str, uri: str) -> None:
    """MLflow's own store (its client opens, so creates, it) or `MlflowLogger`'s."""
    if way == "mlflow":
        MlflowClient(uri)._tracking_client.store  # noqa: B018 - the property creates the store
    else:
        MlflowLogger(uri)


def timed(call: Callable[[], None]) -> dict[str, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    call()
    return {"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"mlflow": [], "template": []}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["STUDY_CACHE_DIR"] = str(Path(tmp) / "cache")
        os.chdir(tmp)
        template_path()
        for i in range(args.rounds):
            for way in runs:
                folder = Path(tmp) / f"{way}-{i}"
                folder.mkdir()
                uri = f"sqlite:///{folder / 'mlflow.db'}"
                runs[way].append(timed(lambda u=uri, w=way: make(w, u)))
    summary = {
        way: {k: round(statistics.median(r[k] for r in rs), 3) for k in ("cpu", "wall")}
        for way, rs in runs.items()
    }
    print(f"a new local MLflow store, median of {args.rounds} (seconds):")
    for way, s in summary.items():
        print(f"  {way:9s} CPU {s['cpu']:.3f}  wall {s['wall']:.3f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
