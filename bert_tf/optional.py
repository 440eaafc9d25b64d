"""Imports of the optional dependencies, with an error that names the pip extra to install."""

import importlib

# module -> (pip extra, what needs it)
_EXTRAS = {
    "tensorflow_datasets": ("tfds", "reading TFDS data sets (--input_tfds, --tfds_data_dir)"),
    "keras_hub": ("keras-hub", "keras-hub checkpoints and presets"),
    "orbax.checkpoint": ("jax", "checkpoints of --backend=jax runs (Orbax)"),
}


def require(module):
    """Imports an optional dependency, or raises ImportError naming the extra that installs it.

    Args:
      module: "tensorflow_datasets", "keras_hub" or "orbax.checkpoint".
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        extra, purpose = _EXTRAS[module]
        raise ImportError(f"{purpose} needs the {module} package, which bert_tf installs only "
                          f"with an extra: pip install 'bert_tf[{extra}]' ({e})") from None
