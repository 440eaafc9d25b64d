r"""Fine-tunes BERT for token tagging (NER) on CoNLL-2003-style files.

    python -m bert_tf.run_tagging --data_dir=conll2003 --init_checkpoint=/path/to/cased \
      --do_lower_case=false --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 \
      --num_train_epochs=3 --do_train --do_eval --do_predict --output_dir=/tmp/ner

--data_dir holds train.txt, dev.txt (or valid.txt) and test.txt; --train_file, --dev_file and
--test_file name other files. Each word's tag is learned and predicted on its first WordPiece
(bert_tf.data.tagging_data); sentences longer than --max_seq_length are split into windows.
The dev set is scored at every checkpoint with seqeval's entity F1 (conlleval chunking, so
IOB1, IOB2 and IOBES tags all work) and the best weights are kept. Besides what
bert_tf.finetuning_run lists, --output_dir receives dev_predictions.txt and test_predictions.txt
in CoNLL format (token, gold tag when the file has one, predicted tag; a blank line after each
sentence), which conlleval reads as they are.
"""

import os
import time

import numpy as np
import tensorflow as tf
from absl import flags, logging

from bert_tf import cli, common_flags, finetuning_run
from bert_tf.cli import flags as cli_flags
from bert_tf.common_flags import FlagValueError
from bert_tf.config import ConfigError
from bert_tf.data import feature_records, tagging_data
from bert_tf.data.task_errors import DataError
from bert_tf.fileio import write_text_atomic
from bert_tf.metrics import entity_scores
from bert_tf.modeling import BertTokenClassifier
from bert_tf.training import checkpointing, finetune
from bert_tf.training.loop import NonFiniteLossError

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The fine-tuning flags, the labelled-data files and the CoNLL columns."""
    return cli_flags.define_tagging_flags(flag_values)


_DEFAULT_FILES = {"train": ("train.txt",), "dev": ("dev.txt", "valid.txt"),
                  "test": ("test.txt",)}


def _data_file(options, split):
    explicit = getattr(options, f"{split}_file")
    if explicit:
        return explicit
    if not options.data_dir:
        raise FlagValueError(f"no {split} data: give --{split}_file or --data_dir")
    for name in _DEFAULT_FILES[split]:
        path = os.path.join(options.data_dir, name)
        if tf.io.gfile.exists(path):
            return path
    raise FlagValueError(f"no {split} file in --data_dir={options.data_dir}: expected "
                         f"{' or '.join(_DEFAULT_FILES[split])}, or --{split}_file")


def _read_split(options, split):
    path = _data_file(options, split)
    sentences = tagging_data.read_conll(path, token_column=options.token_column,
                                        tag_column=options.tag_column,
                                        require_tags=split != "test")
    if not sentences:
        raise DataError(f"{path}: no sentences")
    logging.info("%s: %d sentences, %d words", path, len(sentences),
                 sum(len(s.words) for s in sentences))
    return sentences


def _labels(options, train_sentences):
    if options.labels:
        if len(set(options.labels)) != len(options.labels):
            raise FlagValueError(f"--labels={','.join(options.labels)} repeats a tag")
        labels = list(options.labels)
    elif train_sentences is not None:
        labels = tagging_data.infer_tags(train_sentences)
    else:
        info = finetuning_run.read_task_info(options)
        if not info or not info.get("labels"):
            raise FlagValueError("without --do_train the tags come from --labels or a "
                                 "task_info.json in --output_dir or beside --init_checkpoint; "
                                 "found neither")
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
    log_probs = np.log(np.maximum(finetuning_run.softmax(logits_nsc), 1e-30))
    picked = np.take_along_axis(log_probs, label_ids_ns[..., None], -1)[..., 0]
    return float(-(picked * weights_ns).sum() / max(weights_ns.sum(), 1.0))


def run_tagging(options, flags_text=None):
    """Trains, evaluates and predicts as the flags say; returns the results dict.

    Args:
      options: flag values (FLAGS or an object with the same attribute names).
      flags_text: the command line as a flagfile, saved to output_dir/run_tagging.flags.
    """
    start = time.time()
    splits = [s for s, wanted in (("train", options.do_train), ("dev", options.do_eval),
                                  ("test", options.do_predict)) if wanted]
    for split in splits:
        _data_file(options, split)
    context = finetuning_run.prepare(options)
    with finetuning_run.owned(context, options):
        return _run_tagging(options, flags_text, start, splits, context)


def _run_tagging(options, flags_text, start, splits, context):
    """run_tagging once --output_dir is owned."""
    max_seq_length = options.max_seq_length
    if max_seq_length < 3:
        raise FlagValueError(f"--max_seq_length={max_seq_length} leaves no room for a token "
                             "between [CLS] and [SEP]")
    sentences = {}
    if options.do_train:
        sentences["train"] = _read_split(options, "train")
    labels = _labels(options, sentences.get("train"))
    finetuning_run.check_resume(context, options, "run_tagging", "tagging", labels)
    cache_dir = os.path.join(options.output_dir, "features")
    data = {}
    for split in splits:
        if split not in sentences:
            sentences[split] = _read_split(options, split)
        tagging_data.check_tags(sentences[split], labels, split)
        data[split] = tagging_data.tagging_records(cache_dir, split, sentences[split],
                                                   context.tokenizer, max_seq_length, labels)
    spec = tagging_data.tagging_spec(max_seq_length)

    def window_logits(model, split, batch_size):
        windows, path, meta = data[split]
        dataset = feature_records.records_dataset(path, spec, batch_size=batch_size,
                                                  is_training=False,
                                                  num_examples=meta["num_examples"],
                                                  length_buckets=context.eval_length_buckets)
        return finetune.predict(model, dataset, sequence_length=max_seq_length)[:len(windows)]

    def word_tags(split, logits):
        return tagging_data.word_predictions(data[split][0], sentences[split],
                                             logits.argmax(-1), labels)

    num_train_steps = None
    if options.do_train:
        num_windows = data["train"][2]["num_examples"]
        num_train_steps = finetune.num_train_steps(
            num_windows, common_flags.effective_train_batch_size(options), options.num_train_epochs)
    model, optimizer = finetuning_run.build_model(
        context, options, lambda encoder: BertTokenClassifier(encoder, len(labels)),
        num_train_steps)

    if options.do_eval:
        dev_gold = [list(s.tags) for s in sentences["dev"]]
        features = list(tagging_data.tagging_features(data["dev"][0], sentences["dev"],
                                                      context.tokenizer, max_seq_length,
                                                      labels))
        dev_targets = (np.array([f["label_ids"] for f in features], np.int64),
                       np.array([f["label_weights"] for f in features], np.float64))

    def dev_pass():
        """(flat metrics, entity_scores, predicted tags) of the current weights on dev."""
        logits = window_logits(model, "dev", options.eval_batch_size)
        predicted = word_tags("dev", logits)
        scores = entity_scores(dev_gold, predicted)
        metrics = dict(flat_scores(scores), eval_loss=_weighted_loss(logits, *dev_targets))
        return metrics, scores, predicted

    results = {"task": "tagging", "labels": labels, "max_seq_length": max_seq_length,
               "trainable_encoder": bool(options.trainable_encoder),
               "num_sentences": {s: len(sentences[s]) for s in splits},
               "num_windows": {s: data[s][2]["num_examples"] for s in splits},
               "split_sentences": {s: data[s][2]["split_sentences"] for s in splits}}
    if options.do_train:
        _, train_path, train_meta = data["train"]

        def dataset_fn(input_context=None):
            return feature_records.records_dataset(
                train_path, spec, batch_size=options.train_batch_size, is_training=True,
                seed=options.seed, input_context=input_context,
                length_buckets=context.length_buckets)

        outcome = finetuning_run.train(
            context, options, model=model, optimizer=optimizer,
            loss_fn=finetune.tagging_loss_fn, dataset_fn=dataset_fn,
            num_train_steps=num_train_steps,
            steps_per_epoch=finetune.steps_per_epoch(
                train_meta["num_examples"], common_flags.effective_train_batch_size(options)),
            evaluate_fn=(lambda: dev_pass()[0]) if options.do_eval else None,
            best_metric="f1" if options.do_eval else None)
        results.update(global_step=outcome["step"], num_train_steps=num_train_steps,
                       train=outcome["train"], evaluations=outcome["evaluations"])
        if outcome["best"] is not None:
            results["best_step"] = outcome["best"]["step"]
    else:
        results["global_step"] = finetuning_run.restore_trained(options, model, "f1")
    step = results.get("best_step", results["global_step"])

    eval_metrics = None
    if options.do_eval:
        eval_start = time.time()
        eval_metrics, results["eval"], predicted = dev_pass()
        results["eval_sentences_per_second"] = len(dev_gold) / (time.time() - eval_start)
        _write_predictions(context, options, "dev", sentences["dev"], predicted)
        logging.info("dev entity F1 %.4f (precision %.4f, recall %.4f) at step %d",
                     eval_metrics["f1"], eval_metrics["precision"], eval_metrics["recall"], step)
    if options.do_predict:
        predict_start = time.time()
        predicted = word_tags("test", window_logits(model, "test", options.predict_batch_size))
        results["predict_sentences_per_second"] = (len(sentences["test"])
                                                   / (time.time() - predict_start))
        _write_predictions(context, options, "test", sentences["test"], predicted)
        if all(s.tags is not None for s in sentences["test"]):
            results["test"] = entity_scores([list(s.tags) for s in sentences["test"]],
                                            predicted)
            logging.info("test entity F1 %.4f at step %d", results["test"]["f1"], step)

    finetuning_run.write_run_files(context, options, model, "tagging", labels, "run_tagging",
                                   flags_text)
    results["wall_time_seconds"] = time.time() - start
    finetuning_run.write_results(context, options, results, eval_metrics)
    return results


def _write_predictions(context, options, split, sentences, predicted):
    if context.chief:
        write_text_atomic(os.path.join(options.output_dir, f"{split}_predictions.txt"),
                          tagging_data.conll_text(sentences, predicted))


def main(argv):
    del argv
    run_tagging(FLAGS, flags_text=FLAGS.flags_into_string())


def run():
    """Console-script entry point (bert-tf-tag)."""
    cli.run(main, "run_tagging", define_flags=define_flags,
            errors=(FlagValueError, ConfigError, DataError, checkpointing.CheckpointError,
                    NonFiniteLossError))


if __name__ == "__main__":
    run()
