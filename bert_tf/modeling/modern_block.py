"""The modern encoder block (ModernBERT): pre- or post-norm, rotary positions, a gated
feed-forward, optional biases, global or sliding-window attention."""

import math

import keras
from keras import ops

from bert_tf.modeling import attention, rotary
from bert_tf.modeling.activations import get_activation
from bert_tf.modeling.initializers import truncated_normal
from bert_tf.modeling.dropout import FusedDropout
from bert_tf.modeling.layer_norm import FusedLayerNorm


@keras.saving.register_keras_serializable(package="bert_tf")
class ModernTransformerBlock(keras.layers.Layer):
    """One block of the modern encoder.

    Pre-norm (ModernBERT): x = x + attn(norm(x)); x = x + ffn(norm(x)); block 0 skips the
    attention norm (the embeddings are normalised already). Post-norm (BERT's order):
    x = norm(x + attn(x)); x = norm(x + ffn(x)).

    Sub-layers (checkpoint names in bert_tf.interop.weights; ModernBERT's in parentheses):
      attention_layer_norm   (attn_norm; absent in pre-norm block 0)
      qkv                    one [H, 3H] projection, split into query, key, value (attn.Wqkv)
      attention_output       [H, H] (attn.Wo)
      output_layer_norm      (mlp_norm)
      intermediate           [H, 2I] gated (input, gate halves) or [H, I] dense (mlp.Wi)
      output                 [I, H] (mlp.Wo)

    Args:
      hidden_size: H.
      num_attention_heads: A; must divide H.
      intermediate_size: I.
      hidden_act: activation of the feed-forward (of its input half when gated).
      hidden_dropout_prob: dropout on both sub-layer outputs.
      attention_probs_dropout_prob: dropout on the attention probabilities.
      initializer_range: stddev of the truncated-normal kernel initializer.
      layer_norm_eps: LayerNorm epsilon.
      norm_placement: "pre" or "post".
      feed_forward_type: "gated" or "dense".
      use_bias: biases on the four dense layers.
      norm_bias: a beta on the LayerNorms.
      attention_norm: pre-norm only: False leaves out the attention LayerNorm (block 0).
      local_window: 0 (global attention) or the total window W (keys within W / 2).
      position_embedding_type: "rotary" rotates queries and keys by `rope_theta`; other values
        (positions added to the embeddings) leave them as they are.
      rope_theta: rotary base.
    """

    def __init__(self, hidden_size, num_attention_heads, intermediate_size, hidden_act="gelu",
                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                 initializer_range=0.02, layer_norm_eps=1e-5, norm_placement="pre",
                 feed_forward_type="gated", use_bias=False, norm_bias=False,
                 attention_norm=True, local_window=0, position_embedding_type="rotary",
                 rope_theta=10000.0, **kwargs):
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
        self.norm_placement = norm_placement
        self.feed_forward_type = feed_forward_type
        self.use_bias = use_bias
        self.norm_bias = norm_bias
        self.attention_norm = attention_norm
        self.local_window = local_window
        self.position_embedding_type = position_embedding_type
        self.rope_theta = rope_theta
        self.activation = get_activation(hidden_act)
        policy = self.dtype_policy

        def dense(units, name):
            return keras.layers.Dense(units, use_bias=use_bias,
                                      kernel_initializer=truncated_normal(initializer_range),
                                      dtype=policy, name=name)

        def norm(name):
            return FusedLayerNorm(epsilon=layer_norm_eps, center=norm_bias, dtype=policy,
                                  name=name)

        has_attention_norm = norm_placement == "post" or attention_norm
        self.attention_layer_norm = norm("attention_layer_norm") if has_attention_norm else None
        self.qkv = dense(3 * hidden_size, "qkv")
        self.attention_output = dense(hidden_size, "attention_output")
        self.output_layer_norm = norm("output_layer_norm")
        gated = feed_forward_type == "gated"
        self.intermediate = dense((2 if gated else 1) * intermediate_size, "intermediate")
        self.output_dense = dense(hidden_size, "output")
        self.attention_dropout = FusedDropout(
            attention_probs_dropout_prob, dtype=policy, name="attention_probs_dropout")
        self.hidden_dropout = FusedDropout(
            hidden_dropout_prob, dtype=policy, name="hidden_dropout")

    def build(self, input_shape=None):
        matrix = (None, self.hidden_size)
        for layer in (self.attention_layer_norm, self.qkv, self.attention_output,
                      self.output_layer_norm, self.intermediate):
            if layer is not None:
                layer.build(matrix)
        self.output_dense.build((None, self.intermediate_size))
        self.built = True

    def call(self, hidden_bsh, segment_ids, position_ids, dense_bias=None, training=None):
        """Runs the block.

        Args:
          hidden_bsh: float [B, S, H].
          segment_ids: int [B, S]: input_mask, or input_instance_ids for packed rows (a key
            is visible when real and in the query's segment; see attention.py).
          position_ids: int [B, S] or [1, S], the rotary positions.
          dense_bias: optional float32 [B, 1, 1, S] or [B, 1, S, S], the global layers'
            attention bias when the caller computed it once for all of them.
          training: enables dropout.

        Returns:
          float [B, S, H].
        """
        shape = ops.shape(hidden_bsh)
        x_mh = ops.reshape(hidden_bsh, [-1, self.hidden_size])  # M = B*S rows.
        pre = self.norm_placement == "pre"
        attention_in_mh = (self.attention_layer_norm(x_mh)
                           if pre and self.attention_layer_norm is not None else x_mh)
        context_mh = self._attention(attention_in_mh, shape, segment_ids, position_ids,
                                     dense_bias, training)
        attention_mh = self.hidden_dropout(self.attention_output(context_mh), training=training)
        if pre:
            x_mh = x_mh + attention_mh
            ffn_mh = self._feed_forward(self.output_layer_norm(x_mh), training)
            output_mh = x_mh + ffn_mh
        else:
            x_mh = self.attention_layer_norm(x_mh + attention_mh)
            output_mh = self.output_layer_norm(x_mh + self._feed_forward(x_mh, training))
        return ops.reshape(output_mh, [shape[0], shape[1], self.hidden_size])

    def _feed_forward(self, x_mh, training):
        inner_mi = self.intermediate(x_mh)
        if self.feed_forward_type == "gated":
            input_mi, gate_mi = ops.split(inner_mi, 2, axis=-1)
            inner_mi = self.activation(input_mi) * gate_mi
        else:
            inner_mi = self.activation(inner_mi)
        return self.hidden_dropout(self.output_dense(inner_mi), training=training)

    def _attention(self, x_mh, shape, segment_ids, position_ids, dense_bias, training):
        """Returns the attention context [M, H] of the (normalised) input x [M, H]."""
        batch, length = shape[0], shape[1]
        qkv_bs3ad = ops.reshape(self.qkv(x_mh), [batch, length, 3, self.num_attention_heads,
                                                 self.head_size])
        query_bsad, key_bsad, value_bsad = ops.unstack(qkv_bs3ad, num=3, axis=2)
        if self.position_embedding_type == "rotary":
            cos, sin = rotary.rotary_cos_sin(position_ids, self.head_size, self.rope_theta)
            query_bsad = rotary.apply_rotary(query_bsad, cos, sin)
            key_bsad = rotary.apply_rotary(key_bsad, cos, sin)
        query_bsad = query_bsad * ops.cast(1.0 / math.sqrt(self.head_size), query_bsad.dtype)

        dropout = None
        if training and self.attention_probs_dropout_prob > 0:
            def dropout(probs):
                return self.attention_dropout(probs, training=training)

        if self.local_window:
            context_bsad = attention.local_attention(
                query_bsad, key_bsad, value_bsad, segment_ids, self.local_window // 2, dropout)
        else:
            bias = (dense_bias if dense_bias is not None
                    else attention.segment_bias(segment_ids))
            context_bsad = attention.global_attention(
                query_bsad, key_bsad, value_bsad, bias, dropout, chunk_queries=not training)
        return ops.reshape(context_bsad, [-1, self.hidden_size])

    def compute_output_spec(self, hidden_bsh, *args, **kwargs):
        return keras.KerasTensor(hidden_bsh.shape, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size, num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size, hidden_act=self.hidden_act,
            hidden_dropout_prob=self.hidden_dropout_prob,
            attention_probs_dropout_prob=self.attention_probs_dropout_prob,
            initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps,
            norm_placement=self.norm_placement, feed_forward_type=self.feed_forward_type,
            use_bias=self.use_bias, norm_bias=self.norm_bias,
            attention_norm=self.attention_norm, local_window=self.local_window,
            position_embedding_type=self.position_embedding_type, rope_theta=self.rope_theta)
        return config
