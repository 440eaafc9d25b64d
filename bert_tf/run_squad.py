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

import json
import os
import time

import tensorflow as tf
from absl import flags, logging

from bert_tf import cli, common_flags, serving
from bert_tf.common_flags import FlagValueError
from bert_tf.config import ConfigError
from bert_tf.data import squad, squad_postprocess
from bert_tf.metrics import squad as squad_metrics
from bert_tf.fileio import write_text_atomic
from bert_tf.interop import warm_start
from bert_tf.modeling import BertEncoder, BertSpanLabeler
from bert_tf.text import WordpieceTokenizer, validate_case_matches_checkpoint
from bert_tf.training import checkpointing, finetune
from bert_tf.training.distribute import is_chief
from bert_tf.training.loop import NonFiniteLossError, write_summaries
from bert_tf.training.optimization import create_optimizer

FLAGS = flags.FLAGS

# Flags of the original google-research/bert run_squad.py, same names and defaults. Defined
# only if absent: run_* modules share one absl flag namespace when imported together.
_SQUAD_FLAGS = (
    (flags.DEFINE_string, "train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json."),
    (flags.DEFINE_string, "predict_file", None,
     "SQuAD JSON to answer, e.g. dev-v1.1.json; with gold answers it is also evaluated (at "
     "every checkpoint when training)."),
    (flags.DEFINE_integer, "doc_stride", 128, "Pieces between the starts of consecutive windows."),
    (flags.DEFINE_integer, "max_query_length", 64, "Question pieces kept (longer ones are cut)."),
    (flags.DEFINE_integer, "n_best_size", 20,
     "Start/end candidates per window, and answers in nbest_predictions.json."),
    (flags.DEFINE_integer, "max_answer_length", 30, "Longest answer, in WordPiece tokens."),
    (flags.DEFINE_bool, "version_2_with_negative", False,
     "SQuAD 2.0: questions may have no answer."),
    (flags.DEFINE_float, "null_score_diff_threshold", 0.0,
     "v2.0: answer \"\" when the null score minus the best span score exceeds this."),
    (flags.DEFINE_bool, "verbose_logging", False,
     "Log why an answer could not be aligned back to the original text."),
)


def define_squad_flags():
    """The SQuAD flags plus the shared fine-tuning ones (idempotent)."""
    for define, name, default, help_text in _SQUAD_FLAGS:
        if name not in FLAGS:
            define(name, default, help_text)
    common_flags.define_finetuning_flags(default_max_seq_length=384)
    common_flags.define_export_flags()


define_squad_flags()

TASK = "squad"


