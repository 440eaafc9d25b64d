"""A pre-training job's config (PretrainingConfig: its task, trainer and runtime sections) and
`check_settings`, every check of its settings that needs neither the encoder's config nor
TensorFlow.

`bert-tf-pretrain` runs `check_settings` before it loads TensorFlow (5 s on 2 CPU cores), so a
mistyped flag, a value out of range or a path that does not exist is refused at once;
`pretrain` (bert_tf.jobs.pretraining) runs it again for callers that build the config
themselves, then checks the settings against the encoder's config. Nothing here imports
TensorFlow or Keras, but for remote paths (gs://...), which need its file systems.
"""

import dataclasses
import math

from bert_tf.config import DEFAULT_DISCRIMINATOR_WEIGHT
from bert_tf.data.patterns import expand_input_patterns
from bert_tf.data.pretraining.masking_recipe import (DEFAULT_MAX_PREDICTIONS_PER_SEQ,
                                                     MaskingSettings, ngram_mask_problem)
from bert_tf.jobs import flag_checks, model_files, tokenizer_setup
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.jobs.sections import Job, ModelFilesConfig, ScheduledTrainerConfig
from bert_tf.training.budget import parse_duration
from bert_tf.training.loop_config import check_batch_size_ramp


@dataclasses.dataclass
class PretrainingTask(MaskingSettings, ModelFilesConfig):
    """What a pre-training run trains on and for: the encoder's files, the input (TFRecords,
    raw text or a TFDS text dataset), the masking recipe (MaskingSettings') and the objectives.

    See `bert-tf-pretrain --help` (bert_tf.cli.flags) for each field. max_predictions_per_seq
    None means "not given": 20, or for packed input the records' own P / the packed-text
    default. do_lower_case None means "not given": see resolve_casing.
    """

    # Input.
    input_file: str | None = None
    eval_input_file: str | None = None
    input_text_file: str | None = None
    eval_input_text_file: str | None = None
    input_tfds: str | None = None
    tfds_data_dir: str | None = None
    tfds_split: str = "train"
    eval_tfds_split: str | None = None
    tfds_text_key: str = "text"
    tf_data_service: str | None = None
    # Objectives.
    use_next_sentence_label: bool = True
    span_boundary_objective: bool = False
    # The [CLS] bag-of-words loss's weight (BertPretrainer.bag_of_words_weight); 0: off.
    bag_of_words_weight: float = 0.0
    full_sentences: bool = False
    objective: str = "mlm"
    generator_hidden_size: int | None = None
    discriminator_weight: float = DEFAULT_DISCRIMINATOR_WEIGHT
    # The masking rate's end (a schedule from masked_lm_prob); raw text only.
    masked_lm_prob_end: float | None = None


@dataclasses.dataclass
class PretrainingTrainerConfig(ScheduledTrainerConfig):
    """How a pre-training run trains: to a step count or a wall-clock budget.

    time_budget: a duration ("45m") that replaces num_train_steps; warmup_proportion is then
    the warmup's share of it (None: 0.1).
    batch_size_ramp: the share of training over which the batch grows from train_batch_size
    to gradient_accumulation_steps x train_batch_size (TrainLoopConfig.batch_size_ramp).
    """

    warmup_proportion: float | None = None
    save_checkpoints_steps: int = 1000
    num_train_steps: int = 100000
    num_warmup_steps: int = 10000
    time_budget: str | None = None
    max_eval_steps: int = 100
    batch_size_ramp: float | None = None


@dataclasses.dataclass
class PretrainingConfig(Job):
    """Everything a pre-training run is told: its task, trainer and runtime sections
    (bert_tf.jobs.sections), the run directory and the modes."""

    task: PretrainingTask = dataclasses.field(default_factory=PretrainingTask)
    trainer: PretrainingTrainerConfig = dataclasses.field(
        default_factory=PretrainingTrainerConfig)
    do_train: bool = False
    do_eval: bool = False


# What --objective trains: the masked LM (and the heads the other flags add), or ELECTRA's
# replaced-token detection (bert_tf.modeling.electra).
OBJECTIVES = ["mlm", "electra"]


