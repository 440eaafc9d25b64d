"""The SQuAD v1.1 / v2.0 span question-answering task.

Run by the fine-tuning driver (bert_tf.jobs.finetuning.run_task); `bert-tf-squad`
(bert_tf.cli.squad, alias bert_tf.run_squad) documents the command and its outputs. Reads
SQuAD JSON, splits long contexts into sliding windows (bert_tf.data.tasks.squad), trains a
BertSpanLabeler and answers the predict_file questions with the original's post-processing
(bert_tf.data.tasks.squad_postprocess). When the predict_file has gold answers (SQuAD dev sets do),
every checkpoint is evaluated with the official EM/F1 (bert_tf.metrics.squad) and the weights
with the best F1 are kept.
"""

import time

from absl import logging

from bert_tf import file_names
from bert_tf.data.tasks import squad, squad_postprocess
from bert_tf.jobs import finetuning, finetuning_config
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.metrics import squad as squad_metrics
from bert_tf.modeling import BertSpanLabeler
from bert_tf.training import task_loop
from bert_tf.training.logging_window import write_summaries


TASK = "squad"
BEST_METRIC = "f1"


def _load(path, flag, version_2_with_negative, is_training):
    """(data list, examples, skipped, has_gold) of a SQuAD file; errors name the flag."""
    try:
        data = squad.load_squad_json(path)
        has_gold = squad.check_squad_data(data, path, version_2_with_negative)
        examples, skipped = squad.read_squad_examples(
            data, path, is_training=is_training,
            version_2_with_negative=version_2_with_negative)
    except squad.SquadFormatError as e:
        raise FlagValueError(f"--{flag}: {e}") from None
    if not examples:
        raise FlagValueError(f"--{flag}={path} holds no usable question")
    return data, examples, skipped, has_gold


def _convert(examples, tokenizer, task, is_training):
    """The windows of `examples` as the SquadTask section `task` cuts them."""
    return squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=task.max_seq_length,
        doc_stride=task.doc_stride, max_query_length=task.max_query_length,
        is_training=is_training)


def _serving_settings(task):
    """What an exported model needs besides the vocabulary to prepare inputs and answer (of
    the SquadTask section `task`)."""
    return dict(do_lower_case=bool(task.do_lower_case),
                max_seq_length=task.max_seq_length,
                max_query_length=task.max_query_length,
                max_answer_length=task.max_answer_length,
                doc_stride=task.doc_stride,
                version_2_with_negative=bool(task.version_2_with_negative),
                null_score_diff_threshold=float(task.null_score_diff_threshold))


class _Predictor:
    """Answers the --predict_file questions with the current weights of the model, as the
    SquadTask section `task` says, in batches of `batch_size` (--predict_batch_size)."""

    def __init__(self, model, task, batch_size, data, examples, features, has_gold,
                 length_buckets=None, whole_words=False):
        self.model, self.task, self.batch_size, self.data = model, task, batch_size, data
        self.examples, self.features, self.has_gold = examples, features, has_gold
        # Byte-level BPE: answers are whole context words (squad_postprocess).
        self.whole_words = whole_words
        self.arrays = squad.features_to_arrays(features, task.max_seq_length,
                                               is_training=False)
        self.seconds = 0.0
        self.length_buckets = length_buckets

    def answer(self):
        """SquadPredictions of every question (timed into self.seconds)."""
        start, task = time.time(), self.task
        dataset = squad.squad_dataset(self.arrays, batch_size=self.batch_size,
                                      is_training=False, length_buckets=self.length_buckets)
        logits = task_loop.predict(self.model, dataset, ["start_logits", "end_logits"],
                                  sequence_length=task.max_seq_length)
        count = len(self.features)
        result = squad_postprocess.compute_predictions(
            self.examples, self.features, logits["start_logits"][:count],
            logits["end_logits"][:count], n_best_size=task.n_best_size,
            max_answer_length=task.max_answer_length,
            do_lower_case=task.do_lower_case,
            version_2_with_negative=task.version_2_with_negative,
            null_score_diff_threshold=task.null_score_diff_threshold,
            whole_words=self.whole_words)
        self.seconds = time.time() - start
        return result

    def metrics(self, result):
        return squad_metrics.evaluate(self.data, result.predictions,
                                      self.task.version_2_with_negative, result.null_odds)

    def evaluate(self):
        """Official metrics of the current weights (evaluate_fn of fine_tune)."""
        return self.metrics(self.answer())


