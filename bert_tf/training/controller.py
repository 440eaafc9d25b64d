"""The run controller: one training loop for every job on every backend.

It owns, once, what a training run does around its steps: resume (or warm start) through the
backend's checkpointer, the schedule of logs, TensorBoard summaries, checkpoints and
evaluations (`on_checkpoint`), the time budget (training.budget), the NaN stop, SIGTERM
(checkpoint, then exit 143) and the run's final metrics. Beneath it a step runner per backend
(`runtime.step_runner(...)`: training.tf_runner on a tf.distribute strategy, training.jax_runner
under keras.distribution) supplies only its compiled steps, its device placement and its
checkpointer; the job supplies the task: model, optimizer, loss and metrics, input.

The per-batch function contract (`loss_fn(model, batch, training) -> dict`): float32 scalars,
computed on one replica's batch, with "loss" (the value to minimise, a mean over that batch)
plus any additive parts (counts, correct predictions, partial losses). The runner sums each
part over replicas, accumulated micro-batches and steps; `metrics_fn(sums, count)` turns those
sums into reported metrics (`count` = the number of (micro-batch, replica) terms summed), by
default `sums[k] / count` for every k.

Resume is step-exact: a checkpoint holds the model, the optimizer (whose iteration count is the
global step), the states of the model's random generators (dropout) and the run's clock with
the count of micro-batches consumed; the input continues by skipping those, so with a
deterministic pipeline a resumed run takes exactly the steps an uninterrupted one takes.

Batch-size ramp (`loop_config.batch_size_ramp`): each call of the compiled steps accumulates
`loop_config.accumulation_at(fraction)` micro-batches a step, the fraction being the share of
training done that on_progress gets; the step runner compiles each count once.

Non-finite values: a NaN/Inf loss or weight stops training before any later save, so every
checkpoint holds finite weights; the error names the first bad step and the last good
checkpoint.

Preemption: SIGTERM (what Kubernetes, Slurm and Cloud TPU send before they take a machine away)
makes the run finish the current step, save a checkpoint at that step on every process and
raise TrainingPreempted, a SystemExit with code PREEMPTED_EXIT_CODE (143); the restarted job
resumes at that step.

Time budget (`loop_config.time_budget_seconds`): training stops when the budget is spent, and a
BudgetSchedule learning rate follows the share of the training time spent, reaching its end
exactly then; the budget's seconds are part of every checkpoint, so a resumed run continues the
same budget.
"""

import math
import time

from absl import logging

from bert_tf.training.budget import BudgetClock, format_duration
from bert_tf.training.optimization import budget_schedule
from bert_tf.training.stops import (PREEMPTED_EXIT_CODE, NonFiniteLossError,  # noqa: F401
                                    TrainingPreempted)


def mean_metrics(sums, count):
    """Default metrics_fn: every summed part divided by the number of (micro-batch, replica)
    terms."""
    return {k: v / count for k, v in sums.items()}


