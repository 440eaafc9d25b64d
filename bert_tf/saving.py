"""bert_tf.load_model: the Keras model of a .keras file, a run directory, or any model directory
--init_checkpoint reads (original TF1, Hugging Face, sentence-transformers, keras-hub).

The models come without their tokenizer; `load_model_dir` gives a run's model with what its
directory records (tokenizer file, task_info.json, casing, sequence length), which
bert_tf.load_task (the model answering raw text) and bert-tf-export read. Their .keras files are
read by bert_tf.keras_files.
"""

import dataclasses
import os

from bert_tf import fileio, keras_setup, model_directory, run_directory
from bert_tf.keras_files import load_keras_file
from bert_tf.model_directory import check_one_model
from bert_tf.serving.task_info import TaskInfo, read_task_info
from bert_tf.text import tokenizer_files

# What load_model reads, for its refusals.
READS = ("a .keras file, a bert_tf run directory, an original TF1 checkpoint (a prefix or its "
         "directory, bert_config.json beside), a Hugging Face directory (config.json + "
         "model.safetensors), a sentence-transformers directory (modules.json) or a keras-hub "
         "preset")
# Where a model directory bert_tf does not load as a Keras model is read instead.
_READ_ELSEWHERE = {
    model_directory.SAVED_MODEL: "load it with tf.saved_model.load() or serve it with TF "
                                 "Serving (docs/serving.md)",
    model_directory.LITERT: "answer texts with bert_tf.serving.LiteRTModel() (docs/serving.md)",
}

# A Keras backend the models do not run on is refused before Keras loads; then the classes
# .keras files name (models, layers, bert_tf's optimizers) enter Keras' registry.
keras_setup.check_backend()
keras_setup.register()

def load_model(path, compile=False):  # noqa: A002  (Keras' own argument name)
    """Loads a bert_tf model from any file or directory `--init_checkpoint` reads.

    Args:
      path: one of
        - a .keras file of a bert_tf model;
        - a run's output directory: its fine-tuned `model.keras`, else pre-training's
          `pretrainer.keras`, else `encoder.keras` (name `RUN/encoder.keras` for the encoder of
          a pre-training run), else (a run that has not finished) its newest training
          checkpoint, as a BertPretrainer or BertEncoder;
        - a bert_tf or original TF1 checkpoint prefix, or a directory holding one (with
          bert_config.json beside it): a BertPretrainer (a BertEncoder without the MLM head);
        - a Hugging Face BERT or ModernBERT directory: a BertPretrainer when it holds the
          masked-LM head, else the encoder;
        - a sentence-transformers directory: a BertSentenceEmbedder;
        - a keras-hub BERT preset: the encoder (a BertPretrainer with a BertMaskedLM's head).
        Local paths or any tf.io.gfile filesystem.
      compile: restore the training configuration saved in a .keras file (default: inference
        only).

    Returns:
      The Keras model (a `BertEncoder`, `BertPretrainer`, `BertClassifier`, ...). It takes
      token ids; `bert_tf.load_task(path)` gives a fine-tuned run's model that takes text.

    Raises:
      FileNotFoundError: nothing at `path`, or a run directory without a model yet.
      ValueError: a directory or file of another kind, naming what it holds and what reads it
        (a SavedModel or LiteRT export, a folder without a model).
      bert_tf.interop.InteropError: a checkpoint that does not load (naming the tensor).
      model_directory.ModelFileError: a .keras file that cannot be read, or a directory of
        models of two formats, naming it.

    Examples:

    >>> model = bert_tf.load_model("/tmp/my_classifier")          # doctest: +SKIP
    >>> encoder = bert_tf.load_model("/tmp/run/encoder.keras")    # doctest: +SKIP
    >>> model = bert_tf.load_model("bert-base-uncased/")          # doctest: +SKIP
    """
    path = str(path)
    if fileio.isdir(path):
        check_one_model(path)
    model = _load(path, compile)
    # The text refusal of the models (bert_tf.modeling's `predict` given strings) names it.
    model._bert_tf_source = path
    return model


def _load(path, compile):
    if path.endswith(".keras"):
        # Keras copies a remote (gs://, ram://, ...) .keras archive to a local temp file.
        return load_keras_file(run_directory.model_file(path), compile=compile)
    if fileio.isfile(path):
        if path.endswith(".weights.h5"):
            return _interop().load_checkpoint(path, flag=None)
        raise ValueError(f"{path}: not a model file bert_tf reads; bert_tf.load_model reads "
                         f"{READS}")
    found = model_directory.recognise(path)
    kind = found.kind if found is not None else None
    if kind in (model_directory.RUN, model_directory.BERT_TF_MODEL):
        try:
            return load_keras_file(run_directory.model_file(path), compile=compile)
        except FileNotFoundError:
            if not run_directory.has_checkpoint(path):
                raise
            # A run that has not written its models yet: its newest training checkpoint.
            return _interop().load_checkpoint(path, flag=None)
    if kind == model_directory.HUGGINGFACE:
        return _interop().load_huggingface(path)[0]
    if kind == model_directory.SENTENCE_TRANSFORMERS:
        return _interop().load_sentence_transformers(path).model
    if kind == model_directory.KERAS_HUB:
        interop = _interop()
        backbone, masked_lm, _, _ = interop.load_keras_hub(path)
        return interop.from_keras_hub(backbone, masked_lm)
    if kind == model_directory.TF1_CHECKPOINT:
        return _interop().load_checkpoint(path, flag=None)
    if kind in _READ_ELSEWHERE:
        raise ValueError(f"{path} is {found}: bert_tf.load_model reads models to fine-tune or "
                         f"run in Keras; {_READ_ELSEWHERE[kind]}")
    if fileio.isdir(path):
        names = sorted(name.rstrip("/") for name in fileio.listdir(path))
        held = (f"it holds {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}"
                if names else "it is empty")
        raise FileNotFoundError(f"{path}: no model bert_tf reads ({held}); bert_tf.load_model "
                                f"reads {READS}")
    if fileio.exists(path + model_directory.CHECKPOINT_INDEX_SUFFIX):
        return _interop().load_checkpoint(path, flag=None)
    raise FileNotFoundError(f"{path}: no such file, directory or checkpoint prefix; "
                            f"bert_tf.load_model reads {READS}")


