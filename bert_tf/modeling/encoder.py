"""BertEncoder: the BERT network, embeddings -> N post-LN transformer blocks -> tanh pooler.

The same class builds the BERT-family variants its BertConfig asks for: ALBERT's factorized
embeddings and cross-layer parameter sharing, fixed sinusoidal position embeddings, and the
modern encoder (ModernBERT: rotary positions, pre-norm gated blocks, local attention;
modeling/modern_encoder.py) with the same inputs and outputs.
"""

import keras
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.modeling import layers, modern_encoder, packing_checks

_INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
# The optional fourth input of a packed row (see packing_checks).
INSTANCE_IDS = packing_checks.FEATURE


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEncoder(keras.Model):
    """The BERT encoder as a functional Keras model.

    Inputs (a dict, all int32 [B, S]; S may vary between calls up to max_position_embeddings):
      input_word_ids: WordPiece ids.
      input_mask: 1 for real tokens, 0 for padding (padding keys get no attention).
      input_type_ids: segment ids (0 for sentence A, 1 for sentence B).
      input_instance_ids (optional; packed rows, Krell et al. 2021): 1..K = the instance each
        token belongs to (contiguous runs in order), 0 on padding. A query then attends only
        keys of its own instance, and each token's position id is its offset in its instance
        (0 at the instance's [CLS]), so every instance gets the outputs it would get alone in
        its own row; pooled_output is then the first instance's (see `pool_at` for the
        others). Without it (and in exported signatures) the model is unchanged.

    Outputs (a dict):
      sequence_output: float [B, S, H], the last block's output.
      pooled_output: float [B, H], tanh(dense(sequence_output[:, 0])) (the [CLS] vector).
      encoder_outputs: list of L float [B, S, H], one per block.

    Layer names, for mapping original TF1 checkpoints (`bert/...`):
      embeddings (BertEmbeddings)     embeddings/{word,token_type,position}_embeddings, LayerNorm
      transformer_layer_{i}           encoder/layer_{i}/... (see layers.TransformerBlock)
      pooler                          pooler/dense

    BERT-family options (see BertConfig):
      embedding_size E (!= H)         the tables and their LayerNorm are E wide, then
                                      `embedding_projection` (dense E -> H; ALBERT's
                                      bert/encoder/embedding_hidden_mapping_in)
      share_parameters="all"          one block, `transformer_layer_0`, applied L times
                                      (ALBERT's encoder/transformer/group_0/inner_group_0)
      share_parameters="attention"    transformer_layer_{i} for i > 0 use the attention
                                      sub-layers of transformer_layer_0 ("ffn": the
                                      feed-forward ones); the variables exist once
      position_embedding_type         "sinusoidal": fixed, no position variables
      modern options (is_modern)      embeddings (word table, LayerNorm), transformer_layer_{i}
                                      (modern_block.ModernTransformerBlock, global or local by
                                      BertConfig.layer_is_global), final_layer_norm, pooler
                                      (modern_encoder.ModernPooler: [CLS] or mean); input_type_ids
                                      is ignored when type_vocab_size=0

    Args:
      config: a `BertConfig` or a dict of bert_config.json fields.
      dtype: optional dtype policy for every layer (default: the global policy).
      **kwargs: `name`, `trainable`.

    Examples:

    >>> encoder = BertEncoder(BertConfig.from_preset("bert_tiny", vocab_size=100))
    >>> ids = keras.ops.ones((2, 16), "int32")
    >>> out = encoder({"input_word_ids": ids, "input_mask": ids,
    ...                "input_type_ids": keras.ops.zeros_like(ids)})
    >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
    ((2, 16, 128), (2, 128))
    """

    def __init__(self, config, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = BertConfig.from_dict(config)
        elif not isinstance(config, BertConfig):
            raise TypeError(f"BertEncoder: config must be a BertConfig or a dict of "
                            f"bert_config.json fields, got {type(config).__name__}")
        kwargs.setdefault("name", "bert_encoder")

        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in _INPUT_NAMES
        }
        if config.is_modern:
            outputs, embedding_layer = modern_encoder.build_graph(config, inputs, dtype)
        else:
            outputs, embedding_layer = self._bert_graph(config, inputs, dtype)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.config = config
        self._dtype_argument = dtype
        self.embedding_layer = embedding_layer

    @staticmethod
    def _bert_graph(config, inputs, dtype):
        """BERT's graph (post-LN blocks, tanh pooler): (outputs dict, embeddings layer)."""
        embedding_layer = layers.BertEmbeddings(
            vocab_size=config.vocab_size, type_vocab_size=config.type_vocab_size,
            max_position_embeddings=config.max_position_embeddings,
            hidden_size=config.embedding_width, initializer_range=config.initializer_range,
            layer_norm_eps=config.layer_norm_eps, dropout=config.hidden_dropout_prob,
            position_embedding_type=config.position_embedding_type, dtype=dtype,
            name="embeddings")
        hidden_bsh = embedding_layer(inputs["input_word_ids"], inputs["input_type_ids"])
        if config.embedding_width != config.hidden_size:
            hidden_bsh = keras.layers.Dense(
                config.hidden_size,
                kernel_initializer=layers.truncated_normal(config.initializer_range),
                dtype=dtype, name="embedding_projection")(hidden_bsh)
        attention_bias = layers.AttentionBias(dtype=dtype, name="attention_bias")(
            inputs["input_mask"])

        encoder_outputs = []
        first_block = None
        for i in range(config.num_hidden_layers):
            if first_block is not None and config.share_parameters == "all":
                block = first_block
            else:
                block = layers.TransformerBlock(
                    hidden_size=config.hidden_size,
                    num_attention_heads=config.num_attention_heads,
                    intermediate_size=config.intermediate_size,
                    hidden_act=config.hidden_act,
                    hidden_dropout_prob=config.hidden_dropout_prob,
                    attention_probs_dropout_prob=config.attention_probs_dropout_prob,
                    initializer_range=config.initializer_range,
                    layer_norm_eps=config.layer_norm_eps,
                    attention_from=first_block if config.share_parameters == "attention"
                    else None,
                    ffn_from=first_block if config.share_parameters == "ffn" else None,
                    dtype=dtype, name=f"transformer_layer_{i}")
                first_block = first_block or block
            hidden_bsh = block(hidden_bsh, attention_bias)
            encoder_outputs.append(hidden_bsh)

        cls_bh = hidden_bsh[:, 0, :]
        pooled_bh = keras.layers.Dense(
            config.hidden_size, activation="tanh",
            kernel_initializer=layers.truncated_normal(config.initializer_range),
            dtype=dtype, name="pooler")(cls_bh)
        return ({"sequence_output": hidden_bsh, "pooled_output": pooled_bh,
                 "encoder_outputs": encoder_outputs}, embedding_layer)

    def call(self, inputs, training=None, mask=None):
        # A task model's feature dict carries labels too; pass on only the encoder's inputs so
        # Keras does not warn about the mismatched structure. (A missing input has already
        # been reported by Keras' input check, naming it.)
        if isinstance(inputs, dict):
            if inputs.get(INSTANCE_IDS) is not None:
                return self._call_packed(inputs, training)
            inputs = {k: inputs[k] for k in _INPUT_NAMES}
        return super().call(inputs, training=training, mask=mask)

    def _blocks(self):
        """The block applied at each depth, in order (one block L times when sharing all)."""
        if self.config.share_parameters == "all":
            return [self.get_layer("transformer_layer_0")] * self.config.num_hidden_layers
        return [self.get_layer(f"transformer_layer_{i}")
                for i in range(self.config.num_hidden_layers)]

    def _call_packed(self, inputs, training):
        """The functional graph's layers on a packed row: per-instance positions and a
        block-diagonal attention bias, both from input_instance_ids [B, S]."""
        missing = [k for k in _INPUT_NAMES if k not in inputs]
        if missing:
            raise KeyError(f"BertEncoder: inputs lack {', '.join(missing)}; got "
                           f"{', '.join(sorted(inputs))}")
        instance_ids = inputs[INSTANCE_IDS]
        if tf.executing_eagerly():
            # Debug-time check only: inside tf.function / XLA it would cost every step.
            packing_checks.check_instance_ids(instance_ids, inputs["input_mask"])
        instance_ids = tf.cast(instance_ids, tf.int32)
        if self.config.is_modern:
            return modern_encoder.call_packed(
                self, tf.cast(inputs["input_word_ids"], tf.int32),
                tf.cast(inputs["input_type_ids"], tf.int32), inputs["input_mask"], instance_ids,
                packing_checks.instance_position_ids(instance_ids), training)
        hidden_bsh = self.embedding_layer(
            tf.cast(inputs["input_word_ids"], tf.int32),
            tf.cast(inputs["input_type_ids"], tf.int32),
            position_ids=packing_checks.instance_position_ids(instance_ids), training=training)
        if self.config.embedding_width != self.config.hidden_size:
            hidden_bsh = self.get_layer("embedding_projection")(hidden_bsh)
        attention_bias = packing_checks.instance_attention_bias(instance_ids)
        encoder_outputs = []
        for block in self._blocks():
            hidden_bsh = block(hidden_bsh, attention_bias, training=training)
            encoder_outputs.append(hidden_bsh)
        pooled_bh = self.get_layer("pooler")(hidden_bsh[:, 0, :])
        return {"sequence_output": hidden_bsh, "pooled_output": pooled_bh,
                "encoder_outputs": encoder_outputs}

    def pool_at(self, sequence_output, positions):
        """The pooler (dense + tanh, as pooled_output) at given positions, e.g. each packed
        instance's [CLS].

        Args:
          sequence_output: float [B, S, H].
          positions: int [B, I], row positions.

        Returns:
          float [B, I, H].
        """
        cls_bih = tf.gather(sequence_output, tf.cast(positions, tf.int32), batch_dims=1)
        if self.config.is_modern:
            return self.get_layer("pooler").transform(cls_bih)
        return self.get_layer("pooler")(cls_bih)

    @property
    def word_embeddings(self):
        """The word-embedding `keras.layers.Embedding`; `.embeddings` is the [V, H] variable."""
        return self.embedding_layer.word_embeddings

    def get_config(self):
        config = {"name": self.name, "trainable": self.trainable,
                  "config": dict(self.config.to_dict(), layer_norm_eps=self.config.layer_norm_eps)}
        if self._dtype_argument is not None:
            config["dtype"] = keras.dtype_policies.serialize(
                keras.dtype_policies.get(self._dtype_argument))
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "dtype" in config and isinstance(config["dtype"], dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
