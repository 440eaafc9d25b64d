"""A tf.distribute training loop with step-exact checkpoints, for pre-training and fine-tuning.

Keras `fit` fails under MultiWorkerMirroredStrategy (see docs/DESIGN.md), so the run_* drivers
train with `train()` below: `strategy.run` of one step, several steps per tf.function call,
a tf.train.CheckpointManager over model + optimizer (+ input iterator), absl progress logs and
TensorBoard summaries. Models stay plain Keras models and still work with `fit` elsewhere.
The SIGTERM watcher lives in preemption.py, the logging window (rates, ETA, summaries) in
logging_window.py.

tf.distribute input iterators cannot be checkpointed (DistributedIterator is not trackable in
TF 2.21), so a resumed run continues the input stream by skipping, in every input pipeline, the
batches the restored steps consumed. With a deterministic pipeline (fixed shuffle seed) the
continuation is exact; skipping re-reads (but does not train on) that input. The checkpoints
also hold the state of every Keras random generator in the model (dropout), so a resumed step
draws the masks the uninterrupted run drew: resume is exact with dropout on.

Non-finite values: after each step one all-finite reduction over the loss and the updated
weights decides whether training goes on; the first NaN/Inf step stops it before any save, so
every checkpoint holds finite weights.

The per-batch function contract (`loss_fn(model, batch, training) -> dict`): float32 scalars,
computed on one replica's batch, with "loss" (the value to minimise, a mean over that batch)
plus any additive parts (counts, correct predictions, partial losses). The loop sums each part
over replicas, accumulated micro-batches and steps; `metrics_fn(sums, count)` turns those sums
into reported metrics (`count` = the number of (micro-batch, replica) terms summed), by default
`sums[k] / count` for every k.

Gradient accumulation: with `gradient_accumulation_steps=N` one optimizer step takes N
micro-batches from the input on every replica and applies the mean of their gradients, so the
effective batch is N x the global batch. The update is that of one N-times larger batch when
the loss is a mean over equally sized batches (the classification, QA and tagging losses; the
MLM loss averages over masked positions, so there it is a mean of micro-batch means -- the same
approximation every multi-replica step already makes).

Preemption: while training, SIGTERM (what Kubernetes, Slurm and Cloud TPU send before they
take a machine away) makes the loop finish the current step, save a checkpoint at that step on
every worker (each worker's request is all-reduced, so all stop at the same step) and raise
TrainingPreempted, a SystemExit with code PREEMPTED_EXIT_CODE (143 = 128 + SIGTERM, what a
shell reports for a job SIGTERM ended, so schedulers treat it as failed and restart it). The
restarted job resumes at that exact step, its input continuing as described above.
"""

import os
import shutil
import time

import tensorflow as tf
from absl import logging

from bert_tf import fileio
from bert_tf.training import checkpointing, precision, preemption
from bert_tf.training.distribute import is_chief
# write_summaries, write_scalars, TrainingPreempted and PREEMPTED_EXIT_CODE are re-exported:
# the drivers and tests import them from here.
from bert_tf.training.logging_window import (  # noqa: F401
    LoggingWindow, write_scalars, write_summaries)
# The drivers import it from here as well.
from bert_tf.training.loop_config import TrainLoopConfig  # noqa: F401
from bert_tf.training.stops import (  # noqa: F401
    PREEMPTED_EXIT_CODE, NonFiniteLossError, TrainingPreempted)


def mean_metrics(sums, count):
    """Default metrics_fn: every summed part divided by the number of (micro-batch, replica)
    terms."""
    return {k: v / count for k, v in sums.items()}


