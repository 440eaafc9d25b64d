"""From a run's output directory (or a .keras file) to the model and the settings to export it.

A run directory (bert_tf.run_directory) exports its fine-tuned model.keras with the settings
of its task_info.json (bert_tf.serving.task_info), else the pre-training pretrainer.keras
(fill-mask; an ELECTRA run's discriminator encoder: embeddings) with the casing and sequence
length of its run record. A .keras file exports that
model (e.g. RUN/encoder.keras for embeddings), with the settings found beside it.
"""

import dataclasses
import os

import keras

from bert_tf import fileio, model_directory, run_directory, saving
# Importing bert_tf.modeling registers the model classes that .keras files name.
from bert_tf.modeling import ElectraPretrainer
from bert_tf.serving import task_signatures
from bert_tf.serving.task_info import read_task_info
from bert_tf.text import tokenizer_files


@dataclasses.dataclass
class ExportSource:
    """A loaded model and what its run recorded; None where the run did not say.

    Attributes:
      model: the Keras model.
      model_file: the .keras file it came from.
      vocab_file: vocab.txt beside it, else tokenizer.json (a byte-level BPE run, e.g. a
        fine-tuned ModernBERT), else None.
      task_info: the `TaskInfo` of a fine-tuning run, or None.
      do_lower_case, max_seq_length: from task_info.json, else the run record
        (bert_tf.run_directory.read_record: a bert_tf 0.1 run's run_pretraining.flags too).
    """

    model: keras.Model
    model_file: str
    vocab_file: str = None
    task_info: object = None
    do_lower_case: bool = None
    max_seq_length: int = None


def _check_task_matches(task_info, model, model_file, info_path):
    expected = task_signatures.task_name_of(model)
    if task_info.task != expected:
        raise ValueError(f"{info_path}: task={task_info.task!r}, but {model_file} holds a "
                         f"{type(model).__name__} (a {expected} model)")


def load_model_dir(model_dir):
    """Loads the model of a run directory or .keras file and the settings recorded beside it.

    Args:
      model_dir: a run's output directory, or a .keras file.

    Returns:
      `ExportSource`.

    Raises:
      FileNotFoundError: no model in model_dir; model_directory.ModelFileError: a .keras
        file that cannot be read, or a directory of models of two formats, naming it.
      ValueError: a malformed task_info.json or flagfile, or a task that does not match the
        model (naming the file).
      TypeError: the .keras file holds a model that cannot be served.
    """
    if fileio.isdir(model_dir):
        model_directory.check_one_model(model_dir, "--model_dir")
    model_file = run_directory.model_file(model_dir, flag="--model_dir")
    directory = os.path.dirname(fileio.abspath(model_file))
    model = saving.load_keras_file(model_file)
    if isinstance(model, ElectraPretrainer):
        # An ELECTRA run's pretrainer.keras: what it trained to serve is its discriminator.
        model = model.encoder
    task_signatures.task_name_of(model)  # Raises TypeError for other models.
    source = ExportSource(model=model, model_file=model_file)
    source.vocab_file = tokenizer_files.model_tokenizer_file(directory)
    info_path = run_directory.path(directory, run_directory.TASK_INFO_FILE)
    if fileio.isfile(info_path):
        task_info = read_task_info(info_path)
        source.do_lower_case = task_info.do_lower_case
        source.max_seq_length = task_info.max_seq_length
        # An encoder.keras beside a fine-tuned model shares its tokenizer, not its task.
        if not isinstance(model, (task_signatures.BertPretrainer, task_signatures.Encoder)):
            _check_task_matches(task_info, model, model_file, info_path)
            source.task_info = task_info
        return source
    try:
        record = run_directory.read_record(directory)
    except run_directory.RunDirectoryError as e:
        raise ValueError(str(e)) from None
    if record is not None:
        source.do_lower_case = record.do_lower_case
        source.max_seq_length = record.settings.get("max_seq_length")
    return source
