"""FusedDropout: Keras' Dropout computed by kernels.dropout."""

import keras

from bert_tf.modeling import kernels


@keras.saving.register_keras_serializable(package="bert_tf")
class FusedDropout(keras.layers.Dropout):
    """keras.layers.Dropout (same config and seed generator) computed by kernels.dropout: on
    TensorFlow 16 random bits per element and one fused XLA kernel forward and backward,
    instead of a float random number and three element-wise kernels each way. A noise_shape
    falls back to Keras' own call.
    """

    def call(self, inputs, training=False):
        if not training or self.rate <= 0 or self.noise_shape is not None:
            return super().call(inputs, training=training)
        return kernels.dropout(inputs, self.rate, self.seed_generator)
