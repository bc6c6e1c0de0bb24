"""`study serve-storage`: Optuna's gRPC storage proxy in front of a database, for fleets
(`study.ledger.proxy`).

Workers then use ``--storage grpc://HOST:PORT`` wherever a storage URL goes; only the proxy
holds database connections. Prints one line with the address it serves; SIGTERM, SIGINT
(Ctrl-C) and SIGHUP stop it cleanly (calls in flight finish, exit status 0). A database that
cannot be opened or a port that cannot be bound: one line, exit status 2. No TensorFlow, no
MLflow.
"""

from __future__ import annotations

import argparse
import signal
import threading
from types import FrameType

from study.errors import FieldError

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def main(args: argparse.Namespace) -> int:
    from study.ledger.proxy_server import start_proxy

    try:
        proxy = start_proxy(args.storage, args.host, args.port, threads=args.threads)
    except FieldError as err:
        raise err.named(f"--{err.field.replace('_', '-')}") from None
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, handler) for s in _STOP_SIGNALS}
    try:
        print(
            f"study serve-storage: serving {proxy.where} at {proxy.address} "
            f"(workers: --storage {proxy.address}; Ctrl-C or SIGTERM stops it)",
            flush=True,
        )
        while not stop.is_set() and not proxy.wait(0.5):
            pass
    finally:
        proxy.stop()
        for s, h in previous.items():
            signal.signal(s, h)
    return 0
