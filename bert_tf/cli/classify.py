r"""Fine-tunes BERT for sentence(-pair) classification or regression, with the original's flags.

GLUE from its TSV files (or from TFDS `glue/*` prepared under --tfds_data_dir):

    python -m bert_tf.run_classifier --task_name=mrpc --data_dir=glue/MRPC \
      --init_checkpoint=/path/to/pretrained --max_seq_length=128 --train_batch_size=32 \
      --learning_rate=2e-5 --num_train_epochs=3 --do_train --do_eval --do_predict \
      --output_dir=/tmp/mrpc

Your own CSV (with a header row), TSV or JSONL data:

    python -m bert_tf.run_classifier --train_file=train.csv --dev_file=dev.csv \
      --text_a_column=review --label_column=stars --init_checkpoint=... --do_train --do_eval \
      --output_dir=/tmp/reviews

Evaluates the dev set at every checkpoint with the task's metric (the GLUE score of a GLUE
task: Matthews correlation for CoLA, F1/accuracy for MRPC and QQP, Pearson/Spearman for STS-B,
accuracy otherwise; accuracy for your own classes, Pearson/Spearman for --regression) and keeps
the best weights. Besides what bert_tf.finetuning_run lists, --output_dir receives
test_results.tsv (class probabilities per test example, one line each, in --labels order; the
score for regression) and the predictions in the GLUE submission format (<TASK>.tsv: CoLA.tsv,
MNLI-m.tsv, ...; predictions.tsv for other data: index<TAB>prediction with label names).
"""

import os
import time

import numpy as np
from absl import flags, logging

