"""The runtime every training job starts: the runtime settings, the backend check, the
tf.distribute strategy or JAX devices, the seed and dtype policy, the loop's batch and steps,
and the length buckets the runtime can compile.
"""

import dataclasses

import keras
from absl import logging

from bert_tf import optional
from bert_tf.jobs import flag_checks
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.jobs.sections import RuntimeConfig
from bert_tf.training import runtime
from bert_tf.training.distribute import StrategyError, get_strategy


def check_backend(settings, tensorflow_only=None):
    """--backend is one bert_tf runs on, the one Keras runs on, and no flag of the other
    backend is set; returns it ("tensorflow" or "jax"), or raises FlagValueError naming the
    flag.

    Args:
      settings: the job's runtime section (bert_tf.jobs.sections.RuntimeConfig).
      tensorflow_only: {flag name: (value, why it needs TensorFlow)} of the job's own flags
        that a JAX run cannot honour; a set (truthy) value is refused.
    """
    try:
        backend = runtime.resolve_backend(settings)
    except ValueError as e:
        raise FlagValueError(str(e)) from None
    if backend == "jax":
        # tf.distribute's settings: a JAX run uses every device of its processes instead.
        strategy_settings = {"distribution_strategy": settings.distribution_strategy,
                             "num_gpus": settings.num_gpus, "tpu": settings.tpu,
                             "use_tpu": settings.use_tpu, "tpu_name": settings.tpu_name}
        defaults = {field.name: field.default for field in dataclasses.fields(RuntimeConfig)}
        for name, value in strategy_settings.items():
            if value != defaults[name]:
                raise FlagValueError(
                    f"--{name}={value} is a tf.distribute setting, which a "
                    "--backend=jax run does not read: it trains on every local device and "
                    "joins other hosts through --coordinator_address (docs/scaling.md)")
        for name, (value, why) in (tensorflow_only or {}).items():
            if value:
                raise FlagValueError(f"--{name} has no meaning with --backend=jax ({why})")
        if settings.dtype == "mixed_float16":
            raise FlagValueError("--dtype=mixed_float16 needs loss scaling, which the JAX "
                                 "runner does not do: use --dtype=mixed_bfloat16 (or auto)")
    else:
        jax_process_settings = {"coordinator_address": settings.coordinator_address,
                                "num_processes": settings.num_processes,
                                "process_id": settings.process_id}
        for name, value in jax_process_settings.items():
            if value is not None:
                raise FlagValueError(
                    f"--{name} joins JAX processes (--backend=jax); TensorFlow's workers "
                    "find each other through TF_CONFIG (docs/scaling.md)")
    return backend


def make_runtime(settings, batch_sizes=None, trains=True, varying_shapes=False):
    """The job's Runtime (training.runtime): the tf.distribute strategy the flags ask for
    (make_strategy), or JAX over every device of the run's processes; then the seed and the
    dtype policy. Call before any other TensorFlow work (multi-worker collectives configure
    at start-up). A JAX job that `trains` needs Orbax (its checkpoints), refused in one line
    naming the extra to install when it is missing. `varying_shapes`: the training batches
    change shape from step to step (length buckets), which the dtype and XLA choices weigh.
    `batch_sizes`: {flag name: value} of the job's global batch sizes, each checked to split
    over the replicas or devices.

    Raises:
      FlagValueError: a global batch that does not divide over the replicas or devices.
    """
    try:
        if trains and runtime.resolve_backend(settings) == "jax":
            optional.require("orbax.checkpoint")
        batch_sizes = batch_sizes or {}
        job_runtime = runtime.create(settings, lambda: make_strategy(settings, batch_sizes))
        for name, value in batch_sizes.items():
            job_runtime.check_global_batch(value, f"--{name}")
    except (ValueError, ImportError) as e:
        raise FlagValueError(str(e)) from None
    if settings.seed is not None:
        keras.utils.set_random_seed(settings.seed)
    job_runtime.set_precision(settings.dtype, varying_shapes=varying_shapes)
    return job_runtime


def make_strategy(settings, batch_sizes=None):
    """The strategy the flags ask for; checks that the global batch sizes ({flag name:
    value}) split over its replicas.

    Call before any other TensorFlow work (multi-worker collectives configure at start-up).
    """
    distribution = "tpu" if settings.use_tpu else settings.distribution_strategy
    try:
        strategy = get_strategy(distribution, num_gpus=settings.num_gpus,
                                tpu=settings.tpu or settings.tpu_name)
    except StrategyError as e:
        raise FlagValueError(str(e)) from None
    replicas = strategy.num_replicas_in_sync
    for name, value in (batch_sizes or {}).items():
        if value < 1:
            raise FlagValueError(f"--{name}={value} must be >= 1")
        if value % replicas:
            raise FlagValueError(f"--{name}={value} is not divisible by the {replicas} replicas "
                                 f"of --distribution_strategy={distribution}")
    return strategy


def effective_train_batch_size(trainer):
    """Examples per optimizer step: --train_batch_size x --gradient_accumulation_steps of the
    job's trainer section (bert_tf.jobs.sections.TrainerConfig).

    Training steps, warmup and epochs count optimizer steps, so the fine-tuning CLIs derive
    them from this rather than from --train_batch_size.
    """
    flag_checks.check_gradient_accumulation(trainer)
    return trainer.train_batch_size * trainer.gradient_accumulation_steps


def steps_per_loop(trainer):
    """Optimizer steps per host round trip: --iterations_per_loop (the original's name) when
    set, else --steps_per_loop."""
    return trainer.iterations_per_loop or trainer.steps_per_loop


def resolve_length_buckets(value, max_seq_length, config, job_runtime=None, training=True):
    """The bucket lengths of --length_buckets=`value` for --max_seq_length and the model (an
    EncoderConfig); None: off.

    "auto" gives coarse buckets for training batches (16, 32, 48, 64, 96, ...: a batch holds
    one bucket, and a wide bucket keeps texts of different lengths mixed) and fine ones for
    evaluation and prediction (4, 8, 12, 16, 24, ..., 64, 80, ...: length-sorted batches,
    which do not change any result). On TPUs "auto" is off: the training loop runs many steps
    in one compiled program, which needs one static shape (an explicit list is taken as given
    for both).

    Raises:
      FlagValueError naming the flag: a list that is not strictly increasing, exceeds the
      model's max_position_embeddings, or starts above --max_seq_length.
    """
    from bert_tf.data.tasks import length_buckets

    if (job_runtime is not None and isinstance(value, str) and value.strip().lower() == "auto"
            and job_runtime.needs_static_shapes()):
        logging.info("--length_buckets=auto is off on TPUs (one static shape per program)")
        return None
    # Where each length compiles anew (JAX), evaluation takes training's few lengths too.
    coarse = training or bool(job_runtime is not None and job_runtime.compiles_each_shape)
    try:
        buckets = length_buckets.parse_buckets(value, max_seq_length,
                                               config.max_position_embeddings, coarse=coarse)
    except length_buckets.BucketError as e:
        raise FlagValueError(str(e)) from None
    if buckets and job_runtime is not None:
        logging.info("Length buckets (%s): %s", "training" if training else "evaluation",
                     ",".join(map(str, buckets)))
    return buckets
