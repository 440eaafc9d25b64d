"""TrainLoopConfig: how long and how a training run goes, on either backend."""

import dataclasses


def check_gradient_accumulation_steps(steps):
    """Raises ValueError naming --gradient_accumulation_steps unless `steps` >= 1: the one check
    of the setting, made by TrainLoopConfig and by the jobs before their work."""
    if steps < 1:
        raise ValueError(f"--gradient_accumulation_steps={steps} must be >= 1")


def check_batch_size_ramp(ramp, accumulation_steps):
    """Raises ValueError naming --batch_size_ramp unless it is a share of training in (0, 1]
    and there is a larger batch to grow to (--gradient_accumulation_steps >= 2)."""
    if not 0 < ramp <= 1:
        raise ValueError(f"--batch_size_ramp={ramp} must be in (0, 1]: the share of training "
                         "over which the batch grows")
    if accumulation_steps < 2:
        raise ValueError(f"--batch_size_ramp={ramp} grows the batch from --train_batch_size to "
                         "--train_batch_size x --gradient_accumulation_steps: set "
                         f"--gradient_accumulation_steps >= 2 (it is {accumulation_steps})")


@dataclasses.dataclass
class TrainLoopConfig:
    """How long and how a training run goes: the trainer section the run controller
    (training.controller.train) and task_loop.fine_tune take, on either backend.

    Args:
      num_train_steps: the global step to stop at; a rerun with a larger value continues.
      steps_per_loop: optimizer steps per tf.function call (host round trip); on JAX, steps
        between two checks of the stop request and the NaN guard.
      save_checkpoints_steps: save when the global step is a multiple of this, and at the end.
      log_steps: log and write summaries every this many steps (default: steps_per_loop).
      global_batch_size: examples per micro-batch over all replicas (the batch-size flag), for
        examples/s; each step trains on gradient_accumulation_steps of them. None skips it.
      gradient_accumulation_steps: micro-batches per optimizer step (at the end of a ramp).
      jit_compile: XLA-compile the forward and backward pass (not the optimizer update):
        True, False or "auto" (on for TPUs and GPUs, off on CPUs; see
        precision.resolve_jit_compile). JAX always compiles the whole step.
      init_checkpoint: weights to warm-start from when output_dir has no checkpoint yet (see
        checkpointing.warm_start); ignored on resume.
      time_budget_seconds: train until this much wall-clock time is spent (training.budget)
        instead of to num_train_steps; the optimizer's learning rate must then be a
        BudgetSchedule.
      batch_size_ramp: a batch that grows (Cramming's batch-size ramp): one micro-batch per
        step at the start, rising linearly to gradient_accumulation_steps when this share of
        training (of num_train_steps, or of the time budget) is done; None: always
        gradient_accumulation_steps. Early steps are then many small updates, late ones few
        large ones.
    """

    num_train_steps: int
    steps_per_loop: int = 100
    save_checkpoints_steps: int = 1000
    log_steps: int | None = None
    global_batch_size: int | None = None
    gradient_accumulation_steps: int = 1
    jit_compile: bool | str = False
    init_checkpoint: str | None = None
    time_budget_seconds: float | None = None
    batch_size_ramp: float | None = None

    def __post_init__(self):
        check_gradient_accumulation_steps(self.gradient_accumulation_steps)
        if self.batch_size_ramp is not None:
            check_batch_size_ramp(self.batch_size_ramp, self.gradient_accumulation_steps)
        if self.time_budget_seconds is not None and not self.time_budget_seconds > 0:
            raise ValueError(f"time_budget_seconds={self.time_budget_seconds} must be > 0")

    def accumulation_at(self, fraction):
        """Micro-batches per optimizer step when `fraction` (in [0, 1]) of training is done."""
        steps = self.gradient_accumulation_steps
        if self.batch_size_ramp is None:
            return steps
        # Rounded down, so the full batch arrives exactly at the ramp's end.
        return min(steps, 1 + int((steps - 1) * fraction / self.batch_size_ramp + 1e-9))
