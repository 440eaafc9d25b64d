"""What a backend supplies: its Runtime (devices, precision, evaluation) and its StepRunner
(the compiled training steps and the checkpointer the run controller, training.controller,
drives). training.tf_runner and training.jax_runner implement both; training.runtime builds
the one a job asks for.
"""

import dataclasses

class CheckpointError(ValueError):
    """A checkpoint that cannot be used for what was asked, or one that could not be saved,
    with the path and the reason."""


def save_failed(step, directory, reason, previous):
    """The CheckpointError of a checkpoint save that failed (disk full, quota, permissions), on
    either backend, once the save's partial files are removed (`reason`: fileio.failure_reason):
    nothing was lost, `previous` (the newest checkpoint kept; None: none yet) restores and a
    rerun resumes from it."""
    kept = (f"the previous checkpoint {previous} is intact" if previous
            else "no checkpoint had been saved yet")
    return CheckpointError(
        f"saving the checkpoint of step {step} in {directory} failed ({reason}); nothing was "
        f"lost: {kept}. Free space (or fix the directory) and rerun the same command to resume")


def none_restored(directory, candidates):
    """The CheckpointError of a resume none of whose checkpoints could be used (either
    backend): a fresh start would replace the run's result with a new model."""
    return CheckpointError(
        f"none of the checkpoints in {directory} could be restored ({', '.join(candidates)}): "
        "the warnings above say why each was skipped; rerun with the settings of the run that "
        "wrote them to resume it, move them away to start afresh, or choose a new --output_dir")


# Checkpoint entries of the run's clock (training.budget): seconds spent by every part of the
# run, a time-budget schedule's progress, and the global micro-batches the steps consumed
# (what a resume skips: with a batch-size ramp steps differ in size).
RUN_STATE_KEYS = ("seconds_spent", "schedule_fraction", "micro_batches")


@dataclasses.dataclass
class Restored:
    """Where a run starts: the checkpoint restored (None: a fresh or warm-started run), its
    global step and the run state it holds ({} for a checkpoint written before it had one)."""

    path: str | None
    step: int
    run_state: dict


@dataclasses.dataclass
class StepsResult:
    """One run_steps call: loss_fn's parts summed over the steps run (host floats), how many
    ran, whether a stop request (SIGTERM on any process) ended the call, and whether a step
    made the loss or the weights non-finite (then it is the last step counted in steps_run)."""

    sums: dict
    steps_run: int
    stop: bool = False
    nonfinite: bool = False


class StepRunner:
    """The contract; every method runs on every process, in this order: restore, start, then
    run_steps / save / learning_rate as the controller decides, finish after the last step,
    and close in any case.

    Attributes:
      terms_per_batch: how many (micro-batch, replica) terms each micro-batch of a step adds
        to the sums (what metrics_fn's `count` counts): the replicas on TensorFlow, 1 on JAX.
    """

    terms_per_batch = 1

    def restore(self):
        """Restores the newest readable checkpoint of the run's directory into the model and
        optimizer (and the random generators), or warm-starts from loop_config.init_checkpoint
        when there is none; returns a Restored. A checkpoint that cannot be read, or holds
        non-finite weights, is skipped for the one before it with a warning naming it; when
        none can be read, a CheckpointError says so and what to do."""
        raise NotImplementedError

    def start(self, skip_batches):
        """Prepares the compiled steps and the input, past the first `skip_batches` global
        micro-batches (those the restored steps consumed); starts watching for SIGTERM."""
        raise NotImplementedError

    def run_steps(self, num_steps, accumulation):
        """Runs up to `num_steps` optimizer steps of `accumulation` micro-batches each (one
        compiled program per count, made on its first use); returns a StepsResult."""
        raise NotImplementedError

    def save(self, step, run_state):
        """Saves a checkpoint of `step` holding `run_state` (RUN_STATE_KEYS); its path."""
        raise NotImplementedError

    def sync_model(self):
        """Leaves the trained values in the model's variables (before an evaluation between
        steps); a runner that trains the variables in place does nothing."""

    def learning_rate(self, step):
        """The learning rate of `step`, a float."""
        raise NotImplementedError

    def last_good_checkpoint(self):
        """The newest checkpoint this run saved or restored (finite weights), or None."""
        raise NotImplementedError

    def preempted(self, step, saved):
        """After the stop request's checkpoint: waits for every process, then returns the
        TrainingPreempted to raise."""
        raise NotImplementedError

    def finish(self):
        """After the last step: waits for every process, leaves the trained values in the
        model's variables and removes temporary files."""
        raise NotImplementedError

    def close(self, stop_handled):
        """Stops watching SIGTERM, always (in a `finally`), re-sending a SIGTERM that training
        did not act on unless `stop_handled`."""
        raise NotImplementedError


