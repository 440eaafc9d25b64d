"""The post-LN transformer block of BERT (with ALBERT's cross-layer sharing) and the
attention bias it adds for padding keys."""

import math

import keras
from keras import ops

from bert_tf.modeling import attention, kernels
from bert_tf.modeling.activations import get_activation
from bert_tf.modeling.initializers import truncated_normal
from bert_tf.modeling.dropout import FusedDropout
from bert_tf.modeling.layer_norm import FusedLayerNorm


@keras.saving.register_keras_serializable(package="bert_tf")
class AttentionBias(keras.layers.Layer):
    """Turns a padding mask into an additive float32 attention bias shared by all blocks
    (attention.padding_bias), computed once per batch instead of once per layer."""

    def call(self, input_mask):
        """Args: input_mask: int [B, S], 1 = real token. Returns: float32 [B, 1, 1, S]."""
        return attention.padding_bias(input_mask)

    def compute_output_spec(self, input_mask):
        return keras.KerasTensor((input_mask.shape[0], 1, 1, input_mask.shape[1]), "float32")


@keras.saving.register_keras_serializable(package="bert_tf")
class TransformerBlock(keras.layers.Layer):
    """One post-LayerNorm BERT block: self-attention, add & norm, feed-forward, add & norm.

    All dense layers run on [B*S, H] matrices (as the original does) so every projection is a
    plain 2-D GEMM; attention is two batched matmuls over [B, A, S, d] with the softmax in
    float32 (on TensorFlow's own kernels for a few rows at inference:
    kernels.few_row_attention).

    Sub-layers and their TF1 names (under `bert/encoder/layer_N/`):
      query, key, value            attention/self/{query,key,value}/{kernel,bias}
      attention_output             attention/output/dense
      attention_layer_norm         attention/output/LayerNorm
      intermediate                 intermediate/dense
      output                       output/dense
      output_layer_norm            output/LayerNorm

    Args:
      hidden_size: H.
      num_attention_heads: A; must divide H.
      intermediate_size: width of the feed-forward inner layer.
      hidden_act: bert_config activation name of the feed-forward inner layer.
      hidden_dropout_prob: dropout on the attention output and the feed-forward output.
      attention_probs_dropout_prob: dropout on the attention probabilities.
      initializer_range: stddev of the truncated-normal kernel initializer.
      layer_norm_eps: LayerNorm epsilon.
      attention_from: optional TransformerBlock whose attention sub-layers (query, key, value,
        attention_output, attention_layer_norm) this block uses as its own (ALBERT's shared
        attention). Not serialized: the encoder passes it again when it is rebuilt.
      ffn_from: optional TransformerBlock whose feed-forward sub-layers (intermediate, output,
        output_layer_norm) this block uses as its own. Not serialized either.
    """

    def __init__(self, hidden_size, num_attention_heads, intermediate_size, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 initializer_range=0.02, layer_norm_eps=1e-12, attention_from=None,
                 ffn_from=None, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(f"num_attention_heads={num_attention_heads} does not divide "
                             f"hidden_size={hidden_size}")
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.head_size = hidden_size // num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps

        policy = self.dtype_policy

        def dense(units, name, activation=None):
            return keras.layers.Dense(units, activation=activation,
                                      kernel_initializer=truncated_normal(initializer_range),
                                      dtype=policy, name=name)

        if attention_from is None:
            self.query = dense(hidden_size, "query")
            self.key = dense(hidden_size, "key")
            self.value = dense(hidden_size, "value")
            self.attention_output = dense(hidden_size, "attention_output")
            self.attention_layer_norm = FusedLayerNorm(
                epsilon=layer_norm_eps, dtype=policy, name="attention_layer_norm")
        else:
            self.query, self.key, self.value = (attention_from.query, attention_from.key,
                                                attention_from.value)
            self.attention_output = attention_from.attention_output
            self.attention_layer_norm = attention_from.attention_layer_norm
        if ffn_from is None:
            self.intermediate = dense(intermediate_size, "intermediate",
                                      get_activation(hidden_act))
            self.output_dense = dense(hidden_size, "output")
            self.output_layer_norm = FusedLayerNorm(
                epsilon=layer_norm_eps, dtype=policy, name="output_layer_norm")
        else:
            self.intermediate = ffn_from.intermediate
            self.output_dense = ffn_from.output_dense
            self.output_layer_norm = ffn_from.output_layer_norm
        self.attention_dropout = FusedDropout(
            attention_probs_dropout_prob, dtype=policy, name="attention_probs_dropout")
        self.hidden_dropout = FusedDropout(
            hidden_dropout_prob, dtype=policy, name="hidden_dropout")

    def build(self, input_shape=None):
        matrix = (None, self.hidden_size)
        # Shared sub-layers were built by the block that owns them.
        for layer in (self.query, self.key, self.value, self.attention_output,
                      self.attention_layer_norm, self.intermediate, self.output_layer_norm):
            if not layer.built:
                layer.build(matrix)
        if not self.output_dense.built:
            self.output_dense.build((None, self.intermediate_size))
        self.built = True

    def _heads(self, x_mh, batch, seq_length):
        """[B*S, H] -> [B, S, A, d]."""
        return ops.reshape(x_mh, [batch, seq_length, self.num_attention_heads, self.head_size])

    def call(self, hidden_bsh, attention_bias, training=None):
        """Runs the block.

        Args:
          hidden_bsh: float [B, S, H], the previous block's output (or the embeddings).
          attention_bias: float32 [B, 1, 1, S], 0 for real keys and attention.MASKED_LOGIT
            for padding; or [B, 1, S, S] per query (packed rows: hidden outside the query's
            own instance).
          training: enables dropout.

        Returns:
          float [B, S, H].
        """
        shape = ops.shape(hidden_bsh)
        batch, seq_length = shape[0], shape[1]
        x_mh = ops.reshape(hidden_bsh, [-1, self.hidden_size])  # M = B*S rows.

        # Scaling the queries ([M, H]) is cheaper than scaling the scores ([B, A, S, S]).
        query_bsad = self._heads(
            self.query(x_mh) * (1.0 / math.sqrt(self.head_size)), batch, seq_length)
        key_bsad = self._heads(self.key(x_mh), batch, seq_length)
        value_bsad = self._heads(self.value(x_mh), batch, seq_length)

        context_bsad = self._attention(query_bsad, key_bsad, value_bsad, attention_bias,
                                       training)
        context_mh = ops.reshape(context_bsad, [-1, self.hidden_size])

        attention_mh = self.hidden_dropout(self.attention_output(context_mh), training=training)
        attention_mh = self.attention_layer_norm(attention_mh + x_mh)

        ffn_mh = self.output_dense(self.intermediate(attention_mh))
        ffn_mh = self.hidden_dropout(ffn_mh, training=training)
        output_mh = self.output_layer_norm(ffn_mh + attention_mh)
        return ops.reshape(output_mh, [batch, seq_length, self.hidden_size])

    def _attention(self, query_bsad, key_bsad, value_bsad, attention_bias, training):
        """softmax(q k^T + bias) v per head.

        Args: query_bsad (already scaled), key_bsad, value_bsad: float [B, S, A, d];
          attention_bias: float32 [B, 1, 1, S] or [B, 1, S, S].
        Returns: float [B, S, A, d].
        """
        dropout = None
        if training and self.attention_probs_dropout_prob > 0:
            def dropout(probs):
                return self.attention_dropout(probs, training=training)

        def batched():
            return attention.dot_product_attention(query_bsad, key_bsad, value_bsad,
                                                   attention_bias, dropout)

        return kernels.few_row_attention(query_bsad, key_bsad, value_bsad, attention_bias,
                                         batched, training, self.compute_dtype)

    def compute_output_spec(self, hidden_bsh, attention_bias, training=None):
        return keras.KerasTensor(hidden_bsh.shape, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_attention_heads=self.num_attention_heads,
                      intermediate_size=self.intermediate_size, hidden_act=self.hidden_act,
                      hidden_dropout_prob=self.hidden_dropout_prob,
                      attention_probs_dropout_prob=self.attention_probs_dropout_prob,
                      initializer_range=self.initializer_range,
                      layer_norm_eps=self.layer_norm_eps)
        return config
