"""The set-up every training job does before its work: checks, strategy, model files.

The functions take a job's config (bert_tf.jobs.pretraining.PretrainingConfig,
bert_tf.jobs.finetuning.FinetuningConfig, or any object with the same attribute names); the
field names are the command-line flag names, so errors name the flag at fault.
"""

import dataclasses
import math
import os

import keras
import tensorflow as tf
from absl import logging

from bert_tf import file_names, fileio, model_directory, optional
from bert_tf.config import BertConfig
from bert_tf.text import tokenizer_files
from bert_tf.training import runtime
from bert_tf.training.distribute import StrategyError, get_strategy
from bert_tf.training.loop_config import check_gradient_accumulation_steps

# tf.distribute's settings: a JAX run uses every device of its processes instead.
_STRATEGY_DEFAULTS = {"distribution_strategy": "one_device", "num_gpus": 0, "tpu": None,
                      "use_tpu": False, "tpu_name": None}
_JAX_PROCESS_FLAGS = ("coordinator_address", "num_processes", "process_id")


class FlagValueError(ValueError):
    """A setting (flag) value that cannot work, with the flag named."""


@dataclasses.dataclass
class RuntimeConfig:
    """Devices, distribution, precision, compilation and the loop: what every training job has.

    Field names and defaults are the flags' (bert_tf.cli.flags RUNTIME group).
    """

    distribution_strategy: str = "one_device"
    num_gpus: int = 0
    tpu: str | None = None
    use_tpu: bool = False
    tpu_name: str | None = None
    dtype: str = "float32"
    jit_compile: bool | str = "auto"
    gradient_accumulation_steps: int = 1
    seed: int | None = None
    steps_per_loop: int = 100
    iterations_per_loop: int | None = None
    log_steps: int | None = None
    # The Keras backend the job runs on (None: the one Keras runs on), and a JAX run's
    # processes (jax.distributed).
    backend: str | None = None
    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None


def check_lr_schedule(options, *, warmup_proportion=None, num_warmup_steps=None,
                      num_train_steps=None):
    """--lr_schedule=wsd: --decay_proportion in (0, 1], and a warmup that leaves steps to decay:
    fine-tuning's `warmup_proportion` below 1, pre-training's `num_warmup_steps` below
    `num_train_steps` (a job passes the warmup it has). Raises FlagValueError."""
    if options.lr_schedule != "wsd":
        return
    proportion = options.decay_proportion
    if not 0.0 < proportion <= 1.0:
        raise FlagValueError(f"--decay_proportion={proportion} must be in (0, 1] "
                             "(the fraction of the training steps the final decay takes)")
    if warmup_proportion is not None and warmup_proportion >= 1.0:
        raise FlagValueError(f"--lr_schedule=wsd decays after warmup: --warmup_proportion="
                             f"{warmup_proportion} leaves it no step")
    if num_warmup_steps is not None and num_warmup_steps >= num_train_steps:
        raise FlagValueError(f"--lr_schedule=wsd decays after warmup: --num_warmup_steps="
                             f"{num_warmup_steps} leaves no step of --num_train_steps="
                             f"{num_train_steps} for it")


def check_export_dir(options):
    """--export_dir must be a new or empty version directory (checked before any training; the
    command checks it holds no input and can be written: bert_tf.cli.outputs)."""
    export_dir = options.export_dir
    if not export_dir:
        return
    # The export comes after training: a file in the way must fail now, not then.
    path = export_dir.rstrip("/") or export_dir
    if "://" not in path and os.path.islink(path) and not os.path.exists(path):
        raise FlagValueError(f"--export_dir={export_dir} is a symbolic link to nothing (a "
                             f"missing target or a loop: {os.readlink(path)}); expected a new or "
                             "empty version directory")
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        raise FlagValueError(f"--export_dir={export_dir} is a file; expected a new or empty "
                             "version directory, e.g. EXPORT/1")
    parent = os.path.dirname(path)
    while "://" not in path and parent and parent != path:
        if os.path.exists(parent) and not os.path.isdir(parent):
            raise FlagValueError(f"--export_dir={export_dir} cannot be created: {parent} is a "
                                 "file")
        path, parent = parent, os.path.dirname(parent)
    if tf.io.gfile.exists(export_dir) and tf.io.gfile.listdir(export_dir):
        raise FlagValueError(f"--export_dir={export_dir} exists and is not empty; choose a new "
                             "version directory")


