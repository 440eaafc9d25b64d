"""Training on JAX: one compiled step over every device and host, step-exact checkpoints.

The contract is training.loop.train's (`loss_fn(model, batch, training) -> dict` of float32
scalars with "loss", `metrics_fn(sums, count)`, `dataset_fn(input_context) -> tf.data.Dataset`
of this process's batches), for Keras models on the JAX backend:

- Devices: `keras.distribution.DataParallel` over every device of every process (several hosts
  join through `initialize`, i.e. jax.distributed). The weights are replicated; each
  micro-batch is one global array split along its batch axis, so the loss is the global
  batch's mean and XLA adds the all-reduce of the gradients: N devices take the step one
  device takes with the same global batch.
- The step: the forward and backward pass of every micro-batch (a lax.scan over
  gradient_accumulation_steps), the optimizer's stateless update and the finiteness check, in
  one compiled program. The dropout generators' states are non-trainable variables threaded
  through it, so they are part of every checkpoint.
- Checkpoints: `ckpt-<step>.npz` (run_directory.jax_checkpoint_file), written atomically by
  process 0 through bert_tf.fileio (any tf.io.gfile file system): every model and optimizer
  variable by its path. The input
  continues after a restore by skipping the batches the restored steps consumed; with a
  deterministic pipeline a resumed run takes exactly the steps an uninterrupted one takes.
  A checkpoint that cannot be read is skipped for the one before it.
- Non-finite values: a NaN/Inf loss or weight is noted on the device with its step and stops
  training at the next check (every steps_per_loop steps and before every save), so no
  checkpoint holds one; the error names the first bad step and the last good checkpoint.
- SIGTERM: the loop finishes the current step, saves a checkpoint there (every process stops
  at the same step) and raises TrainingPreempted (exit code 143).
"""

import io
import logging as python_logging
import os
import signal
import threading
import time

import jax
import keras
import numpy as np
from absl import logging
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from bert_tf import fileio, run_directory
from bert_tf.training.stops import NonFiniteLossError, TrainingPreempted

# "No step was non-finite" in the int32 JAX keeps steps in.
_NO_BAD_STEP = 2 ** 31 - 1


class InputContext:
    """What dataset_fn is told about this process's share of the input (the attributes of
    tf.distribute.InputContext that bert_tf's dataset functions read): one pipeline per
    process, each feeding global_batch / process_count examples per micro-batch."""

    def __init__(self):
        self.num_input_pipelines = jax.process_count()
        self.input_pipeline_id = jax.process_index()
        self.num_replicas_in_sync = jax.process_count()

    def get_per_replica_batch_size(self, global_batch_size):
        if global_batch_size % self.num_replicas_in_sync:
            raise ValueError(f"the global batch of {global_batch_size} does not divide over "
                             f"{self.num_replicas_in_sync} processes")
        return global_batch_size // self.num_replicas_in_sync


# JAX logs at INFO each platform it finds missing ("Unable to initialize backend 'tpu'") on
# every machine without that accelerator: nothing a user can act on.
python_logging.getLogger("jax._src.xla_bridge").setLevel(python_logging.WARNING)

# Environment variables that say a process is one of several (jax.distributed finds the rest).
_MULTI_PROCESS_ENVIRONMENT = ("JAX_COORDINATOR_ADDRESS", "KERAS_DISTRIBUTION_JOB_ADDRESSES")


def initialize(coordinator_address=None, num_processes=None, process_id=None):
    """Joins a multi-process run through jax.distributed, when one is asked for.

    The flags' values, else the environment: JAX_COORDINATOR_ADDRESS (with
    JAX_NUM_PROCESSES and JAX_PROCESS_ID) or Keras' KERAS_DISTRIBUTION_* variables; on a
    multi-host Cloud TPU (TPU_WORKER_HOSTNAMES lists several hosts) or under Slurm with several
    tasks, jax.distributed finds its peers itself. Otherwise (one process) nothing happens. On
    CPUs the processes exchange gradients over gloo.
    """
    environment = os.environ
    several_tpu_hosts = "," in environment.get("TPU_WORKER_HOSTNAMES", "")
    several_slurm_tasks = int(environment.get("SLURM_NTASKS", "1") or 1) > 1
    if coordinator_address is None and not (
            any(environment.get(name) for name in _MULTI_PROCESS_ENVIRONMENT)
            or several_tpu_hosts or several_slurm_tasks):
        return
    if jax.config.jax_platforms in (None, "", "cpu") and not several_tpu_hosts:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if coordinator_address is None and environment.get("KERAS_DISTRIBUTION_JOB_ADDRESSES"):
        keras.distribution.initialize()
        return
    jax.distributed.initialize(coordinator_address=coordinator_address,
                               num_processes=num_processes, process_id=process_id)


