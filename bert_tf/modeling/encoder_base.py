"""Encoder: what BertEncoder and ModernBertEncoder share (inputs, outputs, packed rows, config).

Each architecture is its own class (bert_encoder.BertEncoder, modern_encoder.ModernBertEncoder);
`bert_tf.modeling.build_encoder(config)` builds the one a config declares.
"""

import keras
from keras import ops

from bert_tf.config import ENCODER_INPUTS, ConfigError, EncoderConfig
from bert_tf.modeling import kernels, packing_checks
from bert_tf.modeling.indexing import gather_positions
from bert_tf.modeling.token_ids import TakesTokenIds

# The optional fourth input of a packed row (see packing_checks).
INSTANCE_IDS = packing_checks.FEATURE


def as_config(config, owner):
    """`config` (an EncoderConfig: BertConfig or ModernBertConfig, or a dict of
    bert_config.json fields) as an EncoderConfig of its architecture."""
    if isinstance(config, dict):
        return EncoderConfig.from_dict(config, source=owner, warn_legacy=False)
    if not isinstance(config, EncoderConfig):
        raise TypeError(f"{owner}: config must be a BertConfig, a ModernBertConfig or a dict of "
                        f"bert_config.json fields, got {type(config).__name__}")
    return config


class Encoder(TakesTokenIds, keras.Model):
    """A transformer encoder as a functional Keras model (base of BertEncoder and
    ModernBertEncoder; build one with `bert_tf.modeling.build_encoder`).

    Inputs (a dict, all int32 [B, S]; S may vary between calls up to max_position_embeddings):
      input_word_ids: token ids.
      input_mask: 1 for real tokens, 0 for padding (padding keys get no attention).
      input_type_ids: segment ids (0 for sentence A, 1 for sentence B).
      input_instance_ids (optional; packed rows, Krell et al. 2021): 1..K = the instance each
        token belongs to (contiguous runs in order), 0 on padding. A query then attends only
        keys of its own instance, and each token's position id is its offset in its instance
        (0 at the instance's [CLS]), so every instance gets the outputs it would get alone in
        its own row; pooled_output is then the first instance's (see `pool_at` for the
        others). Without it (and in exported signatures) the model is unchanged.

    Outputs (a dict):
      sequence_output: float [B, S, H], the last block's output (after a final norm, if any).
      pooled_output: float [B, H], the pooler's vector.
      encoder_outputs: list of L float [B, S, H], one per block.

    Args:
      config: a BertConfig or ModernBertConfig (the subclass's architecture), or a dict of
        bert_config.json fields.
      dtype: optional dtype policy for every layer (default: the global policy).
      embedding_layer: another encoder's embedding layer to use instead of new tables (ELECTRA's
        generator shares its discriminator's); None builds the encoder's own. Not serialized:
        the model that owns both passes it again on load.
      **kwargs: `name`, `trainable`.

    Subclasses set `architecture` and implement `_build_graph(config, inputs, dtype,
    embedding_layer)` -> (outputs, embedding layer) and `_packed_outputs(...)`.
    """

    architecture = None

    def __init__(self, config, dtype=None, embedding_layer=None, **kwargs):
        owner = type(self).__name__
        config = as_config(config, owner)
        if config.architecture != self.architecture:
            raise ConfigError(
                f"{owner}: the config declares architecture '{config.architecture}', this class "
                f"builds '{self.architecture}'; use bert_tf.modeling.build_encoder(config)")
        kwargs.setdefault("name", "bert_encoder")
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ENCODER_INPUTS}
        outputs, embedding_layer = self._build_graph(config, inputs, dtype, embedding_layer)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.config = config
        self._dtype_argument = dtype
        self.embedding_layer = embedding_layer

    def call(self, inputs, training=None, mask=None):
        # A task model's feature dict carries labels too; pass on only the encoder's inputs so
        # Keras does not warn about the mismatched structure. (A missing input has already
        # been reported by Keras' input check, naming it.)
        if isinstance(inputs, dict):
            if inputs.get(INSTANCE_IDS) is not None:
                return self._call_packed(inputs, training)
            inputs = {k: inputs[k] for k in ENCODER_INPUTS}
        return super().call(inputs, training=training, mask=mask)

    def _call_packed(self, inputs, training):
        """The functional graph's layers on a packed row: per-instance positions and
        attention, both from input_instance_ids [B, S]."""
        missing = [k for k in ENCODER_INPUTS if k not in inputs]
        if missing:
            raise KeyError(f"{type(self).__name__}: inputs lack {', '.join(missing)}; got "
                           f"{', '.join(sorted(inputs))}")
        instance_ids = inputs[INSTANCE_IDS]
        if kernels.is_concrete(instance_ids):
            # Debug-time check only: inside a compiled step it would cost every step.
            packing_checks.check_instance_ids(instance_ids, inputs["input_mask"])
        instance_ids = ops.cast(instance_ids, "int32")
        return self._packed_outputs(
            ops.cast(inputs["input_word_ids"], "int32"),
            ops.cast(inputs["input_type_ids"], "int32"), instance_ids,
            packing_checks.instance_position_ids(instance_ids), training)

    def _packed_outputs(self, word_ids, type_ids, instance_ids, position_ids, training):
        """Args: int32 [B, S] each; position_ids each token's offset in its instance.
        Returns: the outputs dict (pooled_output from the row's first instance)."""
        raise NotImplementedError

    def _pooler_transform(self, pooled_xh):
        """The pooler's layers on already gathered vectors [..., H]."""
        return self.get_layer("pooler")(pooled_xh)

    def pool_at(self, sequence_output, positions):
        """The pooler at given positions, e.g. each packed instance's [CLS] (as pooled_output
        is at the first).

        Args:
          sequence_output: float [B, S, H].
          positions: int [B, I], row positions.

        Returns:
          float [B, I, H].
        """
        return self._pooler_transform(gather_positions(sequence_output, positions))

    @property
    def word_embeddings(self):
        """The word-embedding `keras.layers.Embedding`; `.embeddings` is the [V, E] variable."""
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