def check_backend(options, tensorflow_only=()):
    """--backend is one bert_tf runs on, the one Keras runs on, and no flag of the other
    backend is set; raises FlagValueError naming it.

    Args:
      options: a config with `backend`, the runtime flags and the JAX process flags.
      tensorflow_only: {flag name: why it needs TensorFlow} of the job's own flags that a
        JAX run cannot honour.
    """
    try:
        backend = runtime.resolve_backend(options)
    except ValueError as e:
        raise FlagValueError(str(e)) from None
    if backend == "jax":
        for name, default in _STRATEGY_DEFAULTS.items():
            if getattr(options, name) != default:
                raise FlagValueError(
                    f"--{name}={getattr(options, name)} is a tf.distribute setting, which a "
                    "--backend=jax run does not read: it trains on every local device and "
                    "joins other hosts through --coordinator_address (docs/scaling.md)")
        for name, why in dict(tensorflow_only).items():
            if getattr(options, name):
                raise FlagValueError(f"--{name} has no meaning with --backend=jax ({why})")
        if options.dtype == "mixed_float16":
            raise FlagValueError("--dtype=mixed_float16 needs loss scaling, which the JAX "
                                 "runner does not do: use --dtype=mixed_bfloat16 (or auto)")
    else:
        for name in _JAX_PROCESS_FLAGS:
            if getattr(options, name) is not None:
                raise FlagValueError(
                    f"--{name} joins JAX processes (--backend=jax); TensorFlow's workers "
                    "find each other through TF_CONFIG (docs/scaling.md)")


def make_runtime(options, batch_size_flags=(), trains=True, varying_shapes=False):
    """The job's Runtime (training.runtime): the tf.distribute strategy the flags ask for
    (make_strategy), or JAX over every device of the run's processes; then the seed and the
    dtype policy. Call before any other TensorFlow work (multi-worker collectives configure
    at start-up). A JAX job that `trains` needs Orbax (its checkpoints), refused in one line
    naming the extra to install when it is missing. `varying_shapes`: the training batches
    change shape from step to step (length buckets), which the dtype and XLA choices weigh.

    Raises:
      FlagValueError: a global batch that does not divide over the replicas or devices.
    """
    try:
        if trains and runtime.resolve_backend(options) == "jax":
            optional.require("orbax.checkpoint")
        job_runtime = runtime.create(options, lambda: make_strategy(options, batch_size_flags))
        for name in batch_size_flags:
            job_runtime.check_global_batch(getattr(options, name), f"--{name}")
    except (ValueError, ImportError) as e:
        raise FlagValueError(str(e)) from None
    if options.seed is not None:
        keras.utils.set_random_seed(options.seed)
    job_runtime.set_precision(options.dtype, varying_shapes=varying_shapes)
    return job_runtime


def make_strategy(options, batch_size_flags=()):
    """The strategy the flags ask for; checks that global batch sizes split over replicas.

    Call before any other TensorFlow work (multi-worker collectives configure at start-up).
    """
    distribution = "tpu" if options.use_tpu else options.distribution_strategy
    try:
        strategy = get_strategy(distribution, num_gpus=options.num_gpus,
                                tpu=options.tpu or options.tpu_name)
    except StrategyError as e:
        raise FlagValueError(str(e)) from None
    replicas = strategy.num_replicas_in_sync
    for name in batch_size_flags:
        value = getattr(options, name)
        if value < 1:
            raise FlagValueError(f"--{name}={value} must be >= 1")
        if value % replicas:
            raise FlagValueError(f"--{name}={value} is not divisible by the {replicas} replicas "
                                 f"of --distribution_strategy={distribution}")
    return strategy


# Float flags and the range each must lie in: (low, high, low inclusive); None is no bound.
# A NaN or Inf here trained (or poisoned checkpoints) before anything said so.
_FLOAT_FLAG_RANGES = {
    "learning_rate": (0.0, None, True),
    "weight_decay_rate": (0.0, None, True),
    "masked_lm_prob": (0.0, 1.0, False),
    "num_train_epochs": (0.0, None, False),
    "warmup_proportion": (0.0, 1.0, True),
    "null_score_diff_threshold": (None, None, True),
}


