"""The TensorFlow step runner: tf.distribute, several steps per tf.function call, checkpoints by
tf.train.CheckpointManager.

Keras `fit` fails under MultiWorkerMirroredStrategy (docs/design.md), so training runs its own
`strategy.run` of one step, several steps per tf.function call (the run controller decides how
many); models stay plain Keras models and still work with `fit` elsewhere.

tf.distribute input iterators cannot be checkpointed (DistributedIterator is not trackable in
TF 2.21), so a resumed run continues the input by skipping, in every input pipeline, the
micro-batches the restored steps consumed (the run state counts them). The checkpoints hold
the model, the optimizer, the state of every Keras random generator in the model (dropout: a
resumed step draws the masks the uninterrupted run drew) and the run's clock (`run_state`).

Gradient accumulation: with N accumulated micro-batches (the controller's count for each call:
loop_config.accumulation_at) one optimizer step takes N micro-batches from the input on every
replica and applies the mean of their gradients, so the
effective batch is N x the global batch (the same update as one N-times larger batch when the
loss is a mean over equally sized batches; the MLM loss averages over masked positions, so
there it is a mean of micro-batch means, the approximation every multi-replica step makes).

Preemption: while training, SIGTERM sets a stop request that the compiled step loop reads after
every step (training.preemption); under MultiWorkerMirroredStrategy the requests are
all-reduced, so every worker stops at the same step. Non-chief workers take part in every save,
writing to a private directory removed at the end.
"""

import contextlib
import os
import shutil

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import fileio, quiet_logs
from bert_tf.cpu import CPU_TYPES, cpu_info
from bert_tf.tf_data_options import without_autotuning
from bert_tf.training import checkpointing, precision, preemption
from bert_tf.training.distribute import is_chief
from bert_tf.training.optimization import learning_rate_at
from bert_tf.training.step_runner import (RUN_STATE_KEYS, Restored, Runtime, StepRunner,
                                          StepsResult, eval_results)
from bert_tf.training.stops import TrainingPreempted

_RUN_STATE = "run_state"


class TensorFlowRuntime(Runtime):
    """A job's runtime on TensorFlow: a tf.distribute strategy (default one device).

    Args:
      strategy: the tf.distribute.Strategy (create it before any other TensorFlow work:
        multi-worker collectives are configured at start-up); None: OneDeviceStrategy on the
        first GPU, else the CPU.
    """

    backend = "tensorflow"

    def __init__(self, strategy=None):
        if strategy is None:
            from bert_tf.training.distribute import get_strategy

            strategy = get_strategy("one_device", num_gpus=min(
                1, len(tf.config.list_physical_devices("GPU"))))
        self.strategy = strategy

    @property
    def chief(self):
        return is_chief(self.strategy)

    @property
    def num_replicas(self):
        return self.strategy.num_replicas_in_sync

    def devices(self):
        return ", ".join(self.strategy.extended.worker_devices)

    def scope(self):
        return self.strategy.scope()

    def set_precision(self, dtype, varying_shapes=False):
        resolved = precision.resolve_dtype(dtype, self.strategy, varying_shapes=varying_shapes)
        self.varying_shapes = varying_shapes
        if dtype == "auto":
            info = cpu_info()
            logging.info("--dtype=auto: %s on %s (CPU: %s, %s%s)", resolved, self.devices(),
                         info.model_name or "unknown", CPU_TYPES[info.kind].name,
                         ", length-bucketed batches" if varying_shapes else "")
        import keras

        keras.mixed_precision.set_global_policy(resolved)
        self.dtype = resolved
        return resolved

    def needs_static_shapes(self):
        return _is_tpu(self.strategy)

    def step_runner(self, **kwargs):
        return TensorFlowStepRunner(self, **kwargs)

    def evaluate(self, *, model, loss_fn, dataset_fn, max_steps=None, metrics_fn=None):
        strategy = self.strategy

        @tf.function(autograph=False)
        def eval_step(batch):
            parts = strategy.run(lambda b: loss_fn(model, b, False), args=(batch,))
            return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                    for k, v in parts.items()}

        sums, steps = None, 0
        for batch in _input_iterator(strategy, dataset_fn):
            if max_steps is not None and steps >= max_steps:
                break
            part = {k: float(v) for k, v in eval_step(batch).items()}
            sums = part if sums is None else {k: sums[k] + part[k] for k in sums}
            steps += 1
        return eval_results(sums, steps, steps * self.num_replicas, metrics_fn)

    def restore_latest(self, output_dir, model, optimizer=None):
        checkpoint = tf.train.Checkpoint(model=model, **(
            {"optimizer": optimizer} if optimizer is not None else {}))
        manager = tf.train.CheckpointManager(checkpoint, output_dir, max_to_keep=None)
        return checkpointing.restore_latest(manager, checkpoint)

    def saved_run_state(self, output_dir):
        latest = tf.train.latest_checkpoint(output_dir)
        return _read_run_state(latest) if latest else {}

    def private_dir(self, output_dir, purpose):
        # A worker restoring the best weights at the end reads its own copy, not the chief's
        # best/ while the chief may be replacing it.
        return None if self.chief else worker_temp_dir(output_dir, self.strategy, purpose)

    def agree(self, flag):
        if not self._multi_worker():
            return bool(flag)
        return self.mean([1.0 if flag else 0.0])[0] > 0

    def mean(self, values):
        if not self._multi_worker():
            return list(values)
        strategy = self.strategy
        local = tf.constant(values, tf.float64)
        summed = strategy.reduce(tf.distribute.ReduceOp.SUM,
                                 strategy.run(lambda: local / strategy.num_replicas_in_sync),
                                 axis=None)
        return [float(v) for v in summed.numpy()]

    def barrier(self, name):
        del name
        if self._multi_worker():
            self.mean([1.0])

    def _multi_worker(self):
        return isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)




