"""The ledger's journal file (the default ledger, ``mlruns/optuna.journal``): Optuna's journal
file backend, kept readable through the faults a file meets.

A journal is a list of records, one JSON object a line, appended under a lock file; any whole
prefix of it is a state the ledger was in. `CheckedJournalBackend` adds three things:

- **a torn record** (a write cut short by a full disk or a killed process leaves the file
  ending without a newline, or in a line that is not JSON): Optuna's readers skip it, but the next record appended would join
  it into one line no reader can parse, and every later read of the ledger would fail. Before
  each append, under the journal's lock (so no writer is mid-write), a torn tail is cut off and
  kept in ``FILE.torn``, with one warning line. The write it came from was told it failed.
- **a full disk** (ENOSPC, EDQUOT, or EFBIG past the file size limit): the part of the write
  that landed is cut off again, so the journal stays whole, and `StoreFull` is raised (exit
  75): free space, then ``study resume NAME`` runs the trial again.
- **a damaged record** (a line that is not JSON): `StoreDamaged` naming the file, the line and
  how to keep the intact records before it (`damaged_line`); nothing is written to the file.

Example: a disk that fills while trial 3 is recorded leaves trials 0-2 in the journal, the
command exits 75 with ``no space left for mlruns/optuna.journal ([Errno 28] No space left on
device); ...``, and once space is freed ``study resume NAME`` runs trial 3 again.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock

from study.errors import StoreDamaged
from study.paths import shown
from study.store_faults import file_fault

#: The suffix of the file a torn record is kept in, next to the journal.
TORN = ".torn"
#: Bytes read at a time when looking back for the last whole record.
_CHUNK = 1 << 16


class CheckedJournalBackend(JournalFileBackend):
    """`JournalFileBackend` at ``path`` that cuts off torn records before it appends, undoes a
    write that meets a full disk (`StoreFull`) and names a damaged record (`StoreDamaged`);
    see the module docstring."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lock = JournalFileSymlinkLock(str(self.path))
        try:
            super().__init__(str(self.path), lock_obj=self.lock)
        except OSError as exc:  # creating the file on a full disk
            raise file_fault(exc, self.path) or exc from None

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        logs = super().read_logs(log_number_from)
        while True:
            try:
                log = next(logs)
            except StopIteration:
                return
            except ValueError:  # JSONDecodeError, UnicodeDecodeError: a damaged record
                raise damaged(self.path) from None
            yield log

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        data = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode()
        self.lock.acquire()
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
            try:
                _cut_torn_tail(fd, self.path)
                _append(fd, data, self.path)
            finally:
                os.close(fd)
        finally:
            self.lock.release()


def _append(fd: int, data: bytes, path: Path) -> None:
    """Write ``data`` at the end of ``fd`` and sync it; on a full disk, cut off what landed
    and raise `StoreFull`."""
    start = os.fstat(fd).st_size
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError as exc:
        fault = file_fault(exc, path)
        if fault is None:
            raise
        os.ftruncate(fd, start)
        raise fault from None


def _cut_torn_tail(fd: int, path: Path) -> None:
    """Cut off a torn last record (a last line without a newline, or one that is not JSON:
    Optuna's readers skip both), keeping it in ``FILE.torn``."""
    size = os.fstat(fd).st_size
    if size == 0:
        return
    whole = os.pread(fd, 1, size - 1) == b"\n"
    end = _line_start(fd, size - 1 if whole else size)
    if whole and _is_record(os.pread(fd, size - end, end)):
        return
    torn = os.pread(fd, size - end, end).rstrip(b"\n")
    kept = path.with_name(path.name + TORN)
    try:
        with open(kept, "ab") as out:
            out.write(torn + b"\n")
        os.ftruncate(fd, end)
    except OSError as exc:
        raise file_fault(exc, kept) or exc from None
    print(
        f"study: warning: the ledger {shown(path)} ended in a torn record ({len(torn)} bytes: "
        f"a write cut short by a full disk or a stopped process); it is kept in "
        f"{shown(kept)} and the records before it are intact",
        file=sys.stderr,
        flush=True,
    )


def _line_start(fd: int, end: int) -> int:
    """The offset of the line that holds the byte before ``end`` (0 for the first line)."""
    while end > 0:
        start = max(0, end - _CHUNK)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def _is_record(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def damaged_line(path: Path) -> tuple[int, int, str] | None:
    """The first whole line of the journal at ``path`` that is not a record: its number (from
    1), its byte offset and why, e.g. ``(12, 4096, "Expecting ',' delimiter")``; None if every
    whole line is one (a torn last line is not counted: `CheckedJournalBackend` cuts it off)."""
    offset = 0
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.endswith(b"\n"):
                return None
            try:
                json.loads(line)
            except ValueError as exc:
                reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                return number, offset, reason
            offset += len(line)
    return None


def damaged(path: Path) -> StoreDamaged:
    """The error for a journal that Optuna could not read: where its first damaged record is,
    and how to keep the records before it."""
    where = shown(path)
    found = damaged_line(path)
    if found is None:  # damaged and mended again between Optuna's read and this one
        return StoreDamaged(f"the ledger {where}", "a record could not be read", "run it again")
    number, offset, reason = found
    return StoreDamaged(
        f"the ledger {where}",
        f"line {number} (byte {offset}) is not a whole record ({reason}); the {number - 1} "
        "records before it are intact and nothing was written",
        f"restore it from a backup, or keep those records: `mv {where} {where}.damaged && head "
        f"-n {number - 1} {where}.damaged > {where}`, then `study resume NAME` runs again the "
        "trials recorded after them",
    )