class Runtime:
    """The backend, devices and precision of a job (one subclass per backend).

    Attributes:
      backend: the Keras backend, one of BACKENDS.
      dtype: the dtype policy in force (after set_precision).
    """

    backend = None
    dtype = "float32"

    @property
    def chief(self):
        """Whether this process writes the run's files."""
        raise NotImplementedError

    @property
    def num_replicas(self):
        """How many parts a global batch is split into (replicas, or devices)."""
        raise NotImplementedError

    def devices(self):
        """The devices, as a string for the logs."""
        raise NotImplementedError

    def scope(self):
        """The context models and optimizers are created in."""
        raise NotImplementedError

    def check_global_batch(self, value, flag):
        """ValueError naming `flag` unless a global batch of `value` splits over the devices."""
        if value < 1:
            raise ValueError(f"{flag}={value} must be >= 1")
        if value % self.num_replicas:
            raise ValueError(f"{flag}={value} does not divide over the {self.num_replicas} "
                             f"replicas ({self.devices()}); use a multiple of "
                             f"{self.num_replicas}")

    def set_precision(self, dtype, varying_shapes=False):
        """Sets the global Keras dtype policy for `dtype` ("auto" resolved for the devices by
        training.precision's rule; `varying_shapes`: the batches change shape, as length
        buckets make them); returns the policy set."""
        raise NotImplementedError

    # Whether the training batches change shape (set_precision's varying_shapes): some CPU
    # types then leave XLA off, which would compile once per shape.
    varying_shapes = False

    # Whether every new input shape costs a compilation (jit): evaluation then takes the
    # coarse length buckets of training batches rather than the fine ones.
    compiles_each_shape = False

    def needs_static_shapes(self):
        """True where one compiled program runs many steps and needs one input shape (TPUs
        under TensorFlow): length buckets are then off."""
        return False

    def step_runner(self, **kwargs):
        """The StepRunner (training.controller's contract) of this backend for one training
        run; see tf_runner.TensorFlowStepRunner / jax_runner.JaxStepRunner for the arguments."""
        raise NotImplementedError

    def evaluate(self, *, model, loss_fn, dataset_fn, max_steps=None, metrics_fn=None):
        """`loss_fn(model, batch, training=False)` over a (finite) dataset, aggregated by
        `metrics_fn(sums, count)` (default: means); the metrics plus "eval_steps"."""
        raise NotImplementedError

    def restore_latest(self, output_dir, model, optimizer=None):
        """Loads the newest readable training checkpoint of `output_dir` into the model (and
        the optimizer when given): an evaluation of the run; its path, or None when there is
        none."""
        raise NotImplementedError

    def saved_run_state(self, output_dir):
        """The run state (step_runner.RUN_STATE_KEYS) of `output_dir`'s newest checkpoint, {}
        when there is none or it holds none; reads only."""
        raise NotImplementedError

    def private_dir(self, output_dir, purpose):
        """A directory under output_dir where this process keeps its own copy of something
        the chief writes for everyone (`purpose`: e.g. best/), or None where it needs none."""
        return None

    def agree(self, flag):
        """True on every process when `flag` is True on any."""
        raise NotImplementedError

    def mean(self, value):
        """The mean of a host float over the processes (every process gets the same)."""
        raise NotImplementedError

    def barrier(self, name):
        """Returns once every process has reached it."""
        raise NotImplementedError


def eval_results(sums, steps, count, metrics_fn):
    """A runtime's evaluate() results: metrics_fn (default: means over `count`) of the summed
    parts of `steps` batches, plus eval_steps."""
    if sums is None:
        raise ValueError("evaluation input is empty: the eval dataset yielded no batch")
    metrics_fn = metrics_fn or (lambda s, n: {k: v / n for k, v in s.items()})
    results = {k: float(v) for k, v in metrics_fn(sums, count).items()}
    results["eval_steps"] = steps
    return results