class TensorFlowStepRunner(StepRunner):
    """The controller's steps on a tf.distribute strategy (training.step_runner's contract).

    Args:
      runtime: the TensorFlowRuntime the model and optimizer were created in.
      model, optimizer, loss_fn, dataset_fn, output_dir, loop_config, warm_start_fn,
        init_checkpoint_target, max_checkpoints_to_keep, handle_sigterm: as
        training.controller.train. When the model computes in float16 (mixed_float16) the
        optimizer is wrapped in a precision.DynamicLossScaleOptimizer, which the checkpoints
        then hold.
    """

    def __init__(self, runtime, *, model, optimizer, loss_fn, dataset_fn, output_dir,
                 loop_config, max_checkpoints_to_keep=5, warm_start_fn=None,
                 init_checkpoint_target=None, handle_sigterm=True):
        self._strategy = strategy = runtime.strategy
        self._model, self._loss_fn, self._dataset_fn = model, loss_fn, dataset_fn
        self._output_dir, self._config = output_dir, loop_config
        self._max_to_keep = max_checkpoints_to_keep
        self._warm_start_fn = warm_start_fn or checkpointing.warm_start
        self._init_target = init_checkpoint_target or model
        self._handle_sigterm = handle_sigterm
        checkpointing.check_writable_dir(output_dir)
        self._jit = precision.resolve_jit_compile(loop_config.jit_compile, strategy,
                                                 varying_shapes=runtime.varying_shapes)
        logging.info("XLA compilation of the training step: %s (jit_compile=%s)",
                     "on" if self._jit else "off", loop_config.jit_compile)
        with strategy.scope():
            self._optimizer = precision.with_loss_scale(optimizer, model)
            self._optimizer.build(model.trainable_variables)
        # Host scalars, outside the strategy: each worker saves its own clock.
        with tf.device("/cpu:0"):
            self._run_state = {key: tf.Variable(0.0, dtype=tf.float64, trainable=False,
                                                name=key) for key in RUN_STATE_KEYS}
        self._manager = self._worker_dir = self._last_good = self._sigterm = None
        self._train_steps = {}
        self._iterator = self._grad_fn = self._part_names = None
        # The sums add every replica's parts of every micro-batch.
        self.terms_per_batch = strategy.num_replicas_in_sync

    def restore(self):
        model, optimizer, strategy = self._model, self._optimizer, self._strategy
        rng = checkpointing.random_state(model)
        parts = dict(model=model, optimizer=optimizer, **({"rng": rng} if rng else {}))
        # Saved with the run's clock; restored without it (read apart, so that checkpoints of
        # a bert_tf that kept no clock still restore).
        saved = tf.train.Checkpoint(**parts, **{_RUN_STATE: tf.train.Checkpoint(
            **self._run_state)})
        self._manager = tf.train.CheckpointManager(saved, self._output_dir,
                                                   max_to_keep=self._max_to_keep)
        if self._manager.latest_checkpoint:
            _check_loss_scale_matches(self._manager.latest_checkpoint, optimizer)
        restored = checkpointing.restore_latest(
            self._manager, tf.train.Checkpoint(**parts),
            without_rng=tf.train.Checkpoint(model=model, optimizer=optimizer) if rng else None,
            validate=lambda: _nonfinite_weights(model))
        if not is_chief(strategy):
            # Every worker resumes from the chief's checkpoints (a shared output_dir, as
            # multi-worker training assumes) and takes part in each save in a private
            # directory removed at the end.
            self._worker_dir = worker_temp_dir(self._output_dir, strategy)
            self._manager = tf.train.CheckpointManager(saved, self._worker_dir, max_to_keep=1)
        run_state = {}
        if restored is None and self._config.init_checkpoint:
            self._warm_start_fn(self._config.init_checkpoint, self._init_target)
        elif restored is not None:
            run_state = _read_run_state(restored)
        for key in RUN_STATE_KEYS:
            self._run_state[key].assign(run_state.get(key, 0.0))
        self._last_good = restored
        return Restored(restored, int(optimizer.iterations.numpy()), run_state)

    def start(self, skip_batches):
        # The input pipeline's graphs may run before any model graph (whose LayerNorm spends
        # oneDNN's one-time type notice) and hold an int64 transpose: spend it here first.
        quiet_logs.absorb_onednn_type_notice()
        self._sigterm = (preemption.SigtermWatcher(self._strategy) if self._handle_sigterm
                         else None)
        self._skip_batches, self._steps_done = skip_batches, 0
        self._start_input()
        if self._sigterm:
            self._sigterm.start()

    def _start_input(self):
        """The input iterator past the skipped micro-batches; the compiled steps are made
        anew, for each accumulation count on its first use."""
        strategy = self._strategy
        self._iterator = _input_iterator(strategy, self._dataset_fn, self._skip_batches)
        # On TPUs the whole step is XLA-compiled already.
        self._grad_fn = _make_grad_fn(
            self._model, self._loss_fn, self._jit and not _is_tpu(strategy),
            self._optimizer if isinstance(self._optimizer, precision.DynamicLossScaleOptimizer)
            else None)
        # The loop's sums need the names of loss_fn's parts up front: a trace (not a run) of
        # the forward pass gives them.
        self._part_names = _part_names(strategy, self._model, self._loss_fn, self._iterator)
        self._train_steps = {}

    def run_steps(self, num_steps, accumulation):
        first_step = int(self._optimizer.iterations.numpy()) if not self._steps_done else None
        if accumulation not in self._train_steps:
            self._train_steps[accumulation] = _build_train_steps(
                self._model, self._optimizer, self._strategy, self._iterator, self._grad_fn,
                self._part_names, accumulation, self._sigterm)
        try:
            sums, steps_run, stop, nonfinite = self._train_steps[accumulation](
                tf.constant(num_steps))
        except tf.errors.OutOfRangeError:
            raise RuntimeError("the training input ended; dataset_fn must return a repeating "
                               "dataset") from None
        except tf.errors.InvalidArgumentError as e:
            message = precision.xla_fallback_message(e) if self._jit else None
            if message is None or self._steps_done:
                raise
            # XLA refuses the graph before any weight changes (only the optimizer's step count
            # has moved on): the same steps run again without it, from the same step on an
            # input restarted where this call began, so the run stays exact.
            logging.warning("%s", message)
            self._optimizer.iterations.assign(first_step)
            self._jit = False
            self._start_input()
            return self.run_steps(num_steps, accumulation)
        self._steps_done += int(steps_run)
        return StepsResult({k: float(v) for k, v in sums.items()}, int(steps_run), bool(stop),
                           bool(nonfinite))

    def save(self, step, run_state):
        for key in RUN_STATE_KEYS:
            self._run_state[key].assign(run_state.get(key, 0.0))
        checkpointing.save(self._manager, step)
        saved = os.path.join(self._output_dir, os.path.basename(self._manager.latest_checkpoint))
        logging.info("Saved checkpoint for step %d to %s", step, self._manager.latest_checkpoint)
        self._last_good = saved
        return saved

    def learning_rate(self, step):
        # A constant rate is a Keras variable, distributed under a strategy's scope, and
        # float() of a mirrored variable fails; reading it as a tensor works for every kind.
        return learning_rate_at(self._optimizer, step,
                                lambda value: float(tf.convert_to_tensor(value)))

    def last_good_checkpoint(self):
        return self._last_good

    def preempted(self, step, saved):
        _wait_for_all_workers(self._strategy)
        remove_worker_dir(self._worker_dir)
        return TrainingPreempted(step, saved, self._sigterm and self._sigterm.received)

    def finish(self):
        # The chief has then finished writing its last checkpoint, so a worker that goes
        # straight on to restore it (another run in the same process) cannot read the one
        # before it, or a half-written one.
        _wait_for_all_workers(self._strategy)
        remove_worker_dir(self._worker_dir)

    def close(self, stop_handled):
        if self._sigterm:
            self._sigterm.stop(handled=stop_handled)