def train(*, model, optimizer, loss_fn, dataset_fn, strategy, output_dir, loop_config,
          metrics_fn=None, init_checkpoint_target=None, skip_consumed_input=True,
          max_checkpoints_to_keep=5, on_checkpoint=None, warm_start_fn=None,
          handle_sigterm=True):
    """Trains `model` to `num_train_steps` optimizer steps, resuming from output_dir's checkpoint.

    Args:
      model: a built keras.Model created under `strategy.scope()`.
      optimizer: a keras optimizer created under `strategy.scope()`; `optimizer.iterations` is
        the global step (so the learning-rate schedule resumes with it). When the model
        computes in float16 (mixed_float16 policy) it is wrapped in a
        precision.DynamicLossScaleOptimizer, which the checkpoints then hold.
      loss_fn: `(model, batch, training) -> dict` of float32 scalars with "loss" (see module doc).
      dataset_fn: `(tf.distribute.InputContext) -> tf.data.Dataset` of per-replica batches; it
        must repeat (training stops with an error if it ends).
      strategy: the tf.distribute.Strategy.
      output_dir: checkpoints go to `output_dir` (ckpt-<step>), summaries to
        `output_dir/summaries/train`.
      loop_config: a TrainLoopConfig (steps, checkpoint and log cadence, batch size, gradient
        accumulation, XLA, the warm-start checkpoint).
      metrics_fn: `(sums: dict, count) -> dict` of reported metrics (default: means).
      init_checkpoint_target: what init_checkpoint loads into (default `model`).
      warm_start_fn: `(init_checkpoint, target) -> any` that loads it (default
        checkpointing.warm_start; the CLIs pass bert_tf.interop's, which also reads original
        TF1 and Hugging Face checkpoints).
      skip_consumed_input: on resume, skip the batches the restored steps consumed so the
        input stream continues where it stopped (see module doc); False restarts the input.
      max_checkpoints_to_keep: how many checkpoints the manager keeps.
      on_checkpoint: optional `(step) -> None`, called on every worker after each checkpoint
        save (e.g. to evaluate and keep the best model); it runs between training steps.
      handle_sigterm: save and raise TrainingPreempted on SIGTERM (see module doc). Only
        possible in the main thread; elsewhere SIGTERM keeps its handler.

    Returns:
      dict: the metrics of the last logging window plus "step", "steps_this_run",
      "first_log" (the metrics and step of this run's first logging window, None if none),
      "examples_per_second" (this run) and "wall_time_seconds".

    Raises:
      NonFiniteLossError: the loss or the updated weights became NaN/Inf; the message gives
        the step and the last good checkpoint (checked finite when saved; nothing is saved
        after the bad step).
      TrainingPreempted: SIGTERM arrived; the checkpoint of the step reached was saved.
      checkpointing.CheckpointError: output_dir not writable, or an unusable init_checkpoint.
      ValueError: gradient_accumulation_steps < 1, or a bad jit_compile value.
    """
    start_time = time.time()
    num_train_steps, steps_per_loop = loop_config.num_train_steps, loop_config.steps_per_loop
    save_checkpoints_steps, log_steps = loop_config.save_checkpoints_steps, loop_config.log_steps
    global_batch_size, jit_compile = loop_config.global_batch_size, loop_config.jit_compile
    gradient_accumulation_steps = loop_config.gradient_accumulation_steps
    init_checkpoint = loop_config.init_checkpoint
    if gradient_accumulation_steps < 1:
        raise ValueError(f"--gradient_accumulation_steps={gradient_accumulation_steps} must be "
                         ">= 1")
    accumulation = gradient_accumulation_steps
    log_steps = log_steps or steps_per_loop
    checkpointing.check_writable_dir(output_dir)
    jit = precision.resolve_jit_compile(jit_compile, strategy)
    logging.info("XLA compilation of the training step: %s (jit_compile=%s)",
                 "on" if jit else "off", jit_compile)
    with strategy.scope():
        optimizer = precision.with_loss_scale(optimizer, model)
        optimizer.build(model.trainable_variables)
    manager, worker_dir = _restore_or_warm_start(
        model, optimizer, strategy, output_dir, max_checkpoints_to_keep, init_checkpoint,
        init_checkpoint_target or model, warm_start_fn or checkpointing.warm_start)
    step = first_step = int(optimizer.iterations.numpy())
    iterator = _resumed_iterator(strategy, dataset_fn, step if skip_consumed_input else 0,
                                 accumulation)
    sigterm = preemption.SigtermWatcher(strategy) if handle_sigterm else None
    train_steps = _build_train_steps(model, optimizer, loss_fn, strategy, iterator, accumulation,
                                     jit, sigterm)
    if step >= num_train_steps:
        logging.info("Global step %d already reaches --num_train_steps=%d; nothing to train.",
                     step, num_train_steps)
    window = LoggingWindow(output_dir, is_chief(strategy), metrics_fn or mean_metrics,
                           num_train_steps, strategy.num_replicas_in_sync * accumulation,
                           global_batch_size * accumulation if global_batch_size else None,
                           first_step)
    if sigterm:
        sigterm.start()
    preempted = None
    try:
        while step < num_train_steps:
            num_steps = min(steps_per_loop, num_train_steps - step,
                            _to_next_multiple(step, save_checkpoints_steps),
                            _to_next_multiple(step, log_steps))
            sums, steps_run, stop = _run_steps(train_steps, num_steps, step, manager)
            step += steps_run
            window.add(sums, steps_run)
            if step % log_steps == 0 or step == num_train_steps:
                window.log(step, _learning_rate_value(optimizer))
            if step % save_checkpoints_steps == 0 or step == num_train_steps or stop:
                checkpointing.save(manager, step)
                logging.info("Saved checkpoint for step %d to %s", step, manager.latest_checkpoint)
                if stop:
                    preempted = _preempted(strategy, output_dir, manager, worker_dir, step)
                    raise preempted
                if on_checkpoint is not None:
                    on_checkpoint(step)
    finally:
        if sigterm:
            sigterm.stop(handled=preempted is not None)
    _wait_for_all_workers(strategy)
    remove_worker_dir(worker_dir)
    return _final_results(window, step, first_step, start_time)