def _interop():
    # TensorFlow reads the checkpoints; a .keras file on JAX needs none of it.
    from bert_tf import interop

    return interop


@dataclasses.dataclass
class SavedModelDir:
    """A loaded model and what its run recorded; None where the run did not say.

    Attributes:
      model: the Keras model.
      model_file: the .keras file it came from.
      vocab_file: vocab.txt beside it, else tokenizer.json (a byte-level BPE run, e.g. a
        fine-tuned ModernBERT), else None.
      task_info: the `TaskInfo` of task_info.json beside it, or None.
      do_lower_case, max_seq_length: from task_info.json, else the run record
        (bert_tf.run_directory.read_record: a bert_tf 0.1 run's run_pretraining.flags too).
    """

    model: object
    model_file: str
    vocab_file: str = None
    task_info: object = None
    do_lower_case: bool = None
    max_seq_length: int = None


def load_model_dir(path, flag=None):
    """Loads the model of a run directory or .keras file and the settings recorded beside it.

    Args:
      path: a run's output directory (or a directory a task of bert_tf.tasks saved), a
        .keras file, or a Hugging Face directory (a fine-tuned transformers model: its head,
        its id2label as the labels, the casing and model_max_length of its
        tokenizer_config.json; see `_huggingface_model_dir`).
      flag: the flag `path` came from (e.g. "--model_dir"), named in errors.

    Returns:
      `SavedModelDir`.

    Raises:
      FileNotFoundError: no model at `path`.
      ValueError: a malformed task_info.json or run record (naming the file).
    """
    if fileio.isdir(str(path)):
        check_one_model(str(path), flag)
        found = model_directory.recognise(str(path))
        if found is not None and found.kind == model_directory.HUGGINGFACE:
            return _huggingface_model_dir(str(path), found)
    model_file = run_directory.model_file(path, flag=flag)
    directory = os.path.dirname(fileio.abspath(model_file))
    model = load_keras_file(model_file)
    model._bert_tf_source = str(path)
    source = SavedModelDir(model=model, model_file=model_file,
                           vocab_file=tokenizer_files.model_tokenizer_file(directory))
    info_path = run_directory.path(directory, run_directory.TASK_INFO_FILE)
    if fileio.isfile(info_path):
        source.task_info = read_task_info(info_path)
        source.do_lower_case = source.task_info.do_lower_case
        source.max_seq_length = source.task_info.max_seq_length
        return source
    try:
        record = run_directory.read_record(directory)
    except run_directory.RunDirectoryError as e:
        raise ValueError(str(e)) from None
    if record is not None:
        source.do_lower_case = record.do_lower_case
        source.max_seq_length = record.settings.get("max_seq_length")
    return source


# The length of a Hugging Face model whose tokenizer_config.json does not say one (the
# commands' and bert_tf.tasks' default).
_DEFAULT_MAX_SEQ_LENGTH = 128


def _huggingface_model_dir(path, found):
    """A Hugging Face directory as a SavedModelDir: the model with its head
    (interop.load_huggingface_task), the casing its tokenizer_config.json records (else
    transformers' BertTokenizer default, lower case) and its model_max_length where the model's
    positions hold it (else 128, or the positions if fewer), and for a task model a TaskInfo
    made of these and config.json's id2label."""
    from absl import logging

    interop = _interop()
    model, task, labels, vocab_file = interop.load_huggingface_task(path)
    model._bert_tf_source = path
    # transformers tokenizes with a tokenizer.json's own normalizer (what transformers 5 saves),
    # a vocab.txt as tokenizer_config.json says.
    if vocab_file and tokenizer_files.records_casing(vocab_file):
        casing = tokenizer_files.file_casing(vocab_file)
    else:
        casing, _ = interop.checkpoint_casing(path)
    source = SavedModelDir(model=model, model_file=os.path.join(path, found.names[-1]),
                           vocab_file=vocab_file, do_lower_case=casing)
    from bert_tf.modeling.token_ids import encoder_config

    positions = encoder_config(model).max_position_embeddings
    length = model_directory.huggingface_max_length(path, positions)
    if length is not None:
        logging.info("%s: max_seq_length=%d, as its tokenizer_config.json's model_max_length "
                     "records (at most the model's positions)", path, length)
    else:
        length = min(_DEFAULT_MAX_SEQ_LENGTH, positions)
    source.max_seq_length = length
    if task is not None:
        windows = {}
        if task == "squad":
            # The original's 64 question pieces and stride 128, where the length holds them.
            query = min(64, (length - 3) // 2)
            windows = dict(max_query_length=query, doc_stride=min(128, length - 3 - query))
        source.task_info = TaskInfo(
            task=task, labels=tuple(labels or ()),
            do_lower_case=True if source.do_lower_case is None else source.do_lower_case,
            max_seq_length=length, **windows)
    return source
