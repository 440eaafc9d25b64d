"""bert_tf: BERT pre-training (MLM + NSP) and fine-tuning with TensorFlow 2 and Keras 3."""

from bert_tf import lazy_names
from bert_tf.config import BertConfig, ConfigError

__version__ = "0.1.0"

# The models pull in Keras and its backend (seconds of start-up); load them on first use so that
# the pure-Python tokenizer and the config stay cheap to import. Importing bert_tf.modeling
# registers the Keras classes .keras files name (bert_tf.load_model and every command do).
_LAZY = {name: "bert_tf.modeling" for name in (
    "BertEncoder", "ModernBertEncoder", "build_encoder", "BertPretrainer", "BertClassifier",
    "BertSpanLabeler", "BertTokenClassifier", "BertSentenceEmbedder", "ElectraPretrainer")}
_LAZY["load_model"] = "bert_tf.saving"


__getattr__ = lazy_names.module_getattr(__name__, _LAZY)


__all__ = ["BertConfig", "ConfigError", "__version__", *_LAZY]
