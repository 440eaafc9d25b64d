"""The JAX step runner: one compiled step over every device and host, step-exact checkpoints.

- Devices: `keras.distribution.DataParallel` over every device of every process (several hosts
  join through jax.distributed). The weights are replicated; each micro-batch is one global
  array split along its batch axis, so the loss is the global batch's mean and XLA adds the
  all-reduce of the gradients: N devices take the step one device takes with the same global
  batch.
- The step: the forward and backward pass of every micro-batch (a lax.scan over the step's
  micro-batches), the optimizer's stateless update and the finiteness check, in one compiled
  program (compiled again for each accumulation count a batch-size ramp reaches). The dropout
  generators' states are non-trainable variables threaded through it, so they are part of
  every checkpoint; a time budget's schedule anchor (optimization.BudgetSchedule) is an input
  of every call.
- Checkpoints: training.jax_checkpoints (Orbax: the loop's state as it lies on the devices,
  every process taking part, plus the run's clock). The input continues after a restore by
  skipping the micro-batches the restored steps consumed.
- Non-finite values: a NaN/Inf loss or weight is noted on the device with its step and read at
  the end of every run_steps call (before any save), so no checkpoint holds one.
- SIGTERM: a flag the controller reads after every call; every process stops at the same step.
"""

import itertools
import logging as python_logging
import os
import signal
import threading

import jax
import keras
import numpy as np
from absl import logging
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from bert_tf import fileio, optional
from bert_tf.tf_data_options import without_autotuning
from bert_tf.training import jax_checkpoints
from bert_tf.training.optimization import budget_schedule, learning_rate_at
from bert_tf.training.step_runner import (Restored, Runtime, StepRunner, StepsResult,
                                          eval_results)
from bert_tf.training.stops import TrainingPreempted, handled_stop_signals, stop_signal_note

# "No step was non-finite" in the int32 JAX keeps steps in.
_NO_BAD_STEP = 2 ** 31 - 1

# JAX logs at INFO each platform it finds missing ("Unable to initialize backend 'tpu'") on
# every machine without that accelerator: nothing a user can act on.
python_logging.getLogger("jax._src.xla_bridge").setLevel(python_logging.WARNING)

# Environment variables that say a process is one of several (jax.distributed finds the rest).
_MULTI_PROCESS_ENVIRONMENT = ("JAX_COORDINATOR_ADDRESS", "KERAS_DISTRIBUTION_JOB_ADDRESSES")


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


def device_mesh():
    """The jax Mesh of the DataParallel distribution (axis "batch"), or of every device."""
    distribution = keras.distribution.distribution()
    if isinstance(distribution, keras.distribution.DataParallel):
        return distribution.device_mesh.backend_mesh
    return jax.sharding.Mesh(np.array(jax.devices()), ("batch",))


class JaxRuntime(Runtime):
    """A job's runtime on JAX: every device of every process, data parallel."""

    backend = "jax"
    compiles_each_shape = True

    @classmethod
    def start(cls, coordinator_address=None, num_processes=None, process_id=None):
        """Joins the run's processes (initialize) and sets keras.distribution.DataParallel
        over every device, before any model is built."""
        initialize(coordinator_address, num_processes, process_id)
        data_parallel()
        return cls()

    @property
    def chief(self):
        return jax.process_index() == 0

    @property
    def num_replicas(self):
        return jax.device_count()

    def devices(self):
        return (f"{jax.device_count()} {jax.default_backend()} device(s), "
                f"{jax.process_count()} process(es)")

    def scope(self):
        import contextlib

        return contextlib.nullcontext()

    def set_precision(self, dtype, varying_shapes=False):
        resolved = dtype
        self.varying_shapes = varying_shapes
        if dtype == "auto":
            # On CPUs XLA compiles every JAX step, and its bfloat16 steps measured slower than
            # float32 (BERT-small, Xeon with AVX512_BF16: 818 vs 927 tokens/s).
            resolved = "mixed_bfloat16" if jax.default_backend() != "cpu" else "float32"
            logging.info("--dtype=auto: %s on %s", resolved, self.devices())
        keras.mixed_precision.set_global_policy(resolved)
        self.dtype = resolved
        return resolved

    def check_global_batch(self, value, flag):
        if value < 1:
            raise ValueError(f"{flag}={value} must be >= 1")
        devices = jax.device_count()
        if value % devices:
            raise ValueError(f"{flag}={value} does not divide over the {devices} devices "
                             f"({jax.process_count()} process(es)); use a multiple of {devices}")

    def step_runner(self, **kwargs):
        return JaxStepRunner(self, **kwargs)

    def evaluate(self, *, model, loss_fn, dataset_fn, max_steps=None, metrics_fn=None):
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
        for local in numpy_batches(dataset_fn(InputContext())):
            if max_steps is not None and steps >= max_steps:
                break
            batch = jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, x),
                                 local)
            parts = {k: float(v) for k, v in eval_step(values, batch).items()}
            sums = parts if sums is None else {k: sums[k] + parts[k] for k in sums}
            steps += 1
        return eval_results(sums, steps, steps, metrics_fn)

    def restore_latest(self, output_dir, model, optimizer=None):
        if optimizer is not None:
            optimizer.build(model.trainable_variables)
        path, _ = jax_checkpoints.Checkpointer(output_dir, writer=False).restore(model,
                                                                                optimizer)
        return path

    def saved_run_state(self, output_dir):
        return jax_checkpoints.newest_run_state(output_dir)

    def agree(self, flag):
        if jax.process_count() == 1:
            return bool(flag)
        return bool(np.any(multihost_utils.process_allgather(np.array(bool(flag)))))

    def mean(self, values):
        if jax.process_count() == 1:
            return list(values)
        gathered = multihost_utils.process_allgather(np.asarray(values, np.float64))
        return [float(v) for v in np.mean(gathered, axis=0)]

    def barrier(self, name):
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices(name)


