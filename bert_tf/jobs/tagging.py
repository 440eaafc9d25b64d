"""The token-tagging (NER) task on CoNLL-2003-style files.

Run by the fine-tuning driver (bert_tf.jobs.finetuning.run_task); `bert-tf-tag`
(bert_tf.cli.tag, alias bert_tf.run_tagging) documents the command. Each word's tag is learned
and predicted on its first WordPiece (bert_tf.data.tasks.tagging_data); sentences longer than
max_seq_length are split into windows. The dev set is scored at every checkpoint with seqeval's
entity F1 (conlleval chunking, so IOB1, IOB2 and IOBES tags all work) and the best weights are
kept. Besides the driver's run files, --output_dir receives dev_predictions.txt and
test_predictions.txt in CoNLL format (token, gold tag when the file has one, predicted tag; a
blank line after each sentence), which conlleval reads as they are.
"""

import os
import time

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import file_names
from bert_tf.data.tasks import feature_records, tagging_data
from bert_tf.data.tasks.task_errors import DataError
from bert_tf.fileio import write_text_atomic
from bert_tf.jobs import finetuning, finetuning_config
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.metrics import entity_scores
from bert_tf.modeling import BertTokenClassifier
from bert_tf.training import task_loop


_DEFAULT_FILES = {"train": ("train.txt",), "dev": ("dev.txt", "valid.txt"),
                  "test": ("test.txt",)}


def _data_file(task, split):
    """The file of a split ("train", "dev", "test") of the TaggingTask section `task`."""
    explicit = {"train": task.train_file, "dev": task.dev_file, "test": task.test_file}[split]
    if explicit:
        return explicit
    if not task.data_dir:
        raise FlagValueError(f"no {split} data: give --{split}_file or --data_dir")
    for name in _DEFAULT_FILES[split]:
        path = os.path.join(task.data_dir, name)
        if tf.io.gfile.exists(path):
            return path
    raise FlagValueError(f"no {split} file in --data_dir={task.data_dir}: expected "
                         f"{' or '.join(_DEFAULT_FILES[split])}, or --{split}_file")


def _read_split(task, split):
    path = _data_file(task, split)
    sentences = tagging_data.read_conll(path, token_column=task.token_column,
                                        tag_column=task.tag_column,
                                        require_tags=split != "test")
    if not sentences:
        raise DataError(f"{path}: no sentences")
    logging.info("%s: %d sentences, %d words", path, len(sentences),
                 sum(len(s.words) for s in sentences))
    return sentences


def _labels(task, output_dir, train_sentences):
    """The tags in logit order: --labels of the TaggingTask section `task`, else the training
    sentences', else those of a task_info.json in `output_dir` (--output_dir) or beside
    --init_checkpoint."""
    if task.labels:
        if len(set(task.labels)) != len(task.labels):
            raise FlagValueError(f"--labels={','.join(task.labels)} repeats a tag")
        labels = list(task.labels)
    elif train_sentences is not None:
        labels = tagging_data.infer_tags(train_sentences)
    else:
        info = finetuning.read_task_info(output_dir, task.init_checkpoint)
        if not info or not info.get("labels"):
            raise FlagValueError("without --do_train the tags come from --labels or a "
                                 "task_info.json in --output_dir or beside --init_checkpoint; "
                                 "found neither (nor a Hugging Face "
                                 "model's id2label)")
        labels = list(info["labels"])
    if len(labels) < 2:
        raise FlagValueError(f"tagging needs at least 2 tags, got {', '.join(labels) or 'none'}")
    return labels


def flat_scores(scores):
    """entity_scores as flat float metrics: precision, recall, f1, accuracy, <TYPE>/f1, ..."""
    metrics = {k: scores[k] for k in ("precision", "recall", "f1", "accuracy")}
    for entity_type, values in scores["per_type"].items():
        for name in ("precision", "recall", "f1"):
            metrics[f"{entity_type}/{name}"] = values[name]
    return metrics


def _weighted_loss(logits_nsc, label_ids_ns, weights_ns):
    log_probs = np.log(np.maximum(finetuning.softmax(logits_nsc), 1e-30))
    picked = np.take_along_axis(log_probs, label_ids_ns[..., None], -1)[..., 0]
    return float(-(picked * weights_ns).sum() / max(weights_ns.sum(), 1.0))


