"""From a run's output directory (or a .keras file) to the model and the settings to export it.

What the run directories hold:

  pre-training (run_pretraining)   pretrainer.keras, encoder.keras, bert_config.json,
                                   vocab.txt, run_pretraining.flags (absl flagfile with
                                   --do_lower_case and --max_seq_length)
  fine-tuning (run_classifier,     model.keras, vocab.txt (or tokenizer.json: byte-level BPE),
  run_squad, run_tagging)          bert_config.json, task_info.json (see
                                   bert_tf.serving.task_info)

A directory exports its fine-tuned model.keras, else the pre-training pretrainer.keras
(fill-mask). A .keras file exports that model (e.g. RUN/encoder.keras for embeddings), with the
settings found beside it.
"""

import dataclasses
import os

import keras

import bert_tf.modeling  # noqa: F401  Registers the model classes that .keras files name.
from bert_tf import fileio
from bert_tf.saving import model_file_of
from bert_tf.serving import task_signatures
from bert_tf.serving.task_info import TASK_INFO_FILE, read_task_info

PRETRAINING_FLAGFILE = "run_pretraining.flags"
VOCAB_FILE = "vocab.txt"
TOKENIZER_JSON = "tokenizer.json"


@dataclasses.dataclass
class ExportSource:
    """A loaded model and what its run recorded; None where the run did not say.

    Attributes:
      model: the Keras model.
      model_file: the .keras file it came from.
      vocab_file: vocab.txt beside it, else tokenizer.json (a byte-level BPE run, e.g. a
        fine-tuned ModernBERT), else None.
      task_info: the `TaskInfo` of a fine-tuning run, or None.
      do_lower_case, max_seq_length: from task_info.json or run_pretraining.flags.
    """

    model: keras.Model
    model_file: str
    vocab_file: str = None
    task_info: object = None
    do_lower_case: bool = None
    max_seq_length: int = None


def read_flagfile_values(path, names):
    """Reads the values of `names` from an absl flagfile (one --flag=value per line).

    Booleans may be written --flag, --noflag or --flag=true/false; the last occurrence wins.

    Returns:
      dict name -> str value ("true"/"false" for booleans) of the names present.
    """
    values = {}
    with fileio.open_file(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("--"):
                continue
            flag, has_value, value = line[2:].partition("=")
            if flag in names:
                values[flag] = value if has_value else "true"
            elif not has_value and flag.startswith("no") and flag[2:] in names:
                values[flag[2:]] = "false"
    return values


def _pretraining_settings(path):
    values = read_flagfile_values(path, ("do_lower_case", "max_seq_length"))
    settings = {}
    if "do_lower_case" in values:
        text = values["do_lower_case"].lower()
        if text not in ("true", "false", "1", "0"):
            raise ValueError(f"{path}: --do_lower_case={values['do_lower_case']} is not a "
                             "boolean")
        settings["do_lower_case"] = text in ("true", "1")
    if "max_seq_length" in values:
        try:
            settings["max_seq_length"] = int(values["max_seq_length"])
        except ValueError:
            raise ValueError(f"{path}: --max_seq_length={values['max_seq_length']} is not an "
                             "integer") from None
    return settings


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
      FileNotFoundError: no model in model_dir.
      ValueError: a malformed task_info.json or flagfile, or a task that does not match the
        model (naming the file).
      TypeError: the .keras file holds a model that cannot be served.
    """
    model_file = model_file_of(model_dir, flag="--model_dir")
    directory = os.path.dirname(fileio.abspath(model_file))
    model = keras.saving.load_model(model_file, compile=False)
    task_signatures.task_name_of(model)  # Raises TypeError for other models.
    source = ExportSource(model=model, model_file=model_file)
    for name in (VOCAB_FILE, TOKENIZER_JSON):
        if fileio.isfile(os.path.join(directory, name)):
            source.vocab_file = os.path.join(directory, name)
            break
    info_path = os.path.join(directory, TASK_INFO_FILE)
    flags_path = os.path.join(directory, PRETRAINING_FLAGFILE)
    if fileio.isfile(info_path):
        task_info = read_task_info(info_path)
        source.do_lower_case = task_info.do_lower_case
        source.max_seq_length = task_info.max_seq_length
        # An encoder.keras beside a fine-tuned model shares its tokenizer, not its task.
        if not isinstance(model, (task_signatures.BertPretrainer, task_signatures.BertEncoder)):
            _check_task_matches(task_info, model, model_file, info_path)
            source.task_info = task_info
    elif fileio.isfile(flags_path):
        settings = _pretraining_settings(flags_path)
        source.do_lower_case = settings.get("do_lower_case")
        source.max_seq_length = settings.get("max_seq_length")
    return source
