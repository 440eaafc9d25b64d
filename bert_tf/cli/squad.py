r"""Fine-tunes BERT for SQuAD v1.1 / v2.0 span question answering with the original's flags.

    python -m bert_tf.run_squad --vocab_file=... --bert_config_file=... \
      --init_checkpoint=... --train_file=train-v1.1.json --predict_file=dev-v1.1.json \
      --do_train --do_predict --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad

Reads SQuAD JSON, splits long contexts into sliding windows (bert_tf.data.squad), trains a
BertSpanLabeler with the shared fine-tuning loop (bert_tf.training.finetune) and answers the
--predict_file questions with the original's post-processing (bert_tf.data.squad_postprocess).
When the --predict_file has gold answers (SQuAD dev sets do), every checkpoint is evaluated
with the official EM/F1 (bert_tf.metrics.squad) and the weights with the best F1 are kept.

--output_dir receives: ckpt-<step> checkpoints, best/ (best weights and metrics),
summaries/{train,eval} (TensorBoard), predictions.json, nbest_predictions.json, null_odds.json
(v2.0), results.json, model.keras (the final, best model), bert_config.json, vocab.txt,
task_info.json and run_squad.flags (the flags used); with --export_dir, a SavedModel of the
final model whose serve_text signature answers raw question/context pairs (bert_tf.serving).
"""

import os
import time

from absl import flags, logging