def train(*, runtime, model, optimizer, loss_fn, dataset_fn, output_dir, loop_config,
          metrics_fn=None, on_checkpoint=None, checkpoint_done=None, warm_start_fn=None,
          init_checkpoint_target=None, skip_consumed_input=True, max_checkpoints_to_keep=5,
          handle_sigterm=True, start_time=None, budget_reserve_fn=None, on_restored=None,
          on_progress=None):
    """Trains `model` to `loop_config.num_train_steps` optimizer steps (or for
    `loop_config.time_budget_seconds`), resuming from output_dir's checkpoint.

    Args:
      runtime: the training.runtime.Runtime the model and optimizer were created in
        (`runtime.scope()`).
      model: a built keras.Model.
      optimizer: a keras optimizer; its `iterations` is the global step (so the learning-rate
        schedule resumes with it). For a time budget its learning rate is a BudgetSchedule
        (optimization.create_optimizer(..., budget_warmup_proportion=...)).
      loss_fn: `(model, batch, training) -> dict` of float32 scalars with "loss" (module doc).
      dataset_fn: `(input_context) -> tf.data.Dataset` of this input pipeline's batches
        (tf.distribute.InputContext, or jax_runner.InputContext with the same attributes); it
        must repeat (training stops with an error if it ends). On JAX it may return any
        iterable of dicts of numpy arrays instead (jax_runner.numpy_batches): no TensorFlow
        is then needed.
      output_dir: checkpoints (ckpt-<step>), summaries/train.
      loop_config: a TrainLoopConfig (steps or time budget, checkpoint and log cadence, batch
        size, gradient accumulation, XLA, the warm-start checkpoint).
      metrics_fn: `(sums, count) -> dict` of reported metrics (default: means).
      on_checkpoint: optional `(step) -> None`, called on every process after each checkpoint
        save (e.g. to evaluate and keep the best model); it runs between training steps.
      checkpoint_done: optional `(step) -> bool`, with on_checkpoint: whether on_checkpoint(step)
        completed (what it records says so). A resumed run whose checkpoint was due a call
        that never completed (the process was killed between the save and the call's end, or
        stopped by SIGTERM at that step) makes it, on the restored weights, before training
        on (the chief decides, from what it recorded; every process follows it). Called on
        the chief only.
      warm_start_fn: `(init_checkpoint, target) -> any` that loads loop_config.init_checkpoint
        when output_dir has no checkpoint (default: checkpointing.warm_start).
      init_checkpoint_target: what init_checkpoint loads into (default `model`).
      skip_consumed_input: on resume, skip the batches the restored steps consumed; False
        restarts the input (a tf.data service, whose order is not reproducible).
      max_checkpoints_to_keep: how many of its own checkpoints the run keeps.
      handle_sigterm: save and raise TrainingPreempted on SIGTERM (the main thread only).
      start_time: `time.time()` when the job started (default now): a time budget counts the
        job's set-up too.
      budget_reserve_fn: `(seconds_per_batch, compile_seconds) -> seconds` the job needs after
        training (evaluation, model files), from the measured time of one micro-batch's
        training step and the time compiling the step took, kept free of the budget; None:
        the final checkpoint only.
      on_restored: optional `() -> None` called once the run's checkpoint is restored (or the
        warm start done), before the first step: a job writes its run files there, so a
        resume refused for its checkpoints writes nothing.
      on_progress: optional `(fraction) -> None`, called before each call of the compiled
        steps with the share of training done, in [0, 1]: steps done / num_train_steps, or
        the time budget's fraction (what the learning rate follows). A schedule outside the
        optimizer follows it (the masking rate of raw text: text_pretraining_dataset's
        masking_progress).

    Returns:
      dict: the metrics of the last logging window plus "step", "steps_this_run",
      "micro_batches" (global micro-batches trained on, every part of the run),
      "first_log" (this run's first logging window with its step, None if none),
      "examples_per_second" (this run), "wall_time_seconds" (this run) and "seconds_spent"
      (every part of the run, from its checkpoints); with a budget also "time_budget_seconds".

    Raises:
      NonFiniteLossError: the loss or the updated weights became NaN/Inf; the message gives
        the step and the last good checkpoint (nothing is saved after the bad step).
      TrainingPreempted: SIGTERM arrived; the checkpoint of the step reached was saved.
      checkpointing.CheckpointError: output_dir not writable, no checkpoint there can be read,
        or an unusable init_checkpoint.
    """
    start_time = time.time() if start_time is None else start_time
    config = loop_config
    runner = runtime.step_runner(
        model=model, optimizer=optimizer, loss_fn=loss_fn, dataset_fn=dataset_fn,
        output_dir=output_dir, loop_config=config, max_checkpoints_to_keep=max_checkpoints_to_keep,
        warm_start_fn=warm_start_fn, init_checkpoint_target=init_checkpoint_target or model,
        handle_sigterm=handle_sigterm)
    restored = runner.restore()
    if on_restored is not None:
        on_restored()
    step = first_step = restored.step
    if (on_checkpoint is not None and checkpoint_done is not None and restored.path is not None
            and _checkpoint_due(step, config, _finished(step, config, restored.run_state))
            and _chief_decides(runtime, lambda: not checkpoint_done(step))):
        on_checkpoint(step)
    # Checkpoints without the count were written by runs whose every step took the full count.
    micro_batches = first_batches = int(restored.run_state.get("micro_batches")
                                        or step * config.gradient_accumulation_steps)
    budget = config.time_budget_seconds
    clock = BudgetClock(budget or math.inf, start_time,
                        spent_before=restored.run_state.get("seconds_spent", 0.0),
                        fraction_before=restored.run_state.get("schedule_fraction", 0.0),
                        save_seconds=_save_seconds_guess(model))
    schedule = budget_schedule(optimizer)
    if budget and schedule is None:
        raise ValueError("a time budget needs an optimizer whose learning rate is a "
                         "BudgetSchedule (create_optimizer(..., budget_warmup_proportion=...))")
    log_steps = config.log_steps or config.steps_per_loop
    window = _window(runtime, runner, output_dir, metrics_fn or mean_metrics, config,
                     first_step, clock if budget else None)
    runner.start(micro_batches if skip_consumed_input else 0)
    _log_start(step, config, clock if budget else None)
    seconds_per_batch = seconds_per_step = compile_seconds = None
    compiled = set()
    preempted = None
    clock.start_training()
    try:
        while True:
            if budget:
                left, fraction, rate = runtime.mean(
                    [clock.training_left(), clock.fraction(), clock.fraction_per_second()])
                accumulation = config.accumulation_at(fraction)
                if seconds_per_batch is not None:
                    seconds_per_step = seconds_per_batch * accumulation
                    if budget_reserve_fn is not None:
                        clock.set_reserve(budget_reserve_fn(seconds_per_batch, compile_seconds))
                if left <= (seconds_per_step or 0.0) or fraction >= 1.0:
                    break
                fit = 1 if seconds_per_step is None else max(1, int(left / seconds_per_step))
                num_steps = min(fit, config.steps_per_loop, _to_next_multiple(step, log_steps),
                                _to_next_multiple(step, config.save_checkpoints_steps))
                schedule.set_anchor(step, fraction, rate * (seconds_per_step or 0.0))
            else:
                if step >= config.num_train_steps:
                    break
                num_steps = min(config.steps_per_loop, config.num_train_steps - step,
                                _to_next_multiple(step, config.save_checkpoints_steps),
                                _to_next_multiple(step, log_steps))
                fraction = step / config.num_train_steps
                accumulation = config.accumulation_at(fraction)
            if on_progress is not None:
                on_progress(fraction)
            call_start = time.time()
            result = runner.run_steps(num_steps, accumulation)
            call_seconds = time.time() - call_start
            batches_run = result.steps_run * accumulation
            if accumulation not in compiled:
                # A call at a new count compiles: its time says nothing of the speed, but the
                # run's first call with a later call's tells what compiling took.
                compiled.add(accumulation)
                if step == first_step:
                    first_call = (call_seconds, batches_run)
            elif batches_run:
                seconds_per_batch = call_seconds / batches_run
                seconds_per_step = seconds_per_batch * accumulation
                compile_seconds = max(0.0, first_call[0] - first_call[1] * seconds_per_batch)
            if result.nonfinite:
                raise NonFiniteLossError(_nonfinite_message(result, step, runner))
            step += result.steps_run
            micro_batches += batches_run
            window.add(result.sums, result.steps_run, batches_run)
            last = (not budget and step >= config.num_train_steps) or (
                budget and _budget_spent(runtime, clock, seconds_per_step))
            if step % log_steps == 0 or last or result.stop:
                window.log(step, runner.learning_rate(step))
            if _checkpoint_due(step, config, last) or result.stop:
                save_start = time.time()
                saved = runner.save(step, _run_state(clock, budget, last, micro_batches))
                clock.note_save(time.time() - save_start)
                if result.stop:
                    preempted = runner.preempted(step, saved)
                    logging.warning("Training %s", preempted)
                    raise preempted
                if on_checkpoint is not None:
                    runner.sync_model()
                    on_checkpoint(step)
            if last:
                break
        runner.finish()
    finally:
        runner.close(stop_handled=preempted is not None)
    results = _final_results(window, step, first_step, micro_batches - first_batches,
                             start_time, clock)
    results["micro_batches"] = micro_batches
    if budget:
        results["time_budget_seconds"] = budget
    return results