from bert_tf import cli, common_flags, finetuning_run
from bert_tf.cli import flags as cli_flags
from bert_tf.common_flags import FlagValueError
from bert_tf.config import ConfigError
from bert_tf.data import classifier_data, feature_records, glue
from bert_tf.data.task_errors import DataError
from bert_tf.fileio import write_text_atomic
from bert_tf.metrics import classification_metrics, regression_metrics
from bert_tf.modeling import BertClassifier
from bert_tf.training import checkpointing, finetune
from bert_tf.training.loop import NonFiniteLossError

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The original run_classifier.py's flags (same names and defaults) and bert_tf's."""
    return cli_flags.define_classifier_flags(flag_values)

_USER_FILE_EXTENSIONS = (".tsv", ".csv", ".jsonl", ".json")


class ClassifierData:
    """Reads the splits of the task the flags name: GLUE TSV, TFDS glue/*, or user files."""

    def __init__(self, options):
        self.options = options
        self.task = glue.glue_task(options.task_name) if options.task_name else None
        self.user_files = options.text_a_column is not None
        if self.task is None and not self.user_files:
            known = ", ".join(glue.GLUE_TASKS)
            if options.task_name:
                raise FlagValueError(
                    f"--task_name={options.task_name} is not a GLUE task ({known}); for your own "
                    "data give --text_a_column (and --label_column, --text_b_column)")
            raise FlagValueError(f"give --task_name (one of {known}) or, for your own data, "
                                 "--text_a_column and --label_column")
        if self.user_files and options.tfds_data_dir:
            raise FlagValueError("--tfds_data_dir reads GLUE tasks; it does not go with "
                                 "--text_a_column")
        if (self.task is not None and not self.user_files and not options.tfds_data_dir
                and not options.data_dir):
            raise FlagValueError(f"--task_name={options.task_name} needs --data_dir (the GLUE "
                                 "TSV files) or --tfds_data_dir (TFDS glue/*)")
        if self.task is not None and options.regression and not self.task.is_regression:
            raise FlagValueError(f"--regression: GLUE {self.task.name} is a classification "
                                 "task")
        self.is_regression = self.task.is_regression if self.task else options.regression
        self.name = self.task.name if self.task else (options.task_name or "classifier")

    def _user_file(self, split):
        explicit = getattr(self.options, f"{split}_file")
        if explicit:
            return explicit
        if not self.options.data_dir:
            raise FlagValueError(f"no {split} data: give --{split}_file or --data_dir")
        path = classifier_data.split_file(self.options.data_dir, split, _USER_FILE_EXTENSIONS)
        if path:
            return path
        raise FlagValueError(f"no {split} file in --data_dir={self.options.data_dir}: expected "
                             f"{split} with one of {', '.join(_USER_FILE_EXTENSIONS)}, or "
                             f"--{split}_file")

    def read(self, split):
        """InputExamples of "train", "dev" or "test"."""
        options = self.options
        if not self.user_files:
            if options.tfds_data_dir:
                return glue.read_glue_tfds(self.task, options.tfds_data_dir, split)
            return glue.read_glue_tsv(self.task, options.data_dir, split)
        is_test = split == "test"
        return classifier_data.read_table_examples(
            self._user_file(split), text_a_column=options.text_a_column,
            text_b_column=options.text_b_column, label_column=options.label_column,
            is_regression=self.is_regression, require_labels=not is_test, keep_empty=is_test)

    @property
    def text_pair(self):
        if self.user_files:
            return self.options.text_b_column is not None
        return self.task.labelled.text_b is not None

    def metrics(self, label_ids, predictions):
        if self.is_regression:
            return regression_metrics(label_ids, predictions)
        return classification_metrics(label_ids, predictions,
                                      self.task.name if self.task else None)

    def predictions_file(self):
        return f"{self.task.submission_name}.tsv" if self.task else "predictions.tsv"


def _labels(options, data, train_examples):
    """The label names in logit order (None for regression)."""
    if data.is_regression:
        if options.labels:
            raise FlagValueError("--labels does not go with a regression task")
        return None
    if data.task is not None:
        if options.labels and list(options.labels) != list(data.task.labels):
            raise FlagValueError(f"--labels={','.join(options.labels)} differs from GLUE "
                                 f"{data.task.name}'s labels {','.join(data.task.labels)}")
        return list(data.task.labels)
    if options.labels:
        if len(set(options.labels)) != len(options.labels):
            raise FlagValueError(f"--labels={','.join(options.labels)} repeats a label")
        labels = list(options.labels)
    elif train_examples is not None:
        labels = classifier_data.infer_labels(train_examples)
    else:
        info = finetuning_run.read_task_info(options)
        if not info or not info.get("labels"):
            raise FlagValueError("without --do_train the labels come from --labels or a "
                                 "task_info.json in --output_dir or beside --init_checkpoint; "
                                 "found neither")
        labels = list(info["labels"])
    if len(labels) < 2:
        raise FlagValueError(f"classification needs at least 2 labels, got "
                             f"{', '.join(labels) or 'none'} (give --labels, or use "
                             "--regression for numeric targets)")
    return labels


def _read_split(data, split):
    examples = data.read(split)
    if not examples:
        raise DataError(f"the {split} data of {data.name} has no examples")
    logging.info("%s %s: %d examples", data.name, split, len(examples))
    return examples


def _eval_loss(outputs, label_ids, is_regression):
    if is_regression:
        return float(np.mean((outputs[:, 0] - label_ids) ** 2))
    log_probs = np.log(np.maximum(finetuning_run.softmax(outputs), 1e-30))
    return float(-np.mean(log_probs[np.arange(len(label_ids)), label_ids.astype(np.int64)]))


def run_classifier(options, flags_text=None):
    """Trains, evaluates and predicts as the flags say; returns the results dict.

    Args:
      options: flag values (FLAGS or an object with the same attribute names).
      flags_text: the command line as a flagfile, saved to output_dir/run_classifier.flags.
    """
    start = time.time()
    data = ClassifierData(options)
    context = finetuning_run.prepare(options)
    with finetuning_run.owned(context, options):
        return _run_classifier(options, flags_text, start, data, context)


def _run_classifier(options, flags_text, start, data, context):
    """run_classifier once --output_dir is owned."""
    tokenizer = context.tokenizer
    max_seq_length = options.max_seq_length
    cache_dir = os.path.join(options.output_dir, "features")
    splits = [s for s, wanted in (("train", options.do_train), ("dev", options.do_eval),
                                  ("test", options.do_predict)) if wanted]
    examples = {}
    if options.do_train:
        examples["train"] = _read_split(data, "train")
    labels = _labels(options, data, examples.get("train"))
    finetuning_run.check_resume(context, options, "run_classifier", data.name, labels)
    records = {}
    for split in splits:
        if split not in examples:
            examples[split] = _read_split(data, split)
        if labels is not None:
            classifier_data.check_labels(examples[split], labels, split)
        records[split] = classifier_data.classifier_records(
            cache_dir, split, examples[split], tokenizer, max_seq_length, labels)
    spec = classifier_data.classifier_spec(max_seq_length, labels is None)
    num_outputs = 1 if labels is None else len(labels)
    best_metric = "score"

    def eval_dataset(split, batch_size):
        path, meta = records[split]
        return feature_records.records_dataset(path, spec, batch_size=batch_size,
                                               is_training=False,
                                               num_examples=meta["num_examples"],
                                               length_buckets=context.eval_length_buckets)

    def model_outputs(model, split, batch_size):
        count = records[split][1]["num_examples"]
        return finetune.predict(model, eval_dataset(split, batch_size))[:count]

    num_train_steps = None
    if options.do_train:
        num_train = records["train"][1]["num_examples"]
        num_train_steps = finetune.num_train_steps(
            num_train, common_flags.effective_train_batch_size(options), options.num_train_epochs)
    model, optimizer = finetuning_run.build_model(
        context, options, lambda encoder: BertClassifier(encoder, num_outputs), num_train_steps)

    dev_labels = None
    if options.do_eval:
        dev_labels = np.array([e.label if labels is None else labels.index(e.label)
                               for e in examples["dev"]],
                              np.float64 if labels is None else np.int64)

    @finetuning_run.timed
    def evaluate():
        outputs = model_outputs(model, "dev", options.eval_batch_size)
        predictions = outputs[:, 0] if labels is None else outputs.argmax(-1)
        metrics = data.metrics(dev_labels, predictions)
        metrics["eval_loss"] = _eval_loss(outputs, dev_labels, labels is None)
        return metrics

    results = {"task": data.name, "max_seq_length": max_seq_length,
               "trainable_encoder": bool(options.trainable_encoder),
               "num_examples": {s: records[s][1]["num_examples"] for s in splits},
               "truncated_examples": {s: records[s][1]["truncated"] for s in splits}}
    eval_metrics = None
    if options.do_train:
        train_path, train_meta = records["train"]

        def dataset_fn(input_context=None):
            return feature_records.records_dataset(
                train_path, spec, batch_size=options.train_batch_size, is_training=True,
                seed=options.seed, input_context=input_context,
                length_buckets=context.length_buckets)

        outcome = finetuning_run.train(
            context, options, model=model, optimizer=optimizer,
            loss_fn=finetune.classification_loss_fn, dataset_fn=dataset_fn,
            num_train_steps=num_train_steps,
            steps_per_epoch=finetune.steps_per_epoch(
                train_meta["num_examples"], common_flags.effective_train_batch_size(options)),
            evaluate_fn=evaluate if options.do_eval else None,
            best_metric=best_metric if options.do_eval else None)
        results.update(global_step=outcome["step"], num_train_steps=num_train_steps,
                       train=outcome["train"], evaluations=outcome["evaluations"])
        if outcome["best"] is not None:
            results["best_step"] = outcome["best"]["step"]
            eval_metrics = outcome["best"]["metrics"]
    else:
        results["global_step"] = finetuning_run.restore_trained(options, model, best_metric)

    if options.do_eval:
        if eval_metrics is None or not evaluate.seconds:
            # No evaluation ran in this process (an eval-only run, or a finished run resumed).
            eval_metrics = evaluate()
        results["eval"] = eval_metrics
        results["eval_examples_per_second"] = len(examples["dev"]) / evaluate.seconds
        logging.info("Eval results (step %d): %s", results.get("best_step",
                                                              results["global_step"]),
                     " ".join(f"{k}={v:.4g}" for k, v in sorted(eval_metrics.items())))

    if options.do_predict:
        predict_start = time.time()
        outputs = model_outputs(model, "test", options.predict_batch_size)
        seconds = time.time() - predict_start
        _write_predictions(context, options, data, examples["test"], outputs, labels)
        results["predict"] = {"num_examples": len(examples["test"]),
                              "examples_per_second": len(examples["test"]) / seconds,
                              "predictions_file": data.predictions_file()}

    finetuning_run.write_run_files(
        context, options, model, "regression" if labels is None else "classification", labels,
        "run_classifier", flags_text, text_pair=data.text_pair)
    results["wall_time_seconds"] = time.time() - start
    finetuning_run.write_results(context, options, results, eval_metrics)
    return results


def _write_predictions(context, options, data, examples, outputs, labels):
    """test_results.tsv (probabilities, or scores) and the submission-format predictions."""
    if not context.chief:
        return
    if labels is None:
        scores = outputs[:, 0]
        probability_lines = [f"{s:.6f}" for s in scores]
        predictions = [f"{s:.3f}" for s in scores]
    else:
        probabilities = finetuning_run.softmax(outputs)
        probability_lines = ["\t".join(f"{p:.6f}" for p in row) for row in probabilities]
        predictions = [labels[i] for i in probabilities.argmax(-1)]
    write_text_atomic(os.path.join(options.output_dir, "test_results.tsv"),
                      "\n".join(probability_lines) + "\n")
    write_text_atomic(os.path.join(options.output_dir, data.predictions_file()),
                      glue.submission_text(examples, predictions))


def main(argv):
    del argv
    run_classifier(FLAGS, flags_text=FLAGS.flags_into_string())


def run():
    """Console-script entry point (bert-tf-classify)."""
    cli.run(main, "run_classifier", define_flags=define_flags,
            errors=(FlagValueError, ConfigError, DataError, checkpointing.CheckpointError,
                    NonFiniteLossError))


if __name__ == "__main__":
    run()