from bert_tf import cli, common_flags, finetuning_run
from bert_tf.cli import flags as cli_flags
from bert_tf.common_flags import FlagValueError
from bert_tf.config import ConfigError
from bert_tf.data import squad, squad_postprocess
from bert_tf.metrics import squad as squad_metrics
from bert_tf.modeling import BertSpanLabeler
from bert_tf.training import checkpointing, finetune
from bert_tf.training.loop import NonFiniteLossError, write_summaries

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The original run_squad.py's flags (same names and defaults) and bert_tf's."""
    return cli_flags.define_squad_flags(flag_values)


TASK = "squad"
BEST_METRIC = "f1"


def validate_options(options):
    """Checks the SQuAD flags; finetuning_run.prepare checks the shared ones after these.

    Raises:
      FlagValueError naming the flag, the value and what was expected.
    """
    if not (options.do_train or options.do_predict or options.do_eval):
        raise FlagValueError("at least one of --do_train, --do_predict or --do_eval must be set")
    if options.do_train and not options.train_file:
        raise FlagValueError("--do_train needs --train_file")
    if (options.do_predict or options.do_eval) and not options.predict_file:
        raise FlagValueError("--do_predict and --do_eval need --predict_file")
    if not options.output_dir:
        raise FlagValueError("--output_dir is required")
    try:
        squad.check_window_sizes(options.max_seq_length, options.max_query_length,
                                 options.doc_stride)
    except ValueError as e:
        raise FlagValueError(str(e)) from None
    for name in ("n_best_size", "max_answer_length"):
        if getattr(options, name) < 1:
            raise FlagValueError(f"--{name}={getattr(options, name)} must be >= 1")


def _load(path, flag, options, is_training):
    """(data list, examples, skipped, has_gold) of a SQuAD file; errors name the flag."""
    try:
        data = squad.load_squad_json(path)
        has_gold = squad.check_squad_data(data, path, options.version_2_with_negative)
        examples, skipped = squad.read_squad_examples(
            data, path, is_training=is_training,
            version_2_with_negative=options.version_2_with_negative)
    except squad.SquadFormatError as e:
        raise FlagValueError(f"--{flag}: {e}") from None
    if not examples:
        raise FlagValueError(f"--{flag}={path} holds no usable question")
    return data, examples, skipped, has_gold


def _convert(examples, tokenizer, options, is_training):
    return squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=options.max_seq_length,
        doc_stride=options.doc_stride, max_query_length=options.max_query_length,
        is_training=is_training)


def _serving_settings(options):
    """What an exported model needs besides the vocabulary to prepare inputs and answer."""
    return dict(do_lower_case=bool(options.do_lower_case),
                max_seq_length=options.max_seq_length,
                max_query_length=options.max_query_length,
                max_answer_length=options.max_answer_length,
                version_2_with_negative=bool(options.version_2_with_negative))


class _Predictor:
    """Answers the --predict_file questions with the current weights of the model."""

    def __init__(self, model, options, data, examples, features, has_gold,
                 length_buckets=None):
        self.model, self.options, self.data = model, options, data
        self.examples, self.features, self.has_gold = examples, features, has_gold
        self.arrays = squad.features_to_arrays(features, options.max_seq_length,
                                               is_training=False)
        self.seconds = 0.0
        self.length_buckets = length_buckets

    def answer(self):
        """SquadPredictions of every question (timed into self.seconds)."""
        start = time.time()
        dataset = squad.squad_dataset(self.arrays, batch_size=self.options.predict_batch_size,
                                      is_training=False, length_buckets=self.length_buckets)
        logits = finetune.predict(self.model, dataset, ["start_logits", "end_logits"],
                                  sequence_length=self.options.max_seq_length)
        count = len(self.features)
        result = squad_postprocess.compute_predictions(
            self.examples, self.features, logits["start_logits"][:count],
            logits["end_logits"][:count], n_best_size=self.options.n_best_size,
            max_answer_length=self.options.max_answer_length,
            do_lower_case=self.options.do_lower_case,
            version_2_with_negative=self.options.version_2_with_negative,
            null_score_diff_threshold=self.options.null_score_diff_threshold)
        self.seconds = time.time() - start
        return result

    def metrics(self, result):
        return squad_metrics.evaluate(self.data, result.predictions,
                                      self.options.version_2_with_negative, result.null_odds)

    def evaluate(self):
        """Official metrics of the current weights (evaluate_fn of fine_tune)."""
        return self.metrics(self.answer())


def run_squad(options, flags_text=None):
    """Trains and/or predicts as the flags say; returns the results dict (results.json).

    Goes through the driver run_classifier and run_tagging use (bert_tf.finetuning_run):
    its flag checks, model, training loop, restore rule and run files.

    Args:
      options: flag values (FLAGS or an object with the same attribute names).
      flags_text: the command line as a flagfile, saved to output_dir/run_squad.flags.
    """
    start = time.time()
    validate_options(options)
    context = finetuning_run.prepare(options)
    with finetuning_run.owned(context, options):
        return _run_squad(options, flags_text, start, context)


def _run_squad(options, flags_text, start, context):
    """run_squad once --output_dir is owned."""
    tokenizer = context.tokenizer
    version_2 = bool(options.version_2_with_negative)
    finetuning_run.check_resume(context, options, "run_squad",
                                f"{TASK} (version_2_with_negative={version_2})", None)
    results = {"task": TASK, "version_2_with_negative": version_2}

    train_arrays = None
    num_train_steps = None
    if options.do_train:
        _, train_examples, skipped, _ = _load(options.train_file, "train_file", options, True)
        train_arrays = squad.features_to_arrays(
            _convert(train_examples, tokenizer, options, True), options.max_seq_length,
            is_training=True)
        if not squad.num_rows(train_arrays):
            raise FlagValueError(f"--train_file={options.train_file}: no context has any "
                                 "WordPiece token")
        results.update(num_train_examples=len(train_examples),
                       num_train_features=squad.num_rows(train_arrays),
                       num_skipped_train_examples=skipped)
        logging.info("Training on %d questions (%d windows); %d skipped (answer not found "
                     "in the context)", len(train_examples), squad.num_rows(train_arrays),
                     skipped)
        # As the original: steps from the number of questions, not of windows; a step takes
        # --gradient_accumulation_steps batches.
        num_train_steps = finetune.num_train_steps(
            len(train_examples), common_flags.effective_train_batch_size(options),
            options.num_train_epochs)

    predict_input = None
    if options.do_predict or options.do_eval:
        data, examples, _, has_gold = _load(options.predict_file, "predict_file", options,
                                            False)
        if options.do_eval and not has_gold:
            raise FlagValueError(f"--do_eval: --predict_file={options.predict_file} has "
                                 "questions without gold answers")
        features = list(_convert(examples, tokenizer, options, False))
        if not features:
            raise FlagValueError(f"--predict_file={options.predict_file}: no context has "
                                 "any WordPiece token")
        predict_input = (data, examples, features, has_gold)
        results.update(num_predict_examples=len(examples), num_predict_features=len(features))
        logging.info("Predicting %d questions (%d windows)%s", len(examples), len(features),
                     ", with gold answers" if has_gold else "")

    model, optimizer = finetuning_run.build_model(context, options, BertSpanLabeler,
                                                  num_train_steps)
    predictor = (_Predictor(model, options, *predict_input,
                            length_buckets=context.eval_length_buckets)
                 if predict_input else None)

    if options.do_train:
        results.update(_train(context, options, model, optimizer, train_arrays,
                              results["num_train_examples"], num_train_steps, predictor))
        # fine_tune leaves the best weights (by F1) in the model when it evaluated.
        weights_step = (results["best"] or {}).get("step", results["global_step"])
    else:
        weights_step = results["global_step"] = finetuning_run.restore_trained(
            options, model, BEST_METRIC)

    if predictor is not None:
        answers = predictor.answer()
        # Questions answered per second, post-processing included.
        results["predict_examples_per_second"] = (len(predictor.examples) / predictor.seconds
                                                  if predictor.seconds > 0 else 0.0)
        if context.chief:
            results["prediction_files"] = squad_postprocess.write_predictions(
                answers, options.output_dir)
        results["predict_step"] = weights_step
        if predictor.has_gold:
            results["eval"] = predictor.metrics(answers)
            logging.info("Eval of the weights of step %d: %s", weights_step, " ".join(
                f"{k}={v:.4g}" for k, v in results["eval"].items()))
            if context.chief and not options.do_train:
                write_summaries(os.path.join(options.output_dir, "summaries", "eval"),
                                weights_step, results["eval"])

    settings = _serving_settings(options)
    del settings["do_lower_case"], settings["max_seq_length"]  # write_run_files adds them
    finetuning_run.write_run_files(context, options, model, TASK, None, "run_squad",
                                   flags_text, export_fields=settings,
                                   doc_stride=options.doc_stride, **settings)
    results["wall_time_seconds"] = time.time() - start
    # No eval_results.txt: SQuAD's metrics are in results.json only, as before.
    finetuning_run.write_results(context, options, results, None)
    return results


def _train(context, options, model, optimizer, arrays, num_examples, num_train_steps,
           predictor):
    """Fine-tunes `model`; evaluates each checkpoint when the predict file has answers."""
    global_batch = options.train_batch_size
    buckets = context.length_buckets

    def dataset_fn(input_context=None):
        batch = (input_context.get_per_replica_batch_size(global_batch) if input_context
                 else global_batch)
        return squad.squad_dataset(arrays, batch_size=batch, is_training=True,
                                   seed=options.seed, input_context=input_context,
                                   length_buckets=buckets)

    evaluating = predictor is not None and predictor.has_gold
    outcome = finetuning_run.train(
        context, options, model=model, optimizer=optimizer, loss_fn=finetune.span_loss_fn,
        dataset_fn=dataset_fn, num_train_steps=num_train_steps,
        steps_per_epoch=finetune.steps_per_epoch(
            num_examples, common_flags.effective_train_batch_size(options)),
        evaluate_fn=predictor.evaluate if evaluating else None,
        best_metric=BEST_METRIC if evaluating else None)
    return {"global_step": outcome["step"], "num_train_steps": num_train_steps,
            "num_warmup_steps": finetune.num_warmup_steps(num_train_steps,
                                                          options.warmup_proportion),
            "train": outcome["train"], "evaluations": outcome["evaluations"],
            "best": outcome["best"]}


def main(argv):
    del argv
    if FLAGS.verbose_logging:
        logging.set_verbosity(logging.DEBUG)
    run_squad(FLAGS, flags_text=FLAGS.flags_into_string())


def run():
    """Console-script entry point (bert-tf-squad)."""
    cli.run(main, "run_squad", define_flags=define_flags,
            errors=(FlagValueError, ConfigError, checkpointing.CheckpointError,
                    NonFiniteLossError))


if __name__ == "__main__":
    run()