def validate_options(options):
    """Checks flag values against each other before any work starts.

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
    for name in ("n_best_size", "max_answer_length", "predict_batch_size"):
        if getattr(options, name) < 1:
            raise FlagValueError(f"--{name}={getattr(options, name)} must be >= 1")
    common_flags.check_numeric_flags(options)
    if options.num_train_epochs <= 0:
        raise FlagValueError(f"--num_train_epochs={options.num_train_epochs} must be > 0")
    common_flags.effective_train_batch_size(options)  # checks --gradient_accumulation_steps
    common_flags.check_export_dir(options)
    if not 0.0 <= options.warmup_proportion <= 1.0:
        raise FlagValueError(f"--warmup_proportion={options.warmup_proportion} must be in "
                             "[0, 1]")
    if options.save_checkpoints_steps is not None and options.save_checkpoints_steps < 1:
        raise FlagValueError(
            f"--save_checkpoints_steps={options.save_checkpoints_steps} must be >= 1")
    if options.init_checkpoint:
        try:
            validate_case_matches_checkpoint(options.do_lower_case, options.init_checkpoint)
        except ValueError as e:
            raise FlagValueError(str(e)) from None


def _check_vocab(tokenizer, config, config_file, vocab_file):
    if config.vocab_size < tokenizer.vocab_size:
        raise FlagValueError(
            f"vocab_size={config.vocab_size} in {config_file} is smaller than the "
            f"{tokenizer.vocab_size} tokens of --vocab_file={vocab_file}")


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


def _restore_for_predict(options, model):
    """Prediction without training uses --output_dir's best weights, else its latest
    checkpoint, else --init_checkpoint; returns the step (0 for --init_checkpoint)."""
    keeper = finetune.BestModelKeeper(model, options.output_dir, "f1", write=False)
    best = keeper.restore()
    if best is not None:
        return best["step"]
    checkpoint = tf.train.Checkpoint(model=model)
    manager = tf.train.CheckpointManager(checkpoint, options.output_dir, max_to_keep=None)
    latest = checkpointing.restore_latest(manager, checkpoint)
    if latest:
        logging.info("Predicting with %s", latest)
        return int(latest.rsplit("-", 1)[-1])
    if options.init_checkpoint:
        warm_start(options.init_checkpoint, model, do_lower_case=options.do_lower_case)
        return 0
    raise FlagValueError(f"--do_predict without --do_train needs a checkpoint in "
                         f"--output_dir={options.output_dir} or --init_checkpoint")


def run_squad(options, flags_text=None):
    """Trains and/or predicts as the flags say; returns the results dict (results.json).

    Args:
      options: flag values (FLAGS or an object with the same attribute names).
      flags_text: the command line as a flagfile, saved to output_dir/run_squad.flags.
    """
    start = time.time()
    validate_options(options)
    config_file, vocab_file = common_flags.resolve_model_files(options)
    config = common_flags.load_config(config_file, options)
    checkpointing.check_writable_dir(options.output_dir)
    # The strategy comes before any other TensorFlow work (multi-worker set-up).
    strategy = common_flags.make_strategy(options, ("train_batch_size",))
    buckets = common_flags.resolve_length_buckets(options, config, strategy)
    tokenizer = WordpieceTokenizer(vocab_file, do_lower_case=options.do_lower_case)
    _check_vocab(tokenizer, config, config_file, vocab_file)
    results = {"task": TASK, "version_2_with_negative": bool(options.version_2_with_negative)}

    train_arrays = None
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

    common_flags.set_seed_and_policy(options, strategy)
    with strategy.scope():
        encoder = BertEncoder(config)
        encoder.trainable = options.trainable_encoder
        model = BertSpanLabeler(encoder)
    predictor = (_Predictor(model, options, *predict_input, length_buckets=buckets)
                 if predict_input else None)

    chief = is_chief(strategy)
    if chief:
        common_flags.copy_model_files(options.output_dir, strategy, config, vocab_file)
        serving.write_task_info(options.output_dir, TASK, doc_stride=options.doc_stride,
                                **_serving_settings(options))
        if flags_text:
            write_text_atomic(os.path.join(options.output_dir, "run_squad.flags"), flags_text)

    if options.do_train:
        results.update(_train(options, strategy, model, train_arrays,
                              results["num_train_examples"], predictor, buckets))
        # fine_tune leaves the best weights (by F1) in the model when it evaluated.
        weights_step = (results["best"] or {}).get("step", results["global_step"])
    else:
        weights_step = results["global_step"] = _restore_for_predict(options, model)

    if predictor is not None:
        answers = predictor.answer()
        # Questions answered per second, post-processing included.
        results["predict_examples_per_second"] = (len(predictor.examples) / predictor.seconds
                                                  if predictor.seconds > 0 else 0.0)
        if chief:
            results["prediction_files"] = squad_postprocess.write_predictions(
                answers, options.output_dir)
        results["predict_step"] = weights_step
        if predictor.has_gold:
            results["eval"] = predictor.metrics(answers)
            logging.info("Eval of the weights of step %d: %s", weights_step, " ".join(
                f"{k}={v:.4g}" for k, v in results["eval"].items()))
            if chief and not options.do_train:
                write_summaries(os.path.join(options.output_dir, "summaries", "eval"),
                                weights_step, results["eval"])

    results["wall_time_seconds"] = time.time() - start
    if chief:
        checkpointing.save_keras_model(model, os.path.join(options.output_dir, "model.keras"))
        if options.export_dir:
            serving.export(model, options.export_dir, vocab_file=vocab_file,
                           **_serving_settings(options))
            logging.info("Exported the model as a SavedModel to %s", options.export_dir)
        write_text_atomic(os.path.join(options.output_dir, "results.json"),
                          json.dumps(results, indent=2, sort_keys=True) + "\n")
    return results


def _train(options, strategy, model, arrays, num_examples, predictor, buckets=None):
    """Fine-tunes `model`; evaluates each checkpoint when the predict file has answers."""
    global_batch = options.train_batch_size
    # As the original: steps from the number of questions, not of windows; a step takes
    # --gradient_accumulation_steps batches.
    step_batch = common_flags.effective_train_batch_size(options)
    train_steps = finetune.num_train_steps(num_examples, step_batch, options.num_train_epochs)
    warmup_steps = finetune.num_warmup_steps(train_steps, options.warmup_proportion)
    save_steps = options.save_checkpoints_steps or finetune.steps_per_epoch(num_examples,
                                                                            step_batch)
    with strategy.scope():
        optimizer = create_optimizer(options.learning_rate, train_steps, warmup_steps,
                                     optimizer_type=options.optimizer,
                                     weight_decay_rate=options.weight_decay_rate)

    def dataset_fn(input_context=None):
        batch = (input_context.get_per_replica_batch_size(global_batch) if input_context
                 else global_batch)
        return squad.squad_dataset(arrays, batch_size=batch, is_training=True,
                                   seed=options.seed, input_context=input_context,
                                   length_buckets=buckets)

    def warm_start_fn(init_checkpoint, target):
        # Any format bert_tf.interop reads (bert_tf, original TF1, Hugging Face, keras-hub):
        # the encoder from a pre-trained model, everything from a fine-tuned span labeler.
        return warm_start(init_checkpoint, target, do_lower_case=options.do_lower_case)

    evaluating = predictor is not None and predictor.has_gold
    outcome = finetune.fine_tune(
        model=model, optimizer=optimizer, loss_fn=finetune.span_loss_fn,
        train_dataset_fn=dataset_fn, strategy=strategy, output_dir=options.output_dir,
        num_train_steps=train_steps, global_batch_size=global_batch,
        evaluate_fn=predictor.evaluate if evaluating else None,
        best_metric="f1" if evaluating else None,
        steps_per_loop=common_flags.steps_per_loop(options), save_checkpoints_steps=save_steps,
        log_steps=options.log_steps, init_checkpoint=options.init_checkpoint,
        warm_start_fn=warm_start_fn, jit_compile=options.jit_compile,
        gradient_accumulation_steps=options.gradient_accumulation_steps)
    return {"global_step": outcome["step"], "num_train_steps": train_steps,
            "num_warmup_steps": warmup_steps, "train": outcome["train"],
            "evaluations": outcome["evaluations"], "best": outcome["best"]}


def main(argv):
    del argv
    if FLAGS.verbose_logging:
        logging.set_verbosity(logging.DEBUG)
    run_squad(FLAGS, flags_text=FLAGS.flags_into_string())


def run():
    """Console-script entry point (bert-tf-squad)."""
    cli.run(main, "run_squad",
            errors=(FlagValueError, ConfigError, checkpointing.CheckpointError,
                    NonFiniteLossError))


if __name__ == "__main__":
    run()