def data_parallel():
    """keras.distribution.DataParallel over every device; set it before building the model so
    its variables are created replicated."""
    distribution = keras.distribution.DataParallel(devices=jax.devices())
    keras.distribution.set_distribution(distribution)
    return distribution


def check_batch_divides(global_batch_size, flag="--train_batch_size"):
    """A global batch splits evenly over the devices (and processes), or a ValueError naming
    both, before anything is compiled."""
    devices = jax.device_count()
    if global_batch_size % devices:
        raise ValueError(f"{flag}={global_batch_size} does not divide over the {devices} "
                         f"devices ({jax.process_count()} process(es)); use a multiple of "
                         f"{devices}")


def train(*, model, optimizer, loss_fn, dataset_fn, output_dir, loop_config, metrics_fn=None,
          max_checkpoints_to_keep=5, on_checkpoint=None, warm_start_fn=None,
          handle_sigterm=True, summaries=True):
    """Trains `model` to loop_config.num_train_steps, resuming from output_dir's checkpoint.

    Args: as training.loop.train, without the strategy (see the module doc); summaries: write
      TensorBoard summaries (needs TensorFlow, which the input pipelines use anyway).

    Returns:
      dict: the metrics of the last logging window plus "step", "steps_this_run",
      "first_log", "examples_per_second" and "wall_time_seconds".

    Raises:
      NonFiniteLossError, TrainingPreempted, ValueError (a batch that does not divide over the
      devices, gradient_accumulation_steps < 1).
    """
    start_time = time.time()
    config = loop_config
    accumulation = config.gradient_accumulation_steps
    if accumulation < 1:
        raise ValueError(f"--gradient_accumulation_steps={accumulation} must be >= 1")
    if config.global_batch_size:
        check_batch_divides(config.global_batch_size)
    log_steps = config.log_steps or config.steps_per_loop
    chief = jax.process_index() == 0
    fileio.makedirs(output_dir)

    optimizer.build(model.trainable_variables)
    restored = restore_latest(output_dir, model, optimizer)
    if restored is None and config.init_checkpoint:
        (warm_start_fn or _no_warm_start)(config.init_checkpoint, model)
    step = first_step = int(np.asarray(optimizer.iterations.value))

    mesh = device_mesh()
    train_step, state = compile_train_step(model, optimizer, loss_fn, accumulation, mesh)
    batches = _micro_batches(dataset_fn, step * accumulation, accumulation, mesh)
    window = _window(output_dir, chief and summaries, metrics_fn or _mean_metrics,
                     config.num_train_steps, accumulation,
                     config.global_batch_size * accumulation if config.global_batch_size
                     else None, first_step)
    stop_requested = _SigtermFlag() if handle_sigterm else None
    if step >= config.num_train_steps:
        logging.info("Global step %d already reaches --num_train_steps=%d; nothing to train.",
                     step, config.num_train_steps)
    last_saved = latest_checkpoint(output_dir)
    sums, steps_in_window, first_bad = None, 0, None
    try:
        while step < config.num_train_steps:
            state, parts, finite = train_step(state, next(batches))
            step += 1
            sums = parts if sums is None else _add(sums, parts)
            first_bad = _note_nonfinite(first_bad, finite, step)
            steps_in_window += 1
            at_log = step % log_steps == 0 or step == config.num_train_steps
            at_save = step % config.save_checkpoints_steps == 0 or step == config.num_train_steps
            at_check = step % config.steps_per_loop == 0
            if not (at_log or at_save or at_check):
                continue
            _raise_if_nonfinite(first_bad, sums, last_saved)
            stop = _agreed(stop_requested is not None and stop_requested.is_set())
            if at_log or stop:
                window.add({k: float(v) for k, v in sums.items()}, steps_in_window)
                sums, steps_in_window = None, 0
                if at_log:
                    window.log(step, _learning_rate(optimizer, step))
            if at_save or stop:
                _put_state(model, optimizer, state)
                last_saved = save(output_dir, model, optimizer, step, max_checkpoints_to_keep)
                if stop:
                    preempted = TrainingPreempted(step, last_saved)
                    logging.warning("Training %s", preempted)
                    raise preempted
                if on_checkpoint is not None:
                    on_checkpoint(step)
    finally:
        if stop_requested is not None:
            stop_requested.restore()
    _put_state(model, optimizer, state)
    return _final_results(window, step, first_step, start_time)


