"""The SQuAD v1.1 / v2.0 span question-answering task.

Run by the fine-tuning driver (bert_tf.jobs.finetuning.run_task); `bert-tf-squad`
(bert_tf.cli.squad, alias bert_tf.run_squad) documents the command and its outputs. Reads
SQuAD JSON, splits long contexts into sliding windows (bert_tf.data.tasks.squad), trains a
BertSpanLabeler and answers the predict_file questions with the original's post-processing
(bert_tf.data.tasks.squad_postprocess). When the predict_file has gold answers (SQuAD dev sets do),
every checkpoint is evaluated with the official EM/F1 (bert_tf.metrics.squad) and the weights
with the best F1 are kept.
"""

import dataclasses
import time

from absl import logging

from bert_tf import file_names
from bert_tf.data.tasks import squad, squad_postprocess
from bert_tf.jobs import finetuning, flag_checks
from bert_tf.jobs.finetuning import FinetuningConfig, FinetuningTask
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.metrics import squad as squad_metrics
from bert_tf.modeling import BertSpanLabeler
from bert_tf.training import task_loop
from bert_tf.training.logging_window import write_summaries


@dataclasses.dataclass
class SquadTask(FinetuningTask):
    """The SQuAD task: the encoder's files (384 tokens) and the original's flags."""

    max_seq_length: int = 384
    train_file: str | None = None
    predict_file: str | None = None
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0
    verbose_logging: bool = False


@dataclasses.dataclass
class SquadConfig(FinetuningConfig):
    """A SQuAD run: the fine-tuning sections with a SquadTask."""

    task: SquadTask = dataclasses.field(default_factory=SquadTask)


TASK = "squad"
BEST_METRIC = "f1"


