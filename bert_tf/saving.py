"""Loading saved bert_tf models: a .keras file, or the output directory of a bert_tf run."""

import os

import keras

# Both register the Keras classes .keras files name: the models and layers, and the optimizers
# a compiled model saves.
import bert_tf.modeling  # noqa: F401
import bert_tf.training.optimization  # noqa: F401
from bert_tf import fileio

# The order run directories are searched in: a fine-tuned model first, then pre-training's.
RUN_DIR_MODEL_FILES = ("model.keras", "pretrainer.keras", "encoder.keras")


def model_file_of(path, flag=None):
    """The .keras file `path` names: the file itself, or the first of RUN_DIR_MODEL_FILES in it.

    Args:
      path: a .keras file or a run's output directory (local or any tf.io.gfile file system).
      flag: the flag `path` came from (e.g. "--model_dir"), named in the errors.

    Raises:
      FileNotFoundError, ValueError: naming `path` (and the flag) and what was expected.
    """
    where = f"{flag}={path}" if flag else path
    if fileio.isfile(path):
        if not path.endswith(".keras"):
            raise ValueError(f"{where}: expected a run's output directory or a .keras file")
        return path
    if not fileio.isdir(path):
        raise FileNotFoundError(f"{where}: no such directory or .keras file")
    for name in RUN_DIR_MODEL_FILES:
        candidate = os.path.join(path, name)
        if fileio.isfile(candidate):
            return candidate
    raise FileNotFoundError(f"{where}: found none of {', '.join(RUN_DIR_MODEL_FILES)}; expected "
                            "the output directory of run_pretraining, run_classifier, run_squad "
                            "or run_tagging")


def load_model(path, compile=False):  # noqa: A002  (Keras' own argument name)
    """Loads a bert_tf model from a .keras file or a run's output directory.

    A run directory gives its fine-tuned `model.keras`, else pre-training's `pretrainer.keras`,
    else `encoder.keras` (load `RUN/encoder.keras` by name for the encoder of a pre-training run).

    Args:
      path: a .keras file or a run directory (local or any tf.io.gfile filesystem).
      compile: restore the training configuration saved with the model (default: inference only).

    Returns:
      The Keras model (a `BertEncoder`, `BertPretrainer`, `BertClassifier`, ...).

    Examples:

    >>> model = bert_tf.load_model("/tmp/my_classifier")          # doctest: +SKIP
    >>> encoder = bert_tf.load_model("/tmp/run/encoder.keras")    # doctest: +SKIP
    """
    # Keras copies a remote (gs://, ram://, ...) .keras archive to a local temp file itself.
    return keras.saving.load_model(model_file_of(path), compile=compile)