def evaluate(*, model, loss_fn, dataset_fn, max_steps=None, metrics_fn=None):
    """loss_fn(model, batch, training=False) over a dataset (one compiled step); the metrics
    plus "eval_steps"."""
    mesh = device_mesh()
    values = jax.device_put([v.value for v in model.variables], NamedSharding(mesh, P()))
    variables = model.variables

    @jax.jit
    def eval_step(values, batch):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            parts = loss_fn(model, batch, False)
            return {k: keras.ops.cast(v, "float32") for k, v in parts.items()}

    sharding = NamedSharding(mesh, P("batch"))
    sums, steps = None, 0
    for local in dataset_fn(InputContext()).as_numpy_iterator():
        if max_steps is not None and steps >= max_steps:
            break
        batch = jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, x),
                             local)
        parts = {k: float(v) for k, v in eval_step(values, batch).items()}
        sums = parts if sums is None else {k: sums[k] + parts[k] for k in sums}
        steps += 1
    if sums is None:
        raise ValueError("evaluation input is empty: the eval dataset yielded no batch")
    results = {k: float(v) for k, v in (metrics_fn or _mean_metrics)(sums, steps).items()}
    results["eval_steps"] = steps
    return results


def device_mesh():
    """The jax Mesh of the DataParallel distribution (axis "batch"), or of every device."""
    distribution = keras.distribution.distribution()
    if isinstance(distribution, keras.distribution.DataParallel):
        return distribution.device_mesh.backend_mesh
    return jax.sharding.Mesh(np.array(jax.devices()), ("batch",))


