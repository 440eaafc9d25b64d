"""The classification / regression task: GLUE (TSV or TFDS glue/*) or your own CSV, TSV, JSONL,
with one label per example, any number of them (--multi_label) or a number (--regression).

Run by the fine-tuning driver (bert_tf.jobs.finetuning.run_task); `bert-tf-classify`
(bert_tf.cli.classify, alias bert_tf.run_classifier) documents the command and its outputs.
Evaluates the dev set at every checkpoint with the task's metric (the GLUE score of a GLUE
task: Matthews correlation for CoLA, F1/accuracy for MRPC and QQP, Pearson/Spearman for STS-B,
accuracy otherwise; accuracy for your own classes, micro-averaged F1 for multi-label,
Pearson/Spearman for regression) and keeps the best weights. Besides the driver's run files,
--output_dir receives test_results.tsv (class probabilities per test example, in label order:
softmax, or each label's sigmoid for multi-label; the score for regression) and the
predictions in the GLUE submission format (<TASK>.tsv, or predictions.tsv for other data).
"""

import os
import time

import numpy as np
from absl import logging

from bert_tf import file_names
from bert_tf.data.tasks import classifier_data, feature_records, glue
from bert_tf.data.tasks.task_errors import DataError
from bert_tf.fileio import write_text_atomic
from bert_tf.jobs import finetuning, finetuning_config
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.metrics import (best_multi_label_threshold, classification_metrics,
                             multi_label_metrics, regression_metrics)
from bert_tf.modeling import BertClassifier
from bert_tf.serving.task_info import threshold_logit
from bert_tf.training import task_loop


_USER_FILE_EXTENSIONS = (".tsv", ".csv", ".jsonl", ".json")
PREDICTIONS_FILE = "predictions.tsv"
PROBABILITIES_FILE = "test_results.tsv"
# A label is one per example (multi-label: [C], never cut to a length bucket, even if C == S).
_PER_EXAMPLE = ("label_ids",)
# Test data may also be texts alone, one per line.
_TEST_FILE_EXTENSIONS = _USER_FILE_EXTENSIONS + (classifier_data.TEXT_LINES_EXTENSION,)


