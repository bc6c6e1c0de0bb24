"""Every command and Python block of README.md and docs/ runs, or says why it does not.

A page's blocks run in order in a scratch folder of their own, with ``examples/`` (the shipped
quickstart ledger copied, the rest linked) and ``search_spaces/`` at hand: ``bash`` blocks in
``bash -euo pipefail`` with ``study`` meaning this interpreter's ``python -m study``, ``python``
blocks in one interpreter per page (a later block sees an earlier one's names). Markers, an HTML
comment on the line before a block:

* ``<!-- not run: WHY -->``: the block is shown, not run (it trains, installs, needs a server);
* ``<!-- checked: output of the block above -->`` on a ``text`` block: each of its lines is a
  line of what the block above printed;
* ``<!-- same as: PATH ... -->``: the block is part of the file PATH (a first comment line naming
  the file aside), which its own tests run (or, for a ``yaml`` block, load).

``yaml`` blocks must parse. Run ``python -m pytest -q -n 0 tests/docs`` after editing the docs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
COMMANDS = ("bash", "sh", "shell")
PYTHON = ("python", "py")
FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")
MARKER = re.compile(r"^<!--\s*(not run|checked|same as):\s*(.*?)\s*-->\s*$")
TIMEOUT = 180  # seconds for one block


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language, text, first line (1-based) and marker, if any."""

    page: Path
    lang: str
    text: str
    line: int
    marker: tuple[str, str] | None

    @property
    def where(self) -> str:
        shown = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{shown}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.lang in COMMANDS + PYTHON and self.marker is None


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, each with the marker on the last non-blank line before it."""
    found, lines = [], page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{page}:{i + 1}: a code block is never closed"
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marked = MARKER.match(before.strip())
        marker = (marked.group(1), marked.group(2)) if marked else None
        indent = len(opened.group(1))
        text = "\n".join(line[indent:] for line in lines[i + 1 : end]) + "\n"
        found.append(Block(page, opened.group(2).lower(), text, i + 1, marker))
        i = end + 1
    return found


def counts() -> dict[str, int]:
    """How many command and Python blocks run, are shown only, or are checked against a file."""
    tally = {"run": 0, "not run": 0, "same as": 0}
    for page in PAGES:
        for block in blocks(page):
            if block.lang in COMMANDS + PYTHON:
                tally["run" if block.marker is None else block.marker[0]] += 1
    return tally


# --- running a page --------------------------------------------------------------------------

WORKER = r"""
import contextlib, io, json, sys, traceback
channel = sys.stdout
namespace = {"__name__": "__main__"}
for request in sys.stdin:
    code, name = json.loads(request)
    buffer, error = io.StringIO(), None
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            exec(compile(code, name, "exec"), namespace)
        except BaseException:
            error = traceback.format_exc()
    channel.write("\x00" + json.dumps([buffer.getvalue(), error]) + "\n")
    channel.flush()
"""


class Python:
    """One interpreter for a page's Python blocks: each block's output, or its traceback."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.log = (cwd / "python-stderr.log").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER], cwd=cwd, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
        )  # fmt: skip

    def run(self, block: Block) -> str:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps([block.text, block.where]) + "\n")
        self.process.stdin.flush()
        timer = threading.Timer(TIMEOUT, self.process.kill)
        timer.start()
        try:
            noise = []  # anything written to the real stdout outside Python (a C library)
            for line in self.process.stdout:
                if line.startswith("\x00"):
                    output, error = json.loads(line[1:])
                    assert error is None, f"{block.where}: the block raised\n{output}{error}"
                    return "".join(noise) + output
                noise.append(line)
        finally:
            timer.cancel()
        raise AssertionError(f"{block.where}: the interpreter ended (or ran past {TIMEOUT} s)")

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        self.log.close()


