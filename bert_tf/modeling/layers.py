"""Keras layers of BERT: the embedding sum, the post-LN transformer block, the pre-training heads.

The BERT-family options live here too: fixed sinusoidal position embeddings, blocks that share
sub-layers across depth (ALBERT), a masked-LM head over narrower (factorized) embeddings, and
SpanBERT's span-boundary head.

Every layer works on the TensorFlow backend of Keras 3, serializes through `get_config`, and
keeps LayerNorm and softmax in float32 under a mixed (bfloat16/float16) dtype policy.
Sub-layer names mirror the original TF1 checkpoint names (see each class) so that a checkpoint
converter can map `bert/encoder/layer_3/attention/self/query/kernel` to
`transformer_layer_3/query/kernel` without guesswork.
"""

import math

import keras
import tensorflow as tf

# The original adds this to the attention logits of padding keys (modeling.py uses -10000.0);
# keeping the value makes converted checkpoints reproduce the original's outputs exactly.
_MASKED_LOGIT = -10000.0


def get_activation(name):
    """Returns the activation function for a bert_config.json `hidden_act` value.

    Args:
      name: "gelu" or "gelu_new" (tanh approximation, as the original), "gelu_exact" (erf),
        "relu", "tanh", "swish" or "silu" (both x * sigmoid(x)).
    """
    if name in ("gelu", "gelu_new"):
        return _gelu_tanh
    if name == "gelu_exact":
        return _gelu_erf
    if name == "relu":
        return tf.nn.relu
    if name == "tanh":
        return tf.math.tanh
    if name in ("swish", "silu"):
        return tf.nn.silu
    raise ValueError(f"hidden_act={name!r} is not one of gelu, gelu_new, gelu_exact, relu, "
                     f"tanh, swish, silu")


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715


# Both GELUs keep TensorFlow's forward op (so exported SavedModels need no XLA) and take their
# gradient from x alone in one fused XLA kernel. Autodiff through tf.nn.gelu ran about a dozen
# memory-bound element-wise kernels and kept their intermediates: on a [4096, 2048] FFN activation
# (BERT-small, 2-core AVX2 CPU) forward + backward went from 118 ms to 65 ms.
@tf.custom_gradient
def _gelu_tanh(x):
    return tf.nn.gelu(x, approximate=True), lambda dy: _gelu_tanh_grad(dy, x)


@tf.custom_gradient
def _gelu_erf(x):
    return tf.nn.gelu(x, approximate=False), lambda dy: _gelu_erf_grad(dy, x)


@tf.function(jit_compile=True, autograph=False)
def _gelu_tanh_grad(dy, x):
    """dy * d/dx 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3); float32 inside."""
    x = tf.cast(x, tf.float32)
    t = tf.tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * (x * x * x)))
    du_dx = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_CUBIC * (x * x))
    dgelu = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx
    return tf.cast(tf.cast(dy, tf.float32) * dgelu, dy.dtype)


@tf.function(jit_compile=True, autograph=False)
def _gelu_erf_grad(dy, x):
    """dy * d/dx x Phi(x) = dy * (Phi(x) + x phi(x)); float32 inside."""
    x = tf.cast(x, tf.float32)
    cdf = 0.5 * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))
    pdf = tf.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
    return tf.cast(tf.cast(dy, tf.float32) * (cdf + x * pdf), dy.dtype)


@keras.saving.register_keras_serializable(package="bert_tf")
class FusedLayerNorm(keras.layers.LayerNormalization):
    """keras.layers.LayerNormalization (same variables, forward and config) with a fused gradient.

    The forward pass is Keras' own ops, so outputs and exported SavedModels are unchanged; the
    backward recomputes the statistics from x in one XLA kernel instead of autodiff's ~20
    element-wise and reduction kernels. Only for a normalization over the last axis with both
    gamma and beta, as every BERT LayerNorm is.
    """

    def call(self, inputs):
        if (self.axis not in (-1, [-1], len(inputs.shape) - 1, [len(inputs.shape) - 1])
                or not (self.center and self.scale) or self.rms_scaling):
            return super().call(inputs)
        return _layer_norm(inputs, tf.convert_to_tensor(self.gamma),
                           tf.convert_to_tensor(self.beta), self.epsilon, self.compute_dtype)


