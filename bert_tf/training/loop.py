"""A tf.distribute training loop with step-exact checkpoints, for pre-training and fine-tuning.

Keras `fit` fails under MultiWorkerMirroredStrategy (see docs/DESIGN.md), so the run_* drivers
train with `train()` below: `strategy.run` of one step, several steps per tf.function call,
a tf.train.CheckpointManager over model + optimizer (+ input iterator), absl progress logs and
TensorBoard summaries. Models stay plain Keras models and still work with `fit` elsewhere.

tf.distribute input iterators cannot be checkpointed (DistributedIterator is not trackable in
TF 2.21), so a resumed run continues the input stream by skipping, in every input pipeline, the
batches the restored steps consumed. With a deterministic pipeline (fixed shuffle seed) the
continuation is exact; skipping re-reads (but does not train on) that input.

The per-batch function contract (`loss_fn(model, batch, training) -> dict`): float32 scalars,
computed on one replica's batch, with "loss" (the value to minimise, a mean over that batch)
plus any additive parts (counts, correct predictions, partial losses). The loop sums each part
over replicas and steps; `metrics_fn(sums, count)` turns those sums into reported metrics
(`count` = steps x replicas summed), by default `sums[k] / count` for every k.
"""

import os
import shutil
import time

import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2

from bert_tf.training import checkpointing
from bert_tf.training.distribute import is_chief


_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
).SerializeToString()


class NonFiniteLossError(RuntimeError):
    """Training stopped because the loss became NaN or Inf."""


def mean_metrics(sums, count):
    """Default metrics_fn: every summed part divided by the number of (step, replica) terms."""
    return {k: v / count for k, v in sums.items()}


