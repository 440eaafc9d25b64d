"""bert_tf: BERT pre-training (MLM + NSP) and fine-tuning with TensorFlow 2 and Keras 3."""

from bert_tf.config import BertConfig, ConfigError

__version__ = "0.1.0"

__all__ = ["BertConfig", "ConfigError", "__version__"]
