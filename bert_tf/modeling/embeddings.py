"""BERT's input embeddings: the word + position + token-type sum and the position layers
(learned, or fixed sinusoidal)."""

import math

import keras
import numpy as np
from keras import ops

from bert_tf.modeling.initializers import truncated_normal
from bert_tf.modeling.dropout import FusedDropout
from bert_tf.modeling.layer_norm import FusedLayerNorm


@keras.saving.register_keras_serializable(package="bert_tf")
class PositionEmbedding(keras.layers.Layer):
    """A learned absolute position table; returns its first S rows for an input of length S.

    TF1 name: `bert/embeddings/position_embeddings` ([max_length, width]).

    Args:
      max_length: number of rows (the config's max_position_embeddings).
      width: embedding width H.
      initializer_range: stddev of the truncated-normal initializer.
    """

    def __init__(self, max_length, width, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.max_length = max_length
        self.width = width
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.max_length, self.width),
            initializer=truncated_normal(self.initializer_range))
        self.built = True

    def call(self, input_ids):
        """Args: input_ids int [B, S] (only S is read). Returns: float [S, width]."""
        return self.embeddings[:ops.shape(input_ids)[1]]

    def lookup(self, position_ids):
        """Rows at explicit positions (packed rows). Args: int [B, S]. Returns: [B, S, width]."""
        return ops.take(self.embeddings, ops.cast(position_ids, "int32"), axis=0)

    def get_config(self):
        config = super().get_config()
        config.update(max_length=self.max_length, width=self.width,
                      initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class SinusoidalPositionEmbedding(keras.layers.Layer):
    """Fixed sinusoidal position embeddings (Vaswani et al., 2017); no variables.

    Row p, column 2i is sin(p / 10000^(2i / width)) and column 2i + 1 is
    cos(p / 10000^(2i / width)); computed in float32 for any length, so inputs are not limited
    to a table size.

    Args:
      width: embedding width (odd widths end with a sine column).
    """

    def __init__(self, width, **kwargs):
        super().__init__(**kwargs)
        self.width = width

    def call(self, input_ids):
        """Args: input_ids int [B, S] (only S is read). Returns: float32 [S, width]."""
        return self._encode(ops.arange(ops.shape(input_ids)[1]))

    def lookup(self, position_ids):
        """Rows at explicit positions (packed rows). Args: int [B, S]. Returns: float32
        [B, S, width], equal to call(S)'s rows at those positions."""
        return self._encode(position_ids)

    def _encode(self, positions):
        """int [...] -> float32 [..., width]."""
        positions_1 = ops.expand_dims(ops.cast(positions, "float32"), -1)
        # Column j uses the frequency of its sin/cos pair, 10000^(-2 * (j // 2) / width).
        pair_w = (np.arange(self.width) // 2 * 2).astype(np.float32)
        frequency_w = np.exp(pair_w * np.float32(-math.log(10000.0) / self.width),
                             dtype=np.float32)
        angles_w = positions_1 * frequency_w
        is_sine_w = np.arange(self.width) % 2 == 0
        return ops.where(is_sine_w, ops.sin(angles_w), ops.cos(angles_w))

    def compute_output_spec(self, input_ids):
        return keras.KerasTensor((input_ids.shape[1], self.width), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(width=self.width)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEmbeddings(keras.layers.Layer):
    """Token + segment + position embeddings, summed, then LayerNorm and dropout.

    TF1 names (under `bert/embeddings/`): word_embeddings, token_type_embeddings,
    position_embeddings, LayerNorm/{gamma,beta}. Here: sub-layers `word_embeddings`,
    `token_type_embeddings`, `position_embeddings` (each holding `embeddings`) and `layer_norm`.

    Args:
      vocab_size: V, rows of the word-embedding table [V, H].
      type_vocab_size: number of segment ids.
      max_position_embeddings: rows of the position table; inputs may not be longer (with
        learned position embeddings).
      hidden_size: H, the width of the tables and of the output (ALBERT: the embedding size E).
      initializer_range: stddev of the truncated-normal initializer of the three tables.
      layer_norm_eps: LayerNorm epsilon.
      dropout: dropout rate on the normalized sum.
      position_embedding_type: "learned" (a trained table) or "sinusoidal" (fixed, no
        variables; the `position_embeddings` sub-layer is then a SinusoidalPositionEmbedding).
    """

    def __init__(self, vocab_size, type_vocab_size, max_position_embeddings, hidden_size,
                 initializer_range=0.02, layer_norm_eps=1e-12, dropout=0.1,
                 position_embedding_type="learned", **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.type_vocab_size = type_vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.dropout = dropout
        self.position_embedding_type = position_embedding_type
        policy = self.dtype_policy
        self.word_embeddings = keras.layers.Embedding(
            vocab_size, hidden_size, embeddings_initializer=truncated_normal(initializer_range),
            dtype=policy, name="word_embeddings")
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size, hidden_size,
            embeddings_initializer=truncated_normal(initializer_range),
            dtype=policy, name="token_type_embeddings")
        if position_embedding_type == "learned":
            self.position_embeddings = PositionEmbedding(
                max_position_embeddings, hidden_size, initializer_range, dtype=policy,
                name="position_embeddings")
        elif position_embedding_type == "sinusoidal":
            self.position_embeddings = SinusoidalPositionEmbedding(
                hidden_size, dtype=policy, name="position_embeddings")
        else:
            raise ValueError(f"position_embedding_type={position_embedding_type!r} is not one of "
                             "learned, sinusoidal")
        self.layer_norm = FusedLayerNorm(
            epsilon=layer_norm_eps, dtype=policy, name="layer_norm")
        self.dropout_layer = FusedDropout(dropout, dtype=policy, name="dropout")

    def build(self, input_shape=None):
        self.word_embeddings.build((None, None))
        self.token_type_embeddings.build((None, None))
        self.position_embeddings.build(None)
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, position_ids=None, training=None):
        """Sums the three embeddings.

        Args:
          input_word_ids, input_type_ids: int [B, S].
          position_ids: optional int [B, S], each token's position (packed rows: its offset in
            its own instance); default 0..S-1 in every row.

        Returns:
          float [B, S, H].
        """
        self._check_length(input_word_ids.shape[1])
        if position_ids is None:
            positions = self.position_embeddings(input_word_ids)
        else:
            positions = self.position_embeddings.lookup(position_ids)
        embeddings_bsh = (self.word_embeddings(input_word_ids)
                          + self.token_type_embeddings(input_type_ids)
                          + ops.cast(positions, self.compute_dtype))
        embeddings_bsh = self.layer_norm(embeddings_bsh)
        return self.dropout_layer(embeddings_bsh, training=training)

    def _check_length(self, static_length):
        if (self.position_embedding_type == "learned" and static_length is not None
                and static_length > self.max_position_embeddings):
            raise ValueError(
                f"input length {static_length} exceeds max_position_embeddings="
                f"{self.max_position_embeddings}")

    def compute_output_spec(self, input_word_ids, input_type_ids, position_ids=None,
                            training=None):
        self._check_length(input_word_ids.shape[1])
        return keras.KerasTensor((*input_word_ids.shape, self.hidden_size), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, type_vocab_size=self.type_vocab_size,
                      max_position_embeddings=self.max_position_embeddings,
                      hidden_size=self.hidden_size, initializer_range=self.initializer_range,
                      layer_norm_eps=self.layer_norm_eps, dropout=self.dropout,
                      position_embedding_type=self.position_embedding_type)
        return config
