"""The fine-tuning jobs' configs (FinetuningConfig and each task's: ClassificationConfig,
TaggingConfig, SquadConfig, with their task, trainer and runtime sections) and `check_settings`,
the checks of their settings that need neither the model (its config, its weights) nor
TensorFlow.

`bert-tf-classify`, `bert-tf-tag` and `bert-tf-squad` run `check_settings` before they load
TensorFlow (5 s on 2 CPU cores), so a mistyped flag, a value out of range or a file that does not
exist is refused at once; the fine-tuning driver (bert_tf.jobs.finetuning.prepare) runs it again
for callers that build the config themselves. Nothing here imports TensorFlow or Keras, but for
remote paths (gs://...), which need its file systems.
"""

import dataclasses
import os
from typing import ClassVar

from absl import logging

from bert_tf import model_directory, run_directory
from bert_tf.data.tasks.squad import check_window_sizes
from bert_tf.jobs import flag_checks, model_files, tokenizer_setup
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.jobs.sections import Job, ModelFilesConfig, ScheduledTrainerConfig
from bert_tf.serving.task_info import (CLASSIFIER_TASKS, DEFAULT_MULTI_LABEL_THRESHOLD,
                                      is_finite_number, multi_label_threshold_problem,
                                      read_task_info)
from bert_tf.text import validate_case_matches_checkpoint


@dataclasses.dataclass
class FinetuningTask(ModelFilesConfig):
    """What every fine-tuning task is given: the encoder's files and how its inputs are cut.
    A task adds its data in a subclass (ClassificationTask, TaggingTask, SquadTask).

    See `bert-tf-classify --help` (bert_tf.cli.flags FINETUNING group) for each field.
    do_lower_case None: what --init_checkpoint records, else the tokenizer file's casing (a
    tokenizer.json records it; a vocab.txt: True). max_seq_length None: the length the run
    the model comes from records, else DEFAULT_MAX_SEQ_LENGTH (`resolve_from_run`).
    """

    DEFAULT_MAX_SEQ_LENGTH: ClassVar[int] = 128

    max_seq_length: int | None = None
    allow_untrained_head: bool = False
    trainable_encoder: bool = True
    length_buckets: str = "auto"


@dataclasses.dataclass
class FinetuningTrainerConfig(ScheduledTrainerConfig):
    """How a fine-tuning run trains: epochs over the training set, and prediction batches."""

    # None: the batch --output_dir's run records (its resume), else 32 (resolve_from_run).
    train_batch_size: int | None = None
    predict_batch_size: int = 8
    num_train_epochs: float = 3.0


@dataclasses.dataclass
class FinetuningConfig(Job):
    """What every fine-tuning run is told: its task, trainer and runtime sections
    (bert_tf.jobs.sections), the run directory, the modes and the export. A task's config is a
    subclass with its own task section (ClassificationConfig, TaggingConfig, SquadConfig).
    """

    task: FinetuningTask = dataclasses.field(default_factory=FinetuningTask)
    trainer: FinetuningTrainerConfig = dataclasses.field(
        default_factory=FinetuningTrainerConfig)
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    export_dir: str | None = None
    # A prediction replaces the files of an earlier one in output_dir (else they are kept).
    overwrite: bool = False

    # The command whose runs bert_tf_run.json names ("command"): each task's config sets it.
    COMMAND: ClassVar[str | None] = None


@dataclasses.dataclass
class ClassificationTask(FinetuningTask):
    """A classification task: the encoder's files, the data files and their columns."""

    task_name: str | None = None
    data_dir: str | None = None
    tfds_data_dir: str | None = None
    train_file: str | None = None
    dev_file: str | None = None
    test_file: str | None = None
    labels: list | None = None
    text_a_column: str | None = None
    text_b_column: str | None = None
    label_column: str | None = None
    regression: bool = False
    multi_label: bool = False
    # None: the separator the model's run recorded (resolve_from_run), else ",".
    label_separator: str | None = None
    # None: the threshold the model's run recorded (resolve_from_run), else 0.5.
    multi_label_threshold: float | None = None


@dataclasses.dataclass
class ClassificationConfig(FinetuningConfig):
    """A classification run: the fine-tuning sections with a ClassificationTask."""

    COMMAND: ClassVar[str] = "run_classifier"

    task: ClassificationTask = dataclasses.field(default_factory=ClassificationTask)