def _checkpoint_due(step, config, last):
    """Whether the schedule saves a checkpoint at `step` and calls on_checkpoint for it: every
    save_checkpoints_steps, and the `last` step (a stop request's save is not the schedule's)."""
    return step % config.save_checkpoints_steps == 0 or last


def _finished(step, config, run_state):
    """Whether the checkpoint of `step`, with its `run_state`, is the run's last: the budget's
    (its schedule recorded done, _run_state) or --num_train_steps'."""
    if config.time_budget_seconds:
        return run_state.get("schedule_fraction", 0.0) >= 1.0
    return step >= config.num_train_steps


def _chief_decides(runtime, decide):
    """The chief's `decide()` on every process (every process calls this; only the chief calls
    `decide`): a decision read from the files the chief owns, which a worker may have read
    before the chief put them in order (run_directory.owned), or never (a directory of its
    own). Agreed through the runtime's mean, as the budget's values are."""
    flagged, chiefs = runtime.mean([float(runtime.chief and bool(decide())),
                                    float(runtime.chief)])
    return flagged > chiefs / 2


def _save_seconds_guess(model):
    """What saving a checkpoint of `model` may take before one was timed: its weights and two
    optimizer slots each at 200 MB/s, and half a second."""
    bytes_ = sum(4 * math.prod(v.shape) for v in model.trainable_variables)
    return 0.5 + 3 * bytes_ / 2e8


