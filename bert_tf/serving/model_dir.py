"""From a run's output directory (or a .keras file) to the model and the settings to export it.

A run directory (bert_tf.run_directory) exports its fine-tuned model.keras with the settings
of its task_info.json (bert_tf.serving.task_info), else the pre-training pretrainer.keras
(fill-mask; an ELECTRA run's discriminator encoder: embeddings) with the casing and sequence
length of its run record. A .keras file exports that
model (e.g. RUN/encoder.keras for embeddings), with the settings found beside it.
"""

import os

from bert_tf import file_names, fileio, saving
# Importing bert_tf.modeling registers the model classes that .keras files name.
from bert_tf.modeling import ElectraPretrainer
from bert_tf.serving import task_signatures

# The loaded model and what its run recorded (bert_tf.saving.load_model_dir).
ExportSource = saving.SavedModelDir


def _check_task_matches(task_info, model, model_file):
    expected = task_signatures.task_name_of(model)
    if task_info.task != expected:
        info_path = file_names.path(os.path.dirname(fileio.abspath(model_file)),
                                    file_names.TASK_INFO_FILE)
        raise ValueError(f"{info_path}: task={task_info.task!r}, but {model_file} holds a "
                         f"{type(model).__name__} (a {expected} model)")


def load_model_dir(model_dir):
    """Loads the model of a run directory or .keras file and the settings recorded beside it.

    Args:
      model_dir: a run's output directory, or a .keras file.

    Returns:
      `ExportSource` (bert_tf.saving.SavedModelDir); its task_info only for a task model (an
      encoder.keras or pretrainer.keras beside a fine-tuned model shares its tokenizer, not
      its task).

    Raises:
      FileNotFoundError: no model in model_dir; model_directory.ModelFileError: a .keras
        file that cannot be read, or a directory of models of two formats, naming it.
      ValueError: a malformed task_info.json or flagfile, or a task that does not match the
        model (naming the file).
      TypeError: the .keras file holds a model that cannot be served.
    """
    source = saving.load_model_dir(model_dir, flag="--model_dir")
    if isinstance(source.model, ElectraPretrainer):
        # An ELECTRA run's pretrainer.keras: what it trained to serve is its discriminator.
        source.model = source.model.encoder
    task_signatures.task_name_of(source.model)  # Raises TypeError for other models.
    if source.task_info is not None:
        if isinstance(source.model, (task_signatures.BertPretrainer, task_signatures.Encoder)):
            source.task_info = None
        else:
            _check_task_matches(source.task_info, source.model, source.model_file)
    return source
