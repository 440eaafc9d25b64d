"""bert-tf-embed's config (EmbeddingConfig: its task, trainer and runtime sections) and
`check_settings`, the checks of its settings that need neither the model nor TensorFlow.

The command runs `check_settings` before it loads TensorFlow (5 s on 2 CPU cores), so a mistyped
flag or a file that does not exist is refused at once; the job (bert_tf.jobs.embedding) runs it
again for callers that build the config themselves, with the checks that need Keras (--pooling)
after it.

    job = EmbeddingConfig(
        task=EmbeddingTask(init_checkpoint="all-MiniLM-L6-v2", train_file="pairs.tsv"),
        trainer=EmbeddingTrainerConfig(num_train_epochs=2), output_dir="runs/search")
"""

import dataclasses
import math
import os

from bert_tf.config import check_pooling_modes
from bert_tf.jobs import flag_checks, model_files, tokenizer_setup
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.jobs.sections import Job, TrainerConfig

# What --output_file of an encoding run may be.
OUTPUT_EXTENSIONS = (".npy", ".jsonl")


@dataclasses.dataclass
class EmbeddingTask:
    """What bert-tf-embed computes: the model, the pairs it trains on, the texts it encodes.

    See `bert-tf-embed --help` (bert_tf.cli.flags EMBED group) for each field. The model
    settings left None (do_lower_case, max_seq_length) come from --init_checkpoint; pooling
    and normalize apply to an encoder checkpoint (None: mean, true). A sentence-transformers
    directory or an embedding run carries its own, which a value given must equal.
    """

    # The model.
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    max_seq_length: int | None = None
    pooling: list | None = None
    normalize: bool | None = None
    # Training pairs and the loss.
    train_file: str | None = None
    dev_file: str | None = None
    dev_scored_file: str | None = None
    scale: float = 20.0
    symmetric_loss: bool = False
    length_buckets: str = "auto"
    # Encoding.
    input_file: str | None = None
    output_file: str | None = None
    batch_size: int = 64
    # The files' columns (None: the names bert_tf.data.tasks.pairs knows).
    text_a_column: str | None = None
    text_b_column: str | None = None
    label_column: str | None = None
    negative_column: str | None = None


@dataclasses.dataclass
class EmbeddingTrainerConfig(TrainerConfig):
    """How contrastive training runs: epochs over the pairs (bert_tf.training.contrastive)."""

    learning_rate: float = 2e-5
    num_train_epochs: float = 1.0


@dataclasses.dataclass
class EmbeddingConfig(Job):
    """What bert-tf-embed is told: its task, trainer and runtime sections
    (bert_tf.jobs.sections), the run directory and the sentence-transformers directory it
    writes."""

    task: EmbeddingTask = dataclasses.field(default_factory=EmbeddingTask)
    trainer: EmbeddingTrainerConfig = dataclasses.field(default_factory=EmbeddingTrainerConfig)
    sentence_transformers_dir: str | None = None


def check_settings(job):
    """Checks an EmbeddingConfig's settings against each other and that the local files it
    reads exist: exactly one mode (--train_file or --input_file), that mode's settings and
    files, then --init_checkpoint and --vocab_file.

    Raises:
      FlagValueError naming the flag, the value and what was expected.
    """
    task = job.task
    if task.train_file and task.input_file:
        raise FlagValueError("give --train_file (fine-tune) or --input_file (encode), not both")
    if not (task.train_file or task.input_file):
        raise FlagValueError("give --train_file (fine-tune) or --input_file (encode)")
    if task.train_file:
        check_training(job)
    else:
        check_encoding(task)
    model_files.check_init_checkpoint_exists(task.init_checkpoint)
    tokenizer_setup.check_vocab_file_exists(task.vocab_file)


def check_encoding(task):
    """The encoding settings of the task section: --output_file, --batch_size, --pooling,
    --input_file (what encode checks; the mode is the caller's)."""
    if not task.output_file:
        raise FlagValueError("--output_file is required with --input_file")
    if os.path.splitext(task.output_file)[1].lower() not in OUTPUT_EXTENSIONS:
        raise FlagValueError(f"--output_file={task.output_file}: expected a .npy or .jsonl "
                             "file")
    if task.batch_size < 1:
        raise FlagValueError(f"--batch_size={task.batch_size} must be >= 1")
    _check_pooling(task)
    flag_checks.check_file("input_file", task.input_file)


def check_training(job):
    """The training settings of the job's sections, --output_dir and the pair files (what
    train checks; the mode is the caller's). Raises FlagValueError."""
    task, trainer = job.task, job.trainer
    if not job.output_dir:
        raise FlagValueError("--output_dir is required with --train_file")
    if trainer.train_batch_size < 2:
        raise FlagValueError(f"--train_batch_size={trainer.train_batch_size}: in-batch "
                             "negatives need at least 2 rows per batch")
    flag_checks.check_numeric_flags(task, trainer)
    if not task.scale > 0 or not math.isfinite(task.scale):
        raise FlagValueError(f"--scale={task.scale} must be > 0 and finite")
    if trainer.save_checkpoints_steps is not None:
        flag_checks.require_positive(save_checkpoints_steps=trainer.save_checkpoints_steps)
    _check_pooling(task)
    for flag in ("train_file", "dev_file", "dev_scored_file"):
        flag_checks.check_file(flag, getattr(task, flag))


def _check_pooling(task):
    if task.pooling is None:
        return
    try:
        check_pooling_modes(task.pooling, "--pooling")
    except ValueError as e:
        raise FlagValueError(str(e)) from None
