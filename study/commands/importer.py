"""`study import-batch-science DIR`: Shallue et al.'s released measurements as ledger studies.

Each workload (dataset, model, optimizer) below DIR becomes one study named ``--name`` or
``dataset-model-optimizer`` (see `study.importers.ledger` for what is stored).

Example::

    study import-batch-science batch_science/mnist/simple_cnn/nesterov_momentum
    study report mnist-simple_cnn-nesterov_momentum --target "val/classification_error<0.01"
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from study.errors import ExitCode, UsageError


def main(args: argparse.Namespace) -> int:
    """Import every workload below ``args.dir`` into ``args.storage``; print the names."""
    from study.importers.batch_science import scan_release
    from study.importers.ledger import import_workload
    from study.ledger import Ledger, open_storage

    workloads = scan_release(args.dir)
    names = study_names(workloads, args.name)
    storage = open_storage(args.storage)
    taken = _taken(storage, names)
    if taken:
        raise UsageError(
            f"a study named {taken[0]!r} already exists in this storage; nothing was imported "
            "(choose another --name, or another --storage)"
        )
    source = str(Path(args.dir).resolve())
    for workload, name in zip(workloads, names):
        counts = import_workload(Ledger(storage, name), workload, source=source)
        batches = ", ".join(str(s.batch_size) for s in workload.studies)
        statuses = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        print(
            f"imported {name}: {len(workload.studies)} batch sizes ({batches}), "
            f"{workload.trials_total} trials ({statuses})"
        )
    example = names[0]
    print(f"next: study report {example} --target 'val/classification_error<0.1'")
    return ExitCode.OK


def study_names(workloads: Sequence[Any], name: str | None) -> list[str]:
    """One study name per workload: ``name``, or ``dataset-model-optimizer``.

    Two workloads with the same triple (e.g. ``solution_quality/...`` next to the top-level
    workload) are told apart by their directory path instead.

    Raises:
        UsageError: ``name`` given for several workloads, or not a valid study name.
    """
    from study.importers.batch_science import sanitize_name

    if name is not None:
        if len(workloads) > 1:
            listed = ", ".join(str(w.path) for w in workloads[:5])
            raise UsageError(
                f"--name names one study, but the directory holds {len(workloads)} workloads "
                f"({listed}{', ...' if len(workloads) > 5 else ''}); import one workload "
                "directory at a time, or leave out --name"
            )
        if sanitize_name(name) != name:
            raise UsageError(
                f"--name: {name!r} is not a valid study name; use letters, digits, '_', '.', "
                f"'-' (e.g. {sanitize_name(name)!r})"
            )
        return [name]
    names = [w.name for w in workloads]
    common = Path(*_common_parts([w.path for w in workloads]))
    for i, w in enumerate(workloads):
        if names.count(w.name) > 1:
            relative = w.path.relative_to(common) if common.parts else w.path
            names[i] = sanitize_name("-".join((*relative.parts, w.name)))
    return names


def _taken(storage: Any, names: Sequence[str]) -> list[str]:
    from study.ledger import stored_names

    existing = stored_names(storage)
    return [n for n in names if any(e == n or e.startswith(f"{n}/") for e in existing)]


def _common_parts(paths: Sequence[Path]) -> tuple[str, ...]:
    parts = [p.parts for p in paths]
    common: list[str] = []
    for items in zip(*parts):
        if len(set(items)) != 1:
            break
        common.append(items[0])
    return tuple(common)