def train(*, model, optimizer, loss_fn, dataset_fn, strategy, output_dir, num_train_steps,
          steps_per_loop=100, save_checkpoints_steps=1000, log_steps=None, metrics_fn=None,
          global_batch_size=None, init_checkpoint=None, init_checkpoint_target=None,
          skip_consumed_input=True, max_checkpoints_to_keep=5, jit_compile=False,
          on_checkpoint=None, warm_start_fn=None):
    """Trains `model` to `num_train_steps` optimizer steps, resuming from output_dir's checkpoint.

    Args:
      model: a built keras.Model created under `strategy.scope()`.
      optimizer: a keras optimizer created under `strategy.scope()`; `optimizer.iterations` is
        the global step (so the learning-rate schedule resumes with it).
      loss_fn: `(model, batch, training) -> dict` of float32 scalars with "loss" (see module doc).
      dataset_fn: `(tf.distribute.InputContext) -> tf.data.Dataset` of per-replica batches; it
        must repeat (training stops with an error if it ends).
      strategy: the tf.distribute.Strategy.
      output_dir: checkpoints go to `output_dir` (ckpt-<step>), summaries to
        `output_dir/summaries/train`.
      num_train_steps: the global step to stop at; a rerun with a larger value continues.
      steps_per_loop: optimizer steps per tf.function call (host round trip).
      save_checkpoints_steps: save when the global step is a multiple of this, and at the end.
      log_steps: log and write summaries every this many steps (default: steps_per_loop).
      metrics_fn: `(sums: dict, count) -> dict` of reported metrics (default: means).
      global_batch_size: examples per step over all replicas, for examples/s; None skips it.
      init_checkpoint: weights to warm-start from when output_dir has no checkpoint yet (see
        checkpointing.warm_start); ignored on resume.
      init_checkpoint_target: what init_checkpoint loads into (default `model`).
      warm_start_fn: `(init_checkpoint, target) -> any` that loads it (default
        checkpointing.warm_start; the CLIs pass bert_tf.interop's, which also reads original
        TF1 and Hugging Face checkpoints).
      skip_consumed_input: on resume, skip the batches the restored steps consumed so the
        input stream continues where it stopped (see module doc); False restarts the input.
      max_checkpoints_to_keep: how many checkpoints the manager keeps.
      jit_compile: XLA-compile the forward and backward pass (not the optimizer update).
      on_checkpoint: optional `(step) -> None`, called on every worker after each checkpoint
        save (e.g. to evaluate and keep the best model); it runs between training steps.

    Returns:
      dict: the metrics of the last logging window plus "step", "steps_this_run",
      "first_log" (the metrics and step of this run's first logging window, None if none),
      "examples_per_second" (this run) and "wall_time_seconds".

    Raises:
      NonFiniteLossError: the loss became NaN/Inf; the message gives the step and the last
        good checkpoint (which is kept; nothing is saved after the bad step).
      checkpointing.CheckpointError: output_dir not writable, or an unusable init_checkpoint.
    """
    start_time = time.time()
    metrics_fn = metrics_fn or mean_metrics
    log_steps = log_steps or steps_per_loop
    chief = is_chief(strategy)
    checkpointing.check_writable_dir(output_dir)
    num_replicas = strategy.num_replicas_in_sync

    with strategy.scope():
        optimizer.build(model.trainable_variables)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    manager = tf.train.CheckpointManager(checkpoint, output_dir,
                                         max_to_keep=max_checkpoints_to_keep)
    # Every worker resumes from the chief's checkpoints (a shared output_dir, as multi-worker
    # training assumes). Non-chief workers must still take part in each save, which they
    # write to a private directory removed at the end.
    restored = checkpointing.restore_latest(manager, checkpoint)
    worker_dir = None
    if not chief:
        worker_dir = _worker_temp_dir(output_dir, strategy)
        manager = tf.train.CheckpointManager(checkpoint, worker_dir, max_to_keep=1)
    if restored is None and init_checkpoint:
        (warm_start_fn or checkpointing.warm_start)(init_checkpoint,
                                                    init_checkpoint_target or model)
    step = int(optimizer.iterations.numpy())

    def resumed_dataset_fn(input_context):
        dataset = dataset_fn(input_context)
        if step and skip_consumed_input:
            # Each step takes one batch per replica this pipeline feeds.
            per_pipeline = (input_context.num_replicas_in_sync
                            // input_context.num_input_pipelines)
            dataset = dataset.skip(step * per_pipeline)
        return dataset

    iterator = iter(strategy.distribute_datasets_from_function(resumed_dataset_fn))

    grad_fn = _make_grad_fn(model, loss_fn, num_replicas, jit_compile)

    def replica_step(batch):
        parts, grads = grad_fn(batch)
        optimizer.apply(grads, model.trainable_variables)
        return parts

    def one_step():
        parts = strategy.run(replica_step, args=(next(iterator),))
        return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                for k, v in parts.items()}

    @tf.function
    def train_steps(num_steps):
        # Stops early at the first non-finite loss so the step that produced it is known.
        sums = one_step()
        steps_run = tf.constant(1)
        for _ in tf.range(num_steps - 1):
            if not tf.math.is_finite(sums["loss"]):
                break
            step_sums = one_step()
            sums = {k: sums[k] + step_sums[k] for k in sums}
            steps_run += 1
        return sums, steps_run

    first_step = step
    if step >= num_train_steps:
        logging.info("Global step %d already reaches --num_train_steps=%d; nothing to train.",
                     step, num_train_steps)
    writer = tf.summary.create_file_writer(os.path.join(output_dir, "summaries", "train")) \
        if chief else tf.summary.create_noop_writer()
    window_sums, window_count, window_steps = None, 0, 0
    window_start, run_start = time.time(), time.time()
    results, first_log = {}, None
    while step < num_train_steps:
        num_steps = min(steps_per_loop, num_train_steps - step,
                        _to_next_multiple(step, save_checkpoints_steps),
                        _to_next_multiple(step, log_steps))
        try:
            sums, steps_run = train_steps(tf.constant(num_steps))
        except tf.errors.OutOfRangeError:
            raise RuntimeError(f"the training input ended at step {step}; dataset_fn must "
                               "return a repeating dataset") from None
        sums = {k: float(v) for k, v in sums.items()}
        steps_run = int(steps_run)
        if not _finite(sums["loss"]):
            bad_step = step + steps_run
            last_good = manager.latest_checkpoint
            raise NonFiniteLossError(
                f"loss became {_describe(sums['loss'])} at step {bad_step}; training stopped "
                f"without saving. Last good checkpoint: {last_good or 'none'}")
        step += steps_run
        window_sums = sums if window_sums is None else {
            k: window_sums[k] + sums[k] for k in sums}
        window_count += steps_run * num_replicas
        window_steps += steps_run

        if step % log_steps == 0 or step == num_train_steps:
            elapsed = time.time() - window_start
            results = {k: float(v) for k, v in metrics_fn(window_sums, window_count).items()}
            if first_log is None:
                first_log = dict(results, step=step)
            learning_rate = float(optimizer.learning_rate)
            _log_progress(step, num_train_steps, dict(results, learning_rate=learning_rate),
                          window_steps, elapsed, global_batch_size, time.time() - run_start,
                          step - first_step)
            with writer.as_default(step=step):
                for name, value in results.items():
                    _write_scalar(name, value)
                _write_scalar("learning_rate", learning_rate)
                if global_batch_size and elapsed > 0:
                    _write_scalar("examples_per_second",
                                  window_steps * global_batch_size / elapsed)
            writer.flush()
            window_sums, window_count, window_steps = None, 0, 0
            window_start = time.time()
        if step % save_checkpoints_steps == 0 or step == num_train_steps:
            manager.save(checkpoint_number=step)
            logging.info("Saved checkpoint for step %d to %s", step, manager.latest_checkpoint)
            if on_checkpoint is not None:
                on_checkpoint(step)
    if worker_dir:
        shutil.rmtree(worker_dir, ignore_errors=True)

    wall = time.time() - start_time
    train_time = time.time() - run_start
    steps_this_run = step - first_step
    results.update({
        "step": step,
        "steps_this_run": steps_this_run,
        "wall_time_seconds": wall,
        "first_log": first_log,
    })
    if global_batch_size:
        results["examples_per_second"] = (steps_this_run * global_batch_size / train_time
                                          if train_time > 0 and steps_this_run else 0.0)
    return results


