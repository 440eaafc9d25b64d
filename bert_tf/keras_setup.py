"""bert_tf's terms with Keras: the backends its models run on, and its classes in Keras' registry.

Backends: the models are written in keras.ops for TensorFlow and JAX. Any other
KERAS_BACKEND is refused in one line naming the variable and the backends that work, before
Keras is imported: by bert_tf.modeling, and by the first `import keras` after `import bert_tf`
when the backend's package is not installed (Keras' own import would fail deep inside).

Registry: keras.saving.load_model finds a custom class of a .keras file only once the module
that registers it has run. `import bert_tf` loads no Keras (the tokenizer and the config stay
cheap), so it calls `register_when_keras_loads()`: the modules whose classes bert_tf's .keras
files name (`REGISTERING_MODULES`: the models and layers, the optimizers and schedules a
compiled model saves) are imported right after the process first imports Keras, or at once
when it has. None of them imports TensorFlow on JAX. Standard library only.
"""

import importlib
import importlib.util
import json
import os
import sys

from bert_tf import import_hooks

SUPPORTED_BACKENDS = ("tensorflow", "jax")
REGISTERING_MODULES = ("bert_tf.modeling", "bert_tf.training.optimization")


class UnsupportedBackendError(ImportError):
    """KERAS_BACKEND names a backend the models do not run on."""


def _configured_backend():
    """The backend Keras will load: KERAS_BACKEND, else keras.json's, else tensorflow."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"], "KERAS_BACKEND"
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    path = os.path.join(home, "keras.json")
    try:
        with open(path, encoding="utf-8") as f:
            backend = json.load(f).get("backend")
    except (OSError, ValueError, AttributeError):
        backend = None
    return (backend, f"the backend of {path}") if backend else ("tensorflow", None)


def backend():
    """(the Keras backend of this process, where it was set), Keras imported or not."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend"):
        name = keras.backend.backend()
        return name, "KERAS_BACKEND" if os.environ.get("KERAS_BACKEND") == name else None
    return _configured_backend()


def check_backend():
    """Raises UnsupportedBackendError, in one line naming the setting and the backends that
    work, unless the models can run on the process's Keras backend."""
    name, source = backend()
    if name in SUPPORTED_BACKENDS:
        return
    setting = f"KERAS_BACKEND={name}" if source in (None, "KERAS_BACKEND") else (
        f"{source} is {name!r}")
    raise UnsupportedBackendError(
        f"{setting}: bert_tf's models run on the Keras backends "
        f"{' and '.join(SUPPORTED_BACKENDS)}; set KERAS_BACKEND=tensorflow (the default) or "
        "KERAS_BACKEND=jax")


def register():
    """Imports REGISTERING_MODULES (their classes enter Keras' registry), unless the backend
    is one the models refuse. A module being imported already is left to finish."""
    if backend()[0] not in SUPPORTED_BACKENDS:
        return
    for module in REGISTERING_MODULES:
        if module not in sys.modules:
            importlib.import_module(module)


def _register_after(load):
    name = backend()[0]
    if name not in SUPPORTED_BACKENDS and importlib.util.find_spec(name) is None:
        # Keras' own import would fail deep inside on the missing package (torch): say what
        # works instead. An installed one loads; the models refuse it when imported.
        check_backend()
    load()
    register()


def register_when_keras_loads():
    """`register()` now if Keras is imported, else right after its first import."""
    if "keras" in sys.modules:
        register()
    else:
        import_hooks.around_first_import("keras", _register_after)