def _read_run_state(path):
    """The run state a checkpoint holds ({} when it holds none: written by an older bert_tf)."""
    try:
        reader = tf.train.load_checkpoint(path)
    except (tf.errors.OpError, ValueError):
        return {}
    state = {}
    for key in RUN_STATE_KEYS:
        name = f"{_RUN_STATE}/{key}/.ATTRIBUTES/VARIABLE_VALUE"
        if reader.has_tensor(name):
            state[key] = float(reader.get_tensor(name))
    return state


def _nonfinite_weights(model):
    """A reason when a weight of `model` holds NaN/Inf, else None."""
    for variable in model.trainable_variables:
        if not np.all(np.isfinite(np.asarray(tf.convert_to_tensor(variable)))):
            return f"its weights hold NaN/Inf ({variable.path})"
    return None


def _input_iterator(strategy, dataset_fn, skip_batches=0):
    """The input iterator, past the first `skip_batches` global micro-batches: a plain one on
    a single CPU, else a distributed one."""
    # The pipelines run without autotuning (tf_data_options.without_autotuning: tearing an
    # iterator down waits for its autotuning threads); on one CPU a plain iterator replaces
    # the distributed one, whose multi-device buffers autotune on their own.
    if _single_cpu(strategy):
        context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                             num_replicas_in_sync=1)
        return iter(input_pipeline(dataset_fn, context, skip_batches))
    return iter(strategy.distribute_datasets_from_function(
        lambda input_context: input_pipeline(dataset_fn, input_context, skip_batches)))


