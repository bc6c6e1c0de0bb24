"""`study worker NAME`: join a study another process or host started, and run its trials.

Like ``wandb agent`` or Optuna's shared-storage workers: everything comes from the ledger (the
study file, search space, budget and tuner as `study run` stored them), so a host needs only the
study's name and the two URLs (``--storage``, ``--tracking-uri``). The worker claims slots until
the study's budget is spent and no trial is open anywhere (it waits for other workers' trials,
and reruns those whose host stopped answering), or until ``--max-trials`` trials of its own;
then it exits 0. Ctrl-C and SIGTERM stop it cleanly: 130 and 143.
"""

from __future__ import annotations

import argparse


def main(args: argparse.Namespace) -> int:
    from study.commands.run import run_config, stored_study

    config, record = stored_study(args.storage, args.name)
    return run_config(config, args, tuner=record.tuner or "both")
