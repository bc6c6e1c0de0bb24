"""Running `study` in the test process (`study.cli.main`), where a test is about what a command
does, not about the process boundary: the same directory, store, cache and module path as
`tests.cli.study` gives its subprocess, without starting a Python (and MLflow, Optuna) each time.
Trainer workers are still spawned processes, as in a real run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from study.cli import main


def study_here(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    cwd: Path,
    pythonpath: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``study ARGS`` run by `study.cli.main` in ``cwd`` (store ``cwd/mlruns``, dataset cache
    ``cwd/cache``, no inherited tracking URI or store root); ``pythonpath`` first on the module
    path, which its trainer workers inherit. Its exit status, stdout and stderr as a
    subprocess's."""
    with monkeypatch.context() as env:
        _as_a_command(env, cwd, pythonpath, cwd / "cache")
        capsys.readouterr()  # what came before is not this command's
        status = main([str(a) for a in args])
        out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["study", *args], status, out, err)


def study_in(
    *args: str, cwd: Path, pythonpath: Path | None = None, cache: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`study_here` for a fixture wider than one test (module or session scope, where the
    ``monkeypatch`` and ``capsys`` fixtures are not available): the same directory,
    environment and module path, its stdout and stderr captured as Python writes them.
    ``cache``: the dataset cache, if not ``cwd/cache``."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as env:
        _as_a_command(env, cwd, pythonpath, cache or cwd / "cache")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main([str(a) for a in args])
    return subprocess.CompletedProcess(["study", *args], status, out.getvalue(), err.getvalue())


def _as_a_command(env: pytest.MonkeyPatch, cwd: Path, pythonpath: Path | None, cache: Path) -> None:
    """What `tests.cli.study` gives its subprocess, undone when ``env`` is: the directory, no
    inherited tracking URI or store root, the dataset cache, the module path."""
    env.chdir(cwd)
    env.delenv("MLFLOW_TRACKING_URI", raising=False)
    env.delenv("STUDY_HOME", raising=False)
    env.setenv("STUDY_CACHE_DIR", str(cache))
    if pythonpath is not None:
        env.syspath_prepend(str(pythonpath))


# One `python -m study` process running several commands in turn, each with its own directory
# and its own file descriptors 1 and 2 (so what TensorFlow's C++ side or a spawned worker writes
# lands with the command that caused it), its exit status as `python -m study`'s: main()'s return
# value, a SystemExit's code, or 1 with the traceback on its stderr.
_EACH = """
import hashlib, json, os, sys, traceback
from study.cli import main

# A worker imports this file again as its main module: only the script runs the cases.
if __name__ == "__main__":
    sys.path[0] = ""  # the current directory, as under `python -c`: each case's own
    cases, watched = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    for cwd, argv, out, err in cases:
        os.chdir(cwd)
        os.environ["STUDY_CACHE_DIR"] = os.path.join(cwd, "cache")
        sys.stdout.flush(), sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        with open(out, "w") as out_file, open(err, "w") as err_file:
            os.dup2(out_file.fileno(), 1), os.dup2(err_file.fileno(), 2)
            try:
                status = main(argv)
            except SystemExit as exc:
                status = exc.code
                if status is not None and not isinstance(status, int):
                    print(status, file=sys.stderr)
                    status = 1
            except BaseException:
                traceback.print_exc()
                status = 1
            finally:
                sys.stdout.flush(), sys.stderr.flush()
                os.dup2(saved[0], 1), os.dup2(saved[1], 2)
                os.close(saved[0]), os.close(saved[1])
        with open(err + ".status", "w") as status_file:
            status_file.write(str(status or 0))
        digests = [
            hashlib.sha256(open(path, "rb").read()).hexdigest() if os.path.exists(path) else None
            for path in watched
        ]
        with open(err + ".watched", "w") as digest_file:
            json.dump(digests, digest_file)
"""


def sha256(path: Path) -> str | None:
    """The file's SHA-256 (hex), None if it does not exist: what `study_each` records."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def study_each(
    runs: list[tuple[Path, list[str]]],
    *,
    logs: Path,
    watch: tuple[Path, ...] = (),
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> list[subprocess.CompletedProcess[str]]:
    """``study ARGV`` in ``cwd`` for each ``(cwd, ARGV)`` of ``runs``, all in one Python process
    forked from the zygote as `tests.cli.study` forks its one, in the first ``cwd`` (a user's
    modules there are found by its workers too; no inherited tracking URI or store root; each
    command's dataset cache ``cwd/cache``); each command's exit status, stdout and stderr
    as its own process's. ``logs`` (outside every ``cwd``) holds what they wrote. The files in
    ``watch`` are read after each command: its result's ``watched`` is their `sha256` then.
    ``env`` adds to the process's environment."""
    import json
    import os

    from tests.zygote import zygote

    logs.mkdir(parents=True, exist_ok=True)
    cases = [
        (str(cwd), list(argv), str(logs / f"{i}.out"), str(logs / f"{i}.err"))
        for i, (cwd, argv) in enumerate(runs)
    ]
    inherited = os.environ.items()
    environment = {k: v for k, v in inherited if k not in ("MLFLOW_TRACKING_URI", "STUDY_HOME")}
    script = logs / "each.py"
    script.write_text(_EACH, encoding="utf-8")
    argv = [json.dumps(cases), json.dumps([str(p) for p in watch])]
    out, err = logs / "each.out", logs / "each.err"
    environment.update(env or {})
    start = runs[0][0] if runs else logs
    process = zygote().spawn(
        argv, cwd=start, env=environment, stdout=out, stderr=err, module=str(script),
        fork_server=True,
    )  # fmt: skip
    try:
        status = process.wait(timeout)
    finally:
        if process.poll() is None:
            process.kill()
    assert status == 0, err.read_text(encoding="utf-8", errors="replace")[-3000:]
    results = []
    for _cwd, argv, out, err in cases:
        status = int(Path(err + ".status").read_text(encoding="utf-8"))
        result = subprocess.CompletedProcess(
            ["study", *argv],
            status,
            Path(out).read_text(encoding="utf-8"),
            Path(err).read_text(encoding="utf-8"),
        )
        result.watched = json.loads(Path(err + ".watched").read_text(encoding="utf-8"))  # type: ignore[attr-defined]
        results.append(result)
    return results