def validate_options(options):
    """Checks the SQuAD flags; finetuning.prepare checks the shared ones after these.

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
    flag_checks.require_positive(n_best_size=options.n_best_size,
                                 max_answer_length=options.max_answer_length)


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
                doc_stride=options.doc_stride,
                version_2_with_negative=bool(options.version_2_with_negative))


class _Predictor:
    """Answers the --predict_file questions with the current weights of the model."""

    def __init__(self, model, options, data, examples, features, has_gold,
                 length_buckets=None, whole_words=False):
        self.model, self.options, self.data = model, options, data
        self.examples, self.features, self.has_gold = examples, features, has_gold
        # Byte-level BPE: answers are whole context words (squad_postprocess).
        self.whole_words = whole_words
        self.arrays = squad.features_to_arrays(features, options.max_seq_length,
                                               is_training=False)
        self.seconds = 0.0
        self.length_buckets = length_buckets

    def answer(self):
        """SquadPredictions of every question (timed into self.seconds)."""
        start = time.time()
        dataset = squad.squad_dataset(self.arrays, batch_size=self.options.predict_batch_size,
                                      is_training=False, length_buckets=self.length_buckets)
        logits = task_loop.predict(self.model, dataset, ["start_logits", "end_logits"],
                                  sequence_length=self.options.max_seq_length)
        count = len(self.features)
        result = squad_postprocess.compute_predictions(
            self.examples, self.features, logits["start_logits"][:count],
            logits["end_logits"][:count], n_best_size=self.options.n_best_size,
            max_answer_length=self.options.max_answer_length,
            do_lower_case=self.options.do_lower_case,
            version_2_with_negative=self.options.version_2_with_negative,
            null_score_diff_threshold=self.options.null_score_diff_threshold,
            whole_words=self.whole_words)
        self.seconds = time.time() - start
        return result

    def metrics(self, result):
        return squad_metrics.evaluate(self.data, result.predictions,
                                      self.options.version_2_with_negative, result.null_odds)

    def evaluate(self):
        """Official metrics of the current weights (evaluate_fn of fine_tune)."""
        return self.metrics(self.answer())


class SquadTask(finetuning.Task):
    """Span question answering with a BertSpanLabeler, scored by the official EM/F1."""

    cli_name = "run_squad"
    best_metric = BEST_METRIC
    loss_fn = staticmethod(task_loop.span_loss_fn)

    run_kind = TASK

    def __init__(self, options):
        super().__init__(options)
        validate_options(options)
        self.predictor = None

    @property
    def resume_name(self):
        return f"{TASK} (version_2_with_negative={bool(self.options.version_2_with_negative)})"

    def prepare_inputs(self, context):
        options, tokenizer = self.options, context.tokenizer
        self.info = {"task": TASK,
                     "version_2_with_negative": bool(options.version_2_with_negative)}
        if options.do_train:
            _, train_examples, skipped, _ = _load(options.train_file, "train_file", options,
                                                  True)
            self.train_arrays = squad.features_to_arrays(
                _convert(train_examples, tokenizer, options, True), options.max_seq_length,
                is_training=True)
            if not squad.num_rows(self.train_arrays):
                raise FlagValueError(f"--train_file={options.train_file}: no context has any "
                                     f"{context.tokenizer.kind} token")
            self.info.update(num_train_examples=len(train_examples),
                             num_train_features=squad.num_rows(self.train_arrays),
                             num_skipped_train_examples=skipped)
            logging.info("Training on %d questions (%d windows); %d skipped (answer not found "
                         "in the context)", len(train_examples),
                         squad.num_rows(self.train_arrays), skipped)
            # As the original: steps from the number of questions, not of windows.
            self.num_train_examples = len(train_examples)
        self.predict_input = None
        if options.do_predict or options.do_eval:
            data, examples, _, has_gold = _load(options.predict_file, "predict_file", options,
                                                False)
            if options.do_eval and not has_gold:
                raise FlagValueError(f"--do_eval: --predict_file={options.predict_file} has "
                                     "questions without gold answers")
            features = list(_convert(examples, tokenizer, options, False))
            if not features:
                raise FlagValueError(f"--predict_file={options.predict_file}: no context has "
                                     f"any {context.tokenizer.kind} token")
            self.predict_input = (data, examples, features, has_gold)
            self.info.update(num_predict_examples=len(examples),
                             num_predict_features=len(features))
            logging.info("Predicting %d questions (%d windows)%s", len(examples),
                         len(features), ", with gold answers" if has_gold else "")

    def make_model(self, encoder):
        return BertSpanLabeler(encoder)

    def attach(self, model, context):
        super().attach(model, context)
        if self.predict_input:
            self.predictor = _Predictor(model, self.options, *self.predict_input,
                                        length_buckets=context.eval_length_buckets,
                                        whole_words=not context.tokenizer.subword_offsets)

    def results(self):
        return dict(self.info)

    def train_dataset_fn(self, context):
        options, arrays = self.options, self.train_arrays
        global_batch, buckets = options.train_batch_size, context.length_buckets

        def dataset_fn(input_context=None):
            batch = (input_context.get_per_replica_batch_size(global_batch) if input_context
                     else global_batch)
            return squad.squad_dataset(arrays, batch_size=batch, is_training=True,
                                       seed=options.seed, input_context=input_context,
                                       length_buckets=buckets)
        return dataset_fn

    def evaluate_fn(self):
        evaluating = self.predictor is not None and self.predictor.has_gold
        return self.predictor.evaluate if evaluating else None

    def record_training(self, results, outcome, num_train_steps):
        results.update(global_step=outcome["step"], num_train_steps=num_train_steps,
                       num_warmup_steps=task_loop.num_warmup_steps(
                           num_train_steps, self.options.warmup_proportion),
                       train=outcome["train"], evaluations=outcome["evaluations"],
                       best=outcome["best"])

    def evaluate_and_predict(self, context, results, outcome):
        options, predictor = self.options, self.predictor
        # fine_tune leaves the best weights (by F1) in the model when it evaluated.
        weights_step = results["global_step"]
        if outcome is not None:
            weights_step = (results["best"] or {}).get("step", results["global_step"])
        if predictor is not None:
            answers = predictor.answer()
            # Questions answered per second, post-processing included.
            results["predict_examples_per_second"] = (
                len(predictor.examples) / predictor.seconds if predictor.seconds > 0 else 0.0)
            if context.chief:
                results["prediction_files"] = squad_postprocess.write_predictions(
                    answers, options.output_dir)
            results["predict_step"] = weights_step
            if predictor.has_gold:
                results["eval"] = predictor.metrics(answers)
                logging.info("Eval of the weights of step %d: %s", weights_step, " ".join(
                    f"{k}={v:.4g}" for k, v in results["eval"].items()))
                if context.chief and not options.do_train:
                    write_summaries(file_names.path(options.output_dir,
                                                    file_names.SUMMARIES_DIR, "eval"),
                                    weights_step, results["eval"])
        # No eval_results.txt (the original run_squad.py writes none): the metrics are in
        # results.json.
        return None

    def run_files(self):
        settings = _serving_settings(self.options)
        del settings["do_lower_case"], settings["max_seq_length"]  # write_run_files adds them
        # The threshold goes to the --export_dir SavedModel; task_info.json has no field for it
        # (bert-tf-export takes --null_score_diff_threshold).
        export = dict(settings, null_score_diff_threshold=self.options.null_score_diff_threshold)
        return TASK, export, settings


def run_squad(options, flags_text=None):
    """Trains and/or predicts as the config says; returns the results dict (results.json).

    Args:
      options: a SquadConfig (or any object with its attribute names).
      flags_text: the command line as a flagfile, saved to output_dir/run_squad.flags.
    """
    return finetuning.run_task(SquadTask(options), options, flags_text)