def _restore_or_warm_start(model, optimizer, strategy, output_dir, max_checkpoints_to_keep,
                           init_checkpoint, init_checkpoint_target, warm_start_fn):
    """Restores output_dir's latest checkpoint into model + optimizer (+ dropout generators),
    or warm-starts from init_checkpoint when there is none.

    Returns:
      (manager, worker_dir): the CheckpointManager train() saves with, and the private
      directory a non-chief worker saves to (None on the chief).
    """
    # The dropout generators' states resume with the step (see checkpointing.random_state).
    rng = checkpointing.random_state(model)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                     **({"rng": rng} if rng else {}))
    manager = tf.train.CheckpointManager(checkpoint, output_dir,
                                         max_to_keep=max_checkpoints_to_keep)
    # Every worker resumes from the chief's checkpoints (a shared output_dir, as multi-worker
    # training assumes). Non-chief workers must still take part in each save, which they
    # write to a private directory removed at the end.
    if manager.latest_checkpoint:
        _check_loss_scale_matches(manager.latest_checkpoint, optimizer)
    restored = checkpointing.restore_latest(
        manager, checkpoint,
        without_rng=tf.train.Checkpoint(model=model, optimizer=optimizer) if rng else None)
    worker_dir = None
    if not is_chief(strategy):
        worker_dir = worker_temp_dir(output_dir, strategy)
        manager = tf.train.CheckpointManager(checkpoint, worker_dir, max_to_keep=1)
    if restored is None and init_checkpoint:
        warm_start_fn(init_checkpoint, init_checkpoint_target)
    return manager, worker_dir


