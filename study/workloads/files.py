"""Shared pieces of the file-backed workloads (csv, images, tfrecord): splits, statistics, caches.

No TensorFlow at module level: the hash split has a NumPy form (used by the pandas pass and the
in-memory path) and a TensorFlow form (used inside ``tf.data``) that agree bit for bit, so a row
lands on the same side of the split in both passes.

Example::

    is_val = val_rows(np.arange(10), seed=0, val_fraction=0.2)   # boolean mask, ~2 True
    stats = RunningStats(); stats.update(chunk1); stats.update(chunk2)
    stats.mean, stats.std                                        # as np.mean/np.std of both
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from study.paths import cache_dir

__all__ = [
    "RunningStats",
    "cache_dir",
    "cached_json",
    "fingerprint",
    "row_hash",
    "stratified_split",
    "tf_val_rows",
    "val_rows",
]

_MASK32 = 0xFFFFFFFF
_MIX = 0x45D9F3B  # small enough that a 32-bit value times it stays inside int64


# -- splits ----------------------------------------------------------------------------------


def _mix32(x: Any, shift: Callable[[Any, int], Any], xor: Callable[[Any, Any], Any]) -> Any:
    """A 32-bit integer mixer (two multiply-xorshift rounds) on int64 values below 2**32."""
    for _ in range(2):
        x = (xor(shift(x, 16), x) * _MIX) & _MASK32
    return xor(shift(x, 16), x)


def _seed_key(seed: int) -> int:
    key = _mix32(int(seed) & _MASK32, lambda v, s: v >> s, lambda a, b: a ^ b)
    return int(key) ^ 0x9E3779B9


def row_hash(rows: np.ndarray, seed: int) -> np.ndarray:
    """A uniform 32-bit hash of each row number under ``seed`` (int64 array)."""
    x = (np.asarray(rows, dtype=np.int64) & _MASK32) ^ _seed_key(seed)
    return _mix32(x, np.right_shift, np.bitwise_xor)


def _threshold(val_fraction: float) -> int:
    return int(val_fraction * 2**32)


def val_rows(rows: np.ndarray, seed: int, val_fraction: float) -> np.ndarray:
    """True where a row (0-based data row number) belongs to validation.

    Each row goes to validation with probability ``val_fraction``, independently of the others
    and of the file's length, so a file can be split while it is read.
    """
    return row_hash(rows, seed) < _threshold(val_fraction)


def tf_val_rows(tf: Any, rows: Any, seed: int, val_fraction: float) -> Any:
    """`val_rows` in TensorFlow (``rows``: an int64 tensor); the same answer bit for bit."""
    x = tf.bitwise.bitwise_xor(
        tf.bitwise.bitwise_and(rows, _MASK32), tf.constant(_seed_key(seed), tf.int64)
    )
    mixed = _mix32(x, tf.bitwise.right_shift, tf.bitwise.bitwise_xor)
    return mixed < _threshold(val_fraction)


def stratified_split(
    labels: np.ndarray | None, count: int, val_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(count)``: about ``val_fraction`` of each class to validation.

    ``labels`` None (regression, multi-label) splits without strata. Returns (train, val)
    indices, each in a seeded random order.
    """
    rng = np.random.default_rng(seed)
    groups = (
        [np.arange(count)]
        if labels is None
        else [np.flatnonzero(labels == cls) for cls in np.unique(labels)]
    )
    val_parts = []
    for members in groups:
        members = rng.permutation(members)
        val_parts.append(members[: round(len(members) * val_fraction)])
    val = np.concatenate(val_parts) if val_parts else np.zeros(0, np.int64)
    train = np.setdiff1d(np.arange(count), val)
    return rng.permutation(train), rng.permutation(val)


# -- statistics ------------------------------------------------------------------------------


class RunningStats:
    """Column means and standard deviations over chunks (Chan et al.'s pairwise update).

    Equal, up to round-off, to ``x.mean(axis=0)`` and ``x.std(axis=0)`` of all rows at once,
    with memory bounded by one chunk. A constant column gets standard deviation 1 (``std``),
    so that standardising leaves it at 0.
    """

    def __init__(self) -> None:
        self.count = 0
        self._mean: np.ndarray | None = None
        self._m2: np.ndarray | None = None

    def update(self, x: np.ndarray) -> None:
        """Add the rows of ``x`` ([n] or [n, d])."""
        x = np.asarray(x, dtype=np.float64)
        n = len(x)
        if n == 0:
            return
        mean = x.mean(axis=0)
        m2 = ((x - mean) ** 2).sum(axis=0)
        if self._mean is None or self._m2 is None:
            self.count, self._mean, self._m2 = n, mean, m2
            return
        total = self.count + n
        delta = mean - self._mean
        self._mean = self._mean + delta * (n / total)
        self._m2 = self._m2 + m2 + delta**2 * (self.count * n / total)
        self.count = total

    @property
    def mean(self) -> np.ndarray:
        if self._mean is None:
            raise ValueError("no rows")
        return self._mean

    @property
    def std(self) -> np.ndarray:
        """Population standard deviation; 1 where a column is constant."""
        if self._m2 is None:
            raise ValueError("no rows")
        std = np.sqrt(self._m2 / self.count)
        return np.where(std > 0, std, 1.0)


# -- caching facts about files ---------------------------------------------------------------


def fingerprint(paths: Sequence[str | os.PathLike[str]], **facts: Any) -> str:
    """A key naming files as they are now (path, size, modification time) and other facts."""
    parts: list[Any] = []
    for path in paths:
        stat = os.stat(path)
        parts.append([os.path.abspath(path), stat.st_size, stat.st_mtime_ns])
    text = json.dumps({"files": parts, **facts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def cached_json(kind: str, key: str, compute: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
    """``compute()`` once per ``key``: later calls (other processes too) read a JSON file.

    A cache that cannot be read or written is ignored (the facts are computed again).
    """
    path = cache_dir() / f"{kind}-{key}.json"
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        pass
    facts = dict(compute())
    temporary: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8"
        ) as handle:
            temporary = handle.name
            json.dump(facts, handle)
        os.replace(temporary, path)
    except OSError:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
    return facts


# -- caching generated arrays ----------------------------------------------------------------


def read_arrays(path: Path, keys: Sequence[str], what: str) -> dict[str, np.ndarray] | None:
    """The arrays ``keys`` cached in the ``.npz`` file ``path``, or None if it is missing or
    unreadable (a warning names ``what``: the caller then generates them again)."""
    try:
        with np.load(path) as npz:
            return {key: npz[key] for key in keys}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        warnings.warn(f"ignoring unreadable {what} cache {path}; regenerating", stacklevel=3)
        return None


def write_arrays(path: Path, arrays: Mapping[str, np.ndarray], what: str) -> None:
    """Write ``arrays`` to ``path`` atomically (temp file + ``os.replace``), so that concurrent
    trial workers can share the cache; a failure only costs a warning naming ``what``."""
    tmp_name = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            dir=path.parent, prefix=path.stem + ".", suffix=".tmp", delete=False
        ) as tmp:
            tmp_name = tmp.name
            np.savez(tmp, **arrays)
        os.replace(tmp_name, path)
    except OSError as exc:
        warnings.warn(
            f"could not cache {what} in {path.parent} ({exc}); set STUDY_CACHE_DIR to a "
            "writable directory to avoid generating it again",
            stacklevel=3,
        )
        if tmp_name is not None and os.path.exists(tmp_name):
            os.unlink(tmp_name)