def check_numeric_flags(options):
    """Refuses a NaN, Inf or out-of-range value of any float flag `options` has (a job's config,
    or any object with its attribute names).

    Raises:
      FlagValueError naming the flag, its value and the range expected.
    """
    for name, (low, high, low_inclusive) in _FLOAT_FLAG_RANGES.items():
        value = getattr(options, name, None)  # None: a flag this job does not have, or unset
        if value is None:
            continue
        below = low is not None and (value < low if low_inclusive else value <= low)
        if not math.isfinite(value) or below or (high is not None and value > high):
            if low is None:
                expected = "a finite number"
            else:
                bracket = "[" if low_inclusive else "("
                expected = (f"in {bracket}{low:g}, {high:g}]" if high is not None
                            else f"{'>=' if low_inclusive else '>'} {low:g} and finite")
            raise FlagValueError(f"--{name}={value} must be {expected}")


def effective_train_batch_size(options):
    """Examples per optimizer step: --train_batch_size x --gradient_accumulation_steps.

    Training steps, warmup and epochs count optimizer steps, so the fine-tuning CLIs derive
    them from this rather than from --train_batch_size.
    """
    try:
        check_gradient_accumulation_steps(options.gradient_accumulation_steps)
    except ValueError as e:
        raise FlagValueError(str(e)) from None
    return options.train_batch_size * options.gradient_accumulation_steps


def steps_per_loop(options):
    return options.iterations_per_loop or options.steps_per_loop


def resolve_model_files(options):
    """(config source, tokenizer file) from the flags, else from --init_checkpoint.

    A bert_tf run directory (run_pretraining or convert_checkpoint output) and a Hugging Face
    directory carry their vocabulary (vocab.txt, or a tokenizer.json: ModernBERT's byte-level
    BPE has no vocab.txt), a keras-hub preset its tokenizer asset; an original TF1 checkpoint
    keeps bert_config.json and vocab.txt next to bert_model.ckpt. Without bert_config.json the
    config source is the checkpoint itself (a Hugging Face config.json, a keras-hub preset, a
    .keras file), read by read_model_config. Explicit flags win; --vocab_file may name a
    vocab.txt, a tokenizer.json or a directory holding one (see
    tokenizer_files.model_tokenizer_file for which one a directory gives).

    Raises:
      FlagValueError when a needed file is neither given nor found.
    """
    source = options.init_checkpoint
    check_init_checkpoint_exists(source)
    config_file, vocab_file = config_source(options), options.vocab_file
    directory = None
    if source:
        directory = source if fileio.isdir(source) else os.path.dirname(source)
    if not options.bert_config_file and directory:
        candidate = file_names.path(directory, file_names.CONFIG_FILE)
        if tf.io.gfile.exists(candidate):
            config_file = candidate
    if vocab_file and fileio.isdir(vocab_file):
        vocab_file = tokenizer_files.model_tokenizer_file(vocab_file)
        if not vocab_file:
            raise FlagValueError(f"--vocab_file={options.vocab_file} is a directory holding "
                                 "neither vocab.txt nor tokenizer.json")
    # Looked up once: the lookup logs which file it picked.
    checkpoint_vocab = tokenizer_files.model_tokenizer_file(directory) if directory else None
    vocab_file = vocab_file or checkpoint_vocab
    if not vocab_file:
        raise FlagValueError(f"--vocab_file is required (no vocab.txt or tokenizer.json beside "
                             f"--init_checkpoint={source})")
    if options.vocab_file and checkpoint_vocab:
        check_tokenizer_matches(options.vocab_file, vocab_file, checkpoint_vocab,
                                f"--init_checkpoint={source}")
    return config_file, vocab_file


