"""A job's model files: the config source and tokenizer file from the flags or beside
--init_checkpoint, the model config read from them, and their copies in the run directory.
"""

import os

from absl import logging

from bert_tf import fileio, model_directory, run_directory
from bert_tf.config import EncoderConfig
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.jobs.tokenizer_setup import check_tokenizer_matches
from bert_tf.text import tokenizer_files


def resolve_model_files(files):
    """(config source, tokenizer file) from the flags, else from --init_checkpoint.

    `files`: the job's model files (a task section built on
    bert_tf.jobs.sections.ModelFilesConfig).

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
    source = files.init_checkpoint
    check_init_checkpoint_exists(source)
    config_file, vocab_file = config_source(files), files.vocab_file
    directory = None
    if source:
        directory = source if fileio.isdir(source) else os.path.dirname(source)
    if not files.bert_config_file and directory:
        candidate = run_directory.path(directory, run_directory.CONFIG_FILE)
        if fileio.exists(candidate):
            config_file = candidate
    if vocab_file and fileio.isdir(vocab_file):
        vocab_file = tokenizer_files.model_tokenizer_file(vocab_file)
        if not vocab_file:
            raise FlagValueError(f"--vocab_file={files.vocab_file} is a directory holding "
                                 "neither vocab.txt nor tokenizer.json")
    # Looked up once: the lookup logs which file it picked.
    checkpoint_vocab = tokenizer_files.model_tokenizer_file(directory) if directory else None
    vocab_file = vocab_file or checkpoint_vocab
    if not vocab_file:
        raise FlagValueError(f"--vocab_file is required (no vocab.txt, tokenizer.json or "
                             f"spiece.model beside --init_checkpoint={source})")
    if files.vocab_file and checkpoint_vocab:
        check_tokenizer_matches(files.vocab_file, vocab_file, checkpoint_vocab,
                                f"--init_checkpoint={source}")
    return config_file, vocab_file


def check_init_checkpoint_exists(path):
    """A missing --init_checkpoint is named as such (not as a missing file expected beside it).

    A checkpoint prefix (.../bert_model.ckpt, .../ckpt-7) exists through its .index file.

    Raises:
      FlagValueError.
    """
    path = str(path) if path else path
    if path and not (fileio.exists(path) or fileio.exists(path + ".index")):
        raise FlagValueError(f"--init_checkpoint={path} does not exist (expected a run "
                             "directory, a .keras file, a checkpoint prefix with its .index "
                             "file, or a Hugging Face or keras-hub directory)")


def config_source(files):
    """--bert_config_file, else the --init_checkpoint whose configuration to use.

    Raises:
      FlagValueError when neither is given.
    """
    if files.bert_config_file:
        problem = fileio.not_a_file(files.bert_config_file,
                                    f"--bert_config_file={files.bert_config_file}")
        if problem:
            raise FlagValueError(problem + (" (a model directory goes to --init_checkpoint)"
                                            if fileio.isdir(files.bert_config_file) else ""))
        return files.bert_config_file
    if files.init_checkpoint:
        return files.init_checkpoint
    raise FlagValueError("--bert_config_file is required (or an --init_checkpoint that records "
                         "its configuration)")


def read_model_config(source):
    """The config (BertConfig or ModernBertConfig) of a bert_config.json, or of a checkpoint
    that records one.

    Args:
      source: a bert_config.json, or an --init_checkpoint (Hugging Face directory, keras-hub
        preset, .keras file, TF1 / bert_tf checkpoint with bert_config.json beside it).

    Raises:
      FlagValueError when `source` is a checkpoint that does not say its configuration.
    """
    extension = os.path.splitext(source)[1]
    is_config_file = (fileio.exists(source) and not fileio.isdir(source)
                      and extension not in (".keras", ".h5")
                      and os.path.basename(source) not in model_directory.HF_WEIGHT_FILES)
    if (extension == ".json" and os.path.basename(source) not in model_directory.HF_WEIGHT_FILES
            or is_config_file):
        return EncoderConfig.from_json_file(source)
    from bert_tf import interop  # Checkpoint formats are only needed on this path.
    config = interop.checkpoint_config(source)
    if config is None:
        raise FlagValueError(f"--bert_config_file is required: --init_checkpoint={source} has "
                             "no bert_config.json beside it")
    logging.info("Model configuration from --init_checkpoint=%s", source)
    return config


def load_config(config_file, max_seq_length):
    """Reads the config (see read_model_config) and checks --max_seq_length against it."""
    config = read_model_config(config_file)
    if max_seq_length > config.max_position_embeddings:
        raise FlagValueError(
            f"--max_seq_length={max_seq_length} exceeds max_position_embeddings="
            f"{config.max_position_embeddings} in {config_file}")
    return config


def copy_model_files(output_dir, job_runtime, config, vocab_file, tokenizer=None):
    """The chief writes bert_config.json and the tokenizer file into output_dir (atomically).

    The tokenizer file keeps its kind: vocab.txt for WordPiece (a WordPiece tokenizer.json is
    written as the vocab.txt it amounts to, so the run reads like any BERT run), tokenizer.json
    for byte-level BPE (as `tokenizer` parsed it, with the special-token roles it resolved).
    """
    if not job_runtime.chief:
        return
    config.to_json_file(run_directory.path(output_dir, run_directory.CONFIG_FILE))
    tokenizer_files.write_tokenizer_file(output_dir, tokenizer, vocab_file)
