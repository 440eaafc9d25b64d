"""The pre-training heads on top of the encoder: masked-LM (also over factorized embeddings),
SpanBERT's span-boundary head and ELECTRA's replaced-token head."""

import keras
from keras import ops

from bert_tf.modeling import kernels
from bert_tf.modeling.activations import get_activation
from bert_tf.modeling.indexing import gather_positions
from bert_tf.modeling.initializers import truncated_normal
from bert_tf.modeling.layer_norm import FusedLayerNorm


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMHead(keras.layers.Layer):
    """The masked-LM head: gather masked positions, transform, and score against the vocabulary.

    Only the P masked positions go through the transform dense (not all S), and the output
    projection reuses the word-embedding table (tied weights: the same variable, transposed)
    plus a per-token bias. With factorized embeddings (ALBERT) the transform maps the encoder's
    width H down to the table's width E. TF1 names (under `cls/predictions/`): transform/dense ->
    `transform`, transform/LayerNorm -> `transform_layer_norm`, output_bias -> `output_bias`.

    Args:
      embedding_layer: the encoder's word-embedding layer; its `embeddings` [V, H] variable is
        the output projection. Not serialized: the owning model passes it again on load.
      hidden_act: bert_config activation name of the transform.
      initializer_range: stddev of the truncated-normal kernel initializer.
      layer_norm_eps: LayerNorm epsilon.
      input_size: width of the sequence_output it reads (default: the table's width).
      use_bias: a bias on the transform dense (ModernBERT's head has none).
      norm_bias: a beta on the transform LayerNorm (ModernBERT's head has none).
    """

    def __init__(self, embedding_layer, hidden_act="gelu", initializer_range=0.02,
                 layer_norm_eps=1e-12, input_size=None, use_bias=True, norm_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        self.use_bias = use_bias
        self.norm_bias = norm_bias
        self.embedding_layer = embedding_layer
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.vocab_size, self.hidden_size = (embedding_layer.input_dim,
                                             embedding_layer.output_dim)
        self.input_size = self.hidden_size if input_size is None else input_size
        policy = self.dtype_policy
        self.transform = keras.layers.Dense(
            self.hidden_size, activation=get_activation(hidden_act), use_bias=use_bias,
            kernel_initializer=truncated_normal(initializer_range), dtype=policy,
            name="transform")
        self.transform_layer_norm = FusedLayerNorm(
            epsilon=layer_norm_eps, center=norm_bias, dtype=policy, name="transform_layer_norm")

    def build(self, input_shape=None):
        self.transform.build((None, self.input_size))
        self.transform_layer_norm.build((None, self.hidden_size))
        # float32 and not autocast: the logits are computed in float32 under mixed precision.
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros", autocast=False)
        self.built = True

    def call(self, sequence_output, masked_positions):
        """Scores the vocabulary at the masked positions.

        Args:
          sequence_output: float [B, S, H], the encoder's last layer.
          masked_positions: int [B, P], indices into S (0-padded).

        Returns:
          float32 logits [B, P, V].
        """
        masked_bph = gather_positions(sequence_output, masked_positions)
        batch, num_predictions = ops.shape(masked_bph)[0], ops.shape(masked_bph)[1]
        masked_nh = ops.reshape(masked_bph, [-1, self.input_size])  # N = B*P rows.
        masked_nh = self.transform_layer_norm(self.transform(masked_nh))
        return _vocabulary_logits(masked_nh, self.embedding_layer.embeddings, self.output_bias,
                                  self.compute_dtype, [batch, num_predictions, self.vocab_size])

    def compute_output_spec(self, sequence_output, masked_positions):
        return keras.KerasTensor(
            (sequence_output.shape[0], masked_positions.shape[1], self.vocab_size), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(hidden_act=self.hidden_act, initializer_range=self.initializer_range,
                      layer_norm_eps=self.layer_norm_eps, input_size=self.input_size)
        if not (self.use_bias and self.norm_bias):
            config.update(use_bias=self.use_bias, norm_bias=self.norm_bias)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class SpanBoundaryHead(keras.layers.Layer):
    """SpanBERT's span-boundary objective (SBO): predict each masked token from its span's edges.

    For a masked token at position i inside a masked span s..e, the head reads the encoder's
    states of the two boundary tokens x[s-1] and x[e+1] (never masked) and a learned embedding
    of the relative position i - s, and runs them through a two-layer feed-forward network with
    GELU and LayerNorm after each layer (as the paper); the result is scored against the tied
    word-embedding table plus its own per-token bias, like the masked-LM head.

    Sub-layers: `relative_position_embeddings` ([max_span_pieces, H]), `transform_1` (3H -> H)
    and `transform_1_layer_norm`, `transform_2` (H -> E, the table's width) and
    `transform_2_layer_norm`, `output_bias` [V].

    Args:
      embedding_layer: the encoder's word-embedding layer ([V, E] table, tied). Not serialized:
        the owning model passes it again on load.
      hidden_size: H, the width of the encoder's sequence_output.
      max_span_pieces: rows of the relative-position table; a piece further than this from
        its span's start uses the last row.
      hidden_act: bert_config activation name of both feed-forward layers.
      initializer_range: stddev of the truncated-normal initializer.
      layer_norm_eps: LayerNorm epsilon.
    """

    def __init__(self, embedding_layer, hidden_size, max_span_pieces=32, hidden_act="gelu",
                 initializer_range=0.02, layer_norm_eps=1e-12, **kwargs):
        super().__init__(**kwargs)
        self.embedding_layer = embedding_layer
        self.hidden_size = hidden_size
        self.max_span_pieces = max_span_pieces
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.vocab_size, self.embedding_width = (embedding_layer.input_dim,
                                                 embedding_layer.output_dim)
        policy = self.dtype_policy
        self.relative_position_embeddings = keras.layers.Embedding(
            max_span_pieces, hidden_size,
            embeddings_initializer=truncated_normal(initializer_range), dtype=policy,
            name="relative_position_embeddings")

        def dense(units, name):
            return keras.layers.Dense(units, activation=get_activation(hidden_act),
                                      kernel_initializer=truncated_normal(initializer_range),
                                      dtype=policy, name=name)

        def layer_norm(name):
            return FusedLayerNorm(epsilon=layer_norm_eps, dtype=policy, name=name)

        self.transform_1 = dense(hidden_size, "transform_1")
        self.transform_1_layer_norm = layer_norm("transform_1_layer_norm")
        self.transform_2 = dense(self.embedding_width, "transform_2")
        self.transform_2_layer_norm = layer_norm("transform_2_layer_norm")

    def build(self, input_shape=None):
        self.relative_position_embeddings.build((None,))
        self.transform_1.build((None, 3 * self.hidden_size))
        self.transform_1_layer_norm.build((None, self.hidden_size))
        self.transform_2.build((None, self.hidden_size))
        self.transform_2_layer_norm.build((None, self.embedding_width))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros", autocast=False)
        self.built = True

    def call(self, sequence_output, masked_positions, left_boundaries, right_boundaries):
        """Scores the vocabulary at the masked positions from their spans' boundaries.

        Args:
          sequence_output: float [B, S, H], the encoder's last layer.
          masked_positions: int [B, P], positions of the masked tokens (0-padded).
          left_boundaries: int [B, P], position s-1 just before each token's masked span.
          right_boundaries: int [B, P], position e+1 just after it.

        Returns:
          float32 logits [B, P, V].
        """
        positions_bp = ops.cast(masked_positions, "int32")
        left_bp = ops.cast(left_boundaries, "int32")
        left_bph = gather_positions(sequence_output, left_bp)
        right_bph = gather_positions(sequence_output, right_boundaries)
        # Offset of the token inside its span (0 for the span's first piece); padding slots
        # (all zeros) land on row 0 and carry weight 0 in the loss.
        offset_bp = ops.clip(positions_bp - left_bp - 1, 0, self.max_span_pieces - 1)
        offset_bph = ops.cast(self.relative_position_embeddings(offset_bp), self.compute_dtype)
        batch, num_predictions = ops.shape(positions_bp)[0], ops.shape(positions_bp)[1]
        x_n3h = ops.reshape(ops.concatenate([left_bph, right_bph, offset_bph], axis=-1),
                            [-1, 3 * self.hidden_size])  # N = B*P rows.
        x_nh = self.transform_1_layer_norm(self.transform_1(x_n3h))
        x_ne = self.transform_2_layer_norm(self.transform_2(x_nh))
        return _vocabulary_logits(x_ne, self.embedding_layer.embeddings, self.output_bias,
                                  self.compute_dtype, [batch, num_predictions, self.vocab_size])

    def compute_output_spec(self, sequence_output, masked_positions, left_boundaries,
                            right_boundaries):
        return keras.KerasTensor(
            (sequence_output.shape[0], masked_positions.shape[1], self.vocab_size), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, max_span_pieces=self.max_span_pieces,
                      hidden_act=self.hidden_act, initializer_range=self.initializer_range,
                      layer_norm_eps=self.layer_norm_eps)
        return config



@keras.saving.register_keras_serializable(package="bert_tf")
class ReplacedTokenHead(keras.layers.Layer):
    """ELECTRA's discriminator head: one logit per token that the token was replaced.

    `dense` (H -> H with the config's activation) then `dense_prediction` (H -> 1), the two
    layers of ELECTRA's `discriminator_predictions` (transformers' ElectraForPreTraining keeps
    the names).

    Args:
      hidden_size: H, the width of the encoder's sequence_output.
      hidden_act: bert_config activation name of the first layer.
      initializer_range: stddev of the truncated-normal kernel initializer.
    """

    def __init__(self, hidden_size, hidden_act="gelu", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        policy = self.dtype_policy
        self.dense = keras.layers.Dense(
            hidden_size, activation=get_activation(hidden_act),
            kernel_initializer=truncated_normal(initializer_range), dtype=policy, name="dense")
        self.dense_prediction = keras.layers.Dense(
            1, kernel_initializer=truncated_normal(initializer_range), dtype=policy,
            name="dense_prediction")

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))
        self.dense_prediction.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output):
        """Args: sequence_output float [B, S, H]. Returns: float32 logits [B, S]."""
        logits_bs1 = self.dense_prediction(self.dense(sequence_output))
        return ops.cast(logits_bs1[..., 0], "float32")

    def compute_output_spec(self, sequence_output):
        return keras.KerasTensor(sequence_output.shape[:-1], "float32")

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, hidden_act=self.hidden_act,
                      initializer_range=self.initializer_range)
        return config

def _vocabulary_logits(x_ne, table_ve, output_bias_v, compute_dtype, shape):
    """Scores against the tied word-embedding table plus a per-token bias: float32 logits.

    Args: x_ne float [N, E]; table_ve the [V, E] embedding variable; output_bias_v float32 [V];
      shape: the logits' shape, e.g. [B, P, V] with N = B * P.
    """
    logits_nv = kernels.matmul_transposed(x_ne, ops.cast(table_ve, compute_dtype))
    return ops.reshape(ops.cast(logits_nv, "float32") + output_bias_v, shape)
