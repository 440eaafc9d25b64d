"""The plumbing shared by the models built on an encoder: EncoderTaskModel (a functional graph
over the encoder inputs, the base of the fine-tuning models), the mixin that leaves an unused
pooler out of training, and their `from_config`."""

import keras

from bert_tf.config import ENCODER_INPUTS
from bert_tf.modeling.encoder_base import Encoder
from bert_tf.modeling.initializers import truncated_normal
from bert_tf.modeling.token_ids import TakesTokenIds


def from_config_with_encoder(cls, config):
    """`from_config` of the models built on an encoder: `cls(**config)`, the serialized
    `encoder` deserialized first."""
    config = dict(config)
    config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
    return cls(**config)


class UnusedPoolerNotTrained:
    """Leaves the encoder's pooler out of the trained variables when the heads do not use it.

    A head on sequence_output alone (MLM without NSP, span and token models) gives the pooler
    no gradient; leaving its variables out spares Keras' "Gradients do not exist" warning and
    keeps weight decay off them. Mixed into keras.Model subclasses with an `encoder`.
    """

    def _uses_pooler(self):
        return True

    def _untrained_variable_ids(self):
        if self._uses_pooler():
            return set()
        return {id(v) for v in self.encoder.get_layer("pooler").weights}

    @property
    def trainable_weights(self):
        untrained = self._untrained_variable_ids()
        return [v for v in super().trainable_weights if id(v) not in untrained]

    @property
    def trainable_variables(self):
        untrained = self._untrained_variable_ids()
        return [v for v in super().trainable_variables if id(v) not in untrained]

    @property
    def non_trainable_weights(self):
        untrained = self._untrained_variable_ids()
        return [v for v in self.weights if not v.trainable or id(v) in untrained]


class EncoderTaskModel(TakesTokenIds, UnusedPoolerNotTrained, keras.Model):
    """Shared plumbing of the fine-tuning models: a functional graph over the encoder inputs.

    Subclasses build `outputs` from the encoder's outputs in `_head`; the model takes the
    encoder's three int32 inputs (extra dict keys, such as labels, are dropped), round-trips
    through `.keras` files and exposes the encoder as `.encoder`.
    """

    def __init__(self, encoder, dropout_rate=None, **kwargs):
        if not isinstance(encoder, Encoder):
            raise TypeError(f"{type(self).__name__}: encoder must be a BertEncoder or "
                            f"ModernBertEncoder, got {type(encoder).__name__}")
        config = encoder.config
        self._head_dropout = (config.hidden_dropout_prob if dropout_rate is None
                              else float(dropout_rate))
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ENCODER_INPUTS}
        outputs = self._head(encoder, encoder(inputs), config, encoder.dtype_policy)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.encoder = encoder
        self.dropout_rate = dropout_rate

    def _head(self, encoder, encoder_outputs, config, policy):
        raise NotImplementedError

    def call(self, inputs, training=None, mask=None):
        # Labels may ride along in the feature dict; a missing input is reported by Keras'
        # input check (naming it) before this runs.
        if isinstance(inputs, dict):
            inputs = {k: inputs[k] for k in ENCODER_INPUTS}
        return super().call(inputs, training=training, mask=mask)

    def compile_from_config(self, config):
        # Keras skips compiling on load when `compile` is overridden; these overrides only
        # fill in default losses, and the saved config holds the ones actually used.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def _dense(self, units, config, policy, name):
        return keras.layers.Dense(units, kernel_initializer=truncated_normal(
            config.initializer_range), dtype=policy, name=name)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder),
                "dropout_rate": self.dropout_rate}

    from_config = classmethod(from_config_with_encoder)