def _state(model, optimizer):
    return ([v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
            [v.value for v in optimizer.variables])


def _put_state(model, optimizer, state):
    """Writes the compiled loop's state back into the Keras variables (host copies)."""
    trainable, non_trainable, optimizer_values = state
    for variables, values in ((model.trainable_variables, trainable),
                              (model.non_trainable_variables, non_trainable),
                              (optimizer.variables, optimizer_values)):
        for variable, value in zip(variables, values):
            variable.assign(_host(value))


def _host(array):
    """A replicated array's value as numpy (each process holds a full copy)."""
    return np.asarray(array.addressable_data(0))


def compile_train_step(model, optimizer, loss_fn, accumulation, mesh):
    """The compiled train step and its first state.

    Args:
      model, optimizer (built), loss_fn: as train().
      accumulation: micro-batches per step (the leading axis of the step's batches).
      mesh: the device mesh (device_mesh()).

    Returns:
      (step, state): `step(state, micro_batches) -> (state, parts, finite)`, micro_batches a
      dict of [A, B, ...] global arrays (shard_micro_batches), parts loss_fn's float32 sums
      over them, finite a bool scalar; it donates its state. state: the trainable,
      non-trainable and optimizer values, replicated over the mesh (copies: the variables'
      own buffers stay valid).
    """
    replicated = NamedSharding(mesh, P())
    state = jax.device_put(jax.tree.map(np.asarray, _state(model, optimizer)), replicated)
    trainable_variables = model.trainable_variables
    non_trainable_variables = model.non_trainable_variables

    def loss_and_parts(trainable, non_trainable, batch):
        mapping = (list(zip(trainable_variables, trainable))
                   + list(zip(non_trainable_variables, non_trainable)))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            parts = loss_fn(model, batch, True)
        non_trainable = [scope.get_current_value(v) for v in non_trainable_variables]
        parts = {k: keras.ops.cast(v, "float32") for k, v in parts.items()}
        return parts["loss"] / accumulation, (parts, non_trainable)

    grad_fn = jax.value_and_grad(loss_and_parts, has_aux=True)

    def step(state, micro_batches):
        trainable, non_trainable, optimizer_values = state

        def one(carry, batch):
            grads, non_trainable, sums = carry
            (_, (parts, non_trainable)), step_grads = grad_fn(trainable, non_trainable, batch)
            grads = jax.tree.map(lambda a, b: a + b, grads, step_grads)
            sums = jax.tree.map(lambda a, b: a + b, sums, parts)
            return (grads, non_trainable, sums), None

        first = jax.tree.map(lambda x: x[0], micro_batches)
        (_, (sums, non_trainable)), grads = grad_fn(trainable, non_trainable, first)
        if accumulation > 1:
            rest = jax.tree.map(lambda x: x[1:], micro_batches)
            (grads, non_trainable, sums), _ = jax.lax.scan(
                one, (grads, non_trainable, sums), rest)
        trainable, optimizer_values = optimizer.stateless_apply(optimizer_values, grads,
                                                                trainable)
        finite = jax.numpy.isfinite(sums["loss"])
        for value in trainable:
            finite = finite & jax.numpy.all(jax.numpy.isfinite(value))
        return (trainable, non_trainable, optimizer_values), sums, finite

    compiled = jax.jit(step, donate_argnums=(0,),
                       out_shardings=(replicated, replicated, replicated))
    return compiled, state


def shard_micro_batches(local, mesh):
    """This process's stacked micro-batches (a dict of numpy [A, B_local, ...]) as global
    arrays split along the batch axis over the mesh."""
    sharding = NamedSharding(mesh, P(None, "batch"))
    return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, x), local)


def _micro_batches(dataset_fn, skip, accumulation, mesh):
    """Yields [A, B, ...] global arrays: A micro-batches of this process's pipeline stacked,
    split along the batch axis over every device; the first `skip` batches are passed over."""
    dataset = dataset_fn(InputContext())
    if skip:
        dataset = dataset.skip(skip)
    iterator = dataset.as_numpy_iterator()
    while True:
        try:
            local = [next(iterator) for _ in range(accumulation)]
        except StopIteration:
            raise RuntimeError("the training input ended; dataset_fn must return a repeating "
                               "dataset") from None
        yield shard_micro_batches(jax.tree.map(lambda *xs: np.stack(xs), *local), mesh)


def _add(sums, parts):
    return {k: sums[k] + parts[k] for k in sums}


def _note_nonfinite(first_bad, finite, step):
    """The first step whose finiteness flag (a device scalar) is False, kept on the device
    until a check reads it."""
    bad_here = jax.numpy.where(finite, _NO_BAD_STEP, step)
    return bad_here if first_bad is None else jax.numpy.minimum(first_bad, bad_here)


def _raise_if_nonfinite(first_bad, sums, last_saved):
    if first_bad is None:
        return
    bad_step = int(first_bad)
    if bad_step == _NO_BAD_STEP:
        return
    loss = float(sums["loss"]) if sums is not None else float("nan")
    what = (f"loss became {'NaN' if loss != loss else 'Inf'}"
            if not np.isfinite(loss) else "the update made the weights non-finite (NaN/Inf)")
    raise NonFiniteLossError(f"{what} at step {bad_step}; training stopped without saving. "
                             f"Last good checkpoint: {last_saved or 'none'}")


def _agreed(flag):
    """True on every process when any process asks (all stop at the same step)."""
    if jax.process_count() == 1:
        return flag
    return bool(np.any(multihost_utils.process_allgather(np.array(flag))))


class _SigtermFlag:
    """SIGTERM sets a flag the loop reads between steps (the main thread only)."""

    def __init__(self):
        self._event = threading.Event()
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, lambda *_: self._event.set())

    def is_set(self):
        return self._event.is_set()

    def restore(self):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


