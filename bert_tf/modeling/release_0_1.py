"""Reading .keras files of bert_tf 0.1, which named the modern encoder's class BertEncoder.

Such a file names the modern encoder by BertEncoder's registered name (bert_tf>BertEncoder);
`BertEncoder.from_config` hands a modern config to `Release01ModernBertEncoder`. Keras' weight
files address a nested model by the snake case of its class's `__name__`
(`layers/bert_encoder/...`), so that class keeps the `__name__` BertEncoder while its Python
name (and `__qualname__`) says what it is.
"""

import keras

from bert_tf.modeling.modern_encoder import ModernBertEncoder


# Registered under its own name (bert_tf>BertEncoder is BERT's); saved again, a file names it.
@keras.saving.register_keras_serializable(package="bert_tf", name="Release01ModernBertEncoder")
class Release01ModernBertEncoder(ModernBertEncoder):
    """A ModernBertEncoder read from a bert_tf 0.1 `.keras` file; the same model, under the
    class `__name__` that file's weight paths use (saved again, it keeps them)."""


# The weight paths of 0.1 files (layers/bert_encoder/...) come from this name.
Release01ModernBertEncoder.__name__ = "BertEncoder"
