"""Fine-tuning on top of the training loop: prediction, best-model keeping (the task losses:
training.losses).

The run_classifier / run_squad / run_tagging drivers share this module: each supplies its
model, a dataset of feature dicts and an `evaluate_fn` that computes the task's official metric
in Python, and `fine_tune` trains with the run controller (controller.train: step-exact
resume), evaluates at every checkpoint, keeps the best weights by the task's metric and leaves
them in the model at the end.

Feature-dict contract of the task loss functions (per-replica batches, static shapes):
  every task: input_word_ids, input_mask, input_type_ids  int32 [B, S]
  classification: label_ids int32 [B] (float32 [B] for regression, num_classes == 1;
    multi-hot float32 [B, C] for a multi-label model)
  span QA: start_positions, end_positions int32 [B]
  tagging: label_ids int32 [B, S], label_weights float32 [B, S] (1 on scored pieces)
  optional example_weights float32 [B]: 0 for padding examples (classification, QA).
"""

import json
import math
import os
import shutil
import time
import weakref

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from keras import ops

from bert_tf import file_names, fileio
from bert_tf.fileio import write_text_atomic
from bert_tf.training import controller
from bert_tf.training.logging_window import format_metrics, write_scalars
# The task losses are losses.py's (no TensorFlow there); the job drivers take them from here.
from bert_tf.training.losses import (classification_loss_fn, span_loss_fn,  # noqa: F401
                                    tagging_loss_fn, training_metrics)
from bert_tf.training.tf_runner import remove_worker_dir


def num_train_steps(num_examples, global_batch_size, num_train_epochs):
    """Optimizer steps for `num_train_epochs` passes over `num_examples` (at least 1).

    Like the original run_classifier.py: int(num_examples / batch_size * epochs).
    """
    return max(1, int(num_examples / global_batch_size * num_train_epochs))


def steps_per_epoch(num_examples, global_batch_size):
    """Optimizer steps in one pass over the data (at least 1)."""
    return max(1, math.ceil(num_examples / global_batch_size))


def num_warmup_steps(train_steps, warmup_proportion):
    """Warmup steps: the first `warmup_proportion` of training."""
    if not 0.0 <= warmup_proportion <= 1.0:
        raise ValueError(f"--warmup_proportion={warmup_proportion} must be in [0, 1]")
    return int(train_steps * warmup_proportion)


# model -> {(input signature, output keys): traced step}. Evaluation after every epoch and the
# prediction after it reuse one trace (a trace of a 6-layer model costs about 0.5 s on a 2-core
# CPU, as much as predicting a thousand short sentences). The steps hold the model weakly so
# the cache does not keep models alive.
_PREDICTION_STEPS = weakref.WeakKeyDictionary()


def _prediction_step(model, spec, output_keys):
    """The tf.function running `model(features, training=False)` for inputs of `spec`.

    One trace per element spec: the dataset's spec (its sequence dimension is None for
    length-bucketed batches) is the input signature. Other iterables (spec None): at most two
    traces (reduce_retracing).
    """
    signature = None
    if spec is not None and all(isinstance(s, tf.TensorSpec) for s in tf.nest.flatten(spec)):
        signature = [spec]
    keys = tuple(output_keys) if output_keys is not None else None
    try:
        steps = _PREDICTION_STEPS.setdefault(model, {})
        model_ref = weakref.ref(model)
    except TypeError:  # not weak-referenceable: a trace for this pass only
        steps, model_ref = {}, lambda: model
    if signature is not None:
        # TensorSpecs are hashable; the sorted names tell dicts of equal specs apart.
        names = tuple(sorted(spec)) if isinstance(spec, dict) else None
        cache_key = (names, tuple(tf.nest.flatten(spec)), keys)
        if cache_key in steps:
            return steps[cache_key]

    @tf.function(input_signature=signature, reduce_retracing=True, autograph=False)
    def step(features):
        outputs = model_ref()(features, training=False)
        if isinstance(outputs, dict) and keys is not None:
            outputs = {k: outputs[k] for k in keys}
        return tf.nest.map_structure(lambda t: tf.cast(t, tf.float32), outputs)

    if signature is not None:
        steps[cache_key] = step
    return step