class JaxStepRunner(StepRunner):
    """The controller's steps under keras.distribution (training.step_runner's contract).

    Args: as tf_runner.TensorFlowStepRunner.
    """

    def __init__(self, runtime, *, model, optimizer, loss_fn, dataset_fn, output_dir,
                 loop_config, max_checkpoints_to_keep=5, warm_start_fn=None,
                 init_checkpoint_target=None, handle_sigterm=True):
        self._runtime = runtime
        self._model, self._optimizer, self._loss_fn = model, optimizer, loss_fn
        self._dataset_fn, self._config = dataset_fn, loop_config
        self._warm_start_fn = warm_start_fn or _no_warm_start
        self._init_target = init_checkpoint_target or model
        self._handle_sigterm = handle_sigterm
        if loop_config.global_batch_size:
            runtime.check_global_batch(loop_config.global_batch_size, "--train_batch_size")
        fileio.makedirs(output_dir)
        optional.require("orbax.checkpoint")
        self._checkpoints = jax_checkpoints.Checkpointer(output_dir, max_checkpoints_to_keep,
                                                         writer=runtime.chief)
        self._schedule = budget_schedule(optimizer)
        self._state = self._step = self._batches = self._sigterm = None
        self._host_variables = []
        # Each micro-batch is one global array: its loss parts are one term of the sums.
        self.terms_per_batch = 1

    def restore(self):
        model, optimizer = self._model, self._optimizer
        optimizer.build(model.trainable_variables)
        restored, run_state = self._checkpoints.restore(model, optimizer)
        if restored is None and self._config.init_checkpoint:
            self._warm_start_fn(self._config.init_checkpoint, self._init_target)
        return Restored(restored, int(np.asarray(optimizer.iterations.value)), run_state)

    def start(self, skip_batches):
        mesh = device_mesh()
        host_variables = [self._schedule.anchor] if self._schedule is not None else []
        self._step, self._state = compile_train_step(self._model, self._optimizer,
                                                     self._loss_fn, mesh, host_variables)
        self._host_variables = host_variables
        self._batches = _MicroBatches(self._dataset_fn, skip_batches, mesh)
        self._sigterm = _SigtermFlag() if self._handle_sigterm else None

    def run_steps(self, num_steps, accumulation):
        host_values = [np.asarray(v.value) for v in self._host_variables]
        # One process stops at a SIGTERM at once; several stop together after the call.
        alone = jax.process_count() == 1
        sums, first_bad, steps_run = None, None, 0
        for _ in range(num_steps):
            self._state, parts, finite = self._step(self._state,
                                                    self._batches.take(accumulation),
                                                    host_values)
            steps_run += 1
            sums = parts if sums is None else {k: sums[k] + parts[k] for k in sums}
            bad_here = jax.numpy.where(finite, _NO_BAD_STEP, steps_run)
            first_bad = bad_here if first_bad is None else jax.numpy.minimum(first_bad, bad_here)
            if alone and self._sigterm is not None and self._sigterm.is_set():
                break
        stop = self._runtime.agree(self._sigterm is not None and self._sigterm.is_set())
        host_sums = {k: float(v) for k, v in sums.items()}
        bad = int(first_bad)
        if bad != _NO_BAD_STEP:
            return StepsResult(host_sums, bad, stop, True)
        return StepsResult(host_sums, steps_run, stop, False)

    def save(self, step, run_state):
        # The compiled loop's state goes to Orbax as it lies on the devices.
        trainable, non_trainable, optimizer_values = self._state
        values = {id(v): a for variables, arrays in (
            (self._model.trainable_variables, trainable),
            (self._model.non_trainable_variables, non_trainable),
            (self._optimizer.variables, optimizer_values)) for v, a in zip(variables, arrays)}
        return self._checkpoints.save(self._model, self._optimizer, step, run_state, values)

    def sync_model(self):
        _put_state(self._model, self._optimizer, self._state)

    def learning_rate(self, step):
        return learning_rate_at(self._optimizer, step, lambda value: float(np.asarray(value)))

    def last_good_checkpoint(self):
        return self._checkpoints.last_good

    def preempted(self, step, saved):
        return TrainingPreempted(step, saved, self._sigterm and self._sigterm.received)

    def finish(self):
        _put_state(self._model, self._optimizer, self._state)

    def close(self, stop_handled):
        if self._sigterm is not None:
            self._sigterm.restore(stop_handled)