class ClassifierData:
    """Reads the splits of the task the flags name: GLUE TSV, TFDS glue/*, or user files.

    Args:
      settings: the run's ClassificationTask section (its files and columns).
      predict_only: the run only predicts (--do_predict without --do_train or --do_eval).
    """

    def __init__(self, settings, predict_only=False):
        self.settings = settings
        self.task = glue.glue_task(settings.task_name) if settings.task_name else None
        # Texts to predict, one per line, have no columns to name (a prediction-only run).
        text_lines_only = predict_only and classifier_data.is_text_lines(settings.test_file)
        self.user_files = settings.text_a_column is not None or (
            self.task is None and text_lines_only)
        if self.task is None and not self.user_files:
            known = ", ".join(glue.GLUE_TASKS)
            if settings.task_name:
                raise FlagValueError(
                    f"--task_name={settings.task_name} is not a GLUE task ({known}); for your own "
                    "data give --text_a_column (and --label_column, --text_b_column)")
            raise FlagValueError(f"give --task_name (one of {known}) or, for your own data, "
                                 "--text_a_column and --label_column")
        if self.user_files and settings.tfds_data_dir:
            raise FlagValueError("--tfds_data_dir reads GLUE tasks; it does not go with "
                                 "--text_a_column")
        if (self.task is not None and not self.user_files and not settings.tfds_data_dir
                and not settings.data_dir):
            raise FlagValueError(f"--task_name={settings.task_name} needs --data_dir (the GLUE "
                                 "TSV files) or --tfds_data_dir (TFDS glue/*)")
        if self.task is not None and settings.regression and not self.task.is_regression:
            raise FlagValueError(f"--regression: GLUE {self.task.name} is a classification "
                                 "task")
        self.is_regression = self.task.is_regression if self.task else settings.regression
        self.multi_label = bool(settings.multi_label)
        self.name = self.task.name if self.task else (settings.task_name or "classifier")

    def _user_file(self, split):
        explicit = {"train": self.settings.train_file, "dev": self.settings.dev_file,
                    "test": self.settings.test_file}[split]
        if explicit:
            return explicit
        if not self.settings.data_dir:
            raise FlagValueError(f"no {split} data: give --{split}_file or --data_dir")
        extensions = _TEST_FILE_EXTENSIONS if split == "test" else _USER_FILE_EXTENSIONS
        path = classifier_data.split_file(self.settings.data_dir, split, extensions)
        if path:
            return path
        raise FlagValueError(f"no {split} file in --data_dir={self.settings.data_dir}: expected "
                             f"{split} with one of {', '.join(extensions)}, or --{split}_file")

    def read(self, split):
        """InputExamples of "train", "dev" or "test"."""
        settings = self.settings
        # A GLUE task reads its own files, but predicts texts given one per line too.
        path = self._user_file(split) if self.user_files or (
            split == "test" and classifier_data.is_text_lines(settings.test_file)) else None
        if classifier_data.is_text_lines(path):
            if split != "test":
                raise FlagValueError(f"--{split}_file={path}: a .txt file holds texts without "
                                     "labels, one per line; give it as --test_file to predict")
            if self.text_pair:
                raise FlagValueError(f"--test_file={path}: a .txt file holds one text per "
                                     "line; this task reads sentence pairs: give a .tsv, .csv "
                                     "or .jsonl with both columns")
            return classifier_data.read_text_lines(path)
        if not self.user_files:
            if settings.tfds_data_dir:
                return glue.read_glue_tfds(self.task, settings.tfds_data_dir, split)
            return glue.read_glue_tsv(self.task, settings.data_dir, split)
        is_test = split == "test"
        return classifier_data.read_table_examples(
            path, text_a_column=settings.text_a_column,
            text_b_column=settings.text_b_column, label_column=settings.label_column,
            is_regression=self.is_regression, require_labels=not is_test, keep_empty=is_test,
            label_separator=settings.label_separator if self.multi_label else None)

    @property
    def text_pair(self):
        if self.user_files:
            return self.settings.text_b_column is not None
        return self.task.labelled.text_b is not None

    def metrics(self, label_ids, predictions):
        if self.multi_label:
            return multi_label_metrics(label_ids, predictions)
        if self.is_regression:
            return regression_metrics(label_ids, predictions)
        return classification_metrics(label_ids, predictions,
                                      self.task.name if self.task else None)

    @property
    def glue_test(self):
        """The test data is a GLUE task's own test split (its predictions: a submission
        file)."""
        return (self.task is not None and not self.user_files
                and not classifier_data.is_text_lines(self.settings.test_file))

    def predictions_file(self):
        return f"{self.task.submission_name}.tsv" if self.glue_test else PREDICTIONS_FILE


def _labels(task, output_dir, data, train_examples):
    """The label names in logit order (None for regression): --labels of the ClassificationTask
    section `task`, else the training examples', else those of a task_info.json in
    `output_dir` (--output_dir) or beside --init_checkpoint."""
    labels = task.labels
    if data.is_regression:
        if labels:
            raise FlagValueError("--labels does not go with a regression task")
        return None
    if data.task is not None:
        if labels and list(labels) != list(data.task.labels):
            raise FlagValueError(f"--labels={','.join(labels)} differs from GLUE "
                                 f"{data.task.name}'s labels {','.join(data.task.labels)}")
        return list(data.task.labels)
    if labels:
        if len(set(labels)) != len(labels):
            raise FlagValueError(f"--labels={','.join(labels)} repeats a label")
        labels = list(labels)
    elif train_examples is not None:
        labels = classifier_data.infer_labels(train_examples)
    else:
        info = finetuning.read_task_info(output_dir, task.init_checkpoint)
        if not info or not info.get("labels"):
            raise FlagValueError("without --do_train the labels come from --labels or a "
                                 "task_info.json in --output_dir or beside --init_checkpoint; "
                                 "found neither (nor a Hugging Face "
                                 "model's id2label)")
        labels = list(info["labels"])
    if len(labels) < 2 and data.multi_label:
        raise FlagValueError(f"--multi_label needs at least 2 labels, got "
                             f"{', '.join(labels) or 'none'} (give --labels with every name; "
                             "one yes/no label is a two-class task without --multi_label)")
    if len(labels) < 2:
        raise FlagValueError(f"classification needs at least 2 labels, got "
                             f"{', '.join(labels) or 'none'} (give --labels, or use "
                             "--regression for numeric targets)")
    return labels