class SquadRunner(finetuning.TaskRunner):
    """Span question answering with a BertSpanLabeler, scored by the official EM/F1."""

    cli_name = finetuning_config.SquadConfig.COMMAND
    best_metric = BEST_METRIC
    loss_fn = staticmethod(task_loop.span_loss_fn)

    run_kind = TASK

    def __init__(self, job):
        # The SQuAD flags are checked with the shared ones (finetuning_config.check_settings).
        super().__init__(job)
        self.predictor = None

    @property
    def resume_name(self):
        return f"{TASK} (version_2_with_negative={bool(self.job.task.version_2_with_negative)})"

    def resume_settings(self):
        # The training windows, recorded when training starts: a resumed run cuts its
        # questions and contexts alike (unset, it takes them from here).
        task = self.job.task
        return {"doc_stride": int(task.doc_stride),
                "max_query_length": int(task.max_query_length),
                "version_2_with_negative": bool(task.version_2_with_negative)}

    def prepare_inputs(self, context):
        job, task, tokenizer = self.job, self.job.task, context.tokenizer
        version_2 = task.version_2_with_negative
        self.info = {"task": TASK, "version_2_with_negative": bool(version_2)}
        if job.do_train:
            _, train_examples, skipped, _ = _load(task.train_file, "train_file", version_2,
                                                  True)
            self.train_arrays = squad.features_to_arrays(
                _convert(train_examples, tokenizer, task, True), task.max_seq_length,
                is_training=True)
            if not squad.num_rows(self.train_arrays):
                raise FlagValueError(f"--train_file={task.train_file}: no context has any "
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
        if job.do_predict or job.do_eval:
            data, examples, _, has_gold = _load(task.predict_file, "predict_file", version_2,
                                                False)
            if job.do_eval and not has_gold:
                raise FlagValueError(f"--do_eval: --predict_file={task.predict_file} has "
                                     "questions without gold answers")
            features = list(_convert(examples, tokenizer, task, False))
            if not features:
                raise FlagValueError(f"--predict_file={task.predict_file}: no context has "
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
            self.predictor = _Predictor(model, self.job.task,
                                        self.job.trainer.predict_batch_size, *self.predict_input,
                                        length_buckets=context.eval_length_buckets,
                                        whole_words=not context.tokenizer.subword_offsets)

    def results(self):
        return dict(self.info)

    def train_dataset_fn(self, context):
        arrays, seed = self.train_arrays, self.job.runtime.seed
        global_batch, buckets = self.job.trainer.train_batch_size, context.length_buckets

        def dataset_fn(input_context=None):
            batch = (input_context.get_per_replica_batch_size(global_batch) if input_context
                     else global_batch)
            return squad.squad_dataset(arrays, batch_size=batch, is_training=True,
                                       seed=seed, input_context=input_context,
                                       length_buckets=buckets)
        return dataset_fn

    def evaluate_fn(self):
        evaluating = self.predictor is not None and self.predictor.has_gold
        return self.predictor.evaluate if evaluating else None

    def record_training(self, results, outcome, num_train_steps):
        results.update(global_step=outcome["step"], num_train_steps=num_train_steps,
                       num_warmup_steps=task_loop.num_warmup_steps(
                           num_train_steps, self.job.trainer.warmup_proportion),
                       train=outcome["train"], evaluations=outcome["evaluations"],
                       best=outcome["best"])

    def evaluate_and_predict(self, context, results, outcome):
        job, predictor = self.job, self.predictor
        # fine_tune leaves the best weights (by F1) in the model when it evaluated.
        weights_step = results["global_step"]
        if outcome is not None:
            weights_step = (results["best"] or {}).get("step", results["global_step"])
        if predictor is not None:
            answers = predictor.answer()
            # Questions answered per second, post-processing included.
            results["predict_examples_per_second"] = (
                len(predictor.examples) / predictor.seconds if predictor.seconds > 0 else 0.0)
            kinds = squad_postprocess.prediction_files(answers)
            names = dict(zip(kinds, finetuning.free_names(
                job.output_dir, [squad_postprocess.PREDICTION_FILES[k] for k in kinds],
                job.overwrite)))
            if context.chief:
                results["prediction_files"] = squad_postprocess.write_predictions(
                    answers, job.output_dir, names)
                logging.info("Wrote the answers to %d questions to %s",
                             len(answers.predictions), results["prediction_files"]["predictions"])
            results["predict_step"] = weights_step
            if predictor.has_gold:
                results["eval"] = predictor.metrics(answers)
                logging.info("Eval of the weights of step %d: %s", weights_step, " ".join(
                    f"{k}={v:.4g}" for k, v in results["eval"].items()))
                if context.chief and not job.do_train:
                    write_summaries(file_names.path(job.output_dir,
                                                    file_names.SUMMARIES_DIR, "eval"),
                                    weights_step, results["eval"])
        # No eval_results.txt (the original run_squad.py writes none): the metrics are in
        # results.json.
        return None

    def run_files(self):
        settings = _serving_settings(self.job.task)
        del settings["do_lower_case"], settings["max_seq_length"]  # write_run_files adds them
        # n_best_size shapes nbest_predictions.json, not the export's one answer: load_task's.
        return TASK, settings, dict(settings, n_best_size=self.job.task.n_best_size)


def run_squad(job, flags_text=None):
    """Trains and/or predicts as the config says; returns the results dict (results.json).

    Args:
      job: a SquadConfig.
      flags_text: the command line as a flagfile, saved to output_dir/run_squad.flags.
    """
    return finetuning.run_task(SquadRunner(job), job, flags_text)