def predict(model, dataset, output_keys=None, sequence_length=None):
    """Runs `model(features, training=False)` over a finite dataset; returns NumPy outputs.

    Args:
      model: a Keras model taking the feature dict.
      dataset: tf.data.Dataset of feature dicts (batched; the last batch may be smaller).
        Length-bucketed batches (bert_tf.data.tasks.length_buckets) carry `example_index` [B]:
        then the outputs are put back in example order and fill rows (index -1) dropped.
      output_keys: for dict outputs, the keys to keep (default all).
      sequence_length: S when every output has a sequence axis 1 ([B, s] span logits,
        [B, s, C] tag logits) that bucketed batches cut short: it is padded back to S with
        zeros so batches of different buckets concatenate. None for [B, C] outputs.

    Returns:
      The model's output structure with each leaf concatenated over batches on axis 0 (NumPy):
      one row per dataset row (with trailing padding rows) or, for bucketed input, exactly one
      row per example in example order.
    """
    if keras.backend.backend() == "tensorflow":
        step = _prediction_step(model, getattr(dataset, "element_spec", None), output_keys)
        batches, host = dataset, lambda t: t.numpy()
    else:
        # Keras' own compiled prediction step (one trace per bucket length).
        def step(features):
            outputs = model.predict_on_batch(features)
            if isinstance(outputs, dict) and output_keys is not None:
                outputs = {k: outputs[k] for k in output_keys}
            return outputs
        batches = (dataset.as_numpy_iterator() if hasattr(dataset, "as_numpy_iterator")
                   else dataset)
        host = np.asarray

    def pad_sequence(array):
        if sequence_length is None or array.shape[1] == sequence_length:
            return array
        widths = [(0, 0), (0, sequence_length - array.shape[1])] + [(0, 0)] * (array.ndim - 2)
        return np.pad(array, widths)

    chunks, indices = [], []
    for batch in batches:
        outputs = step(batch)
        chunks.append(tf.nest.map_structure(
            lambda t: pad_sequence(np.asarray(host(t), np.float32)), outputs))
        if "example_index" in batch:
            indices.append(host(batch["example_index"]))
    if not chunks:
        raise ValueError("prediction input is empty: the dataset yielded no batch")
    outputs = tf.nest.map_structure(lambda *parts: np.concatenate(parts, axis=0), *chunks)
    if not indices:
        return outputs
    index = np.concatenate(indices)
    real = np.flatnonzero(index >= 0)
    order = real[np.argsort(index[real], kind="stable")]
    if not np.array_equal(index[order], np.arange(len(order))):
        raise ValueError("bucketed prediction input does not cover every example exactly once")
    return tf.nest.map_structure(lambda array: array[order], outputs)


