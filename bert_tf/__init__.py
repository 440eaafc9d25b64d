"""bert_tf: BERT pre-training (MLM + NSP) and fine-tuning with TensorFlow 2 and Keras 3."""

import importlib
import importlib.abc
import importlib.util
import sys

from bert_tf.config import BertConfig, ConfigError

__version__ = "0.1.0"

# The models pull in TensorFlow and Keras (seconds of start-up); load them on first use so that
# the pure-Python tokenizer and the config stay cheap to import.
_LAZY = {name: "bert_tf.modeling" for name in (
    "BertEncoder", "BertPretrainer", "BertClassifier", "BertSpanLabeler", "BertTokenClassifier",
    "BertSentenceEmbedder")}
_LAZY["load_model"] = "bert_tf.saving"

# Modules whose Keras classes the models bert_tf saves can name. (The tokenizer layers register
# when bert_tf.text is imported: importing tensorflow_text here would load its ops into every
# process that merely imports keras.)
_REGISTERING_MODULES = ("bert_tf.modeling", "bert_tf.training.optimization")


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bert_tf' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)


def _register_with_keras():
    for module in _REGISTERING_MODULES:
        importlib.import_module(module)


class _RegisterWhenKerasLoads(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Registers bert_tf's Keras classes right after `keras` finishes importing.

    `import bert_tf` stays cheap (no TensorFlow), yet `keras.saving.load_model("encoder.keras")`
    finds BertEncoder: Keras only looks classes up in its registry, which the modules above fill.
    A find_spec("keras") that only probes (TensorFlow does) loads nothing, so the finder stays
    until keras is really executed.
    """

    def __init__(self):
        self._searching = False
        self._keras_loader = None

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "keras" or self._searching:
            return None
        self._searching = True
        try:
            spec = importlib.util.find_spec("keras")
        finally:
            self._searching = False
        if spec is None or spec.loader is None:
            return spec
        self._keras_loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._keras_loader.create_module(spec)

    def exec_module(self, module):
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        module.__spec__.loader = module.__loader__ = self._keras_loader
        self._keras_loader.exec_module(module)
        _register_with_keras()


if "keras" in sys.modules:
    _register_with_keras()
else:
    sys.meta_path.insert(0, _RegisterWhenKerasLoads())

__all__ = ["BertConfig", "ConfigError", "__version__", *_LAZY]