def input_pipeline(dataset_fn, input_context, skip_batches=0):
    """One input pipeline's dataset: dataset_fn's, past the first `skip_batches` global
    micro-batches, without tf.data's autotuning."""
    dataset = dataset_fn(input_context)
    if skip_batches:
        # Each global micro-batch takes one batch per replica this pipeline feeds.
        per_pipeline = input_context.num_replicas_in_sync // input_context.num_input_pipelines
        dataset = dataset.skip(skip_batches * per_pipeline)
    return without_autotuning(dataset)


def _single_cpu(strategy):
    """Whether `strategy` places everything on one CPU device (OneDeviceStrategy on a CPU)."""
    if not isinstance(strategy, tf.distribute.OneDeviceStrategy):
        return False  # the default strategy has no worker_devices
    devices = strategy.extended.worker_devices
    return len(devices) == 1 and tf.DeviceSpec.from_string(devices[0]).device_type == "CPU"


def _build_train_steps(model, optimizer, strategy, iterator, grad_fn, part_names, accumulation,
                       sigterm):
    """The tf.function `(num_steps) -> (sums, steps_run, stop, nonfinite)` that runs up to
    num_steps optimizer steps of `accumulation` micro-batches (grad_fn's terms: replicas x
    accumulation), stopping early at a non-finite step or a stop request."""
    num_terms = tf.constant(float(strategy.num_replicas_in_sync * accumulation))

    def replica_step(micro_batches):
        parts, grads = _accumulate(lambda batch: grad_fn(batch, num_terms), micro_batches)
        optimizer.apply(grads, model.trainable_variables)
        # One all-finite reduction over the loss and the updated weights: a NaN/Inf update
        # (from the gradients or from the learning rate) stops training before any save.
        finite = _all_finite([parts["loss"]] + list(model.trainable_variables))
        return parts, 1.0 - tf.cast(finite, tf.float32)

    # Only train_steps' own loop goes through AutoGraph: the step below it (the model, the
    # losses, the optimizer) has no tensor-dependent Python control flow (JAX traces the same
    # model code), and converting it cost ~1.4 s of a tiny pre-training run's 11.6 s.
    @tf.autograph.experimental.do_not_convert
    def one_step():
        micro_batches = tuple(next(iterator) for _ in range(accumulation))
        parts, nonfinite = strategy.run(replica_step, args=(micro_batches,))
        sums = {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                for k, v in parts.items()}
        return sums, strategy.reduce(tf.distribute.ReduceOp.SUM, nonfinite, axis=None) > 0

    # Every step runs as the same loop body, whatever the number of steps per call: a step
    # compiled outside the loop can round differently, and a resumed run (whose calls start
    # and end at other steps) would then drift from an uninterrupted one.
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


