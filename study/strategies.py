"""Distribution strategies: names, hardware detection and construction.

Parsing and detection are pure Python (testable with a faked `HostInfo`); only `build_strategy`
and `probe_host` touch TensorFlow, and they run inside a trainer worker.

Names: ``auto`` (detect), ``default``, ``one_device``, ``mirrored`` (all GPUs), ``mirrored:N``
(N replicas: N GPUs, or N logical CPU devices on a CPU-only host), ``multi_worker_mirrored``
(the cluster of the environment's ``TF_CONFIG``: one process per host, launched by a
scheduler), ``multi_worker_mirrored:W`` (a group of W worker processes on this host, one
replica each, coordinated by a ``TF_CONFIG`` on loopback ports: `study.runner.cluster`),
``tpu``. `StrategySpec.parse` is the one grammar for these names
(``study train --strategy`` and a study file's ``search_space.strategy`` both use it); it and
`check_batch_divisible` raise `FieldError` for the caller to name.
"""

from __future__ import annotations

import enum
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from study.errors import FieldError, InfeasibleError

_NAME = re.compile(r"^(auto|default|one_device|mirrored|multi_worker_mirrored|tpu)(?::([0-9]+))?$")
_CHOICES = (
    "auto, default, one_device, mirrored, mirrored:N, multi_worker_mirrored, "
    "multi_worker_mirrored:W, tpu"
)
_RULE = (
    "unknown strategy; choose from auto, default, one_device, mirrored, mirrored:N (N >= 1), "
    "multi_worker_mirrored, multi_worker_mirrored:W (W >= 1 worker processes), tpu"
)
_COUNTED = {"mirrored": "N", "multi_worker_mirrored": "W"}
#: Seconds a collective op of a local worker group waits for its peers (a member may trace or
#: evaluate more slowly than another, never for minutes).
GROUP_COLLECTIVE_TIMEOUT_S = 300.0


class StrategyKind(str, enum.Enum):
    AUTO = "auto"
    DEFAULT = "default"
    ONE_DEVICE = "one_device"
    MIRRORED = "mirrored"
    MULTI_WORKER_MIRRORED = "multi_worker_mirrored"
    TPU = "tpu"


@dataclass(frozen=True)
class StrategySpec:
    """A parsed strategy name. ``replicas`` is set only for ``mirrored:N``, ``workers`` only
    for ``multi_worker_mirrored:W``."""

    kind: StrategyKind
    replicas: int | None = None
    workers: int | None = None

    @classmethod
    def parse(cls, name: str, *, option: str | None = None) -> StrategySpec:
        """Parse a strategy name.

        Example: ``StrategySpec.parse("mirrored:2")`` is ``StrategySpec(MIRRORED, 2)``;
        ``StrategySpec.parse("multi_worker_mirrored:2")`` is
        ``StrategySpec(MULTI_WORKER_MIRRORED, workers=2)``.

        Raises:
            FieldError: field ``strategy``, value ``name``; ``option``, if given, names it.
        """
        match = _NAME.match(str(name).strip())
        if not match:
            problem = f"unknown strategy {name!r}; choose from {_CHOICES}"
        elif match.group(2) is None:
            return cls(StrategyKind(match.group(1)))
        elif match.group(1) not in _COUNTED:
            problem = f"only mirrored and multi_worker_mirrored take a count (got {name!r})"
        elif int(match.group(2)) < 1:
            letter = _COUNTED[match.group(1)]
            problem = f"{match.group(1)}:{letter} needs {letter} >= 1 (got {name!r})"
        elif match.group(1) == StrategyKind.MIRRORED.value:
            return cls(StrategyKind.MIRRORED, int(match.group(2)))
        else:
            return cls(StrategyKind.MULTI_WORKER_MIRRORED, workers=int(match.group(2)))
        raise FieldError("strategy", _RULE, name, detail=problem, name=option)

    @property
    def static_replicas(self) -> int | None:
        """Replicas known without looking at the hardware: 1 for default and one_device, N for
        mirrored:N, W for multi_worker_mirrored:W (one replica per worker process); None for
        auto, mirrored, multi_worker_mirrored and tpu."""
        if self.kind in (StrategyKind.DEFAULT, StrategyKind.ONE_DEVICE):
            return 1
        return self.workers or self.replicas

    @property
    def built_at_start(self) -> bool:
        """Whether a worker must build this strategy before TensorFlow initialises: a
        multi-worker strategy configures collective ops, which only works at program start."""
        return self.kind is StrategyKind.MULTI_WORKER_MIRRORED

    @property
    def logical_cpus(self) -> int:
        """Logical CPU devices a worker must create before TensorFlow starts (CPU-only hosts)."""
        return self.replicas if self.kind is StrategyKind.MIRRORED and self.replicas else 1

    def __str__(self) -> str:
        count = self.workers or self.replicas
        return f"{self.kind.value}:{count}" if count else self.kind.value