def scratch(folder: Path) -> tuple[Path, dict[str, str]]:
    """A folder to run a page in, and its environment: ``examples/`` with a copy of the shipped
    quickstart ledger (so nothing can write to the checkout's), ``search_spaces/`` and ``docs/``
    linked, and a ``study`` command that is ``python -m study`` of this interpreter."""
    examples = folder / "examples"
    examples.mkdir(parents=True)
    for entry in (ROOT / "examples").iterdir():
        if entry.name == "quickstart":
            (examples / "quickstart").mkdir()
            for item in entry.iterdir():
                target = examples / "quickstart" / item.name
                if item.name == "optuna.journal":
                    shutil.copy2(item, target)
                else:
                    target.symlink_to(item)
        else:
            (examples / entry.name).symlink_to(entry)
    for linked in ("search_spaces", "docs"):
        (folder / linked).symlink_to(ROOT / linked)
    bin_dir = folder / ".bin"
    bin_dir.mkdir()
    for name, run in (("study", "-m study "), ("python", "")):  # this test's interpreter
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" {run}"$@"\n')
        shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "STUDY_HOME")}
    env.update(
        PATH=os.pathsep.join([str(bin_dir), env.get("PATH", "")]),
        MPLBACKEND="Agg",
        STUDY_CACHE_DIR=env.get("STUDY_CACHE_DIR") or str(folder / ".cache"),
    )
    return folder, env


def run_command(block: Block, cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{block.where}: exit status {proc.returncode}\n{output}"
    return output


def check_output(block: Block, previous: Block | None, output: str | None) -> None:
    assert previous is not None and previous.runs and output is not None, (
        f"{block.where}: 'checked' follows no block that ran"
    )
    printed = {line.strip() for line in output.splitlines()}
    missing = [line for line in block.text.splitlines() if line.strip() not in printed]
    assert not missing, (
        f"{block.where}: these lines are not in what {previous.where} printed: {missing}\n"
        f"it printed:\n{output}"
    )


def check_same_as(block: Block) -> None:
    path = block.marker[1].split()[0] if block.marker else ""
    source = (ROOT / path).read_text(encoding="utf-8")
    text = block.text
    first, _, rest = text.partition("\n")
    if first.startswith("#") and path in first:
        text = rest
    assert text in source, f"{block.where}: the block is not part of {path}"


def check_markers(block: Block) -> None:
    if block.marker is None:
        return
    kind, detail = block.marker
    assert detail, f"{block.where}: '{kind}:' needs a reason or a path"
    if kind == "checked":
        assert block.lang == "text", f"{block.where}: a checked output is a text block"
    elif kind == "not run":
        assert block.lang in COMMANDS + PYTHON, (
            f"{block.where}: 'not run' marks a {block.lang} block"
        )


def run_page(page: Path, folder: Path) -> Iterator[Block]:
    """Run or check every block of ``page``; yield each block that ran."""
    cwd, env = scratch(folder)
    python: Python | None = None
    previous: Block | None = None
    output: str | None = None
    try:
        for block in blocks(page):
            assert block.lang, f"{block.where}: say what the block is (```bash, ```python, ...)"
            check_markers(block)
            if block.marker and block.marker[0] == "checked":
                check_output(block, previous, output)
            elif block.marker and block.marker[0] == "same as":
                check_same_as(block)
            elif block.lang == "yaml":
                yaml.safe_load(block.text)
            if block.runs and block.lang in COMMANDS:
                output = run_command(block, cwd, env)
            elif block.runs:
                python = python or Python(cwd, env)
                output = python.run(block)
            else:
                output = output if block.lang == "text" else None
            if block.runs:
                yield block
            previous = block if block.lang != "text" else previous
    finally:
        if python is not None:
            python.close()


#: The pages whose runnable blocks use an extension's feature (skipped without it); the
#: extensions page loads extensions (and registers one), which STUDY_EXTENSIONS=none forbids.
NEEDS = {
    "docs/how-to/batch-schedules.md": ("schedules",),
    "docs/how-to/extensions.md": ("allocation", "batch_science", "storage_proxy"),
}


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(p, marks=pytest.mark.extension(*NEEDS.get(str(p.relative_to(ROOT)), ())))
        for p in PAGES
    ],
    ids=[str(p.relative_to(ROOT)) for p in PAGES],
)
def test_the_page_s_code_blocks_run(page: Path, tmp_path: Path) -> None:
    list(run_page(page, tmp_path / "page"))


def test_most_command_and_python_blocks_run() -> None:
    tally = counts()
    assert tally["run"] >= tally["not run"], tally


def test_a_block_that_fails_fails_the_page(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```bash\nstudy nosuchcommand\n```\n")
    with pytest.raises(AssertionError, match="exit status 2"):
        list(run_page(page, tmp_path / "run"))


def test_a_checked_output_must_have_been_printed(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        '```python\nprint("one")\n```\n\n<!-- checked: output of the block above -->\n'
        "```text\none\ntwo\n```\n"
    )
    with pytest.raises(AssertionError, match="'two'"):
        list(run_page(page, tmp_path / "run"))