def check_settings(job):
    """Checks the settings of a PretrainingConfig against each other and the files they name,
    without the encoder's config (bert_tf.jobs.pretraining.validate_options checks against it).

    The config source (--bert_config_file, else --init_checkpoint) is checked first, the other
    files last: --vocab_file and the files of the input flags each phase reads
    must exist.

    Raises:
      FlagValueError naming the flag, the value and what was expected.
    """
    task, trainer = job.task, job.trainer
    model_files.config_source(task)
    if not job.do_train and not job.do_eval:
        raise FlagValueError("at least one of --do_train or --do_eval must be set")
    flag_checks.check_numeric_flags(task, trainer)
    if sum(bool(v) for v in (task.input_file, task.input_text_file, task.input_tfds)) != 1:
        raise FlagValueError("give exactly one of --input_file (TFRecords), --input_text_file "
                             "(raw text masked on the fly) or --input_tfds (a prepared TFDS "
                             "text dataset, masked on the fly)")
    if task.eval_tfds_split and not task.input_tfds:
        raise FlagValueError("--eval_tfds_split is a split of --input_tfds, which is not set")
    text_inputs = {"input_text_file": task.input_text_file,
                   "eval_input_text_file": task.eval_input_text_file,
                   "input_tfds": task.input_tfds}
    for name, value in text_inputs.items():
        if value and not task.vocab_file:
            raise FlagValueError(f"--{name} needs --vocab_file")
    if task.eval_input_file and task.eval_input_text_file:
        raise FlagValueError("give at most one of --eval_input_file or --eval_input_text_file")
    _check_masking_schedule(task)
    if not 0 < max_predictions(task) <= task.max_seq_length:
        raise FlagValueError(f"--max_predictions_per_seq={max_predictions(task)} must "
                             f"be in [1, --max_seq_length={task.max_seq_length}]")
    flag_checks.require_positive(
        train_batch_size=trainer.train_batch_size, eval_batch_size=trainer.eval_batch_size,
        num_train_steps=trainer.num_train_steps,
        save_checkpoints_steps=trainer.save_checkpoints_steps,
        steps_per_loop=trainer.steps_per_loop, max_eval_steps=trainer.max_eval_steps)
    if trainer.time_budget is not None:
        _check_time_budget(trainer)
    else:
        if trainer.warmup_proportion is not None:
            raise FlagValueError(f"--warmup_proportion={trainer.warmup_proportion} is the "
                                 "warmup's share of --time_budget; a run of --num_train_steps "
                                 "warms up for --num_warmup_steps")
        if not 0 <= trainer.num_warmup_steps <= trainer.num_train_steps:
            raise FlagValueError(f"--num_warmup_steps={trainer.num_warmup_steps} must be in "
                                 f"[0, --num_train_steps={trainer.num_train_steps}]")
        flag_checks.check_lr_schedule(trainer, num_warmup_steps=trainer.num_warmup_steps,
                                      num_train_steps=trainer.num_train_steps)
    _check_objective_flags(task)
    _check_family_options(task)
    flag_checks.check_gradient_accumulation(trainer)
    if trainer.batch_size_ramp is not None:
        try:
            check_batch_size_ramp(trainer.batch_size_ramp, trainer.gradient_accumulation_steps)
        except ValueError as e:
            raise FlagValueError(str(e)) from None
    service = task.tf_data_service
    if service is not None:
        host, _, port = service[len("grpc://"):].rpartition(":")
        if not service.startswith("grpc://") or not host or not port.isdigit():
            raise FlagValueError(f"--tf_data_service={service} must look like "
                                 "grpc://HOST:PORT (the dispatcher's address)")
    _check_files(job)


def _check_files(job):
    """--vocab_file and the input files each phase reads exist (a remote path loads
    TensorFlow's file systems)."""
    task = job.task
    tokenizer_setup.check_vocab_file_exists(task.vocab_file)
    phases = [True] if job.do_train else []
    phases += [False] if job.do_eval else []
    for is_training in phases:
        name, patterns = input_flags(task, is_training)
        if name == "input_tfds":
            continue
        try:
            expand_input_patterns(patterns)
        except ValueError as e:
            raise FlagValueError(f"--{name}={patterns}: {e}") from None


def _check_objective_flags(task):
    """--objective against the other objectives' flags (the generator's size against the
    encoder's config: bert_tf.jobs.pretraining)."""
    if task.objective != "electra":
        electra_settings = (
            ("generator_hidden_size", task.generator_hidden_size, None),
            ("discriminator_weight", task.discriminator_weight, DEFAULT_DISCRIMINATOR_WEIGHT))
        for name, value, unset in electra_settings:
            if value != unset:
                raise FlagValueError(f"--{name} sets ELECTRA's replaced-token detection: it "
                                     "needs --objective=electra")
        return
    for name, value, adds in _not_with_electra(task):
        if value:
            fix = (f"pass --{name}=false" if name == "use_next_sentence_label"
                   else f"leave --{name} out")
            raise FlagValueError(f"--objective=electra trains replaced-token detection only: "
                                 f"--{name} adds {adds}; {fix}")
    weight = task.discriminator_weight
    if not (math.isfinite(weight) and weight > 0):
        raise FlagValueError(f"--discriminator_weight={weight} must be > 0 and finite")


def _not_with_electra(task):
    """(flag name, value, what it adds) of the task's flags that set an objective ELECTRA's
    does not train, refused with --objective=electra when set."""
    return (("sentence_order_prediction", task.sentence_order_prediction,
             "a sentence-pair head"),
            ("span_boundary_objective", task.span_boundary_objective,
             "a span-boundary head"),
            ("do_span_mask", task.do_span_mask,
             "span masking for the span-boundary objective"),
            ("use_next_sentence_label", task.use_next_sentence_label, "a sentence-pair head"),
            ("bag_of_words_weight", task.bag_of_words_weight, "a [CLS] bag-of-words loss"))