def _check_multi_label_matches(task, output_dir, data):
    """A run that does not train evaluates or predicts with the head its run trained (or a
    Hugging Face model's): refuses --multi_label where that head is single-label, and its
    absence where it is multi-label.
    (A run that trains is held to its checkpoints' record: finetuning.check_resume.)"""
    info = finetuning.read_task_info(output_dir, task.init_checkpoint, quiet=True)
    recorded = info.get("task") if info else None
    if recorded not in ("classification", "multi_label"):
        return
    # The run's task_info.json, else a Hugging Face model's config.json (its problem_type).
    path = (finetuning.task_info_path(output_dir, task.init_checkpoint)
            or os.path.join(task.init_checkpoint, "config.json"))
    if (recorded == "multi_label") != data.multi_label:
        raise FlagValueError(
            f"--multi_label={'true' if data.multi_label else 'false'}, but {path} says task "
            f"{recorded}: give --{'' if recorded == 'multi_label' else 'no'}multi_label to "
            "evaluate or predict with the model it trained")


def _read_split(data, split):
    examples = data.read(split)
    if not examples:
        raise DataError(f"the {split} data of {data.name} has no examples")
    logging.info("%s %s: %d examples", data.name, split, len(examples))
    return examples


def _eval_loss(outputs, label_ids, is_regression, multi_label=False):
    if multi_label:
        # Binary cross-entropy on logits, mean over labels and examples (the training loss).
        logits = np.asarray(outputs, np.float64)
        return float(np.mean(np.logaddexp(0.0, logits) - logits * label_ids))
    if is_regression:
        return float(np.mean((outputs[:, 0] - label_ids) ** 2))
    log_probs = np.log(np.maximum(finetuning.softmax(outputs), 1e-30))
    return float(-np.mean(log_probs[np.arange(len(label_ids)), label_ids.astype(np.int64)]))


