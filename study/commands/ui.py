"""`study ui`: the MLflow UI on the study store, bound to 127.0.0.1."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from study.paths import artifact_root, tracking_uri


def command(uri: str, port: int, host: str = "127.0.0.1") -> list[str]:
    """The ``mlflow ui`` command line for a tracking URI."""
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--host",
        host,
        "--port",
        str(port),
    ]
    artifacts = artifact_root(uri)
    if artifacts:
        cmd += ["--default-artifact-root", artifacts]
    return cmd


def main(args: argparse.Namespace) -> int:
    uri = tracking_uri(args.tracking_uri)
    print(f"MLflow UI for {uri}\n  http://127.0.0.1:{args.port}  (Ctrl-C to stop)", flush=True)
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    try:
        return subprocess.call(command(uri, args.port), env=env)
    except KeyboardInterrupt:
        return 0