def _check_masking_schedule(task):
    """--masked_lm_prob_end: a rate, and input masked on the fly in this process."""
    end = task.masked_lm_prob_end
    if end is None:
        return
    if not 0.0 < end <= 1.0:
        raise FlagValueError(f"--masked_lm_prob_end={end} must be in (0, 1]")
    if task.input_file:
        raise FlagValueError(f"--masked_lm_prob_end={end} schedules the masking of raw text "
                             f"(--input_text_file, --input_tfds); --input_file={task.input_file}"
                             " holds records masked when they were made")
    if task.tf_data_service:
        raise FlagValueError(f"--masked_lm_prob_end={end} needs the input masked in the "
                             "training process, which sets the rate as it trains; "
                             f"--tf_data_service={task.tf_data_service} masks it elsewhere")


def max_predictions(task):
    """P of unpacked input: max_predictions_per_seq, or its default when not given."""
    value = task.max_predictions_per_seq
    return DEFAULT_MAX_PREDICTIONS_PER_SEQ if value is None else value


def time_budget_seconds(trainer):
    """--time_budget of the trainer section in seconds, or None for a run of
    --num_train_steps."""
    if trainer.time_budget is None:
        return None
    try:
        return parse_duration(trainer.time_budget)
    except ValueError as e:
        raise FlagValueError(str(e)) from None


def budget_warmup_proportion(trainer):
    """The warmup's share of --time_budget: --warmup_proportion, 0.1 when not given."""
    return 0.1 if trainer.warmup_proportion is None else trainer.warmup_proportion


def _check_time_budget(trainer):
    time_budget_seconds(trainer)
    warmup = budget_warmup_proportion(trainer)
    if not 0.0 <= warmup < 1.0:
        raise FlagValueError(f"--warmup_proportion={warmup} must be in [0, 1) (the warmup's "
                             "share of --time_budget)")
    if trainer.lr_schedule == "wsd" and not 0.0 < trainer.decay_proportion <= 1.0 - warmup:
        raise FlagValueError(f"--decay_proportion={trainer.decay_proportion} must be in (0, "
                             f"{1.0 - warmup:g}] (the final decay's share of --time_budget, "
                             f"after --warmup_proportion={warmup})")


def _check_family_options(task):
    """The BERT-family flags against the input and each other."""
    text_input = reads_text(task)
    if task.sentence_order_prediction and not task.use_next_sentence_label:
        raise FlagValueError("--sentence_order_prediction trains the pair head: it needs "
                             "--use_next_sentence_label=true")
    problem = ngram_mask_problem(task.ngram_mask, task.do_span_mask)
    if problem:
        raise FlagValueError(problem)
    for name, value in (("do_span_mask", task.do_span_mask), ("ngram_mask", task.ngram_mask),
                        ("full_sentences", task.full_sentences)):
        if value and not text_input:
            raise FlagValueError(f"--{name} masks or packs raw text: it needs --input_text_file, "
                                 "--eval_input_text_file or --input_tfds (TFRecords are made "
                                 "that way by "
                                 "create_pretraining_data)")
    if task.full_sentences and task.use_next_sentence_label:
        raise FlagValueError("--full_sentences packs single sequences: it needs "
                             "--use_next_sentence_label=false")
    pack, instances = task.pack_sequences, task.max_instances_per_row
    if instances and not pack:
        raise FlagValueError("--max_instances_per_row sets packed rows of raw text: it needs "
                             "--pack_sequences")
    if pack and task.full_sentences:
        raise FlagValueError("--pack_sequences packs sentence-pair instances: it cannot be "
                             "combined with --full_sentences (already full rows)")
    if instances < 0:
        raise FlagValueError(f"--max_instances_per_row={instances} must "
                             "be >= 0 (0 = the default)")
    if task.span_boundary_objective and text_input and not task.do_span_mask:
        raise FlagValueError("--span_boundary_objective needs span boundaries: add "
                             "--do_span_mask for raw text input")
    weight = task.bag_of_words_weight
    if not (math.isfinite(weight) and weight >= 0):
        raise FlagValueError(f"--bag_of_words_weight={weight} must be >= 0 and finite "
                             "(0: off)")
    if weight and pack:
        raise FlagValueError("--bag_of_words_weight trains one [CLS] per row: it cannot be "
                             "combined with --pack_sequences (several instances per row)")


def input_flags(task, is_training):
    """(flag name, value) of the input a phase reads; eval falls back to the training input."""
    if not is_training:
        if task.eval_input_file:
            return "eval_input_file", task.eval_input_file
        if task.eval_input_text_file:
            return "eval_input_text_file", task.eval_input_text_file
        if task.input_tfds and task.eval_tfds_split:
            return "input_tfds", f"{task.input_tfds}:{task.eval_tfds_split}"
    if task.input_file:
        return "input_file", task.input_file
    if task.input_tfds:
        return "input_tfds", f"{task.input_tfds}:{task.tfds_split}"
    return "input_text_file", task.input_text_file


def reads_text(task):
    """True when a phase masks raw text on the fly (a text file or a TFDS dataset)."""
    return bool(task.input_text_file or task.eval_input_text_file or task.input_tfds)
