"""The file names of bert_tf's run and model directories and the helpers that build and read them.

The one owner of every name a run directory (a training job's --output_dir) holds (the layout is
described in bert_tf.run_directory) and of the names of a model directory's config and
tokenizer files (vocab.txt | tokenizer.json | spiece.model, the names of the original BERT
release's files and of Hugging Face's tokenizer.json). A leaf: it imports nothing of bert_tf,
so every layer that names such a file (text/ for the tokenizer files, training/ for
checkpoints, run_directory and everything above) imports it without importing what sits above
it.
"""

import fnmatch
import os
import re

# The run record and the lock.
RECORD_FILE = "bert_tf_run.json"
LOCK_FILE = ".bert_tf_run.lock"
# The model and its tokenizer (the names of the original BERT release's files).
CONFIG_FILE = "bert_config.json"
VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
# A SentencePiece model: Hugging Face's name for it, and the original ALBERT release's.
SENTENCEPIECE_FILE = "spiece.model"
ALBERT_SENTENCEPIECE_FILE = "30k-clean.model"
# Models saved at the end of a run.
PRETRAINER_FILE = "pretrainer.keras"
ENCODER_FILE = "encoder.keras"
MODEL_FILE = "model.keras"
# A directory gives its fine-tuned (or embedding) model first, then pre-training's.
MODEL_FILES = (MODEL_FILE, PRETRAINER_FILE, ENCODER_FILE)
TASK_INFO_FILE = "task_info.json"
# Training checkpoints: tf.train.CheckpointManager's prefix and state file.
CHECKPOINT_PREFIX = "ckpt"
# A checkpoint of the JAX step runner (training.jax_checkpoints): a ckpt-<step>.orbax
# directory (Orbax), or a ckpt-<step>.npz file of bert_tf before it (still read).
JAX_CHECKPOINT_SUFFIX = ".orbax"
JAX_NPZ_CHECKPOINT_SUFFIX = ".npz"
JAX_CHECKPOINT_SUFFIXES = (JAX_CHECKPOINT_SUFFIX, JAX_NPZ_CHECKPOINT_SUFFIX)
CHECKPOINT_STATE_FILE = "checkpoint"
BEST_DIR = "best"
BEST_METRICS_FILE = "metrics.json"
# A new best/ is written as best.tmp-<pid> and renamed over it; the best it replaces stays as
# best.old-<pid> between the two renames (a run killed there leaves it: the next one puts it
# back, run_directory.remove_stale_temp_files).
BEST_STAGING_INFIX = ".tmp-"
BEST_REPLACED_INFIX = ".old-"
SUMMARIES_DIR = "summaries"
FEATURES_DIR = "features"
SENTENCE_TRANSFORMERS_DIR = "sentence_transformers"
# A sentence-transformers Transformer module's settings (max_seq_length, do_lower_case); a
# conversion of such a model carries it into every output format.
SENTENCE_BERT_CONFIG_FILE = "sentence_bert_config.json"
RESULTS_FILE = "results.json"
EVAL_RESULTS_TEXT_FILE = "eval_results.txt"
EVAL_RESULTS_JSON_FILE = "eval_results.json"
# Runs that evaluate or predict without training append their results here, beside the
# training run's own (results.json, eval_results.*), which they never write.
EVAL_ONLY_RESULTS_FILE = "eval_only_results.jsonl"
# What runs of bert_tf 0.1 recorded instead of the run record.
LEGACY_FINETUNING_RECORD = "finetuning_run.json"
PRETRAINING_COMMAND = "run_pretraining"
FINETUNING_COMMANDS = ("run_classifier", "run_squad", "run_tagging")
EMBEDDING_COMMAND = "bert-tf-embed"
# task_info.json's task of an embedding run.
EMBEDDING_TASK = "sentence_embedding"


def flags_file(command):
    """The flagfile a run of `command` ("run_pretraining", "run_classifier", ...) leaves."""
    return f"{command}.flags"


PRETRAINING_FLAGS_FILE = flags_file(PRETRAINING_COMMAND)
# Files only a training run leaves: a directory holding one is a run's.
RUN_MARKERS = (CHECKPOINT_STATE_FILE, LOCK_FILE, RECORD_FILE, LEGACY_FINETUNING_RECORD,
               RESULTS_FILE, EVAL_ONLY_RESULTS_FILE, MODEL_FILE, TASK_INFO_FILE,
               PRETRAINING_FLAGS_FILE, *(flags_file(command) for command in FINETUNING_COMMANDS))


def path(directory, name, *names):
    """The path of `name` (a file name of this module) in a run directory."""
    return os.path.join(str(directory), name, *names)


def checkpoint_name(step, suffix=""):
    """The name of the training checkpoint of `step`: ckpt-<step> (TensorFlow's prefix), or
    with `suffix` the JAX step runner's ckpt-<step>.orbax (or an older bert_tf's .npz)."""
    return f"{CHECKPOINT_PREFIX}-{step}{suffix}"


def checkpoint_name_step(name, suffix):
    """The step of a file name ckpt-<step><suffix> (`suffix` not empty: ".index", ".orbax",
    ".npz"), else None."""
    step = name[len(CHECKPOINT_PREFIX) + 1:-len(suffix)]
    if name.startswith(CHECKPOINT_PREFIX + "-") and name.endswith(suffix) and step.isdigit():
        return int(step)
    return None


def checkpoint_step(checkpoint):
    """The global step of a training checkpoint's path (ckpt-<step>, ckpt-<step>.orbax, ...)."""
    name = os.path.basename(str(checkpoint).rstrip("/"))
    for suffix in JAX_CHECKPOINT_SUFFIXES:
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return int(name.rsplit("-", 1)[-1])


def is_checkpoint_file(name):
    """True for a name of a training checkpoint's index (ckpt-<...>.index) or JAX checkpoint
    (ckpt-<...>.orbax / .npz): files only a training run leaves."""
    return (name.startswith(CHECKPOINT_PREFIX + "-")
            and name.endswith((".index",) + JAX_CHECKPOINT_SUFFIXES))


# What a killed process leaves half-written: bert_tf's atomic-write temporaries (.tmp_*),
# TensorFlow's checkpoint temporaries (ckpt-<n>_temp/ shard directories, checkpoint.tmp<hex>
# state files); and the best weights being replaced, is_best_aside.
TEMPORARY_PATTERNS = (".tmp_*", f"{CHECKPOINT_PREFIX}-*_temp", f"{CHECKPOINT_STATE_FILE}.tmp*")


def is_best_aside(name, infix=None):
    """True for the name of a best/ being replaced, best<infix><pid> (`infix`:
    BEST_STAGING_INFIX or BEST_REPLACED_INFIX; None: either), and only that: a user's own
    best.old-backup is not one."""
    infixes = (BEST_STAGING_INFIX, BEST_REPLACED_INFIX) if infix is None else (infix,)
    return any(re.fullmatch(re.escape(BEST_DIR + i) + "[0-9]+", name) for i in infixes)


def is_temporary(name):
    """True for the name of what a killed process leaves half-written (TEMPORARY_PATTERNS, a
    best/ being replaced)."""
    return (any(fnmatch.fnmatchcase(name, p) for p in TEMPORARY_PATTERNS)
            or is_best_aside(name))