class TaggingRunner(finetuning.TaskRunner):
    """Token tagging with a BertTokenClassifier, scored by entity F1."""

    cli_name = finetuning_config.TaggingConfig.COMMAND
    run_kind = "tagging"
    best_metric = "f1"
    loss_fn = staticmethod(task_loop.tagging_loss_fn)

    def __init__(self, job):
        super().__init__(job)
        self.splits = [s for s, wanted in (("train", job.do_train),
                                           ("dev", job.do_eval),
                                           ("test", job.do_predict)) if wanted]
        for split in self.splits:
            _data_file(job.task, split)
        self.sentences, self.data = {}, {}

    def read_training_data(self, context):
        task = self.job.task
        if task.max_seq_length < 3:
            raise FlagValueError(f"--max_seq_length={task.max_seq_length} leaves no "
                                 "room for a token between [CLS] and [SEP]")
        if self.job.do_train:
            self.sentences["train"] = _read_split(task, "train")
        self.labels = _labels(task, self.job.output_dir, self.sentences.get("train"))

    @property
    def resume_name(self):
        return "tagging"

    def prepare_inputs(self, context):
        job, labels = self.job, self.labels
        max_seq_length = job.task.max_seq_length
        cache_dir = file_names.path(job.output_dir, file_names.FEATURES_DIR)
        for split in self.splits:
            if split not in self.sentences:
                self.sentences[split] = _read_split(job.task, split)
            tagging_data.check_tags(self.sentences[split], labels, split)
            self.data[split] = tagging_data.tagging_records(
                cache_dir, split, self.sentences[split], context.tokenizer, max_seq_length,
                labels)
        self.spec = tagging_data.tagging_spec(max_seq_length)
        if job.do_train:
            self.num_train_examples = self.data["train"][2]["num_examples"]
        if job.do_eval:
            self.dev_gold = [list(s.tags) for s in self.sentences["dev"]]
            features = list(tagging_data.tagging_features(
                self.data["dev"][0], self.sentences["dev"], context.tokenizer, max_seq_length,
                labels))
            self.dev_targets = (np.array([f["label_ids"] for f in features], np.int64),
                                np.array([f["label_weights"] for f in features], np.float64))

    def make_model(self, encoder):
        return BertTokenClassifier(encoder, len(self.labels))

    def attach(self, model, context):
        super().attach(model, context)
        self.eval_length_buckets = context.eval_length_buckets

    def _window_logits(self, split, batch_size):
        windows, path, meta = self.data[split]
        dataset = feature_records.records_dataset(path, self.spec, batch_size=batch_size,
                                                  is_training=False,
                                                  num_examples=meta["num_examples"],
                                                  length_buckets=self.eval_length_buckets)
        return task_loop.predict(self.model, dataset,
                                sequence_length=self.job.task.max_seq_length)[:len(windows)]

    def _word_tags(self, split, logits):
        return tagging_data.word_predictions(self.data[split][0], self.sentences[split],
                                             logits.argmax(-1), self.labels)

    def _dev_pass(self):
        """(flat metrics, entity_scores, predicted tags) of the current weights on dev."""
        logits = self._window_logits("dev", self.job.trainer.eval_batch_size)
        predicted = self._word_tags("dev", logits)
        scores = entity_scores(self.dev_gold, predicted)
        metrics = dict(flat_scores(scores), eval_loss=_weighted_loss(logits, *self.dev_targets))
        return metrics, scores, predicted

    def results(self):
        splits, sentences, data, task = self.splits, self.sentences, self.data, self.job.task
        return {"task": "tagging", "labels": self.labels,
                "max_seq_length": task.max_seq_length,
                "trainable_encoder": bool(task.trainable_encoder),
                "num_sentences": {s: len(sentences[s]) for s in splits},
                "num_windows": {s: data[s][2]["num_examples"] for s in splits},
                "split_sentences": {s: data[s][2]["split_sentences"] for s in splits}}

    def train_dataset_fn(self, context):
        return finetuning.records_train_dataset_fn(
            self.data["train"][1], self.spec, self.job.trainer.train_batch_size,
            self.job.runtime.seed, context.length_buckets)

    def evaluate_fn(self):
        return (lambda: self._dev_pass()[0]) if self.job.do_eval else None

    def evaluate_and_predict(self, context, results, outcome):
        job, sentences = self.job, self.sentences
        step = results.get("best_step", results["global_step"])
        eval_metrics = None
        if job.do_eval:
            eval_start = time.time()
            eval_metrics, results["eval"], predicted = self._dev_pass()
            results["eval_sentences_per_second"] = (len(self.dev_gold)
                                                    / (time.time() - eval_start))
            _write_predictions(context, job.output_dir, "dev", sentences["dev"], predicted)
            logging.info("dev entity F1 %.4f (precision %.4f, recall %.4f) at step %d",
                         eval_metrics["f1"], eval_metrics["precision"],
                         eval_metrics["recall"], step)
        if job.do_predict:
            predict_start = time.time()
            predicted = self._word_tags("test", self._window_logits(
                "test", job.trainer.predict_batch_size))
            results["predict_sentences_per_second"] = (len(sentences["test"])
                                                       / (time.time() - predict_start))
            _write_predictions(context, job.output_dir, "test", sentences["test"], predicted,
                               job.overwrite)
            if all(s.tags is not None for s in sentences["test"]):
                results["test"] = entity_scores([list(s.tags) for s in sentences["test"]],
                                                predicted)
                logging.info("test entity F1 %.4f at step %d", results["test"]["f1"], step)
        return eval_metrics

    def run_files(self):
        return self.run_kind, None, {}


def run_tagging(job, flags_text=None):
    """Trains, evaluates and predicts as the config says; returns the results dict.

    Args:
      job: a TaggingConfig.
      flags_text: the command line as a flagfile, saved to output_dir/run_tagging.flags.
    """
    return finetuning.run_task(TaggingRunner(job), job, flags_text)


def _write_predictions(context, output_dir, split, sentences, predicted, overwrite=True):
    """<split>_predictions.txt; the test split's (a prediction) keeps an earlier one unless
    `overwrite` (its new name then test_predictions-2.txt, ...); the dev split's goes with the
    evaluation, replaced as eval_results.txt is."""
    (name,) = finetuning.free_names(output_dir, [f"{split}_predictions.txt"], overwrite)
    if context.chief:
        path = os.path.join(output_dir, name)
        write_text_atomic(path, tagging_data.conll_text(sentences, predicted))
        logging.info("Wrote the predicted tags of %d sentences to %s", len(sentences), path)