def device_key(name: str, env: Mapping[str, str] | None = None) -> str:
    """The worker configuration a strategy needs; trials with equal keys may share a worker.

    ``cpuN``: one process with N logical CPUs; ``mwmW``: a group of W processes on loopback
    ports (``multi_worker_mirrored:W``); ``mwm``: one process that joins the cluster of the
    environment's ``TF_CONFIG`` (``multi_worker_mirrored``, or ``auto`` when ``TF_CONFIG``
    names several workers). Example: ``device_key("mirrored:2")`` is ``"cpu2"``.
    """
    spec = StrategySpec.parse(name)
    if spec.kind is StrategyKind.AUTO and tf_config_workers(env) > 1:
        return "mwm"
    if spec.kind is StrategyKind.MULTI_WORKER_MIRRORED:
        return f"mwm{spec.workers or ''}"
    return f"cpu{spec.logical_cpus}"


def check_batch_divisible(batch_size: int, replicas: int, *, strategy: str) -> None:
    """Reject a global batch that does not split evenly across replicas.

    Raises:
        FieldError: field ``batch_size``, e.g. "batch_size 127 is not divisible by the 2
            replicas of strategy 'mirrored:2'; use a multiple of 2".
    """
    if batch_size % replicas:
        raise FieldError(
            "batch_size",
            f"must be divisible by {replicas}, the replica count of strategy {strategy!r}",
            batch_size,
            detail=f"{batch_size} is not divisible by the {replicas} replicas of strategy "
            f"{strategy!r}; use a multiple of {replicas}",
            sep=" ",
        )


@dataclass(frozen=True)
class HostInfo:
    """What the host offers: accelerators and the multi-worker cluster, if any."""

    gpus: int = 0
    tpu: bool = False
    workers: int = 1

    def describe(self) -> str:
        tpu = "a TPU" if self.tpu else "no TPU"
        return f"{self.gpus} GPU(s), {tpu}, {self.workers} worker(s) in TF_CONFIG"


@dataclass(frozen=True)
class ResolvedStrategy:
    """A concrete strategy for this host: its kind, replica count and devices."""

    kind: StrategyKind
    replicas: int
    devices: tuple[str, ...]
    requested: str

    def describe(self) -> str:
        return f"{self.kind.value} ({self.replicas} replica(s) on {', '.join(self.devices)})"


def tf_config_workers(env: Mapping[str, str] | None = None) -> int:
    """Number of workers (chief included) described by ``TF_CONFIG`` (1 if unset or malformed)."""
    raw = (env if env is not None else os.environ).get("TF_CONFIG")
    if not raw:
        return 1
    try:
        cluster = json.loads(raw).get("cluster", {})
    except (ValueError, AttributeError):
        return 1
    return max(1, len(cluster.get("worker", [])) + len(cluster.get("chief", [])))


def tpu_hint(env: Mapping[str, str] | None = None, dev: Path = Path("/dev")) -> bool:
    """Whether a TPU may be reachable, judged without any network call."""
    env = env if env is not None else os.environ
    if any(env.get(k) for k in ("TPU_NAME", "COLAB_TPU_ADDR", "TPU_ACCELERATOR_TYPE")):
        return True
    return any(dev.glob("accel[0-9]*")) if dev.is_dir() else False


def detect(host: HostInfo) -> StrategySpec:
    """The strategy ``auto`` picks for a host.

    TPU if reachable; multi-worker mirrored if TF_CONFIG has more than one worker; mirrored over
    all GPUs when there are two or more; one_device on one GPU; default on a CPU-only host.
    """
    if host.tpu:
        return StrategySpec(StrategyKind.TPU)
    if host.workers > 1:
        return StrategySpec(StrategyKind.MULTI_WORKER_MIRRORED)
    if host.gpus >= 2:
        return StrategySpec(StrategyKind.MIRRORED, host.gpus)
    if host.gpus == 1:
        return StrategySpec(StrategyKind.ONE_DEVICE)
    return StrategySpec(StrategyKind.DEFAULT)