def check_tokenizer_matches(flag_value, vocab_file, model_vocab, model_flag):
    """A --vocab_file given for a model that carries its own tokenizer file must tokenize as
    that one does (tokenizer_files.tokenizer_difference): the model's embeddings are indexed by
    it.

    Args:
      flag_value: --vocab_file as given; vocab_file: the file it resolved to.
      model_vocab: the tokenizer file beside the model.
      model_flag: "--init_checkpoint=DIR" or "--model_dir=DIR", named in the message.

    Raises:
      FlagValueError naming both files and the first difference.
    """
    if fileio.abspath(model_vocab) == fileio.abspath(vocab_file):
        return
    try:
        problem = tokenizer_files.tokenizer_difference(model_vocab, vocab_file)
    except (OSError, ValueError) as e:
        raise FlagValueError(f"--vocab_file={vocab_file}: {e}") from None
    if problem:
        raise FlagValueError(
            f"--vocab_file={flag_value} differs from {model_vocab} beside {model_flag}: "
            f"{problem}; the model's embeddings are indexed by that vocabulary (leave "
            "--vocab_file out to use it)")


def check_vocab_file_beside(vocab_file, model, model_flag="--init_checkpoint"):
    """A --vocab_file given with a model (a directory, checkpoint prefix or model file) that
    has a tokenizer file beside it must tokenize as that one does (check_tokenizer_matches);
    nothing to check when either is missing.

    Raises:
      FlagValueError naming both files and the first difference.
    """
    if not vocab_file or not model:
        return
    directory = model if fileio.isdir(model) else os.path.dirname(model)
    if not directory or not fileio.isdir(directory):
        return
    model_vocab = tokenizer_files.model_tokenizer_file(directory)
    if not model_vocab:
        return
    resolved = (tokenizer_files.model_tokenizer_file(vocab_file) if fileio.isdir(vocab_file)
                else vocab_file)
    if resolved:
        check_tokenizer_matches(vocab_file, resolved, model_vocab, f"{model_flag}={model}")


def load_tokenizer(vocab_file, options):
    """The tokenizer of a resolved tokenizer file, with --do_lower_case checked against it.

    A vocab.txt tokenizes as --do_lower_case says (unset: True, the original's default). A
    tokenizer.json records its own casing: unset takes it, a contradicting value is an error.

    Returns:
      (WordpieceTokenizer or BpeTokenizer, the casing in force: bool).

    Raises:
      FlagValueError naming --vocab_file (and --do_lower_case when they disagree).
    """
    try:
        # A tokenizer.json is read as it is, its casing compared below to name both flags.
        tokenizer = tokenizer_files.load_tokenizer(vocab_file, tokenizer_files.casing_to_load(
            vocab_file, vocab_txt_casing=options.do_lower_case))
    except (OSError, ValueError) as e:
        raise FlagValueError(f"--vocab_file={vocab_file}: {e}") from None
    casing = tokenizer.do_lower_case
    missing = tokenizer_files.missing_roles(tokenizer)
    if missing:
        raise FlagValueError(f"--vocab_file={vocab_file} has no {'/'.join(missing)} token "
                             "(inputs are packed as [CLS] text [SEP] and padded)")
    # A vocab.txt tokenizes as --do_lower_case says: only a tokenizer.json can disagree.
    if options.do_lower_case is not None and bool(options.do_lower_case) != casing:
        raise FlagValueError(
            f"--do_lower_case={bool(options.do_lower_case)} contradicts --vocab_file="
            f"{vocab_file}, which {'lower-cases' if casing else 'keeps case'} (a tokenizer.json "
            "records its casing); leave --do_lower_case out to use the file's")
    return tokenizer, bool(casing)


def check_init_checkpoint_exists(path):
    """A missing --init_checkpoint is named as such (not as a missing file expected beside it).

    A checkpoint prefix (.../bert_model.ckpt, .../ckpt-7) exists through its .index file.

    Raises:
      FlagValueError.
    """
    if path and not (fileio.exists(path) or fileio.exists(path + ".index")):
        raise FlagValueError(f"--init_checkpoint={path} does not exist (expected a run "
                             "directory, a .keras file, a checkpoint prefix with its .index "
                             "file, or a Hugging Face or keras-hub directory)")


def config_source(options):
    """--bert_config_file, else the --init_checkpoint whose configuration to use.

    Raises:
      FlagValueError when neither is given.
    """
    if options.bert_config_file:
        problem = fileio.not_a_file(options.bert_config_file,
                                    f"--bert_config_file={options.bert_config_file}")
        if problem:
            raise FlagValueError(problem + (" (a model directory goes to --init_checkpoint)"
                                            if fileio.isdir(options.bert_config_file) else ""))
        return options.bert_config_file
    if options.init_checkpoint:
        return options.init_checkpoint
    raise FlagValueError("--bert_config_file is required (or an --init_checkpoint that records "
                         "its configuration)")