def evaluate(*, model, loss_fn, dataset_fn, strategy, max_steps=None, metrics_fn=None):
    """Runs `loss_fn(model, batch, training=False)` over a dataset and aggregates the metrics.

    Args:
      model, loss_fn, dataset_fn, strategy: as in train(); the dataset may be finite.
      max_steps: stop after this many batches (None: the whole dataset).
      metrics_fn: as in train().

    Returns:
      dict of metrics plus "eval_steps".
    """
    metrics_fn = metrics_fn or mean_metrics
    dataset = strategy.distribute_datasets_from_function(dataset_fn)

    @tf.function
    def eval_step(batch):
        parts = strategy.run(lambda b: loss_fn(model, b, False), args=(batch,))
        return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                for k, v in parts.items()}

    sums, steps = None, 0
    for batch in dataset:
        if max_steps is not None and steps >= max_steps:
            break
        part = {k: float(v) for k, v in eval_step(batch).items()}
        sums = part if sums is None else {k: sums[k] + part[k] for k in sums}
        steps += 1
    if sums is None:
        raise ValueError("evaluation input is empty: the eval dataset yielded no batch")
    results = {k: float(v) for k, v in
               metrics_fn(sums, steps * strategy.num_replicas_in_sync).items()}
    results["eval_steps"] = steps
    return results


def _make_grad_fn(model, loss_fn, num_replicas, jit_compile):
    """(batch) -> (parts dict, gradients) on one replica; the loss is scaled by 1/replicas so
    the all-reduced (summed) gradient is that of the mean over the global batch."""
    def grad_fn(batch):
        with tf.GradientTape() as tape:
            parts = loss_fn(model, batch, True)
            loss = tf.cast(parts["loss"], tf.float32) / num_replicas
        grads = tape.gradient(loss, model.trainable_variables)
        return {k: tf.cast(v, tf.float32) for k, v in parts.items()}, grads
    return tf.function(grad_fn, jit_compile=True) if jit_compile else grad_fn


def write_summaries(logdir, step, metrics):
    """Writes a dict of scalar metrics as TensorBoard summaries at `step` under `logdir`."""
    writer = tf.summary.create_file_writer(logdir)
    write_scalars(writer, step, metrics)
    writer.close()


def write_scalars(writer, step, metrics):
    """Writes a dict of scalar metrics with an open summary writer at `step`, then flushes."""
    with writer.as_default(step=step):
        for name, value in metrics.items():
            _write_scalar(name, float(value))
    writer.flush()


def _write_scalar(name, value):
    """Writes a TensorBoard scalar without importing the tensorboard package (not a TF
    dependency): a float32 summary tagged for TensorBoard's "scalars" plugin."""
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)


def _worker_temp_dir(output_dir, strategy):
    resolver = strategy.cluster_resolver
    return os.path.join(output_dir, ".worker_tmp", f"{resolver.task_type}_{resolver.task_id}")


def _to_next_multiple(step, every):
    return every - step % every


def _finite(value):
    return value == value and abs(value) != float("inf")


def _describe(value):
    return "NaN" if value != value else "Inf"


def _log_progress(step, num_train_steps, metrics, window_steps, elapsed, global_batch_size,
                  run_elapsed, run_steps):
    parts = [f"step {step}/{num_train_steps}"]
    parts += [f"{k}={v:.4g}" for k, v in metrics.items()]
    if elapsed > 0:
        parts.append(f"steps/s={window_steps / elapsed:.2f}")
        if global_batch_size:
            parts.append(f"examples/s={window_steps * global_batch_size / elapsed:.1f}")
    if run_steps and run_elapsed > 0:
        eta = (num_train_steps - step) * run_elapsed / run_steps
        parts.append(f"ETA {int(eta) // 3600}h{int(eta) % 3600 // 60:02d}m{int(eta) % 60:02d}s")
    logging.info(" ".join(parts))
