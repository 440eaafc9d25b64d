"""Loading saved bert_tf models: a .keras file, or the output directory of a bert_tf run."""

import keras

# Both register the Keras classes .keras files name: the models and layers, and the optimizers
# a compiled model saves.
import bert_tf.modeling  # noqa: F401
import bert_tf.training.optimization  # noqa: F401
from bert_tf import run_directory


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
    return keras.saving.load_model(run_directory.model_file(path), compile=compile)