def read_model_config(source):
    """The BertConfig of a bert_config.json, or of a checkpoint that records one.

    Args:
      source: a bert_config.json, or an --init_checkpoint (Hugging Face directory, keras-hub
        preset, .keras file, TF1 / bert_tf checkpoint with bert_config.json beside it).

    Raises:
      FlagValueError when `source` is a checkpoint that does not say its configuration.
    """
    extension = os.path.splitext(source)[1]
    is_config_file = (tf.io.gfile.exists(source) and not fileio.isdir(source)
                      and extension not in (".keras", ".h5")
                      and os.path.basename(source) not in model_directory.HF_WEIGHT_FILES)
    if (extension == ".json" and os.path.basename(source) not in model_directory.HF_WEIGHT_FILES
            or is_config_file):
        return BertConfig.from_json_file(source)
    from bert_tf import interop  # Checkpoint formats are only needed on this path.
    config = interop.checkpoint_config(source)
    if config is None:
        raise FlagValueError(f"--bert_config_file is required: --init_checkpoint={source} has "
                             "no bert_config.json beside it")
    logging.info("Model configuration from --init_checkpoint=%s", source)
    return config


def load_config(config_file, options):
    """Reads the config (see read_model_config) and checks --max_seq_length against it."""
    config = read_model_config(config_file)
    if options.max_seq_length > config.max_position_embeddings:
        raise FlagValueError(
            f"--max_seq_length={options.max_seq_length} exceeds max_position_embeddings="
            f"{config.max_position_embeddings} in {config_file}")
    return config


def resolve_length_buckets(options, config, job_runtime=None, training=True):
    """The bucket lengths of --length_buckets for --max_seq_length and the model; None: off.

    "auto" gives coarse buckets for training batches (16, 32, 48, 64, 96, ...: a batch holds
    one bucket, and a wide bucket keeps texts of different lengths mixed) and fine ones for
    evaluation and prediction (4, 8, 12, 16, 24, ..., 64, 80, ...: length-sorted batches,
    which do not change any result). On TPUs "auto" is off: the training loop runs many steps
    in one compiled program, which needs one static shape (an explicit list is taken as given
    for both).

    Raises:
      FlagValueError naming the flag: a list that is not strictly increasing, exceeds the
      model's max_position_embeddings, or starts above --max_seq_length.
    """
    from bert_tf.data.tasks import length_buckets

    value = options.length_buckets
    if (job_runtime is not None and isinstance(value, str) and value.strip().lower() == "auto"
            and job_runtime.needs_static_shapes()):
        logging.info("--length_buckets=auto is off on TPUs (one static shape per program)")
        return None
    # Where each length compiles anew (JAX), evaluation takes training's few lengths too.
    coarse = training or bool(job_runtime is not None and job_runtime.compiles_each_shape)
    try:
        buckets = length_buckets.parse_buckets(value, options.max_seq_length,
                                               config.max_position_embeddings, coarse=coarse)
    except length_buckets.BucketError as e:
        raise FlagValueError(str(e)) from None
    if buckets and job_runtime is not None:
        logging.info("Length buckets (%s): %s", "training" if training else "evaluation",
                     ",".join(map(str, buckets)))
    return buckets


def copy_model_files(output_dir, job_runtime, config, vocab_file, tokenizer=None):
    """The chief writes bert_config.json and the tokenizer file into output_dir (atomically).

    The tokenizer file keeps its kind: vocab.txt for WordPiece (a WordPiece tokenizer.json is
    written as the vocab.txt it amounts to, so the run reads like any BERT run), tokenizer.json
    for byte-level BPE (as `tokenizer` parsed it, with the special-token roles it resolved).
    """
    if not job_runtime.chief:
        return
    config.to_json_file(file_names.path(output_dir, file_names.CONFIG_FILE))
    tokenizer_files.write_tokenizer_file(output_dir, tokenizer, vocab_file)
