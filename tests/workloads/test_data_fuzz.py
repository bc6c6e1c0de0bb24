"""Fuzzed data files (`tests.fuzz_data`: CSV files, TFRecord files, image folders) through what
reads them before a trial: the resolver with the workload's checks (`resolve_workload(...,
validate=True)`, what ``study train`` and ``study check-workload`` run), `Workload.load` (what
the trainer worker runs before every trial) and `check_data`. Every case ends in data or one
`UsageError` line, never another exception. (A streamed image folder decodes its images during
training; `load` checks each file's signature, the in-memory one decodes them all.)"""

from __future__ import annotations

import contextlib
import io
import shutil
import traceback
from pathlib import Path

import pytest
from hypothesis import example, given, settings

from study.errors import UsageError
from study.workloads.data_check import check_data
from study.workloads.resolve import resolve_workload
from tests.fuzz_data import Damage, DataCase, data_file_cases
from tests.fuzzing import Case, Outcome, check, examples_for


class DataArena:
    """A folder each case writes its files into (emptied first), and a dataset cache."""

    def __init__(self, root: Path) -> None:
        self.folder, self.cache = root / "data", root / "cache"
        self.cache.mkdir(parents=True, exist_ok=True)

    def run(self, case: DataCase) -> Case:
        """Read the case's data as a trial would; judge how it ended."""
        import os

        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        options = case.write(self.folder)
        saved = os.environ.get("STUDY_CACHE_DIR")
        os.environ["STUDY_CACHE_DIR"] = str(self.cache)
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                read(case.workload, options)
            outcome, detail = Outcome.RESULT, ""
        except UsageError as exc:
            one = "\n" not in str(exc) and str(exc).strip()
            outcome, detail = (Outcome.USAGE if one else Outcome.NOT_ONE_LINE), str(exc)
        except Exception:
            outcome, detail = Outcome.TRACEBACK, traceback.format_exc()
        finally:
            if saved is None:
                os.environ.pop("STUDY_CACHE_DIR", None)
            else:
                os.environ["STUDY_CACHE_DIR"] = saved
        status = {Outcome.RESULT: 0, Outcome.TRACEBACK: 1}.get(outcome, 2)
        return Case(case.describe(), outcome, status, detail if status == 2 else "", detail)


def read(workload: str, options: dict[str, object]) -> None:
    """Resolve and validate the workload, load its data and check them."""
    resolved = resolve_workload(workload, options, validate=True)
    check_data(resolved.workload.load(), resolved.task.kind)


def data_cases() -> object:
    """What `benchmarks/fuzz.py` draws."""
    return data_file_cases()


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> DataArena:
    pytest.importorskip("tensorflow")
    return DataArena(tmp_path_factory.mktemp("fuzz-data"))


def _png() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (12, 10), color=7).save(out, format="png")
    return out.getvalue()


def _images(odd: tuple[str, bytes, Damage], streamed: bool) -> DataCase:
    """Two class folders of four PNGs each, and ``odd`` among them."""
    files = [(f"images/{c}/{i}.png", _png(), Damage()) for c in ("cat", "dog") for i in range(4)]
    return DataCase("images", (*files, odd), (("path", "@FOLDER/images"), ("streamed", streamed)))


def _tfrecords(bad: bytes) -> DataCase:
    """Train and val files of four good examples each, the train file's second record ``bad``."""
    from tests.fuzz_data import _example

    good = [_example([1.0, 2.0, 3.0, 4.0], [i % 2]) for i in range(4)]
    train = [good[0], bad, *good[1:]]
    files = (("train-0.tfrecord", train, Damage()), ("val-0.tfrecord", good, Damage()))
    options = {
        "train": "@FOLDER/train-*",
        "val": "@FOLDER/val-*",
        "features": "x:float32[4],y:int64[]",
        "label": "y",
    }
    return DataCase("tfrecord", files, tuple(options.items()))


@pytest.mark.slow
@settings(max_examples=examples_for("data"))
@given(case=data_file_cases())
# Found by the fuzzer (each was a TensorFlow error's traceback):
@example(_images(("images/cat/notes.png", b"not an image", Damage()), streamed=True))
@example(_images(("images/dog/cut.png", _png(), Damage("cut", 0.6)), streamed=False))
@example(_tfrecords(b"\xff\xfe\x00 not an Example"))
def test_fuzzed_data_files_end_in_data_or_one_line(arena: DataArena, case: DataCase) -> None:
    check(arena.run(case))