def _budget_spent(runtime, clock, seconds_per_step):
    """Whether another step no longer fits the budget's training time (every process agrees)."""
    left = runtime.mean([clock.training_left()])[0]
    return left <= (seconds_per_step or 0.0)


def _run_state(clock, budget, finished, micro_batches):
    """What a checkpoint keeps of the run's clock and input; a budgeted run's last checkpoint
    records its schedule as done (a resume then has nothing left to train)."""
    state = dict(clock.state(), micro_batches=float(micro_batches))
    if not budget:
        state["schedule_fraction"] = 0.0
    elif finished:
        state["schedule_fraction"] = 1.0
    return state


def _log_start(step, config, clock):
    if clock is None:
        if step >= config.num_train_steps:
            logging.info("Global step %d already reaches --num_train_steps=%d; nothing to train.",
                         step, config.num_train_steps)
        return
    logging.info("--time_budget=%s: %s spent, %s left, training from step %d (the learning "
                 "rate follows the budget: %.0f%% of it done)",
                 format_duration(clock.budget_seconds), format_duration(clock.spent()),
                 format_duration(clock.left()), step, 100 * clock.fraction())


def _nonfinite_message(result, step, runner):
    bad_step = step + result.steps_run
    loss = result.sums.get("loss", float("nan"))
    what = ("the update made the weights non-finite (NaN/Inf)" if math.isfinite(loss)
            else f"loss became {'NaN' if loss != loss else 'Inf'}")
    return (f"{what} at step {bad_step}; training stopped without saving. Last good "
            f"checkpoint: {runner.last_good_checkpoint() or 'none'}")


def _window(runtime, runner, output_dir, metrics_fn, config, first_step, clock):
    from bert_tf.training.logging_window import LoggingWindow

    return LoggingWindow(output_dir, runtime.chief, metrics_fn,
                         None if clock is not None else config.num_train_steps,
                         runner.terms_per_batch, config.global_batch_size, first_step,
                         budget=clock)


def _final_results(window, step, first_step, batches_this_run, start_time, clock):
    """train()'s return value: the last window's metrics plus the run's totals."""
    train_time = time.time() - window.run_start
    results = dict(window.results)
    results.update(step=step, steps_this_run=step - first_step,
                   wall_time_seconds=time.time() - start_time, first_log=window.first_log,
                   seconds_spent=clock.spent())
    if window.examples_per_batch:
        results["examples_per_second"] = (batches_this_run * window.examples_per_batch
                                          / train_time
                                          if train_time > 0 and batches_this_run else 0.0)
    return results


def _to_next_multiple(step, every):
    return every - step % every