@dataclasses.dataclass
class TaggingTask(FinetuningTask):
    """A tagging task: the encoder's files, the CoNLL files and their columns."""

    data_dir: str | None = None
    train_file: str | None = None
    dev_file: str | None = None
    test_file: str | None = None
    labels: list | None = None
    token_column: int = 0
    tag_column: int = -1


@dataclasses.dataclass
class TaggingConfig(FinetuningConfig):
    """A tagging run: the fine-tuning sections with a TaggingTask."""

    COMMAND: ClassVar[str] = "run_tagging"

    task: TaggingTask = dataclasses.field(default_factory=TaggingTask)


@dataclasses.dataclass
class SquadTask(FinetuningTask):
    """The SQuAD task: the encoder's files (384 tokens) and the original's flags."""

    DEFAULT_MAX_SEQ_LENGTH: ClassVar[int] = 384

    train_file: str | None = None
    predict_file: str | None = None
    # None: the run's (resolve_from_run), else RUN_DEFAULTS'.
    doc_stride: int | None = None
    max_query_length: int | None = None
    n_best_size: int = 20
    max_answer_length: int | None = None
    version_2_with_negative: bool | None = None
    null_score_diff_threshold: float | None = None
    verbose_logging: bool = False


@dataclasses.dataclass
class SquadConfig(FinetuningConfig):
    """A SQuAD run: the fine-tuning sections with a SquadTask."""

    COMMAND: ClassVar[str] = "run_squad"

    task: SquadTask = dataclasses.field(default_factory=SquadTask)


def check_settings(job):
    """Checks the settings of a fine-tuning config (any task's) against each other and that
    the files they name exist: the model's files (--init_checkpoint, --bert_config_file,
    --vocab_file) and the data files the run's phases read by their flags. First it sets the
    settings left unset (None) that the model's run records (`resolve_from_run`): the checks
    and every later phase read one value.

    Raises:
      FlagValueError naming the flag, the value and what was expected.
    """
    task, trainer = job.task, job.trainer
    if not (job.do_train or job.do_eval or job.do_predict):
        raise FlagValueError("at least one of --do_train, --do_eval or --do_predict must be set")
    if not job.output_dir:
        raise FlagValueError("--output_dir is required")
    resolve_from_run(job, ("max_seq_length", "train_batch_size"))
    if isinstance(job, SquadConfig):
        _check_squad(job)
    if isinstance(job, ClassificationConfig) and task.multi_label:
        _check_multi_label(job)
    elif isinstance(job, ClassificationConfig) and task.label_separator not in (None, ","):
        raise FlagValueError(f"--label_separator={task.label_separator!r} goes with "
                             "--multi_label (one label per row needs no separator)")
    elif isinstance(job, ClassificationConfig) and task.multi_label_threshold is not None:
        raise FlagValueError(f"--multi_label_threshold={task.multi_label_threshold} goes with "
                             "--multi_label (a single-label classifier predicts its most "
                             "probable class, a regression a number)")
    flag_checks.require_positive(eval_batch_size=trainer.eval_batch_size,
                                 predict_batch_size=trainer.predict_batch_size)
    flag_checks.check_numeric_flags(task, trainer)
    if task.max_seq_length < 3:
        raise FlagValueError(f"--max_seq_length={task.max_seq_length} must be >= 3 ([CLS], "
                             "at least one token, [SEP])")
    if job.do_train:
        # --num_train_epochs > 0: check_numeric_flags.
        flag_checks.check_gradient_accumulation(trainer)
        if not 0.0 <= trainer.warmup_proportion <= 1.0:
            raise FlagValueError(f"--warmup_proportion={trainer.warmup_proportion} must be in "
                                 "[0, 1]")
        flag_checks.check_lr_schedule(trainer, warmup_proportion=trainer.warmup_proportion)
    flag_checks.check_export_dir(job.export_dir)
    if trainer.save_checkpoints_steps is not None:
        flag_checks.require_positive(save_checkpoints_steps=trainer.save_checkpoints_steps)
    try:
        # Released checkpoints are named for their casing; all are WordPiece (unset: True).
        validate_case_matches_checkpoint(
            True if task.do_lower_case is None else task.do_lower_case, task.init_checkpoint)
    except ValueError as e:
        raise FlagValueError(str(e)) from None
    _check_files(job)


