"""What a model directory is: a directory holding a model in a format bert_tf reads.

The output rule (bert_tf.cli.outputs) never writes into a model directory, or places a file
output inside one, unless it is that command's own earlier output of the same kind. A format is
told by the names in the directory (no file is opened, so a half-written or damaged model is
still one):

  a training run                 the run markers of bert_tf.run_directory (checkpoints, the lock,
                                 the run record, model.keras, results.json, a <command>.flags)
  a sentence-transformers model  modules.json
  a keras-hub preset             metadata.json and config.json
  a Hugging Face model           config.json and model.safetensors (or its index, or
                                 pytorch_model.bin)
  a SavedModel export            saved_model.pb
  a LiteRT export                model.tflite
  a bert_tf model                pretrainer.keras or encoder.keras (bert-tf-convert-checkpoint)
  a TF1 checkpoint               <prefix>.index (original BERT or ALBERT, any name)

A path is inside a model directory when its folder is one, or is one of the folders a model
directory holds (best/, variables/, 1_Pooling/, ...) of one, or is yet to be made in one. A
directory may hold models of several formats (models_in); a reader that would take one of
them without a word refuses it instead. Imports no TensorFlow for local paths.
"""

import dataclasses
import os

from bert_tf import file_names, fileio, run_directory

RUN = "a training run"
SENTENCE_TRANSFORMERS = "a sentence-transformers model"
KERAS_HUB = "a keras-hub preset"
HUGGINGFACE = "a Hugging Face model"
SAVED_MODEL = "a SavedModel export"
LITERT = "a LiteRT export"
BERT_TF_MODEL = "a bert_tf model"
TF1_CHECKPOINT = "a TF1 checkpoint"

# The names each format is told by.
MODULES_FILE = "modules.json"
KERAS_HUB_METADATA_FILE = "metadata.json"
HF_CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX_FILE = "model.safetensors.index.json"
PICKLE_FILE = "pytorch_model.bin"
HF_WEIGHT_FILES = (SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, PICKLE_FILE)
SAVED_MODEL_FILE = "saved_model.pb"
LITERT_MODEL_FILE = "model.tflite"
LITERT_INFO_FILE = "bert_tf_litert.json"
CHECKPOINT_INDEX_SUFFIX = ".index"
# Everything an export of each kind holds (tf.saved_model.save's entries; bert_tf's LiteRT
# model and its info file).
EXPORT_ENTRIES = {SAVED_MODEL: frozenset((SAVED_MODEL_FILE, "variables", "assets",
                                          "assets.extra", "fingerprint.pb")),
                  LITERT: frozenset((LITERT_MODEL_FILE, LITERT_INFO_FILE))}
# Files a command reads beside a model it is given (a checkpoint prefix, a model file or a
# directory): its config, tokenizer and the format's own description.
COMPANION_FILES = (run_directory.CONFIG_FILE, "albert_config.json", HF_CONFIG_FILE,
                   run_directory.VOCAB_FILE, run_directory.TOKENIZER_FILE,
                   file_names.SENTENCEPIECE_FILE, file_names.ALBERT_SENTENCEPIECE_FILE,
                   "tokenizer_config.json", "special_tokens_map.json", MODULES_FILE,
                   file_names.SENTENCE_BERT_CONFIG_FILE, run_directory.TASK_INFO_FILE,
                   run_directory.RECORD_FILE)

# Folders a model directory holds: what is in one of them is inside that model directory.
MODEL_FOLDERS = (run_directory.BEST_DIR, run_directory.FEATURES_DIR, run_directory.SUMMARIES_DIR,
                 run_directory.SENTENCE_TRANSFORMERS_DIR, "variables", "assets", "assets.extra",
                 "1_Pooling", "2_Normalize")


class ModelFileError(ValueError):
    """A model file or directory that cannot be read as a model: truncated, not the format its
    name says, or holding models of two formats. Every command reports it in one line."""


@dataclasses.dataclass(frozen=True)
class ModelDirectory:
    """A directory recognised as holding a model.

    Attributes:
      path: the directory.
      kind: one of the kinds above ("a bert_tf run", "a Hugging Face model", ...).
      names: the names in it that tell the kind, sorted.
    """

    path: str
    kind: str
    names: tuple

    def __str__(self):
        shown = ", ".join(self.names[:4]) + (", ..." if len(self.names) > 4 else "")
        return f"{self.kind} ({shown})"


def _kinds(names, directory):
    """[(kind, telling names)] of every model in a directory's listing `names`, the kind that
    tells the directory first. A training run's own checkpoints and models are the run; a
    sentence-transformers model's Hugging Face files are that model."""
    found = []
    markers = run_directory.markers(directory)
    if markers:
        found.append((RUN, markers))
    if MODULES_FILE in names:
        found.append((SENTENCE_TRANSFORMERS, [MODULES_FILE]))
    if KERAS_HUB_METADATA_FILE in names and HF_CONFIG_FILE in names:
        found.append((KERAS_HUB, [HF_CONFIG_FILE, KERAS_HUB_METADATA_FILE]))
    weights = [name for name in HF_WEIGHT_FILES if name in names]
    if HF_CONFIG_FILE in names and weights and MODULES_FILE not in names:
        found.append((HUGGINGFACE, [HF_CONFIG_FILE, *weights]))
    if SAVED_MODEL_FILE in names:
        found.append((SAVED_MODEL, [SAVED_MODEL_FILE]))
    if LITERT_MODEL_FILE in names:
        found.append((LITERT, [LITERT_MODEL_FILE]))
    keras_files = [name for name in (run_directory.PRETRAINER_FILE, run_directory.ENCODER_FILE)
                   if name in names]
    if keras_files and not markers:
        found.append((BERT_TF_MODEL, keras_files))
    indexes = [name for name in names if name.endswith(CHECKPOINT_INDEX_SUFFIX)
               and name not in markers]
    if indexes:
        found.append((TF1_CHECKPOINT, indexes))
    return found


