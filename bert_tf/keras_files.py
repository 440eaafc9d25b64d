"""Reading .keras files: the one reader every command, bert_tf.load_model and the checkpoint
importers use. A file that is truncated or is no Keras archive is named in one line
(model_directory.ModelFileError), not with Keras' "File not found". Keras is imported when a file
is loaded, not at import.
"""

import io
import json
import zipfile

from bert_tf import fileio, keras_setup
from bert_tf.model_directory import ModelFileError

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
    import keras

    # The classes the file names (bert_tf's models, layers and optimizers) enter Keras' registry.
    keras_setup.register()
    where = where or str(path)
    read_keras_config(path, where)
    try:
        return keras.saving.load_model(str(path), compile=compile)
    except (ValueError, OSError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ModelFileError(f"{where}: Keras cannot load this .keras file ({reason})") \
            from None