def _resumed_iterator(strategy, dataset_fn, skip_steps, accumulation):
    """The distributed input iterator, past the batches `skip_steps` steps consumed."""
    def resumed_dataset_fn(input_context):
        dataset = dataset_fn(input_context)
        if skip_steps:
            # Each step takes `accumulation` batches per replica this pipeline feeds.
            per_pipeline = (input_context.num_replicas_in_sync
                            // input_context.num_input_pipelines)
            dataset = dataset.skip(skip_steps * per_pipeline * accumulation)
        return dataset

    return iter(strategy.distribute_datasets_from_function(resumed_dataset_fn))


def _build_train_steps(model, optimizer, loss_fn, strategy, iterator, accumulation, jit, sigterm):
    """The tf.function `(num_steps) -> (sums, steps_run, stop, nonfinite)` that runs up to
    num_steps optimizer steps, stopping early at a non-finite step or a stop request."""
    # On TPUs the whole step is XLA-compiled already.
    grad_fn = _make_grad_fn(model, loss_fn, strategy.num_replicas_in_sync * accumulation,
                            jit and not _is_tpu(strategy),
                            optimizer if isinstance(optimizer, precision.DynamicLossScaleOptimizer)
                            else None)

    def replica_step(micro_batches):
        parts, grads = _accumulate(grad_fn, micro_batches)
        optimizer.apply(grads, model.trainable_variables)
        # One all-finite reduction over the loss and the updated weights: a NaN/Inf update
        # (from the gradients or from the learning rate) stops training before any save.
        finite = _all_finite([parts["loss"]] + list(model.trainable_variables))
        return parts, 1.0 - tf.cast(finite, tf.float32)

    def one_step():
        micro_batches = tuple(next(iterator) for _ in range(accumulation))
        parts, nonfinite = strategy.run(replica_step, args=(micro_batches,))
        sums = {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                for k, v in parts.items()}
        return sums, strategy.reduce(tf.distribute.ReduceOp.SUM, nonfinite, axis=None) > 0

    # Every step runs as the same loop body, whatever the number of steps per call: a step
    # compiled outside the loop can round differently, and a resumed run (whose calls start
    # and end at other steps) would then drift from an uninterrupted one. The loop's sums need
    # the names of loss_fn's parts up front: a trace (not a run) of the forward pass gives them.
    part_names = _part_names(strategy, model, loss_fn, iterator)

    @tf.function
    def train_steps(num_steps):
        # Stops early at the first non-finite loss or weights so the step that produced them
        # is known, and at a SIGTERM (every worker at the same step).
        sums = {k: tf.constant(0.0) for k in part_names}
        steps_run = tf.constant(0)
        stop = tf.constant(False)
        nonfinite = tf.constant(False)
        for _ in tf.range(num_steps):
            step_sums, nonfinite = one_step()
            sums = {k: sums[k] + step_sums[k] for k in sums}
            steps_run += 1
            if sigterm:
                stop = sigterm.requested()
            if stop or nonfinite:
                break
        return sums, steps_run, stop, nonfinite

    return train_steps


def _run_steps(train_steps, num_steps, step, manager):
    """Runs one train_steps call from global step `step`.

    Returns:
      (sums, steps_run, stop): loss_fn's parts summed over the steps run (floats), how many
      ran, and whether a stop request (SIGTERM) ended the call.

    Raises:
      NonFiniteLossError: a step made the loss or the weights NaN/Inf.
      RuntimeError: the input ended.
    """
    try:
        sums, steps_run, stop, nonfinite = train_steps(tf.constant(num_steps))
    except tf.errors.OutOfRangeError:
        raise RuntimeError(f"the training input ended at step {step}; dataset_fn must "
                           "return a repeating dataset") from None
    sums = {k: float(v) for k, v in sums.items()}
    steps_run = int(steps_run)
    if bool(nonfinite):
        # Every saved checkpoint passed this check, so the last one is finite.
        bad_step = step + steps_run
        last_good = manager.latest_checkpoint
        what = (f"loss became {_describe(sums['loss'])}" if not _finite(sums["loss"])
                else "the update made the weights non-finite (NaN/Inf)")
        raise NonFiniteLossError(
            f"{what} at step {bad_step}; training stopped without saving. Last good "
            f"checkpoint: {last_good or 'none'}")
    return sums, steps_run, bool(stop)


def _preempted(strategy, output_dir, manager, worker_dir, step):
    """After the stop request's checkpoint is saved: waits for every worker, removes this
    worker's private directory and returns the TrainingPreempted to raise."""
    saved = os.path.join(output_dir, os.path.basename(manager.latest_checkpoint))
    _wait_for_all_workers(strategy)
    remove_worker_dir(worker_dir)
    preempted = TrainingPreempted(step, saved)
    logging.warning("Training %s", preempted)
    return preempted


def _final_results(window, step, first_step, start_time):
    """train()'s return value: the last window's metrics plus the run's totals."""
    train_time = time.time() - window.run_start
    steps_this_run = step - first_step
    results = dict(window.results)
    results.update({
        "step": step,
        "steps_this_run": steps_this_run,
        "wall_time_seconds": time.time() - start_time,
        "first_log": window.first_log,
    })
    if window.examples_per_step:
        results["examples_per_second"] = (steps_this_run * window.examples_per_step / train_time
                                          if train_time > 0 and steps_this_run else 0.0)
    return results


def _wait_for_all_workers(strategy):
    """Under MultiWorkerMirroredStrategy, returns once every worker has got here.

    Called when train() ends: the chief has then finished writing its last checkpoint, so a
    worker that goes straight on to restore it (another train() call in the same process)
    cannot read the previous one, or a half-written one, and start at another step.
    """
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        strategy.reduce(tf.distribute.ReduceOp.SUM,
                        strategy.run(lambda: tf.constant(1.0)), axis=None)


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


def _make_grad_fn(model, loss_fn, num_terms, jit_compile, loss_scale_optimizer=None):
    """(batch) -> (parts dict, gradients) on one replica.

    The loss is divided by `num_terms` (replicas x accumulated micro-batches) so the summed
    gradients are those of the mean over all of them; with a loss-scale optimizer it is also
    multiplied by the current loss scale (which the optimizer divides out again).
    """
    def grad_fn(batch):
        with tf.GradientTape() as tape:
            parts = loss_fn(model, batch, True)
            loss = tf.cast(parts["loss"], tf.float32) / num_terms
            if loss_scale_optimizer is not None:
                loss = loss_scale_optimizer.scale_loss(loss)
        grads = tape.gradient(loss, model.trainable_variables)
        return {k: tf.cast(v, tf.float32) for k, v in parts.items()}, grads
    return tf.function(grad_fn, jit_compile=True) if jit_compile else grad_fn


def _accumulate(grad_fn, micro_batches):
    """Sums grad_fn's parts and gradients over a tuple of one replica's micro-batches.

    One micro-batch is the plain step. Several are stacked ([N, B, ...]) and run through a
    tf.while loop, so the step's graph holds one forward and backward pass whatever N is.
    Gradients are summed dense (the optimizers apply them dense anyway); variables without a
    gradient keep None.
    """
    if len(micro_batches) > 1:
        micro_batches = _common_width(micro_batches)
    parts, grads = grad_fn(micro_batches[0])
    if len(micro_batches) == 1:
        return parts, grads
    present = [i for i, g in enumerate(grads) if g is not None]
    sums = [tf.convert_to_tensor(grads[i]) for i in present]
    stacked = tf.nest.map_structure(lambda *xs: tf.stack(xs), *micro_batches)
    for index in tf.range(1, len(micro_batches)):
        step_parts, step_grads = grad_fn(tf.nest.map_structure(lambda x: x[index], stacked))
        parts = {k: parts[k] + step_parts[k] for k in parts}
        sums = [total + tf.convert_to_tensor(step_grads[i]) for total, i in zip(sums, present)]
    grads = list(grads)
    for total, i in zip(sums, present):
        grads[i] = total
    return parts, grads


def _learning_rate_value(optimizer):
    """The optimizer's current learning rate as a float.

    A constant rate is a Keras variable, distributed under a strategy's scope, and float() of a
    mirrored variable fails; reading it as a tensor works for every kind (a schedule's value is
    already a tensor).
    """
    rate = optimizer.learning_rate
    rate = getattr(rate, "value", rate)  # a keras.Variable: its tf.Variable
    return float(tf.convert_to_tensor(rate))


def _common_width(micro_batches):
    """The micro-batches with every [B, L, ...] feature of unknown L padded to the longest L.

    Length-bucketed batches (bert_tf.data.tasks.length_buckets) differ in their sequence dimension
    from one batch to the next, and stacking needs one shape. Padding adds positions of id 0,
    mask 0 and weight 0, which attention and the losses ignore.
    """
    flat = [tf.nest.flatten(batch) for batch in micro_batches]
    columns = []
    for tensors in zip(*flat):
        shape = tensors[0].shape
        if shape.rank is not None and shape.rank >= 2 and shape[1] is None:
            width = tf.reduce_max(tf.stack([tf.shape(t)[1] for t in tensors]))
            rest = [[0, 0]] * (shape.rank - 2)
            tensors = [tf.pad(t, [[0, 0], [0, width - tf.shape(t)[1]]] + rest) for t in tensors]
        columns.append(tensors)
    return tuple(tf.nest.pack_sequence_as(micro_batches[0], list(row)) for row in zip(*columns))


def _check_loss_scale_matches(checkpoint_path, optimizer):
    """A float16 run's checkpoints hold a loss scale, others none: resuming across the two
    would fail to restore (or restore the wrong slots); say so with the flag to fix."""
    try:
        names = [name for name, _ in fileio.list_checkpoint_variables(checkpoint_path)]
    except (tf.errors.OpError, ValueError):
        return  # unreadable: restore_latest reports it and falls back to an older one
    saved = any(name.startswith("optimizer/dynamic_scale/") for name in names)
    scaled = isinstance(optimizer, precision.DynamicLossScaleOptimizer)
    if saved != scaled:
        raise checkpointing.CheckpointError(
            f"{checkpoint_path} was written by a run {'with' if saved else 'without'} float16 "
            f"loss scaling, but this run {'computes' if scaled else 'does not compute'} in "
            "float16: resume with the --dtype the run started with")


def _part_names(strategy, model, loss_fn, iterator):
    """The names of loss_fn's parts, from a trace of one replica's forward pass."""
    @tf.function
    def forward():
        return strategy.run(lambda batch: loss_fn(model, batch, True), args=(next(iterator),))
    return sorted(forward.get_concrete_function().structured_outputs)


def _is_tpu(strategy):
    return isinstance(strategy, (tf.distribute.TPUStrategy,
                                 tf.distribute.experimental.TPUStrategy))


def worker_temp_dir(output_dir, strategy, purpose="checkpoints"):
    """A non-chief worker's private directory under output_dir/.worker_tmp for `purpose`."""
    resolver = strategy.cluster_resolver
    return os.path.join(output_dir, ".worker_tmp",
                        f"{resolver.task_type}_{resolver.task_id}_{purpose}")


def remove_worker_dir(worker_dir):
    """Removes a worker's temporary directory, and .worker_tmp once no worker has one."""
    if not worker_dir:
        return
    if fileio.is_remote(worker_dir):
        if tf.io.gfile.exists(worker_dir):
            tf.io.gfile.rmtree(worker_dir)
        return  # object stores keep no empty directory to remove
    shutil.rmtree(worker_dir, ignore_errors=True)
    try:
        os.rmdir(os.path.dirname(worker_dir))
    except OSError:
        pass  # another worker's directory is still there, or it is gone already


def _all_finite(tensors):
    """bool scalar: no NaN or Inf in any of `tensors` (float tensors or variables)."""
    return tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(t)))
                                   for t in tensors]))


def _to_next_multiple(step, every):
    return every - step % every


def _finite(value):
    return value == value and abs(value) != float("inf")


def _describe(value):
    return "NaN" if value != value else "Inf"
