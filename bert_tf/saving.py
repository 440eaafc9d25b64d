"""Loading saved bert_tf models: a .keras file, or the output directory of a bert_tf run.

`load_keras_file` is the one reader of .keras files (every command and bert_tf.load_model read
them through it): a file that is truncated or is no Keras archive is named in one line
(model_directory.ModelFileError), not Keras' "File not found".
"""

import io
import json
import zipfile

import keras

# Both register the Keras classes .keras files name: the models and layers, and the optimizers
# a compiled model saves.
import bert_tf.modeling  # noqa: F401
import bert_tf.training.optimization  # noqa: F401
from bert_tf import fileio, run_directory
from bert_tf.model_directory import ModelFileError, check_one_model

# What every .keras archive holds: the model's config (read to tell the model's class).
_KERAS_CONFIG_ENTRY = "config.json"


def _unreadable(where, cause):
    return ModelFileError(f"{where}: not a readable .keras file ({cause}); it is truncated or is "
                          "not a Keras model file (an interrupted copy or download?): save or "
                          "fetch it again")


def read_keras_config(path, where=None):
    """The config.json of the .keras archive at `path` (a dict: its "module", "class_name",
    "config"), read without building the model.

    Args:
      where: how messages name the file (e.g. "--init_checkpoint=x.keras"); default `path`.

    Raises:
      FileNotFoundError: nothing at `path`.
      ModelFileError: a file that is no readable .keras archive, naming `where` and the cause.
    """
    path, where = str(path), where or str(path)
    if not fileio.exists(path):
        raise FileNotFoundError(f"{where}: no such file")
    try:
        with fileio.open_file(path, "rb") as f, zipfile.ZipFile(_seekable(f)) as archive:
            return json.loads(archive.read(_KERAS_CONFIG_ENTRY))
    except KeyError:
        raise _unreadable(where, f"no {_KERAS_CONFIG_ENTRY} in the archive") from None
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as e:
        raise _unreadable(where, str(e).splitlines()[0] if str(e) else type(e).__name__) from None


def _seekable(stream):
    # zipfile seeks; a remote file's stream does not: it is read into memory.
    if stream.seekable():
        return stream
    return io.BytesIO(stream.read())


def load_keras_file(path, where=None, compile=False):  # noqa: A002  (Keras' own argument name)
    """Loads the .keras file at `path` (local or any tf.io.gfile file system).

    Raises:
      FileNotFoundError, ModelFileError: as read_keras_config; ModelFileError also for an
        archive Keras cannot load (say, a truncated weights entry), with Keras' reason.
    """
    where = where or str(path)
    read_keras_config(path, where)
    try:
        return keras.saving.load_model(str(path), compile=compile)
    except (ValueError, OSError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ModelFileError(f"{where}: Keras cannot load this .keras file ({reason})") \
            from None


def load_model(path, compile=False):  # noqa: A002  (Keras' own argument name)
    """Loads a bert_tf model from a .keras file or a run's output directory.

    A run directory gives its fine-tuned `model.keras`, else pre-training's `pretrainer.keras`,
    else `encoder.keras` (load `RUN/encoder.keras` by name for the encoder of a pre-training run).

    Args:
      path: a .keras file or a run directory (local or any tf.io.gfile filesystem).
      compile: restore the training configuration saved with the model (default: inference only).

    Returns:
      The Keras model (a `BertEncoder`, `BertPretrainer`, `BertClassifier`, ...).

    Raises:
      FileNotFoundError, ValueError: no model at `path`; ModelFileError: a .keras file that
        cannot be read, or a directory of models of two formats, naming it.

    Examples:

    >>> model = bert_tf.load_model("/tmp/my_classifier")          # doctest: +SKIP
    >>> encoder = bert_tf.load_model("/tmp/run/encoder.keras")    # doctest: +SKIP
    """
    if fileio.isdir(str(path)):
        check_one_model(str(path))
    # Keras copies a remote (gs://, ram://, ...) .keras archive to a local temp file itself.
    return load_keras_file(run_directory.model_file(path), compile=compile)
