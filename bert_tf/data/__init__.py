"""Pre-training input pipelines: TFRecords of masked examples, or raw text masked on the fly.

The tf.data pipelines are imported when first used, so the TensorFlow-free parts
(bert_tf.data.create_pretraining_data, tfrecord_io, patterns) start without loading TensorFlow.
"""

import importlib
import sys
import types

_LAZY = {
    "pretraining_dataset": "bert_tf.data.pretraining_dataset",
    "text_pretraining_dataset": "bert_tf.data.dynamic_masking",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bert_tf.data' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


class _DataPackage(types.ModuleType):
    """This package's module type: keeps `bert_tf.data.pretraining_dataset` the function.

    Importing a submodule binds it as an attribute of its package, and the submodule
    bert_tf.data.pretraining_dataset shares its name with the function it defines, so without
    this the first import of that submodule (by any module, in any order) would make
    `from bert_tf.data import pretraining_dataset` return the module. Binding is refused for
    the lazily exported names, which then always resolve through __getattr__ to the function;
    the submodule itself stays importable by its full name.
    """

    def __setattr__(self, name, value):
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _DataPackage

__all__ = list(_LAZY)
