"""bert_tf: BERT pre-training (MLM + NSP) and fine-tuning with TensorFlow 2 and Keras 3."""

import importlib

from bert_tf.config import BertConfig, ConfigError

__version__ = "0.1.0"

# The models pull in Keras and its backend (seconds of start-up); load them on first use so that
# the pure-Python tokenizer and the config stay cheap to import. Importing bert_tf.modeling
# registers the Keras classes .keras files name (bert_tf.load_model and every command do).
_LAZY = {name: "bert_tf.modeling" for name in (
    "BertEncoder", "ModernBertEncoder", "build_encoder", "BertPretrainer", "BertClassifier",
    "BertSpanLabeler", "BertTokenClassifier", "BertSentenceEmbedder")}
_LAZY["load_model"] = "bert_tf.saving"


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bert_tf' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)


__all__ = ["BertConfig", "ConfigError", "__version__", *_LAZY]