def _layer_norm(x, gamma, beta, epsilon, compute_dtype):
    """Keras' LayerNorm forward over the last axis, with a fused gradient for x, gamma, beta."""
    @tf.custom_gradient
    def normalize(x, gamma, beta):
        def grad(dy):
            dx, dgamma, dbeta = _layer_norm_grad(dy, x, gamma, epsilon)
            return dx, tf.cast(dgamma, gamma.dtype), tf.cast(dbeta, beta.dtype)
        y = keras.ops.layer_normalization(x, gamma, beta, axis=-1, epsilon=epsilon)
        return tf.cast(y, compute_dtype), grad
    return normalize(x, gamma, beta)


@tf.function(jit_compile=True, autograph=False)
def _layer_norm_grad(dy, x, gamma, epsilon):
    """Gradients of gamma * (x - mean) / sqrt(var + eps) + beta; float32 inside.

    Args: dy, x: float [..., H]; gamma: float [H]. Returns: dx [..., H] (x's dtype), dgamma and
    dbeta float32 [H].
    """
    x32 = tf.cast(x, tf.float32)
    dy32 = tf.cast(dy, tf.float32)
    mean = tf.reduce_mean(x32, axis=-1, keepdims=True)
    centered = x32 - mean
    rstd = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + epsilon)
    xhat = centered * rstd
    dxhat = dy32 * tf.cast(gamma, tf.float32)
    dx = rstd * (dxhat - tf.reduce_mean(dxhat, axis=-1, keepdims=True)
                 - xhat * tf.reduce_mean(dxhat * xhat, axis=-1, keepdims=True))
    rows = list(range(len(x.shape) - 1))
    return (tf.cast(dx, x.dtype), tf.reduce_sum(dy32 * xhat, axis=rows),
            tf.reduce_sum(dy32, axis=rows))


def truncated_normal(stddev):
    """The initializer of every kernel and embedding: truncated normal, cut at 2 stddev."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


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

    def call(self, seq_length):
        """Args: seq_length: scalar int. Returns: float [seq_length, width]."""
        return self.embeddings[:seq_length]

    def lookup(self, position_ids):
        """Rows at explicit positions (packed rows). Args: int [B, S]. Returns: [B, S, width]."""
        return tf.gather(self.embeddings, tf.cast(position_ids, tf.int32))

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

    def call(self, seq_length):
        """Args: seq_length: scalar int. Returns: float32 [seq_length, width]."""
        return self._encode(tf.range(seq_length))

    def lookup(self, position_ids):
        """Rows at explicit positions (packed rows). Args: int [B, S]. Returns: float32
        [B, S, width], equal to call(S)'s rows at those positions."""
        return self._encode(position_ids)

    def _encode(self, positions):
        """int [...] -> float32 [..., width]."""
        positions_1 = tf.cast(positions, tf.float32)[..., tf.newaxis]
        # Column j uses the frequency of its sin/cos pair, 10000^(-2 * (j // 2) / width).
        pair_w = tf.cast(tf.range(self.width) // 2 * 2, tf.float32)
        angles_w = positions_1 * tf.exp(pair_w * (-math.log(10000.0) / self.width))
        is_sine_w = tf.range(self.width) % 2 == 0
        return tf.where(is_sine_w, tf.sin(angles_w), tf.cos(angles_w))

    def compute_output_spec(self, seq_length):
        return keras.KerasTensor((None, self.width), "float32")

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
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=policy, name="dropout")

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
        seq_length = tf.shape(input_word_ids)[1]
        static_length = input_word_ids.shape[1]
        if (self.position_embedding_type == "learned" and static_length is not None
                and static_length > self.max_position_embeddings):
            raise ValueError(
                f"input length {static_length} exceeds max_position_embeddings="
                f"{self.max_position_embeddings}")
        if position_ids is None:
            positions = self.position_embeddings(seq_length)
        else:
            positions = self.position_embeddings.lookup(position_ids)
        embeddings_bsh = (self.word_embeddings(input_word_ids)
                          + self.token_type_embeddings(input_type_ids)
                          + tf.cast(positions, self.compute_dtype))
        embeddings_bsh = self.layer_norm(embeddings_bsh)
        return self.dropout_layer(embeddings_bsh, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, type_vocab_size=self.type_vocab_size,
                      max_position_embeddings=self.max_position_embeddings,
                      hidden_size=self.hidden_size, initializer_range=self.initializer_range,
                      layer_norm_eps=self.layer_norm_eps, dropout=self.dropout,
                      position_embedding_type=self.position_embedding_type)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class AttentionBias(keras.layers.Layer):
    """Turns a padding mask into an additive float32 attention bias shared by all blocks.

    Computed once per batch instead of once per layer: 0 for real keys, -10000 for padding.
    """

    def call(self, input_mask):
        """Args: input_mask: int [B, S], 1 = real token. Returns: float32 [B, 1, 1, S]."""
        mask_b11s = tf.cast(input_mask[:, tf.newaxis, tf.newaxis, :], tf.float32)
        return (1.0 - mask_b11s) * _MASKED_LOGIT

    def compute_output_spec(self, input_mask):
        return keras.KerasTensor((input_mask.shape[0], 1, 1, input_mask.shape[1]), "float32")