class ClassificationRunner(finetuning.TaskRunner):
    """Sentence (pair) classification or regression with a BertClassifier."""

    cli_name = finetuning_config.ClassificationConfig.COMMAND
    best_metric = "score"
    loss_fn = staticmethod(task_loop.classification_loss_fn)

    def __init__(self, job):
        super().__init__(job)
        self.data = ClassifierData(job.task, predict_only=job.do_predict and not (
            job.do_train or job.do_eval))
        self.examples, self.records = {}, {}

    def read_training_data(self, context):
        if self.job.do_train:
            self.examples["train"] = _read_split(self.data, "train")
        self.labels = _labels(self.job.task, self.job.output_dir, self.data,
                              self.examples.get("train"))
        if not self.job.do_train:
            _check_multi_label_matches(self.job.task, self.job.output_dir, self.data)

    @property
    def resume_name(self):
        return self.data.name

    def resume_settings(self):
        # A softmax head's checkpoints must not go on training as sigmoids (same shapes). The
        # separator and threshold are recorded when training starts, so a resumed run reads
        # its files and decides alike (its best checkpoint is chosen by scores at one
        # threshold).
        if not self.data.multi_label:
            return {"multi_label": False}
        task = self.job.task
        return {"multi_label": True, "label_separator": task.label_separator,
                "multi_label_threshold": task.multi_label_threshold}

    @property
    def splits(self):
        job = self.job
        return [s for s, wanted in (("train", job.do_train), ("dev", job.do_eval),
                                    ("test", job.do_predict)) if wanted]

    def prepare_inputs(self, context):
        job, labels = self.job, self.labels
        max_seq_length = job.task.max_seq_length
        cache_dir = file_names.path(job.output_dir, file_names.FEATURES_DIR)
        for split in self.splits:
            if split not in self.examples:
                self.examples[split] = _read_split(self.data, split)
            if labels is not None:
                classifier_data.check_labels(self.examples[split], labels, split)
            self.records[split] = classifier_data.classifier_records(
                cache_dir, split, self.examples[split], context.tokenizer, max_seq_length,
                labels, self.data.multi_label)
        multi_label = self.data.multi_label
        self.spec = classifier_data.classifier_spec(max_seq_length, labels is None,
                                                    len(labels) if multi_label else None)
        if job.do_train:
            self.num_train_examples = self.records["train"][1]["num_examples"]
        if job.do_eval and multi_label:
            self.dev_labels = np.array([[name in e.label for name in labels]
                                        for e in self.examples["dev"]], np.float64)
        elif job.do_eval:
            self.dev_labels = np.array(
                [e.label if labels is None else labels.index(e.label)
                 for e in self.examples["dev"]], np.float64 if labels is None else np.int64)

    def make_model(self, encoder):
        return BertClassifier(encoder, 1 if self.labels is None else len(self.labels),
                              multi_label=self.data.multi_label)

    def attach(self, model, context):
        super().attach(model, context)
        self.eval_length_buckets = context.eval_length_buckets

        @finetuning.timed
        def evaluate():
            outputs = self._outputs("dev", self.job.trainer.eval_batch_size)
            if self.data.multi_label:
                predictions = self._applies(outputs)
            else:
                predictions = outputs[:, 0] if self.labels is None else outputs.argmax(-1)
            metrics = self.data.metrics(self.dev_labels, predictions)
            if self.data.multi_label:
                # The threshold these scores are at, and what the dev set says it should be.
                metrics["threshold"] = float(self.job.task.multi_label_threshold)
                metrics["best_threshold"], metrics["best_threshold_micro_f1"] = (
                    best_multi_label_threshold(self.dev_labels, finetuning.sigmoid(outputs)))
            metrics["eval_loss"] = _eval_loss(outputs, self.dev_labels, self.labels is None,
                                              self.data.multi_label)
            return metrics
        self.evaluate = evaluate

    def _applies(self, outputs):
        """bool [N, C]: the labels whose probability is above --multi_label_threshold."""
        return outputs > threshold_logit(self.job.task.multi_label_threshold)

    def _outputs(self, split, batch_size):
        """The model's outputs [N, C] of a split's examples, in order."""
        path, meta = self.records[split]
        dataset = feature_records.records_dataset(path, self.spec, batch_size=batch_size,
                                                  is_training=False,
                                                  num_examples=meta["num_examples"],
                                                  length_buckets=self.eval_length_buckets,
                                                  per_example=_PER_EXAMPLE)
        return task_loop.predict(self.model, dataset)[:meta["num_examples"]]

    def results(self):
        splits, records = self.splits, self.records
        task = self.job.task
        return {"task": self.data.name, "max_seq_length": task.max_seq_length,
                "trainable_encoder": bool(task.trainable_encoder),
                "num_examples": {s: records[s][1]["num_examples"] for s in splits},
                "truncated_examples": {s: records[s][1]["truncated"] for s in splits}}

    def train_dataset_fn(self, context):
        return finetuning.records_train_dataset_fn(
            self.records["train"][0], self.spec, self.job.trainer.train_batch_size,
            self.job.runtime.seed, context.length_buckets, _PER_EXAMPLE)

    def evaluate_fn(self):
        return self.evaluate if self.job.do_eval else None

    def evaluate_and_predict(self, context, results, outcome):
        job = self.job
        eval_metrics = None
        if outcome is not None and outcome["best"] is not None:
            eval_metrics = outcome["best"]["metrics"]
        if job.do_eval:
            if eval_metrics is None or not self.evaluate.seconds:
                # No evaluation ran in this process (an eval-only run, or a finished run
                # resumed).
                eval_metrics = self.evaluate()
            results["eval"] = eval_metrics
            results["eval_examples_per_second"] = (len(self.examples["dev"])
                                                   / self.evaluate.seconds)
            logging.info("Eval results (step %d): %s", results.get("best_step",
                                                                  results["global_step"]),
                         " ".join(f"{k}={v:.4g}" for k, v in sorted(eval_metrics.items())))
            threshold = self.job.task.multi_label_threshold
            # (An evaluation of an earlier release, resumed, has no best_threshold.)
            if self.data.multi_label and eval_metrics.get(
                    "best_threshold_micro_f1", 0.0) > eval_metrics["micro_f1"]:
                logging.info("Dev micro F1 %.4g at --multi_label_threshold=%g; %.4g at %g "
                             "(give --multi_label_threshold=%g to predict and export with it)",
                             eval_metrics["micro_f1"], threshold,
                             eval_metrics["best_threshold_micro_f1"],
                             eval_metrics["best_threshold"], eval_metrics["best_threshold"])
        if job.do_predict:
            predict_start = time.time()
            outputs = self._outputs("test", job.trainer.predict_batch_size)
            seconds = time.time() - predict_start
            test = self.examples["test"]
            written = _write_predictions(context, job.output_dir, job.overwrite, self.data,
                                         test, outputs, self.labels,
                                         self._applies(outputs) if self.data.multi_label
                                         else None)
            results["predict"] = {"num_examples": len(test),
                                  "examples_per_second": len(test) / seconds,
                                  "predictions_file": written}
        return eval_metrics

    def run_files(self):
        kind = ("regression" if self.labels is None else
                "multi_label" if self.data.multi_label else "classification")
        # The separator is the run's, not an export's: the serving signatures never see it.
        multi_label = kind == "multi_label"
        separator = self.job.task.label_separator if multi_label else None
        threshold = self.job.task.multi_label_threshold if multi_label else None
        export = {"text_pair": self.data.text_pair}
        if multi_label:
            export["multi_label_threshold"] = threshold
        return (kind, export, {"text_pair": self.data.text_pair, "label_separator": separator,
                               "multi_label_threshold": threshold})


