"""bert_tf: BERT pre-training (MLM + NSP) and fine-tuning with TensorFlow 2 and Keras 3."""

from bert_tf import keras_setup, lazy_names, quiet_logs
from bert_tf.config import BertConfig, ConfigError, EncoderConfig, ModernBertConfig

__version__ = "0.1.0"

# Before TensorFlow loads: its start-up, device and XLA notices stay off stderr
# (TF_CPP_MIN_LOG_LEVEL=0 shows them).
quiet_logs.quiet_tensorflow()
# The models pull in Keras and its backend (seconds of start-up); load them on first use so that
# the pure-Python tokenizer and the config stay cheap to import. The classes .keras files name
# enter Keras' registry when Keras loads, so keras.saving.load_model reads bert_tf's files.
keras_setup.register_when_keras_loads()
_LAZY = {name: "bert_tf.modeling" for name in (
    "BertEncoder", "ModernBertEncoder", "build_encoder", "BertPretrainer", "BertClassifier",
    "BertSpanLabeler", "BertTokenClassifier", "BertSentenceEmbedder", "ElectraPretrainer")}
_LAZY["load_model"] = "bert_tf.saving"
_LAZY["load_task"] = "bert_tf.tasks"


__getattr__ = lazy_names.module_getattr(__name__, _LAZY)


__all__ = ["BertConfig", "ConfigError", "EncoderConfig", "ModernBertConfig", "__version__", *_LAZY]