def _check_files(job):
    """The files the flags name exist (a remote path loads TensorFlow's file systems)."""
    task = job.task
    model_files.check_init_checkpoint_exists(task.init_checkpoint)
    if task.bert_config_file:
        model_files.config_source(task)
    tokenizer_setup.check_vocab_file_exists(task.vocab_file)
    for name, path in _data_files(job):
        flag_checks.check_file(name, path)


def _data_files(job):
    """(flag name, path) of the data files the run's phases read by their flags."""
    task = job.task
    if isinstance(job, SquadConfig):
        return [("train_file", task.train_file if job.do_train else None),
                ("predict_file", task.predict_file if job.do_eval or job.do_predict else None)]
    if isinstance(job, ClassificationConfig) and task.text_a_column is None:
        # A GLUE task reads --data_dir (a .txt --test_file: checked when read).
        return []
    if isinstance(job, (ClassificationConfig, TaggingConfig)):
        return [("train_file", task.train_file if job.do_train else None),
                ("dev_file", task.dev_file if job.do_eval else None),
                ("test_file", task.test_file if job.do_predict else None)]
    return []


def _check_multi_label(job):
    """--multi_label's companions: your own data (or texts to predict, one per line), classes,
    a separator."""
    task = job.task
    if task.regression:
        raise FlagValueError("--multi_label and --regression exclude each other: multi-label "
                             "predicts label names, regression a number")
    # classifier_data.is_text_lines' rule, restated: that module loads TensorFlow.
    predicts_lines = (job.do_predict and not (job.do_train or job.do_eval)
                      and str(task.test_file or "").lower().endswith(".txt"))
    if task.text_a_column is None and not predicts_lines:
        raise FlagValueError("--multi_label reads your own data: give --text_a_column and "
                             "--label_column (GLUE tasks have one label per example)")
    threshold = task.multi_label_threshold
    problem = None if threshold is None else multi_label_threshold_problem(threshold)
    if problem:
        raise FlagValueError(f"--multi_label_threshold={problem}")
    resolve_from_run(job, ("label_separator", "multi_label_threshold"))
    if not task.label_separator:
        raise FlagValueError("--label_separator='' must be a non-empty string (e.g. ',' or "
                             "'|')")


# The task_info.json tasks of each command's runs.
_RUN_TASKS = {"run_classifier": CLASSIFIER_TASKS, "run_tagging": ("tagging",),
              "run_squad": ("squad",)}

# Settings an unset flag (None) takes from the run the model comes from:
# {setting: (the default without such a run, taken from --init_checkpoint's run by a new run
# that trains: False for what describes the data, which a new run reads afresh)}.
# --max_seq_length's default is the task's (DEFAULT_MAX_SEQ_LENGTH).
RUN_DEFAULTS = {
    "max_seq_length": (None, True),
    "label_separator": (",", False),
    "doc_stride": (128, True),
    "max_query_length": (64, True),
    "max_answer_length": (30, True),
    "version_2_with_negative": (False, False),
    "null_score_diff_threshold": (0.0, False),
    "multi_label_threshold": (DEFAULT_MULTI_LABEL_THRESHOLD, False),
    "train_batch_size": (32, False),
}
# Settings of RUN_DEFAULTS that a run's task_info.json records for the exports and
# bert_tf.load_task too: read from it first (recorded_setting).
_TASK_INFO_FIRST = ("multi_label_threshold",)
# The settings of RUN_DEFAULTS that are the trainer section's (the others are the task's).
_TRAINER_SETTINGS = ("train_batch_size",)


def _section(job, name):
    return job.trainer if name in _TRAINER_SETTINGS else job.task


def resolved_settings(job):
    """{name: value} of every RUN_DEFAULTS setting of `job` (None where it has none), e.g. for
    bert_tf.cli.flags.record_resolved once check_settings resolved them."""
    return {name: getattr(_section(job, name), name, None) for name in RUN_DEFAULTS}