def resolve(name: str, host: HostInfo) -> ResolvedStrategy:
    """Decide replicas and devices for a strategy name on a host.

    Raises:
        InfeasibleError: naming the strategy and what was detected, if the host cannot provide it.
    """
    spec = StrategySpec.parse(name)
    if spec.kind is StrategyKind.AUTO:
        spec = detect(host)
    gpu_devices = tuple(f"/gpu:{i}" for i in range(host.gpus))
    if spec.kind is StrategyKind.DEFAULT:
        return ResolvedStrategy(spec.kind, 1, gpu_devices[:1] or ("/cpu:0",), name)
    if spec.kind is StrategyKind.ONE_DEVICE:
        return ResolvedStrategy(spec.kind, 1, gpu_devices[:1] or ("/cpu:0",), name)
    if spec.kind is StrategyKind.MIRRORED:
        if host.gpus:
            wanted = spec.replicas or host.gpus
            if wanted > host.gpus:
                raise InfeasibleError(
                    f"strategy {name!r} needs {wanted} GPUs; detected {host.describe()}"
                )
            return ResolvedStrategy(spec.kind, wanted, gpu_devices[:wanted], name)
        wanted = spec.replicas or 1
        return ResolvedStrategy(spec.kind, wanted, tuple(f"/cpu:{i}" for i in range(wanted)), name)
    if spec.kind is StrategyKind.MULTI_WORKER_MIRRORED:
        if spec.workers and spec.workers != host.workers:
            raise InfeasibleError(
                f"strategy {name!r} needs a group of {spec.workers} worker processes; this "
                f"process has {host.workers} worker(s) in TF_CONFIG"
            )
        local = max(1, host.gpus)
        devices = gpu_devices or ("/cpu:0",)
        return ResolvedStrategy(spec.kind, local * host.workers, devices, name)
    if not host.tpu:
        raise InfeasibleError(
            f"strategy {name!r} needs a TPU; detected {host.describe()} "
            "(set TPU_NAME or run on a TPU VM)"
        )
    return ResolvedStrategy(spec.kind, 8, ("/tpu",), name)


def probe_host(tf: Any) -> HostInfo:
    """Read the host's devices through TensorFlow without initialising its runtime."""
    return HostInfo(
        gpus=len(tf.config.list_physical_devices("GPU")),
        tpu=tpu_hint(),
        workers=tf_config_workers(),
    )


def configure_devices(tf: Any, logical_cpus: int) -> None:
    """Split the CPU into ``logical_cpus`` devices; must run before TensorFlow initialises."""
    if logical_cpus <= 1 or tf.config.list_physical_devices("GPU"):
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(logical_cpus)]
    )


def collective_timeout(env: Mapping[str, str] | None = None) -> float:
    """Seconds one collective op of a local worker group may wait for its peers before it fails
    (`GROUP_COLLECTIVE_TIMEOUT_S`, or ``$STUDY_COLLECTIVE_TIMEOUT``): a member that hangs
    alive then fails the trial instead of blocking the group forever."""
    raw = (env if env is not None else os.environ).get("STUDY_COLLECTIVE_TIMEOUT")
    return float(raw) if raw else GROUP_COLLECTIVE_TIMEOUT_S


def build_strategy(tf: Any, resolved: ResolvedStrategy) -> Any:
    """Construct the `tf.distribute.Strategy` for a resolved strategy.

    A ``multi_worker_mirrored:W`` group's collectives time out (`collective_timeout`); a real
    cluster's (bare ``multi_worker_mirrored``) wait as long as TensorFlow does.
    """
    kind = resolved.kind
    if kind is StrategyKind.DEFAULT:
        return tf.distribute.get_strategy()
    if kind is StrategyKind.ONE_DEVICE:
        return tf.distribute.OneDeviceStrategy(resolved.devices[0])
    if kind is StrategyKind.MIRRORED:
        available = {
            d.name.lower().replace("/device:", "/") for d in tf.config.list_logical_devices()
        }
        missing = [d for d in resolved.devices if not any(a.endswith(d[1:]) for a in available)]
        if missing:
            raise InfeasibleError(
                f"strategy {resolved.requested!r} needs devices {', '.join(resolved.devices)}; "
                f"this worker has {', '.join(sorted(available))}"
            )
        return tf.distribute.MirroredStrategy(list(resolved.devices))
    if kind is StrategyKind.MULTI_WORKER_MIRRORED:
        workers = StrategySpec.parse(resolved.requested).workers
        timeout = collective_timeout() if workers else None
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