def _learning_rate(optimizer, step):
    """The rate at `step` (the optimizer's own variables hold the state of the last save)."""
    rate = optimizer._learning_rate
    if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
        return float(rate(step))
    return float(np.asarray(getattr(rate, "value", rate)))


def _window(output_dir, write_summaries, metrics_fn, num_train_steps, terms_per_step,
            examples_per_step, first_step):
    from bert_tf.training.logging_window import LoggingWindow

    return LoggingWindow(output_dir, write_summaries, metrics_fn, num_train_steps,
                         terms_per_step, examples_per_step, first_step)


def _final_results(window, step, first_step, start_time):
    train_time = time.time() - window.run_start
    steps_this_run = step - first_step
    results = dict(window.results)
    results.update(step=step, steps_this_run=steps_this_run,
                   wall_time_seconds=time.time() - start_time, first_log=window.first_log)
    if window.examples_per_step:
        results["examples_per_second"] = (steps_this_run * window.examples_per_step / train_time
                                          if train_time > 0 and steps_this_run else 0.0)
    return results


def _mean_metrics(sums, count):
    return {k: v / count for k, v in sums.items()}


def _no_warm_start(path, model):
    raise ValueError(f"init_checkpoint={path}: no warm_start_fn to load it with")


def _variables(model, optimizer):
    """(key, variable) of every variable a checkpoint holds, keys unique and stable."""
    keyed = []
    for prefix, variables in (("model", model.variables), ("optimizer", optimizer.variables)):
        for index, variable in enumerate(variables):
            keyed.append((f"{prefix}/{index}/{variable.path}", variable))
    return keyed


def save(output_dir, model, optimizer, step, max_to_keep=5):
    """Writes ckpt-<step>.npz (process 0; every process returns its path) and keeps the newest
    max_to_keep."""
    path = run_directory.jax_checkpoint_file(output_dir, step)
    if jax.process_index() == 0:
        buffer = io.BytesIO()
        arrays = {key: np.asarray(variable.value) for key, variable in
                  _variables(model, optimizer)}
        np.savez(buffer, **arrays)
        fileio.write_bytes_atomic(path, buffer.getvalue())
        for old in run_directory.jax_checkpoint_steps(output_dir)[:-max_to_keep]:
            fileio.gfile().remove(run_directory.jax_checkpoint_file(output_dir, old))
        logging.info("Saved checkpoint for step %d to %s", step, path)
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(f"checkpoint {step}")
    return path


def latest_checkpoint(output_dir):
    steps = run_directory.jax_checkpoint_steps(output_dir)
    return run_directory.jax_checkpoint_file(output_dir, steps[-1]) if steps else None


def restore_latest(output_dir, model, optimizer):
    """Loads the newest readable ckpt-<step>.npz into the model and optimizer; its path, or
    None when there is none. An unreadable one is logged and the one before it is tried.

    Raises:
      ValueError: a checkpoint of another model (its variables differ), naming both.
    """
    keyed = _variables(model, optimizer)
    for step in reversed(run_directory.jax_checkpoint_steps(output_dir)):
        path = run_directory.jax_checkpoint_file(output_dir, step)
        try:
            with fileio.open_file(path, "rb") as f:
                arrays = dict(np.load(io.BytesIO(f.read())))
        except (OSError, ValueError, EOFError) as e:
            logging.warning("Checkpoint %s cannot be read (%s); trying the one before it",
                            path, str(e).splitlines()[0][:200])
            continue
        if sorted(arrays) != sorted(key for key, _ in keyed):
            missing = sorted(set(k for k, _ in keyed) - set(arrays))[:3]
            unknown = sorted(set(arrays) - set(k for k, _ in keyed))[:3]
            raise ValueError(f"{path} holds another model's variables than this run builds "
                             f"(not in it: {missing}; only in it: {unknown}): resume with the "
                             "model and optimizer flags it was written with")
        for key, variable in keyed:
            variable.assign(arrays[key])
        logging.info("Restored %s", path)
        return path
    return None