def run_classifier(job, flags_text=None):
    """Trains, evaluates and predicts as the config says; returns the results dict.

    Args:
      job: a ClassificationConfig.
      flags_text: the command line as a flagfile, saved to output_dir/run_classifier.flags.
    """
    return finetuning.run_task(ClassificationRunner(job), job, flags_text)


def _write_predictions(context, output_dir, overwrite, data, examples, outputs, labels,
                       applies=None):
    """test_results.tsv (probabilities, or scores) and the predictions: a GLUE task's
    submission file, or predictions.tsv (each example's text beside its label and score;
    multi-label: the labels where `applies` [N, C] is true).
    Earlier predictions in `output_dir` (--output_dir) are kept (the new ones take the next
    free numbered names) unless `overwrite` (--overwrite). Returns the predictions file's
    name."""
    predictions_name, probabilities_name = finetuning.free_names(
        output_dir, [data.predictions_file(), PROBABILITIES_FILE], overwrite)
    if not context.chief:
        return predictions_name
    scores = None
    if labels is None:
        values = outputs[:, 0]
        probability_lines = [f"{s:.6f}" for s in values]
        predictions = [f"{s:.3f}" for s in values]
    elif data.multi_label:
        probabilities = finetuning.sigmoid(outputs)
        probability_lines = ["\t".join(f"{p:.6f}" for p in row) for row in probabilities]
        separator = data.settings.label_separator
        predictions = [separator.join(name for name, yes in zip(labels, row) if yes)
                       for row in applies]
    else:
        probabilities = finetuning.softmax(outputs)
        probability_lines = ["\t".join(f"{p:.6f}" for p in row) for row in probabilities]
        predictions = [labels[i] for i in probabilities.argmax(-1)]
        scores = probabilities.max(-1)
    probabilities_path = os.path.join(output_dir, probabilities_name)
    write_text_atomic(probabilities_path, "\n".join(probability_lines) + "\n")
    predictions_path = os.path.join(output_dir, predictions_name)
    write_text_atomic(predictions_path, glue.submission_text(examples, predictions)
                      if data.glue_test else
                      classifier_data.predictions_text(examples, predictions, scores))
    logging.info("Wrote the predictions of %d examples to %s (%s: %s)", len(examples),
                 predictions_path, "scores" if labels is None else "class probabilities",
                 probabilities_path)
    return predictions_name
