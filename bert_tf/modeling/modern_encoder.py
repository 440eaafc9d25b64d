"""ModernBertEncoder: the modern encoder (ModernBERT-class, architecture "modernbert"),
embeddings -> modern blocks -> final norm -> pooler.

Global layers use one attention bias computed once; local layers (sliding window) compute
their own masks, blockwise for long inputs (see attention.py).
"""

import keras
from keras import ops

from bert_tf.config import ModernBertConfig
from bert_tf.modeling import attention
from bert_tf.modeling.activations import get_activation
from bert_tf.modeling.embeddings import PositionEmbedding, SinusoidalPositionEmbedding
from bert_tf.modeling.encoder_base import Encoder
from bert_tf.modeling.initializers import truncated_normal
from bert_tf.modeling.dropout import FusedDropout
from bert_tf.modeling.layer_norm import FusedLayerNorm
from bert_tf.modeling.modern_block import ModernTransformerBlock
from bert_tf.modeling.transformer_block import AttentionBias


@keras.saving.register_keras_serializable(package="bert_tf")
class ModernEmbeddings(keras.layers.Layer):
    """Word embeddings (+ segment and absolute position tables where configured), LayerNorm,
    dropout. ModernBERT: the word table and a LayerNorm without beta only.

    Sub-layers: `word_embeddings`, `token_type_embeddings` (type_vocab_size > 0),
    `position_embeddings` (learned or sinusoidal positions), `layer_norm`.

    Args:
      config: the ModernBertConfig (type_vocab_size, position_embedding_type, norm_bias, ...), as
        a dict of its fields.
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = dict(config)
        c = ModernBertConfig.from_dict(self.config, source="ModernEmbeddings", warn_legacy=False)
        self.hidden_size = c.hidden_size
        self.max_position_embeddings = c.max_position_embeddings
        policy = self.dtype_policy
        init = truncated_normal(c.initializer_range)
        self.word_embeddings = keras.layers.Embedding(
            c.vocab_size, c.hidden_size, embeddings_initializer=init, dtype=policy,
            name="word_embeddings")
        self.token_type_embeddings = (keras.layers.Embedding(
            c.type_vocab_size, c.hidden_size, embeddings_initializer=init, dtype=policy,
            name="token_type_embeddings") if c.type_vocab_size else None)
        self.position_embeddings = None
        if c.position_embedding_type == "learned":
            self.position_embeddings = PositionEmbedding(
                c.max_position_embeddings, c.hidden_size, c.initializer_range, dtype=policy,
                name="position_embeddings")
        elif c.position_embedding_type == "sinusoidal":
            self.position_embeddings = SinusoidalPositionEmbedding(
                c.hidden_size, dtype=policy, name="position_embeddings")
        self.rotary = c.position_embedding_type == "rotary"
        self.layer_norm = FusedLayerNorm(epsilon=c.layer_norm_eps, center=c.norm_bias,
                                         dtype=policy, name="layer_norm")
        self.dropout_layer = FusedDropout(c.hidden_dropout_prob, dtype=policy, name="dropout")

    def build(self, input_shape=None):
        self.word_embeddings.build((None, None))
        if self.token_type_embeddings is not None:
            self.token_type_embeddings.build((None, None))
        if self.position_embeddings is not None:
            self.position_embeddings.build(None)
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, position_ids=None, training=None):
        """Args: int [B, S] ids and segment ids; position_ids int [B, S] (packed rows).
        Returns: float [B, S, H]."""
        self._check_length(input_word_ids.shape[1])
        embeddings_bsh = self.word_embeddings(input_word_ids)
        if self.token_type_embeddings is not None:
            embeddings_bsh = embeddings_bsh + self.token_type_embeddings(input_type_ids)
        if self.position_embeddings is not None:
            if position_ids is None:
                positions = self.position_embeddings(input_word_ids)
            else:
                positions = self.position_embeddings.lookup(position_ids)
            embeddings_bsh = embeddings_bsh + ops.cast(positions, self.compute_dtype)
        return self.dropout_layer(self.layer_norm(embeddings_bsh), training=training)

    def _check_length(self, static_length):
        # Rotary angles exist for any position, but the config promises no more than this.
        if static_length is not None and static_length > self.max_position_embeddings:
            raise ValueError(f"input length {static_length} exceeds max_position_embeddings="
                             f"{self.max_position_embeddings}")

    def compute_output_spec(self, input_word_ids, *args, **kwargs):
        self._check_length(input_word_ids.shape[1])
        return keras.KerasTensor((*input_word_ids.shape, self.hidden_size), self.compute_dtype)

    def get_config(self):
        return dict(super().get_config(), config=self.config)


@keras.saving.register_keras_serializable(package="bert_tf")
class ModernPooler(keras.layers.Layer):
    """pooled_output: the [CLS] vector or the mean over real tokens, then dense + tanh (BERT's
    pooler) or dense + activation + LayerNorm (ModernBERT's classifier head).

    Sub-layers: `dense` (bias with use_bias, or always for "tanh"), `layer_norm` ("head").

    Args:
      hidden_size, hidden_act, initializer_range, layer_norm_eps, use_bias, norm_bias: as in
        ModernBertConfig.
      pooler_type: "tanh" or "head".
      classifier_pooling: "cls" or "mean".
    """

    def __init__(self, hidden_size, hidden_act="gelu_exact", initializer_range=0.02,
                 layer_norm_eps=1e-5, use_bias=False, norm_bias=False, pooler_type="head",
                 classifier_pooling="cls", **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.use_bias = use_bias
        self.norm_bias = norm_bias
        self.pooler_type = pooler_type
        self.classifier_pooling = classifier_pooling
        head = pooler_type == "head"
        self.dense = keras.layers.Dense(
            hidden_size, use_bias=use_bias or not head,
            activation=get_activation(hidden_act) if head else "tanh",
            kernel_initializer=truncated_normal(initializer_range), dtype=self.dtype_policy,
            name="dense")
        self.layer_norm = (FusedLayerNorm(epsilon=layer_norm_eps, center=norm_bias,
                                          dtype=self.dtype_policy, name="layer_norm")
                           if head else None)

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))
        if self.layer_norm is not None:
            self.layer_norm.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_bsh, input_mask):
        """Args: sequence_bsh float [B, S, H]; input_mask int [B, S]. Returns: float [B, H]."""
        if self.classifier_pooling == "mean":
            mask_bs1 = ops.expand_dims(ops.cast(input_mask, sequence_bsh.dtype), 2)
            count_b1 = ops.maximum(ops.sum(mask_bs1, axis=1), 1.0)
            pooled_bh = ops.sum(sequence_bsh * mask_bs1, axis=1) / count_b1
        else:
            pooled_bh = sequence_bsh[:, 0, :]
        return self.transform(pooled_bh)

    def transform(self, pooled_xh):
        """The dense (+ norm) part on already pooled vectors [..., H]."""
        out = self.dense(pooled_xh)
        return out if self.layer_norm is None else self.layer_norm(out)

    def compute_output_spec(self, sequence_bsh, input_mask):
        return keras.KerasTensor((sequence_bsh.shape[0], self.hidden_size), self.compute_dtype)

    def get_config(self):
        return dict(super().get_config(), hidden_size=self.hidden_size,
                    hidden_act=self.hidden_act, initializer_range=self.initializer_range,
                    layer_norm_eps=self.layer_norm_eps, use_bias=self.use_bias,
                    norm_bias=self.norm_bias, pooler_type=self.pooler_type,
                    classifier_pooling=self.classifier_pooling)


@keras.saving.register_keras_serializable(package="bert_tf")
class RowPositions(keras.layers.Layer):
    """0..S-1 for the rotary angles. Args: ids int [B, S]. Returns: int32 [1, S]."""

    def call(self, ids):
        return ops.expand_dims(ops.arange(ops.shape(ids)[1], dtype="int32"), 0)

    def compute_output_spec(self, ids):
        return keras.KerasTensor((1, ids.shape[1]), "int32")


def build_layers(config, dtype):
    """The encoder's layers: (embeddings, [blocks], final norm or None, pooler)."""
    embeddings = ModernEmbeddings(config.to_dict() | {"layer_norm_eps": config.layer_norm_eps},
                                  dtype=dtype, name="embeddings")
    blocks = []
    for i in range(config.num_hidden_layers):
        is_global = config.layer_is_global(i)
        blocks.append(ModernTransformerBlock(
            hidden_size=config.hidden_size, num_attention_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size, hidden_act=config.hidden_act,
            hidden_dropout_prob=config.hidden_dropout_prob,
            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
            initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
            norm_placement=config.norm_placement, feed_forward_type=config.feed_forward_type,
            use_bias=config.use_bias, norm_bias=config.norm_bias, attention_norm=i > 0,
            local_window=0 if is_global else config.local_attention_window,
            position_embedding_type=config.position_embedding_type,
            rope_theta=config.global_rope_theta if is_global else config.local_rope_theta,
            dtype=dtype, name=f"transformer_layer_{i}"))
    final_norm = (FusedLayerNorm(epsilon=config.layer_norm_eps, center=config.norm_bias,
                                 dtype=dtype, name="final_layer_norm")
                  if config.final_layer_norm else None)
    pooler = ModernPooler(
        config.hidden_size, hidden_act=config.hidden_act,
        initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
        use_bias=config.use_bias, norm_bias=config.norm_bias, pooler_type=config.pooler_type,
        classifier_pooling=config.classifier_pooling, dtype=dtype, name="pooler")
    return embeddings, blocks, final_norm, pooler


def build_graph(config, inputs, dtype):
    """The functional graph on the encoder's three inputs.

    Returns:
      (outputs dict: sequence_output, pooled_output, encoder_outputs; embeddings layer).
    """
    embeddings, blocks, final_norm, pooler = build_layers(config, dtype)
    input_mask = inputs["input_mask"]
    hidden_bsh = embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
    positions = RowPositions(name="row_positions")(inputs["input_word_ids"])
    global_bias = AttentionBias(name="attention_bias")(input_mask)
    encoder_outputs = []
    for block in blocks:
        hidden_bsh = block(hidden_bsh, input_mask, positions,
                           global_bias if block.local_window == 0 else None)
        encoder_outputs.append(hidden_bsh)
    if final_norm is not None:
        hidden_bsh = final_norm(hidden_bsh)
    pooled_bh = pooler(hidden_bsh, input_mask)
    return ({"sequence_output": hidden_bsh, "pooled_output": pooled_bh,
             "encoder_outputs": encoder_outputs}, embeddings)


@keras.saving.register_keras_serializable(package="bert_tf")
class ModernBertEncoder(Encoder):
    """The modern encoder (architecture "modernbert") as a functional Keras model.

    Inputs and outputs as `encoder_base.Encoder`; input_type_ids is ignored when
    type_vocab_size=0 (ModernBERT). pooled_output is ModernPooler's ([CLS] or mean, then
    dense + activation + LayerNorm, or BERT's dense + tanh).

    Layers: embeddings (ModernEmbeddings: word table, LayerNorm), transformer_layer_{i}
    (ModernTransformerBlock, global or local by ModernBertConfig.layer_is_global),
    final_layer_norm, pooler (ModernPooler). Their names map ModernBERT's checkpoints in
    bert_tf.interop.modernbert.

    Args:
      config: a `ModernBertConfig` or a dict of bert_config.json fields (architecture
        "modernbert").
      dtype: optional dtype policy for every layer (default: the global policy).
      **kwargs: `name`, `trainable`.

    Examples:

    >>> from bert_tf.config import ModernBertConfig
    >>> encoder = ModernBertEncoder(ModernBertConfig.from_preset("modernbert_tiny"))
    >>> ids = keras.ops.ones((2, 40), "int32")
    >>> out = encoder({"input_word_ids": ids, "input_mask": ids,
    ...                "input_type_ids": keras.ops.zeros_like(ids)})
    >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
    ((2, 40, 64), (2, 64))
    """

    architecture = "modernbert"

    @staticmethod
    def _build_graph(config, inputs, dtype, embedding_layer=None):
        if embedding_layer is not None:
            raise ValueError("ModernBertEncoder: embedding_layer is not supported (only "
                             "BertEncoder shares another encoder's embeddings)")
        return build_graph(config, inputs, dtype)

    def _pooler_transform(self, pooled_xh):
        return self.get_layer("pooler").transform(pooled_xh)

    def _packed_outputs(self, word_ids, type_ids, instance_ids, position_ids, training):
        config = self.config
        hidden_bsh = self.embedding_layer(word_ids, type_ids, position_ids=position_ids,
                                          training=training)
        global_bias = attention.segment_bias(instance_ids)
        encoder_outputs = []
        for i in range(config.num_hidden_layers):
            block = self.get_layer(f"transformer_layer_{i}")
            hidden_bsh = block(hidden_bsh, instance_ids, position_ids,
                               global_bias if block.local_window == 0 else None,
                               training=training)
            encoder_outputs.append(hidden_bsh)
        if config.final_layer_norm:
            hidden_bsh = self.get_layer("final_layer_norm")(hidden_bsh)
        first_instance = ops.cast(ops.equal(instance_ids, 1), "int32")
        pooled_bh = self.get_layer("pooler")(hidden_bsh, first_instance)
        return {"sequence_output": hidden_bsh, "pooled_output": pooled_bh,
                "encoder_outputs": encoder_outputs}