def _recorded_value_ok(name, value):
    """Whether a recorded `value` of setting `name` has its flag's type (a hand-edited or
    foreign file's does not: the default is used then)."""
    if name == "label_separator":
        return isinstance(value, str) and bool(value)
    if name == "version_2_with_negative":
        return isinstance(value, bool)
    if name == "null_score_diff_threshold":
        return is_finite_number(value)
    if name == "multi_label_threshold":
        return multi_label_threshold_problem(value) is None
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def recorded_setting(job, name, from_init=True):
    """(value, file) of setting `name` as the run the model comes from records it: the first
    of --output_dir's run and (`from_init`) --init_checkpoint's (RUN/best/model-N's run too)
    that is a run of job's command, by its bert_tf_run.json settings (written when training
    starts, so an interrupted run has them), else its task_info.json (written when it ends;
    also what bert_tf.tasks saves). (None, None) when that run does not record it (a run of an
    earlier release: the defaults it ran with) or there is no such run. Files that cannot be
    read are skipped: a resume's own check reads --output_dir's and names what is wrong.

    A setting the exports and bert_tf.load_task also decide with (_TASK_INFO_FIRST) is read
    from task_info.json first, the file they read, so every reader of a run agrees; a
    task_info.json that cannot be read is then refused (FlagValueError naming it)."""
    command = job.COMMAND
    init = job.task.init_checkpoint if from_init else None
    for directory in run_directory.model_runs(job.output_dir, init):
        try:
            record = run_directory.read_record(directory)
        except run_directory.RunDirectoryError:
            record = None
        ours = record is not None and record.job == "finetuning" and record.command == command
        from_record = None
        if ours and _recorded_value_ok(name, record.settings.get(name)):
            from_record = record.settings[name], record.source
            if name not in _TASK_INFO_FIRST:
                return from_record
        try:
            info = read_task_info(directory)
        except FileNotFoundError:
            info = None
        except (OSError, ValueError) as e:
            if name in _TASK_INFO_FIRST:
                raise FlagValueError(str(e)) from None
            info = None
        if info is not None and info.task in _RUN_TASKS.get(command, ()):
            value = getattr(info, name, None)
            if _recorded_value_ok(name, value):
                return value, run_directory.path(directory, run_directory.TASK_INFO_FILE)
            ours = True
        if from_record is not None:
            return from_record
        if ours:
            return None, None
    return None, None


def resolve_from_run(job, names):
    """Sets each unset (None) setting of `names` on job.task (job.trainer: train_batch_size)
    to `recorded_setting`'s value, else RUN_DEFAULTS' (the task's DEFAULT_MAX_SEQ_LENGTH),
    logging where a recorded one came from. No TensorFlow."""
    task = job.task
    for name in names:
        section = _section(job, name)
        if getattr(section, name) is not None:
            continue
        default, from_init_when_training = RUN_DEFAULTS[name]
        value, where = recorded_setting(job, name,
                                        from_init=from_init_when_training or not job.do_train)
        if where:
            logging.info("--%s unset: %r, as %s records", name, value, where)
        elif name == "max_seq_length":
            value = (None if job.do_train else _huggingface_length(task.init_checkpoint)
                     ) or task.DEFAULT_MAX_SEQ_LENGTH
        else:
            value = default
        setattr(section, name, value)


def _huggingface_length(init_checkpoint):
    """The length a Hugging Face model given as --init_checkpoint is used at (its
    tokenizer_config.json's model_max_length, at most its positions; logged), for a run that
    evaluates or predicts with it as bert_tf.load_task and bert-tf-export do; else None."""
    if not model_directory.is_huggingface(init_checkpoint):
        return None
    length = model_directory.huggingface_max_length(init_checkpoint)
    if length is not None:
        logging.info("--max_seq_length unset: %d, as %s's model_max_length records (at most "
                     "the model's positions)", length,
                     os.path.join(init_checkpoint, "tokenizer_config.json"))
    return length


def _check_squad(job):
    """The SQuAD flags of a SquadConfig."""
    task = job.task
    resolve_from_run(job, ("doc_stride", "max_query_length", "max_answer_length",
                           "version_2_with_negative", "null_score_diff_threshold"))
    if job.do_train and not task.train_file:
        raise FlagValueError("--do_train needs --train_file")
    if (job.do_predict or job.do_eval) and not task.predict_file:
        raise FlagValueError("--do_predict and --do_eval need --predict_file")
    try:
        check_window_sizes(task.max_seq_length, task.max_query_length, task.doc_stride)
    except ValueError as e:
        raise FlagValueError(str(e)) from None
    flag_checks.require_positive(n_best_size=task.n_best_size,
                                 max_answer_length=task.max_answer_length)
