from pathlib import Path

import pytest

from study.config.rules import FieldError
from study.errors import InfeasibleError
from study.strategies import (
    HostInfo,
    StrategyKind,
    StrategySpec,
    check_batch_divisible,
    detect,
    device_key,
    resolve,
    tf_config_workers,
    tpu_hint,
)


@pytest.mark.parametrize(
    ("name", "kind", "replicas"),
    [
        ("auto", StrategyKind.AUTO, None),
        ("default", StrategyKind.DEFAULT, None),
        ("one_device", StrategyKind.ONE_DEVICE, None),
        ("mirrored", StrategyKind.MIRRORED, None),
        ("mirrored:4", StrategyKind.MIRRORED, 4),
        ("multi_worker_mirrored", StrategyKind.MULTI_WORKER_MIRRORED, None),
        ("multi_worker_mirrored:2", StrategyKind.MULTI_WORKER_MIRRORED, None),
        ("tpu", StrategyKind.TPU, None),
    ],
)
def test_parse_names(name, kind, replicas):
    spec = StrategySpec.parse(name)
    assert spec.kind is kind
    assert spec.replicas == replicas
    assert str(spec) == name


def test_multi_worker_count_is_workers_not_local_replicas():
    spec = StrategySpec.parse("multi_worker_mirrored:3")
    assert (spec.workers, spec.replicas) == (3, None)
    assert spec.static_replicas == 3  # one replica per worker process
    assert spec.logical_cpus == 1  # each worker is a one-device process
    assert spec.built_at_start
    bare = StrategySpec.parse("multi_worker_mirrored")
    assert (bare.workers, bare.static_replicas) == (None, None)  # the cluster decides
    assert bare.built_at_start
    assert not StrategySpec.parse("mirrored:2").built_at_start
    assert StrategySpec.parse("mirrored:2").workers is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("mirored:2", "unknown strategy 'mirored:2'; choose from auto, default, one_device"),
        ("mirrored:0", "mirrored:N needs N >= 1 (got 'mirrored:0')"),
        ("mirrored:x", "unknown strategy 'mirrored:x'"),
        ("tpu:2", "only mirrored and multi_worker_mirrored take a count (got 'tpu:2')"),
        ("default:1", "only mirrored and multi_worker_mirrored take a count (got 'default:1')"),
        (
            "multi_worker_mirrored:0",
            "multi_worker_mirrored:W needs W >= 1 (got 'multi_worker_mirrored:0')",
        ),
        ("multi_worker_mirrored:two", "unknown strategy 'multi_worker_mirrored:two'"),
        ("", "unknown strategy ''"),
        ("gpu", "unknown strategy 'gpu'"),
    ],
)
def test_parse_rejects(name, problem):
    with pytest.raises(FieldError) as info:
        StrategySpec.parse(name)
    err = info.value
    assert (err.field, err.value) == ("strategy", name)
    assert str(err).startswith(f"strategy: {problem}")
    assert str(err.named("--strategy")).startswith(f"--strategy: {problem}")
    assert err.rule.startswith("unknown strategy; choose from auto, default")  # for study files
    with pytest.raises(FieldError, match=rf"^--strategy: {problem[:12]}"):
        StrategySpec.parse(name, option="--strategy")


def test_parse_canonical_name():
    assert str(StrategySpec.parse(" mirrored:02 ")) == "mirrored:2"
    assert str(StrategySpec.parse("multi_worker_mirrored:002")) == "multi_worker_mirrored:2"


def test_device_keys_separate_device_sets():
    assert device_key("default", {}) == device_key("auto", {}) == "cpu1"
    assert device_key("one_device") == "cpu1"
    assert device_key("mirrored:2") == "cpu2"
    assert device_key("mirrored:4") != device_key("mirrored:2")