def _wait_for_all_workers(strategy):
    """Under MultiWorkerMirroredStrategy, returns once every worker has got here."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        # Traced: the strategy run eagerly logs a warning of its overhead on every worker.
        @tf.function(autograph=False)
        def all_reduce_one():
            return strategy.reduce(tf.distribute.ReduceOp.SUM,
                                   strategy.run(lambda: tf.constant(1.0)), axis=None)

        all_reduce_one()


def _make_grad_fn(model, loss_fn, jit_compile, loss_scale_optimizer=None):
    """(batch, num_terms=1) -> (parts dict, gradients) on one replica.

    The loss is divided by `num_terms` (a float32 scalar: replicas x accumulated micro-batches,
    an input so that every accumulation count shares one compiled pass) so the summed
    gradients are those of the mean over all of them; with a loss-scale optimizer it is also
    multiplied by the current loss scale (which the optimizer divides out again).
    """
    def grad_fn(batch, num_terms=1.0):
        with tf.GradientTape() as tape:
            parts = loss_fn(model, batch, True)
            loss = tf.cast(parts["loss"], tf.float32) / num_terms
            if loss_scale_optimizer is not None:
                loss = loss_scale_optimizer.scale_loss(loss)
        grads = tape.gradient(loss, model.trainable_variables)
        return {k: tf.cast(v, tf.float32) for k, v in parts.items()}, grads
    return tf.function(grad_fn, jit_compile=True, autograph=False) if jit_compile else grad_fn


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

    def body(index, parts, sums):
        step_parts, step_grads = grad_fn(tf.nest.map_structure(lambda x: x[index], stacked))
        return (index + 1, {k: parts[k] + step_parts[k] for k in parts},
                [total + tf.convert_to_tensor(step_grads[i]) for total, i in zip(sums, present)])

    _, parts, sums = tf.while_loop(lambda index, *_: index < len(micro_batches), body,
                                   (tf.constant(1), parts, sums),
                                   maximum_iterations=len(micro_batches) - 1)
    grads = list(grads)
    for total, i in zip(sums, present):
        grads[i] = total
    return parts, grads


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
    @tf.function(autograph=False)
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
    with contextlib.suppress(OSError):
        # Another worker's directory is still there, or it is gone already.
        os.rmdir(os.path.dirname(worker_dir))


def _all_finite(tensors):
    """bool scalar: no NaN or Inf in any of `tensors` (float tensors or variables)."""
    return tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(t)))
                                   for t in tensors]))
