"""build_encoder: the encoder class a config's architecture names."""

from bert_tf.modeling.bert_encoder import BertEncoder
from bert_tf.modeling.encoder_base import as_config
from bert_tf.modeling.modern_encoder import ModernBertEncoder

ENCODER_CLASSES = {"bert": BertEncoder, "modernbert": ModernBertEncoder}


def build_encoder(config, dtype=None, **kwargs):
    """The encoder of `config`'s architecture: BertEncoder ("bert") or ModernBertEncoder
    ("modernbert").

    Args:
      config: a BertConfig or ModernBertConfig, or a dict of bert_config.json fields.
      dtype: optional dtype policy for every layer.
      **kwargs: `name`, `trainable`.

    Returns:
      An `Encoder`.
    """
    config = as_config(config, "build_encoder")
    return ENCODER_CLASSES[config.architecture](config, dtype=dtype, **kwargs)

