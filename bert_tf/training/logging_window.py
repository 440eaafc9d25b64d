"""The training loop's logging window: metric sums over the steps since the last log, rates,
ETA, absl progress lines and TensorBoard summaries (written by TensorFlow, without the
tensorboard package; on a machine without TensorFlow, a JAX run's, the log lines alone)."""

import functools
import time

from absl import logging

from bert_tf import file_names
from bert_tf.training.budget import format_duration


def _tensorflow():
    """The tensorflow module, or None where it is not installed."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    return tf


@functools.cache
def _scalar_metadata():
    from tensorflow.core.framework import summary_pb2

    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    ).SerializeToString()


class LoggingWindow:
    """Sums loss_fn's parts over the steps since the last log; `log()` reports and resets.

    Args:
      output_dir: summaries go to `output_dir/summaries/train` (chief only).
      chief: whether this worker writes summaries (others get a no-op writer).
      metrics_fn: `(sums, count) -> dict` of reported metrics (see loop.train).
      num_train_steps: the step training stops at, for the progress line and the ETA.
      terms_per_batch: (micro-batch, replica) terms each micro-batch adds to the sums (the
        step runner's).
      examples_per_batch: examples in one global micro-batch, or None to skip examples/s.
      first_step: the global step this run started at (for the ETA).
      budget: a training.budget.BudgetClock when the run trains to a time budget (the progress
        line then shows the time spent of it; num_train_steps is None).
    """

    def __init__(self, output_dir, chief, metrics_fn, num_train_steps, terms_per_batch,
                 examples_per_batch, first_step, budget=None):
        tf = _tensorflow()
        self._writer = None
        if tf is None:
            if chief:
                logging.info("TensorFlow is not installed: no TensorBoard summaries are "
                             "written; the log lines carry the metrics")
        elif chief:
            self._writer = tf.summary.create_file_writer(
                file_names.path(output_dir, file_names.SUMMARIES_DIR, "train"))
        self._metrics_fn = metrics_fn
        self._num_train_steps = num_train_steps
        self._terms_per_batch = terms_per_batch
        self.examples_per_batch = examples_per_batch
        self._first_step = first_step
        self._budget = budget
        self._sums, self._count, self._steps, self._batches = None, 0, 0, 0
        self._start = self.run_start = time.time()
        self.results, self.first_log = {}, None

    def add(self, sums, steps_run, batches_run):
        """Adds the parts summed over `steps_run` steps of `batches_run` global micro-batches
        in all (a dict of floats)."""
        self._sums = sums if self._sums is None else {
            k: self._sums[k] + sums[k] for k in sums}
        self._count += batches_run * self._terms_per_batch
        self._steps += steps_run
        self._batches += batches_run

    def log(self, step, learning_rate):
        """Computes the window's metrics (kept in `results`), logs them with rates and ETA,
        writes them as summaries at `step` and starts a new window."""
        elapsed = time.time() - self._start
        self.results = {k: float(v) for k, v in self._metrics_fn(self._sums, self._count).items()}
        if self.first_log is None:
            self.first_log = dict(self.results, step=step)
        _log_progress(step, self._num_train_steps, dict(self.results, learning_rate=learning_rate),
                      self._steps, self._batches, elapsed, self.examples_per_batch,
                      time.time() - self.run_start, step - self._first_step, self._budget)
        if self._writer is not None:
            with self._writer.as_default(step=step):
                for name, value in self.results.items():
                    write_scalar(name, value)
                write_scalar("learning_rate", learning_rate)
                if self.examples_per_batch and elapsed > 0:
                    write_scalar("examples_per_second",
                                 self._batches * self.examples_per_batch / elapsed)
            self._writer.flush()
        self._sums, self._count, self._steps, self._batches = None, 0, 0, 0
        self._start = time.time()


def write_summaries(logdir, step, metrics):
    """Writes a dict of scalar metrics as TensorBoard summaries at `step` under `logdir`."""
    import tensorflow as tf

    writer = tf.summary.create_file_writer(logdir)
    write_scalars(writer, step, metrics)
    writer.close()


def write_scalars(writer, step, metrics):
    """Writes a dict of scalar metrics with an open summary writer at `step`, then flushes."""
    with writer.as_default(step=step):
        for name, value in metrics.items():
            write_scalar(name, float(value))
    writer.flush()


def write_scalar(name, value):
    """Writes a TensorBoard scalar without importing the tensorboard package (not a TF
    dependency): a float32 summary tagged for TensorBoard's "scalars" plugin."""
    import tensorflow as tf

    tf.summary.write(name, tf.constant(value, tf.float32), metadata=_scalar_metadata())


def format_metrics(metrics):
    """`name=value` pairs of a metrics dict, four significant digits, in its order: how the
    progress lines and the evaluation lines show metrics."""
    return " ".join(f"{k}={v:.4g}" for k, v in metrics.items())


def _log_progress(step, num_train_steps, metrics, window_steps, window_batches, elapsed,
                  global_batch_size, run_elapsed, run_steps, budget=None):
    if budget is not None:
        head = (f"step {step} ({format_duration(budget.spent())} of "
                f"{format_duration(budget.budget_seconds)})")
    else:
        head = f"step {step}/{num_train_steps}"
    parts = [head, format_metrics(metrics)]
    if elapsed > 0:
        parts.append(f"steps/s={window_steps / elapsed:.2f}")
        if global_batch_size:
            parts.append(f"examples/s={window_batches * global_batch_size / elapsed:.1f}")
    if budget is not None:
        parts.append(f"ETA {format_duration(budget.left())}")
    elif run_steps and run_elapsed > 0:
        parts.append(f"ETA {format_duration((num_train_steps - step) * run_elapsed / run_steps)}")
    logging.info(" ".join(parts))
