"""`study.runner.preload`, what the trainer workers' server imports: TensorFlow with the garbage
collector off, then everything frozen and the collector on again for the workers it forks.

Imported in a fresh interpreter (as the forkserver does), with a `gc.callbacks` hook that notes,
at each collection, whether TensorFlow's import had begun and whether anything was frozen."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import gc, json, sys
passes = []
gc.callbacks.append(
    lambda phase, info: phase == "start"
    and passes.append(["tensorflow" in sys.modules, gc.get_freeze_count(), info["generation"]])
)
import study.runner.preload
print(json.dumps({
    "enabled": gc.isenabled(),
    "frozen": gc.get_freeze_count(),
    "tensorflow": "tensorflow" in sys.modules,
    "passes": passes,
}))
"""


@pytest.fixture(scope="module")
def preloaded() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_server_imports_tensorflow_without_a_collection(preloaded: dict) -> None:
    assert preloaded["tensorflow"]
    during = [p for p in preloaded["passes"] if p[0] and p[1] == 0]
    assert during == []  # none while TensorFlow imported, before the freeze


def test_what_it_imported_is_frozen_and_its_workers_collect_again(preloaded: dict) -> None:
    assert preloaded["frozen"] > 100_000  # TensorFlow's objects, for every forked worker
    assert preloaded["enabled"]
