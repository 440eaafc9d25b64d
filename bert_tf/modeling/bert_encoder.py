"""BertEncoder: the BERT network, embeddings -> N post-LN transformer blocks -> tanh pooler,
with the BERT-family options of its BertConfig: ALBERT's factorized embeddings and
cross-layer parameter sharing, fixed sinusoidal position embeddings."""

import keras

from bert_tf.modeling import packing_checks, release_0_1
from bert_tf.modeling.embeddings import BertEmbeddings
from bert_tf.modeling.encoder_base import Encoder, as_config
from bert_tf.modeling.initializers import truncated_normal
from bert_tf.modeling.transformer_block import AttentionBias, TransformerBlock


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEncoder(Encoder):
    """The BERT encoder (architecture "bert") as a functional Keras model.

    Inputs and packed rows: see `encoder_base.Encoder` (input_word_ids, input_mask,
    input_type_ids int32 [B, S]; optional input_instance_ids).

    Outputs (a dict):
      sequence_output: float [B, S, H], the last block's output.
      pooled_output: float [B, H], tanh(dense(sequence_output[:, 0])) (the [CLS] vector).
      encoder_outputs: list of L float [B, S, H], one per block.

    Layer names, for mapping original TF1 checkpoints (`bert/...`):
      embeddings (BertEmbeddings)     embeddings/{word,token_type,position}_embeddings, LayerNorm
      transformer_layer_{i}           encoder/layer_{i}/... (see transformer_block.TransformerBlock)
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

    Args:
      config: a `BertConfig` or a dict of bert_config.json fields (architecture "bert").
      dtype: optional dtype policy for every layer (default: the global policy).
      embedding_layer: another BertEncoder's `embedding_layer` to share (ELECTRA's generator
        shares its discriminator's word, position and type tables and their LayerNorm); its
        width is the config's embedding width. Not serialized (see `Encoder`).
      **kwargs: `name`, `trainable`.

    Examples:

    >>> from bert_tf.config import BertConfig
    >>> encoder = BertEncoder(BertConfig.from_preset("bert_tiny", vocab_size=100))
    >>> ids = keras.ops.ones((2, 16), "int32")
    >>> out = encoder({"input_word_ids": ids, "input_mask": ids,
    ...                "input_type_ids": keras.ops.zeros_like(ids)})
    >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
    ((2, 16, 128), (2, 128))
    """

    architecture = "bert"

    @staticmethod
    def _build_graph(config, inputs, dtype, embedding_layer=None):
        """BERT's graph (post-LN blocks, tanh pooler): (outputs dict, embeddings layer)."""
        if embedding_layer is not None:
            _check_shared_embeddings(embedding_layer, config)
        embedding_layer = embedding_layer or BertEmbeddings(
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
                kernel_initializer=truncated_normal(config.initializer_range),
                dtype=dtype, name="embedding_projection")(hidden_bsh)
        attention_bias = AttentionBias(dtype=dtype, name="attention_bias")(
            inputs["input_mask"])

        encoder_outputs = []
        first_block = None
        for i in range(config.num_hidden_layers):
            if first_block is not None and config.share_parameters == "all":
                block = first_block
            else:
                block = TransformerBlock(
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
            kernel_initializer=truncated_normal(config.initializer_range),
            dtype=dtype, name="pooler")(cls_bh)
        return ({"sequence_output": hidden_bsh, "pooled_output": pooled_bh,
                 "encoder_outputs": encoder_outputs}, embedding_layer)

    def _blocks(self):
        """The block applied at each depth, in order (one block L times when sharing all)."""
        if self.config.share_parameters == "all":
            return [self.get_layer("transformer_layer_0")] * self.config.num_hidden_layers
        return [self.get_layer(f"transformer_layer_{i}")
                for i in range(self.config.num_hidden_layers)]

    def _packed_outputs(self, word_ids, type_ids, instance_ids, position_ids, training):
        hidden_bsh = self.embedding_layer(word_ids, type_ids, position_ids=position_ids,
                                          training=training)
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

    @classmethod
    def from_config(cls, config):
        # A .keras file of bert_tf 0.1 names BertEncoder for either architecture.
        if as_config(config["config"], cls.__name__).architecture == "modernbert":
            return release_0_1.Release01ModernBertEncoder.from_config(config)
        return super().from_config(config)


def _check_shared_embeddings(embedding_layer, config):
    """Shared embeddings must be BERT's, as wide as `config`'s tables, over its vocabulary."""
    if not isinstance(embedding_layer, BertEmbeddings):
        raise TypeError(f"BertEncoder: embedding_layer must be a BertEmbeddings, got "
                        f"{type(embedding_layer).__name__}")
    shape = (embedding_layer.vocab_size, embedding_layer.hidden_size,
             embedding_layer.max_position_embeddings, embedding_layer.type_vocab_size)
    wanted = (config.vocab_size, config.embedding_width, config.max_position_embeddings,
              config.type_vocab_size)
    if shape != wanted:
        raise ValueError(f"BertEncoder: the shared embeddings (vocab_size, width, "
                         f"max_position_embeddings, type_vocab_size) = {shape} differ from the "
                         f"config's {wanted}")
