"""BertSentenceEmbedder: an encoder plus sentence pooling, a vector per input text."""

import keras

from bert_tf.config import ENCODER_INPUTS
from bert_tf.modeling.encoder_base import Encoder
from bert_tf.modeling.task_model import EncoderTaskModel
from bert_tf.config import check_pooling_modes
from bert_tf.modeling.pooling import SentencePooling


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSentenceEmbedder(EncoderTaskModel):
    """Sentence embeddings: pooled sequence_output, optionally L2-normalised.

    embedding = pooling(sequence_output, input_mask): float32 [B, D], D = len(pooling) * H
    (see bert_tf.modeling.pooling for the modes; the tanh pooler is not used). With
    `normalize` every vector has unit length, so a dot product is the cosine similarity, as
    sentence-transformers models with a Normalize module (all-MiniLM-L6-v2) give.

    Trained contrastively by bert_tf.training.contrastive (no Keras loss of its own);
    bert_tf.interop.sentence_transformers reads and writes sentence-transformers directories.

    Args:
      encoder: a `BertEncoder`.
      pooling: a mode or modes of bert_tf.config.POOLING_MODES.
      normalize: L2-normalise the pooled vectors.
      **kwargs: `name`, `trainable`.

    Examples:

    >>> from bert_tf.config import BertConfig
    >>> from bert_tf.modeling import BertEncoder
    >>> model = BertSentenceEmbedder(BertEncoder(BertConfig.from_preset("bert_tiny")))
    >>> ids = keras.ops.ones((2, 8), "int32")
    >>> tuple(model({"input_word_ids": ids, "input_mask": ids,
    ...              "input_type_ids": keras.ops.zeros_like(ids)}).shape)
    (2, 128)
    """

    def __init__(self, encoder, pooling="mean", normalize=True, **kwargs):
        if not isinstance(encoder, Encoder):
            raise TypeError(f"BertSentenceEmbedder: encoder must be a BertEncoder or "
                            f"ModernBertEncoder, got {type(encoder).__name__}")
        self.pooling = check_pooling_modes(pooling, "BertSentenceEmbedder")
        self.normalize = bool(normalize)
        kwargs.setdefault("name", "bert_sentence_embedder")
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ENCODER_INPUTS}
        # float32 whatever the encoder's policy: similarities and the contrastive softmax
        # need the precision.
        pool = SentencePooling(self.pooling, normalize=self.normalize, dtype="float32",
                               name="pooling")
        outputs = pool(encoder(inputs)["sequence_output"], inputs["input_mask"])
        # The head needs the mask input, which EncoderTaskModel's _head does not get.
        super(EncoderTaskModel, self).__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.encoder = encoder

    def _uses_pooler(self):
        return False

    @property
    def embedding_dim(self):
        """D, the width of the vectors."""
        return len(self.pooling) * self.encoder.config.hidden_size

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder),
                "pooling": list(self.pooling), "normalize": self.normalize}