def models_in(directory):
    """A ModelDirectory for every model `directory` holds, one per format, the one recognise
    gives first; [] for a directory holding none (or no directory)."""
    directory = str(directory)
    if not fileio.isdir(directory):
        return []
    names = set(name.rstrip("/") for name in fileio.listdir(directory))
    return [ModelDirectory(directory, kind, tuple(sorted(telling)))
            for kind, telling in _kinds(names, directory)]


_COUNTS = {2: "two", 3: "three", 4: "four"}


def check_one_model(directory, flag=None):
    """A directory given as a model (`flag`=DIR) must hold one: of several formats, a reader
    would take one of them without a word.

    Raises:
      ModelFileError naming the models and, where each has one, the path that names it alone.
    """
    found = models_in(directory)
    if len(found) < 2:
        return
    files = [_entry_file(model) for model in found]
    pick = f"name the one to read ({' or '.join(files)}), or " if all(files) else ""
    raise ModelFileError(
        f"{fileio.named(directory, flag)} holds {_COUNTS.get(len(found), len(found))} "
        f"models, {' and '.join(str(model) for model in found)}, and would be read as one of "
        f"them without a word: {pick}move one to a directory of its own")


def _entry_file(model):
    """The path that names one model of a directory (a ModelDirectory) alone, or None."""
    names = set(model.names)
    if model.kind == RUN:
        # Its model file, which every reader takes on either backend, else its newest
        # TensorFlow checkpoint.
        files = [name for name in run_directory.MODEL_FILES
                 if fileio.exists(run_directory.path(model.path, name))]
        if files:
            return run_directory.path(model.path, files[0])
        prefixes = run_directory.checkpoint_prefixes(model.path)
        return prefixes[-1] if prefixes else None
    if model.kind == BERT_TF_MODEL:
        return run_directory.path(model.path, next(
            n for n in (run_directory.PRETRAINER_FILE, run_directory.ENCODER_FILE) if n in names))
    if model.kind == HUGGINGFACE:
        return run_directory.path(model.path, next(n for n in HF_WEIGHT_FILES if n in names))
    if model.kind == TF1_CHECKPOINT and len(names) == 1:
        return run_directory.path(model.path, model.names[0][:-len(CHECKPOINT_INDEX_SUFFIX)])
    return None


def _json_int(path, key):
    """config[key] of the JSON object at `path` when an int (not a bool), else None."""
    import json

    if not fileio.exists(path):
        return None
    try:
        with fileio.open_file(path, encoding="utf-8") as f:
            value = json.load(f).get(key)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def huggingface_max_length(directory, positions=None):
    """The length a Hugging Face directory's model is used at: its tokenizer_config.json's
    model_max_length (where transformers truncates texts), at most `positions` (default its
    config.json's max_position_embeddings, when it says); None when it records none (or
    fewer than 3, [CLS] a token [SEP])."""
    directory = str(directory)
    length = _json_int(os.path.join(directory, "tokenizer_config.json"), "model_max_length")
    if length is None or length < 3:
        return None
    if positions is None:
        positions = _json_int(os.path.join(directory, HF_CONFIG_FILE),
                              "max_position_embeddings")
    return length if positions is None else min(length, positions)


def recognise(directory):
    """The ModelDirectory `directory` is, or None (not a directory, or no model in it)."""
    found = models_in(directory)
    return found[0] if found else None


def is_huggingface(directory):
    """True when `directory` is a Hugging Face model directory (config.json and weights)."""
    found = recognise(directory) if directory else None
    return found is not None and found.kind == HUGGINGFACE


def holds_only(directory, kind):
    """True when `directory` is an export of `kind` (SAVED_MODEL or LITERT) and holds nothing
    else: what an export replaces with --overwrite."""
    names = {name.rstrip("/") for name in fileio.listdir(directory)}
    return bool(names) and names <= EXPORT_ENTRIES[kind] and (
        SAVED_MODEL_FILE if kind == SAVED_MODEL else LITERT_MODEL_FILE) in names


def _parent(path):
    path = str(path).rstrip("/")
    if fileio.is_remote(path):
        return path.rsplit("/", 1)[0] if path.count("/") > 2 else path
    return os.path.dirname(os.path.abspath(path))


def enclosing(path, through_links=False):
    """The model directory that `path` (a file or directory, existing or not) would be inside:
    its folder when that holds a model, else the folder above while the folder is one of
    MODEL_FOLDERS or does not exist yet (an output would make it). None when there is none.
    `through_links`: also the one the path resolved (fileio.resolve: symlinks followed) would
    be inside, the rule every output follows."""
    if through_links:
        return enclosing(path) or enclosing(fileio.resolve(path))
    child, folder = str(path).rstrip("/"), _parent(path)
    while folder and folder != child:
        found = recognise(folder)
        if found is not None:
            return found
        if fileio.isdir(folder) and os.path.basename(folder) not in MODEL_FOLDERS:
            return None
        child, folder = folder, _parent(folder)
    return None