@keras.saving.register_keras_serializable(package="bert_tf")
class TransformerBlock(keras.layers.Layer):
    """One post-LayerNorm BERT block: self-attention, add & norm, feed-forward, add & norm.

    All dense layers run on [B*S, H] matrices (as the original does) so every projection is a
    plain 2-D GEMM; attention is two batched matmuls over [B, A, S, d] with the softmax in
    float32.

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
        self.attention_dropout = keras.layers.Dropout(
            attention_probs_dropout_prob, dtype=policy, name="attention_probs_dropout")
        self.hidden_dropout = keras.layers.Dropout(
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

    def _split_heads(self, x_mh, batch, seq_length):
        """[B*S, H] -> [B, A, S, d]."""
        x_bsad = tf.reshape(x_mh, [batch, seq_length, self.num_attention_heads, self.head_size])
        return tf.transpose(x_bsad, [0, 2, 1, 3])

    def call(self, hidden_bsh, attention_bias, training=None):
        """Runs the block.

        Args:
          hidden_bsh: float [B, S, H], the previous block's output (or the embeddings).
          attention_bias: float32 [B, 1, 1, S], 0 for real keys and -10000 for padding; or
            [B, 1, S, S] per query (packed rows: -10000 outside the query's own instance).
          training: enables dropout.

        Returns:
          float [B, S, H].
        """
        shape = tf.shape(hidden_bsh)
        batch, seq_length = shape[0], shape[1]
        x_mh = tf.reshape(hidden_bsh, [-1, self.hidden_size])  # M = B*S rows.

        # Scaling the queries ([M, H]) is cheaper than scaling the scores ([B, A, S, S]).
        query_basd = self._split_heads(
            self.query(x_mh) * (1.0 / math.sqrt(self.head_size)), batch, seq_length)
        key_basd = self._split_heads(self.key(x_mh), batch, seq_length)
        value_basd = self._split_heads(self.value(x_mh), batch, seq_length)

        scores_bass = tf.matmul(query_basd, key_basd, transpose_b=True)
        # Keras casts float call arguments to the compute dtype; the softmax runs in float32.
        scores_bass = tf.cast(scores_bass, tf.float32) + tf.cast(attention_bias, tf.float32)
        probs_bass = tf.cast(tf.nn.softmax(scores_bass, axis=-1), self.compute_dtype)
        probs_bass = self.attention_dropout(probs_bass, training=training)

        context_basd = tf.matmul(probs_bass, value_basd)
        context_mh = tf.reshape(tf.transpose(context_basd, [0, 2, 1, 3]), [-1, self.hidden_size])

        attention_mh = self.hidden_dropout(self.attention_output(context_mh), training=training)
        attention_mh = self.attention_layer_norm(attention_mh + x_mh)

        ffn_mh = self.output_dense(self.intermediate(attention_mh))
        ffn_mh = self.hidden_dropout(ffn_mh, training=training)
        output_mh = self.output_layer_norm(ffn_mh + attention_mh)
        return tf.reshape(output_mh, shape)

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
    """

    def __init__(self, embedding_layer, hidden_act="gelu", initializer_range=0.02,
                 layer_norm_eps=1e-12, input_size=None, **kwargs):
        super().__init__(**kwargs)
        self.embedding_layer = embedding_layer
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.vocab_size, self.hidden_size = (embedding_layer.input_dim,
                                             embedding_layer.output_dim)
        self.input_size = self.hidden_size if input_size is None else input_size
        policy = self.dtype_policy
        self.transform = keras.layers.Dense(
            self.hidden_size, activation=get_activation(hidden_act),
            kernel_initializer=truncated_normal(initializer_range), dtype=policy,
            name="transform")
        self.transform_layer_norm = FusedLayerNorm(
            epsilon=layer_norm_eps, dtype=policy, name="transform_layer_norm")

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
        masked_bph = tf.gather(sequence_output, tf.cast(masked_positions, tf.int32),
                               batch_dims=1)
        batch, num_predictions = tf.shape(masked_bph)[0], tf.shape(masked_bph)[1]
        masked_nh = tf.reshape(masked_bph, [-1, self.input_size])  # N = B*P rows.
        masked_nh = self.transform_layer_norm(self.transform(masked_nh))
        table_vh = tf.cast(self.embedding_layer.embeddings, self.compute_dtype)
        logits_nv = tf.matmul(masked_nh, table_vh, transpose_b=True)
        logits_nv = tf.nn.bias_add(tf.cast(logits_nv, tf.float32), self.output_bias)
        return tf.reshape(logits_nv, [batch, num_predictions, self.vocab_size])

    def compute_output_spec(self, sequence_output, masked_positions):
        return keras.KerasTensor(
            (sequence_output.shape[0], masked_positions.shape[1], self.vocab_size), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(hidden_act=self.hidden_act, initializer_range=self.initializer_range,
                      layer_norm_eps=self.layer_norm_eps, input_size=self.input_size)
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
            return FusedLayerNorm(epsilon=layer_norm_eps, dtype=policy,
                                                   name=name)

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
        positions_bp = tf.cast(masked_positions, tf.int32)
        left_bp = tf.cast(left_boundaries, tf.int32)
        right_bp = tf.cast(right_boundaries, tf.int32)
        left_bph = tf.gather(sequence_output, left_bp, batch_dims=1)
        right_bph = tf.gather(sequence_output, right_bp, batch_dims=1)
        # Offset of the token inside its span (0 for the span's first piece); padding slots
        # (all zeros) land on row 0 and carry weight 0 in the loss.
        offset_bp = tf.clip_by_value(positions_bp - left_bp - 1, 0, self.max_span_pieces - 1)
        offset_bph = tf.cast(self.relative_position_embeddings(offset_bp), self.compute_dtype)
        batch, num_predictions = tf.shape(positions_bp)[0], tf.shape(positions_bp)[1]
        x_n3h = tf.reshape(tf.concat([left_bph, right_bph, offset_bph], axis=-1),
                           [-1, 3 * self.hidden_size])  # N = B*P rows.
        x_nh = self.transform_1_layer_norm(self.transform_1(x_n3h))
        x_ne = self.transform_2_layer_norm(self.transform_2(x_nh))
        table_ve = tf.cast(self.embedding_layer.embeddings, self.compute_dtype)
        logits_nv = tf.matmul(x_ne, table_ve, transpose_b=True)
        logits_nv = tf.nn.bias_add(tf.cast(logits_nv, tf.float32), self.output_bias)
        return tf.reshape(logits_nv, [batch, num_predictions, self.vocab_size])

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