def test_device_keys_of_multi_worker_strategies():
    assert device_key("multi_worker_mirrored:2") == "mwm2"
    assert device_key("multi_worker_mirrored:3") == "mwm3"
    assert device_key("multi_worker_mirrored") == "mwm"  # the environment's cluster
    cluster = {
        "TF_CONFIG": '{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}}'
    }
    assert device_key("auto", cluster) == "mwm"  # auto picks multi-worker on such a host
    assert device_key("default", cluster) == "cpu1"


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        (HostInfo(gpus=0), "default"),
        (HostInfo(gpus=1), "one_device"),
        (HostInfo(gpus=4), "mirrored:4"),
        (HostInfo(gpus=2, workers=3), "multi_worker_mirrored"),
        (HostInfo(gpus=8, tpu=True), "tpu"),
    ],
)
def test_auto_detection(host, expected):
    assert str(detect(host)) == expected
    assert resolve("auto", host).kind is StrategySpec.parse(expected).kind


def test_resolve_mirrored_on_cpu_uses_logical_devices():
    r = resolve("mirrored:3", HostInfo(gpus=0))
    assert r.replicas == 3
    assert r.devices == ("/cpu:0", "/cpu:1", "/cpu:2")


def test_resolve_mirrored_on_gpus():
    r = resolve("mirrored", HostInfo(gpus=2))
    assert (r.replicas, r.devices) == (2, ("/gpu:0", "/gpu:1"))
    assert resolve("one_device", HostInfo(gpus=2)).devices == ("/gpu:0",)


def test_infeasible_strategies_name_strategy_and_detection():
    with pytest.raises(InfeasibleError, match=r"'tpu' needs a TPU; detected 0 GPU\(s\), no TPU"):
        resolve("tpu", HostInfo())
    with pytest.raises(InfeasibleError, match=r"'mirrored:4' needs 4 GPUs; detected 2 GPU"):
        resolve("mirrored:4", HostInfo(gpus=2))


def test_multi_worker_replicas_from_tf_config():
    env = {
        "TF_CONFIG": '{"cluster": {"worker": ["a:1", "b:1", "c:1"]}, "task": {"type": "worker", "index": 0}}'
    }
    assert tf_config_workers(env) == 3
    assert tf_config_workers({}) == 1
    assert tf_config_workers({"TF_CONFIG": "not json"}) == 1
    assert resolve("multi_worker_mirrored", HostInfo(workers=3)).replicas == 3


def test_resolve_multi_worker_group_checks_its_cluster():
    r = resolve("multi_worker_mirrored:2", HostInfo(workers=2))
    assert (r.kind, r.replicas, r.devices) == (StrategyKind.MULTI_WORKER_MIRRORED, 2, ("/cpu:0",))
    with pytest.raises(
        InfeasibleError,
        match=r"'multi_worker_mirrored:2' needs a group of 2 worker processes; this process has "
        r"1 worker\(s\) in TF_CONFIG",
    ):
        resolve("multi_worker_mirrored:2", HostInfo(workers=1))


def test_batch_divisibility_of_a_worker_group():
    spec = StrategySpec.parse("multi_worker_mirrored:2")
    check_batch_divisible(64, spec.static_replicas, strategy=str(spec))
    with pytest.raises(FieldError, match="not divisible by the 2 replicas of strategy 'multi_wo"):
        check_batch_divisible(63, spec.static_replicas, strategy=str(spec))


def test_tpu_hint_without_network(tmp_path: Path):
    assert not tpu_hint({}, dev=tmp_path)
    assert tpu_hint({"TPU_NAME": "my-tpu"}, dev=tmp_path)
    (tmp_path / "accel0").touch()
    assert tpu_hint({}, dev=tmp_path)


def test_batch_divisibility():
    check_batch_divisible(128, 2, strategy="mirrored:2")
    with pytest.raises(FieldError) as info:
        check_batch_divisible(127, 2, strategy="mirrored:2")
    err = info.value
    assert (err.field, err.value) == ("batch_size", 127)
    assert str(err) == (
        "batch_size 127 is not divisible by the 2 replicas of strategy 'mirrored:2'; "
        "use a multiple of 2"
    )
    assert str(err.named("--batch-size")).startswith("--batch-size 127 is not divisible by the 2")
    assert err.rule == "must be divisible by 2, the replica count of strategy 'mirrored:2'"