def _state(model, optimizer):
    return ([v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
            [v.value for v in optimizer.variables])


def _put_state(model, optimizer, state):
    """Writes the compiled loop's state back into the Keras variables (copies on the devices:
    the loop donates its own buffers)."""
    trainable, non_trainable, optimizer_values = state
    for variables, values in ((model.trainable_variables, trainable),
                              (model.non_trainable_variables, non_trainable),
                              (optimizer.variables, optimizer_values)):
        for variable, value in zip(variables, values):
            variable.assign(jax.numpy.copy(value))


def compile_train_step(model, optimizer, loss_fn, mesh, host_variables=()):
    """The compiled train step and its first state.

    Args:
      model, optimizer (built), loss_fn: as controller.train.
      mesh: the device mesh (device_mesh()).
      host_variables: Keras variables the host sets between calls (a BudgetSchedule's
        anchor), read inside the step from the call's `host_values`.

    Returns:
      (step, state): `step(state, micro_batches, host_values) -> (state, parts, finite)`,
      micro_batches a dict of [A, B, ...] global arrays (shard_micro_batches: A micro-batches
      accumulated, one compilation per A), host_values the host variables' values, parts
      loss_fn's float32 sums over the micro-batches, finite a bool scalar; it donates its
      state. state: the trainable, non-trainable and optimizer
      values, replicated over the mesh (copies: the variables' own buffers stay valid).
    """
    replicated = NamedSharding(mesh, P())
    state = jax.device_put(jax.tree.map(np.asarray, _state(model, optimizer)), replicated)
    trainable_variables = model.trainable_variables
    non_trainable_variables = model.non_trainable_variables
    optimizer_variables = optimizer.variables
    host_variables = list(host_variables)

    def loss_and_parts(trainable, non_trainable, batch, accumulation):
        mapping = (list(zip(trainable_variables, trainable))
                   + list(zip(non_trainable_variables, non_trainable)))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            parts = loss_fn(model, batch, True)
        non_trainable = [scope.get_current_value(v) for v in non_trainable_variables]
        parts = {k: keras.ops.cast(v, "float32") for k, v in parts.items()}
        return parts["loss"] / accumulation, (parts, non_trainable)

    grad_fn = jax.value_and_grad(loss_and_parts, has_aux=True)

    def apply(optimizer_values, grads, trainable, host_values):
        # optimizer.stateless_apply, with the host variables mapped as well (the learning-rate
        # schedule reads them inside its scope).
        mapping = (list(zip(trainable_variables, trainable))
                   + list(zip(optimizer_variables, optimizer_values))
                   + list(zip(host_variables, host_values)))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            optimizer.apply(grads, trainable_variables)
        return ([scope.get_current_value(v) for v in trainable_variables],
                [scope.get_current_value(v) for v in optimizer_variables])

    def step(state, micro_batches, host_values=()):
        trainable, non_trainable, optimizer_values = state
        # Static when traced: each count is a compilation of its own.
        accumulation = jax.tree.leaves(micro_batches)[0].shape[0]

        def one(carry, batch):
            grads, non_trainable, sums = carry
            (_, (parts, non_trainable)), step_grads = grad_fn(trainable, non_trainable, batch,
                                                              accumulation)
            grads = jax.tree.map(lambda a, b: a + b, grads, step_grads)
            sums = jax.tree.map(lambda a, b: a + b, sums, parts)
            return (grads, non_trainable, sums), None

        first = jax.tree.map(lambda x: x[0], micro_batches)
        (_, (sums, non_trainable)), grads = grad_fn(trainable, non_trainable, first,
                                                    accumulation)
        if accumulation > 1:
            rest = jax.tree.map(lambda x: x[1:], micro_batches)
            (grads, non_trainable, sums), _ = jax.lax.scan(
                one, (grads, non_trainable, sums), rest)
        trainable, optimizer_values = apply(optimizer_values, grads, trainable, host_values)
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


def numpy_batches(dataset, skip=0):
    """An iterator over `dataset`'s batches (dicts of numpy arrays) past its first `skip`.

    `dataset` is what a dataset_fn returns: a tf.data.Dataset, or any iterable of such dicts
    (a generator, a grain or PyTorch loader), which is how a machine without TensorFlow feeds
    the JAX loop.
    """
    if hasattr(dataset, "as_numpy_iterator"):
        if skip:
            dataset = dataset.skip(skip)
        return without_autotuning(dataset).as_numpy_iterator()
    iterator = iter(dataset)
    for _ in itertools.islice(iterator, skip):
        pass
    return iterator


class _MicroBatches:
    """This process's input pipeline, past its first `skip` batches, as the steps take it."""

    def __init__(self, dataset_fn, skip, mesh):
        self._iterator = numpy_batches(dataset_fn(InputContext()), skip)
        self._mesh = mesh

    def take(self, accumulation):
        """The next `accumulation` batches stacked ([A, B, ...] global arrays, split along the
        batch axis over every device)."""
        try:
            local = [next(self._iterator) for _ in range(accumulation)]
        except StopIteration:
            raise RuntimeError("the training input ended; dataset_fn must return a repeating "
                               "dataset") from None
        return shard_micro_batches(jax.tree.map(_stack_padded, *local), self._mesh)


def _stack_padded(*arrays):
    """Micro-batches [B, L_i, ...] stacked to [A, B, L, ...], L the longest L_i: length-bucketed
    batches differ in their sequence axis, and the added positions (id 0, mask 0, weight 0) are
    ones attention and the losses ignore."""
    if arrays[0].ndim >= 2 and len({a.shape[1] for a in arrays}) > 1:
        width = max(a.shape[1] for a in arrays)
        arrays = [np.pad(a, [(0, 0), (0, width - a.shape[1])] + [(0, 0)] * (a.ndim - 2))
                  for a in arrays]
    return np.stack(arrays)


class _SigtermFlag:
    """SIGTERM or Ctrl-C (STOP_SIGNALS) sets a flag the runner reads between steps (the main
    thread only); a second Ctrl-C raises KeyboardInterrupt at once.

    Attributes:
      received: the first stop signal that arrived (None: none).
    """

    def __init__(self):
        self._event = threading.Event()
        self._previous = {}
        self._aborted = False
        self.received = None
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._on_signal)
                              for s in handled_stop_signals()}

    def _on_signal(self, signum, frame):
        if signum == signal.SIGINT and self.received == signal.SIGINT:
            self._aborted = True
            raise KeyboardInterrupt  # Ctrl-C twice: stop now, without the checkpoint
        if self.received is None:
            self.received = signal.Signals(signum)
            logging.warning(stop_signal_note(signum))
        self._event.set()

    def is_set(self):
        return self._event.is_set()

    def restore(self, handled):
        """Restores the previous handlers; a Ctrl-C training did not act on (`handled` False:
        it came after the last step, or training failed) is re-sent to them, so the command
        stops (a SIGTERM is not: the run then ends as it would have)."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        if self.received == signal.SIGINT and not handled and not self._aborted:
            os.kill(os.getpid(), signal.SIGINT)


def _no_warm_start(path, model):
    raise ValueError(f"init_checkpoint={path}: no warm_start_fn to load it with")
