"""`study init NAME`: a study of your own to start from, written into the working directory.

Writes ``NAME.yaml`` (the quickstart, named NAME, with its model in ``NAME_model.py``) and
``NAME_model.py`` (the model ``build`` to edit), and prints the next command. An existing file
is never overwritten: the command then writes nothing and fails with one line (exit 2).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from study.errors import ExitCode, UsageError
from study.paths import exists


def main(args: argparse.Namespace) -> int:
    from study.examples import model_module, starter

    files = starter(args.name)
    for name in files:
        if exists(name):
            raise UsageError(f"{name} already exists here; choose another NAME or move it away")
    for name, text in files.items():
        try:
            Path(name).write_text(text, encoding="utf-8")
        except OSError as exc:  # a name too long for the file system, a read-only folder
            raise UsageError(
                f"cannot write {name} here ({exc.strerror}); choose another NAME"
            ) from None
    yaml, module = files
    print(f"wrote {yaml} (the quickstart study, training your model)")
    print(f"wrote {module} (its model: edit build; `study` imports it from this folder)")
    print(f"check the model: study check-workload mnist1d --model {model_module(args.name)}:build")
    print(f"run the study:   study run {yaml}")
    return ExitCode.OK
