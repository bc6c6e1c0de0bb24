"""Tests for deploy/: the Kubernetes Job and the Slurm script that launch one multi-worker trial
on W hosts give every host the TF_CONFIG that `study.runner.cluster.tf_config` would, and only
the chief logs to MLflow. The launch scripts run in bash with `study` replaced by `echo`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from study.runner.cluster import tf_config

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def run_script(script: str, env: dict[str, str]) -> tuple[dict, str]:
    """Run a launch script with ``exec study`` replaced by ``echo study``: its TF_CONFIG and the
    `study` command line it would run."""
    script = script.replace("exec study", "echo study")
    out = subprocess.run(
        ["bash", "-c", script], env={**os.environ, **env}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    config = next(line for line in lines if "TF_CONFIG=" in line).split("TF_CONFIG=", 1)[1]
    command = next(line for line in lines if line.startswith("study "))
    return json.loads(config), " ".join(command.split())


def test_kubernetes_indexed_job_builds_tf_config_from_the_pod_index() -> None:
    service, job = yaml.safe_load_all((DEPLOY / "kubernetes/multi-worker-job.yaml").read_text())
    assert (service["kind"], job["kind"]) == ("Service", "Job")
    assert service["spec"]["clusterIP"] == "None"  # headless: pod DNS names
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
    assert job["spec"]["completionMode"] == "Indexed"
    (container,) = pod["containers"]
    env = {item["name"]: item["value"] for item in container["env"]}
    workers = int(env["WORKERS"])
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == workers
    assert env["JOB_NAME"] == job["metadata"]["name"]
    hosts = [f"{env['JOB_NAME']}-{i}.{env['SERVICE']}:2222" for i in range(workers)]
    for index in range(workers):
        config, command = run_script(
            container["args"][0], {**env, "JOB_COMPLETION_INDEX": str(index)}
        )
        assert config == json.loads(tf_config(hosts, index))
        assert "--strategy multi_worker_mirrored " in command
        assert command.endswith(
            f"--tracking-uri {env['MLFLOW_TRACKING_URI']}" if index == 0 else "--no-track"
        )


def test_slurm_script_builds_tf_config_from_the_node_list_and_rank(tmp_path: Path) -> None:
    text = (DEPLOY / "slurm/multi-worker.sbatch").read_text()
    assert "#SBATCH --ntasks-per-node=1" in text
    inner = text.split("bash -c '", 1)[1].rsplit("'\n", 1)[0]
    inner = inner.replace("'\"${PORT}\"'", "2222").replace("'\"${TRACKING_URI}\"'", "http://t:5000")
    scontrol = tmp_path / "scontrol"  # `scontrol show hostnames` expands the node list
    scontrol.write_text("#!/bin/bash\necho node-a\necho node-b\n")
    scontrol.chmod(0o755)
    path = f"{tmp_path}{os.pathsep}{os.environ['PATH']}"
    for rank in range(2):
        config, command = run_script(
            inner, {"PATH": path, "SLURM_JOB_NODELIST": "node-[a-b]", "SLURM_PROCID": str(rank)}
        )
        assert config == json.loads(tf_config(["node-a:2222", "node-b:2222"], rank))
        assert command.endswith("--tracking-uri http://t:5000" if rank == 0 else "--no-track")
