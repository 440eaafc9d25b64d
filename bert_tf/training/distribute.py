"""tf.distribute strategies by name: one device, mirrored GPUs/CPUs, multi-worker, TPU."""

import json
import os

import tensorflow as tf

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


class StrategyError(ValueError):
    """A distribution setting (flag or TF_CONFIG) that cannot be used, named."""


def get_strategy(distribution_strategy="one_device", num_gpus=0, tpu=None):
    """Builds the tf.distribute.Strategy named by `distribution_strategy`.

    Args:
      distribution_strategy: one of "one_device" (the first GPU if num_gpus > 0, else the CPU),
        "mirrored" (all `num_gpus` GPUs, or every visible logical device when num_gpus is 0 --
        several logical CPUs included), "multi_worker_mirrored" (the cluster in the TF_CONFIG
        environment variable) or "tpu".
      num_gpus: GPUs to use for "one_device" and "mirrored".
      tpu: TPU name or grpc address for "tpu"; None, "" or "local" mean a TPU VM's own TPU.

    Returns:
      A tf.distribute.Strategy. For "multi_worker_mirrored" call this before any other
      TensorFlow work in the process (collective ops are configured at start-up).

    Raises:
      StrategyError: unknown strategy name, too few GPUs, or bad TF_CONFIG.
    """
    if distribution_strategy not in STRATEGIES:
        raise StrategyError(f"--distribution_strategy={distribution_strategy!r}; expected one of "
                         f"{', '.join(STRATEGIES)}")
    if num_gpus < 0:
        raise StrategyError(f"--num_gpus={num_gpus} must be >= 0")
    # Physical, not logical: listing logical devices initialises the TF runtime, after which
    # MultiWorkerMirroredStrategy can no longer configure its collective ops.
    gpus = tf.config.list_physical_devices("GPU")
    if num_gpus > len(gpus):
        raise StrategyError(f"--num_gpus={num_gpus} but only {len(gpus)} GPU(s) are visible")

    if distribution_strategy == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if num_gpus else "/cpu:0")
    if distribution_strategy == "mirrored":
        if num_gpus:
            devices = [f"/gpu:{i}" for i in range(num_gpus)]
        else:
            devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)
    if distribution_strategy == "multi_worker_mirrored":
        _check_tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()
    tpu = tpu or "local"
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    if tpu != "local":
        # A remote TPU (name or grpc:// address) is reached through its cluster; a TPU VM's
        # own chips are not.
        tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _check_tf_config():
    """Fails early, naming the problem, when TF_CONFIG cannot describe this worker."""
    raw = os.environ.get("TF_CONFIG")
    if raw is None:
        return  # A single worker without TF_CONFIG is valid (one local host).
    expected = ('expected JSON like {"cluster": {"worker": ["host:port", ...]}, "task": '
                '{"type": "worker", "index": 0}}')
    if not raw.strip():
        raise StrategyError(f"TF_CONFIG is set but empty; {expected} (or unset it to train on "
                            "this host alone)")
    try:
        config = json.loads(raw)
    except ValueError as e:
        raise StrategyError(f"TF_CONFIG is not JSON ({e}); {expected}") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise StrategyError(f"TF_CONFIG needs a \"cluster\" and a \"task\" object; {expected}")
    if not all(isinstance(hosts, list) for hosts in cluster.values()):
        raise StrategyError(f"TF_CONFIG cluster: every job must be a list of host:port; "
                            f"{expected}")
    if not cluster.get("worker", []) + cluster.get("chief", []):
        raise StrategyError(f"TF_CONFIG cluster has no worker or chief; {expected}")
    task_type, index = task.get("type"), task.get("index")
    if task_type not in cluster:
        raise StrategyError(f"TF_CONFIG task type {task_type!r} is not a job of the cluster "
                            f"({', '.join(sorted(cluster))})")
    hosts = cluster[task_type]
    if "index" not in task:
        raise StrategyError(f"TF_CONFIG task has no index; {expected}")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(hosts):
        raise StrategyError(f"TF_CONFIG task index {index!r} is out of range: the cluster's "
                            f"{task_type} job has {len(hosts)} host(s) ({', '.join(hosts)}), "
                            f"so index is 0 to {len(hosts) - 1}")


def is_chief(strategy):
    """True on the worker that writes checkpoints, summaries and result files."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type in (None, "chief"):
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and not has_chief