class BestModelKeeper:
    """Keeps the weights with the best value of one metric under `<output_dir>/best/`.

    `best/` holds a tf.train.Checkpoint of the model (`best/model-<step>`) and `metrics.json`
    (step, metric name, all metrics, `evaluated_step`: the newest step evaluated, best or
    not, so that a resumed run knows which checkpoint's evaluation it never finished, and
    `evaluations`: every evaluation recorded, in step order, so that a resumed run's results
    list its earlier parts' too; `evaluations` is the run's list). It is
    replaced by renames: written as `best.tmp-<pid>`, the old one moved to `best.old-<pid>`,
    the new one moved in, the old one removed. A run killed between the two renames leaves no
    best/: the next one puts best.old-<pid> back (run_directory.remove_stale_temp_files), and
    re-evaluates the checkpoint whose update was lost; never half of one.

    Only the chief writes `best/`. A non-chief worker given `worker_dir` keeps its own copy of
    the best weights there, so that restore() at the end loads them from a directory no other
    worker is replacing at that moment; the caller removes `worker_dir` afterwards.

    Args:
      model: the keras.Model whose weights to keep.
      output_dir: the run's output directory.
      metric: the metric name to compare (a key of the metrics passed to `update`).
      higher_is_better: False for losses and errors.
      write: False on non-chief workers (they do not write `best/`).
      worker_dir: where a non-chief worker (write=False) keeps its copy; None: no copy (then
        restore() reads the chief's `best/`).
    """

    def __init__(self, model, output_dir, metric, higher_is_better=True, write=True,
                 worker_dir=None):
        self.model = model
        self.directory = file_names.path(output_dir, file_names.BEST_DIR)
        self.metric = metric
        self.higher_is_better = higher_is_better
        self.write = write
        self._copy_dir = self.directory if write else worker_dir
        self._copied_step = None
        self.best = self._read_previous()
        # A metrics.json of an earlier release records no list: the resumed part's only.
        self.evaluations = list((self.best or {}).pop("evaluations", []))

    def _read_previous(self):
        # A resumed run must not forget the best of its earlier part.
        try:
            with fileio.open_file(os.path.join(self.directory, file_names.BEST_METRICS_FILE),
                                  encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def is_better(self, value):
        if self.best is None:
            return True
        best = self.best["metrics"][self.metric]
        return value > best if self.higher_is_better else value < best

    def update(self, step, metrics):
        """Records `metrics` of `step`; saves the weights if they are the best so far.

        Returns:
          True if this step is the new best.
        """
        if self.metric not in metrics:
            raise KeyError(f"best-model metric {self.metric!r} is not among the evaluation "
                           f"metrics {', '.join(sorted(metrics))}")
        # A step evaluated again (its recorded update lost to a kill) replaces its record.
        self.evaluations = [e for e in self.evaluations if e["step"] < step]
        self.evaluations.append(dict({k: float(v) for k, v in metrics.items()}, step=int(step)))
        if not self.is_better(metrics[self.metric]):
            self.best["evaluated_step"] = int(step)
            if self.write:
                write_text_atomic(os.path.join(self.directory, file_names.BEST_METRICS_FILE),
                                  self._metrics_json())
            return False
        self.best = {"step": int(step), "metric": self.metric, "evaluated_step": int(step),
                     "metrics": {k: float(v) for k, v in metrics.items()}}
        if self._copy_dir and fileio.is_remote(self._copy_dir):
            self._save_in_place(step)
        elif self._copy_dir:
            directory = self._copy_dir
            tmp = f"{directory}{file_names.BEST_STAGING_INFIX}{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            _write_weights(self.model, os.path.join(tmp, f"model-{step}"))
            write_text_atomic(os.path.join(tmp, file_names.BEST_METRICS_FILE),
                              self._metrics_json())
            old = f"{directory}{file_names.BEST_REPLACED_INFIX}{os.getpid()}"
            if os.path.exists(directory):
                os.replace(directory, old)
            os.replace(tmp, directory)
            shutil.rmtree(old, ignore_errors=True)
            self._copied_step = int(step)
        logging.info("New best %s=%.5g at step %d", self.metric, metrics[self.metric], step)
        return True

    def evaluated(self, step):
        """Whether the evaluation of `step` was recorded (by this run, or by an earlier part
        of it in best/metrics.json; a metrics.json written before `evaluated_step` existed
        records its best step)."""
        return self.best is not None and self.best.get("evaluated_step",
                                                       self.best["step"]) >= step

    def _metrics_json(self):
        return json.dumps(dict(self.best, evaluations=self.evaluations), indent=2,
                          sort_keys=True) + "\n"

    def _save_in_place(self, step):
        """Directory renames are copies (object stores) or unsupported there: the weights go
        in beside the old ones, then metrics.json (naming the step) is replaced, then the old
        weights are deleted. A crash at any point leaves metrics.json naming complete weights."""
        directory = self._copy_dir
        _write_weights(self.model, os.path.join(directory, f"model-{step}"))
        write_text_atomic(os.path.join(directory, file_names.BEST_METRICS_FILE),
                          self._metrics_json())
        for name in tf.io.gfile.listdir(directory):
            if name.startswith("model-") and not name.startswith(f"model-{step}."):
                tf.io.gfile.remove(os.path.join(directory, name))
        self._copied_step = int(step)

    def restore(self):
        """Loads the best weights into the model; returns the best record (None if none).

        Weights that cannot be read (truncated, corrupt, missing) are skipped with a warning
        naming them and None is returned: the caller falls back to the newest weights.
        """
        if self.best is None:
            return None
        # The best of an earlier run (before a restart) is only in the chief's best/.
        directory = (self._copy_dir if self._copied_step == self.best["step"]
                     else self.directory)
        path = os.path.join(directory, f"model-{self.best['step']}")
        # A read that fails part-way may have assigned some variables: put them back.
        current = [ops.convert_to_numpy(v) for v in self.model.weights]
        try:
            _read_weights(self.model, path)
        except (tf.errors.OpError, ValueError, AssertionError, IndexError, OSError) as e:
            # IndexError: the checkpoint reader's "Read less bytes than requested" (truncated).
            for variable, value in zip(self.model.weights, current, strict=True):
                variable.assign(value)
            logging.warning("The best weights %s cannot be restored (%s); falling back to the "
                            "newest weights.", path, str(e).splitlines()[0][:300])
            self.best = None
            return None
        logging.info("Restored the best weights (step %d, %s=%.5g)", self.best["step"],
                     self.metric, self.best["metrics"][self.metric])
        return self.best


def _write_weights(model, prefix):
    """The best weights: a tf.train.Checkpoint at `prefix` on TensorFlow (bert_tf's format
    since its first release), Keras' `<prefix>.weights.h5` on other backends."""
    if keras.backend.backend() == "tensorflow":
        tf.train.Checkpoint(model=model).write(prefix)
    else:
        fileio.makedirs(os.path.dirname(prefix))
        model.save_weights(prefix + _KERAS_WEIGHTS)


def _read_weights(model, prefix):
    """Loads the best weights at `prefix` in whichever format they were written."""
    if fileio.exists(prefix + _KERAS_WEIGHTS):
        model.load_weights(prefix + _KERAS_WEIGHTS)
    else:
        tf.train.Checkpoint(model=model).read(prefix).expect_partial()


_KERAS_WEIGHTS = ".weights.h5"


def fine_tune(*, model, optimizer, loss_fn, train_dataset_fn, runtime, output_dir,
              loop_config, evaluate_fn=None, best_metric=None, higher_is_better=True,
              warm_start_fn=None, start_time=None):
    """Trains a task model, evaluating at every checkpoint and keeping the best weights.

    Args:
      model, optimizer: created under `runtime.scope()`.
      loss_fn: one of the *_loss_fn above (or the same contract, see controller.train).
      train_dataset_fn: `(InputContext) -> repeating dataset` of per-replica feature dicts.
      runtime: the training.runtime.Runtime.
      output_dir: checkpoints, summaries/{train,eval}, best/.
      loop_config: a TrainLoopConfig, as controller.train takes it (num_train_steps counts
        optimizer steps, each of gradient_accumulation_steps batches of global_batch_size;
        init_checkpoint is the warm-start source when output_dir has no checkpoint yet).
      evaluate_fn: optional `() -> dict` of task metrics on the dev set (runs on every worker;
        only the chief writes); called after each checkpoint.
      best_metric: key of evaluate_fn's metrics that selects the best checkpoint (required
        with evaluate_fn).
      higher_is_better: direction of best_metric.
      warm_start_fn: `(init_checkpoint, model) -> any`, default checkpointing.warm_start.
      start_time: when the job started (a time budget counts from there).

    Returns:
      dict with "train" (controller.train's results), "evaluations" (list of {"step", metrics...}
      of the run, its earlier parts' included when it resumed), "best" (BestModelKeeper
      record or None) and "step". The model holds the best weights when there was an
      evaluation, else the last ones.
    """
    if evaluate_fn is not None and not best_metric:
        raise ValueError("fine_tune: evaluate_fn needs best_metric")
    chief = runtime.chief
    worker_dir = runtime.private_dir(output_dir, file_names.BEST_DIR)
    keeper = (BestModelKeeper(model, output_dir, best_metric, higher_is_better, write=chief,
                              worker_dir=worker_dir)
              if evaluate_fn is not None else None)
    eval_writer = (tf.summary.create_file_writer(
        file_names.path(output_dir, file_names.SUMMARIES_DIR, "eval")) if chief else None)

    def evaluated(step):
        # A run killed (or preempted) between a checkpoint's save and its evaluation left it
        # unevaluated: the resume evaluates it before training on, as the run would have. (The
        # chief alone asks, of the best/ it owns; a best/metrics.json of an earlier release
        # records its best step only, so a later checkpoint may have been evaluated.)
        if evaluate_fn is None or keeper.evaluated(step):
            return True
        logging.warning("The checkpoint of step %d is not recorded as evaluated: evaluating "
                        "it now", step)
        return False

    def on_checkpoint(step):
        if evaluate_fn is None:
            return
        start = time.time()
        metrics = {k: float(v) for k, v in evaluate_fn().items()}
        logging.info("Eval at step %d (%.1f s): %s", step, time.time() - start,
                     format_metrics(dict(sorted(metrics.items()))))
        keeper.update(step, metrics)
        if eval_writer is not None:
            write_scalars(eval_writer, step, metrics)

    train_results = controller.train(
        runtime=runtime, model=model, optimizer=optimizer, loss_fn=loss_fn,
        dataset_fn=train_dataset_fn, output_dir=output_dir, loop_config=loop_config,
        metrics_fn=training_metrics, warm_start_fn=warm_start_fn, on_checkpoint=on_checkpoint,
        checkpoint_done=evaluated, start_time=start_time)
    best = keeper.restore() if keeper is not None else None
    remove_worker_dir(worker_dir)
    if eval_writer is not None:
        eval_writer.close()
    evaluations = keeper.evaluations if keeper is not None else []
    return {"train": train_results, "evaluations": evaluations, "best": best,
            "step": train_results["step"]}
