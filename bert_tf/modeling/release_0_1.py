"""Reading .keras files of bert_tf 0.1, which named the modern encoder's class BertEncoder.

Keras' weight files address a nested model by its class name in snake case
(`layers/bert_encoder/...`), so such a file's weights load only into a class of that name.
"""

import keras

from bert_tf.modeling.modern_encoder import ModernBertEncoder


# Registered under its own name (bert_tf>BertEncoder is BERT's); saved again, a file names it.
@keras.saving.register_keras_serializable(package="bert_tf", name="Release01ModernBertEncoder")
class BertEncoder(ModernBertEncoder):
    """A ModernBertEncoder read from a bert_tf 0.1 `.keras` file; the same model, under the
    class name that file's weight paths use (saved again, it keeps them)."""
