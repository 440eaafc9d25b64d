"""FusedLayerNorm: Keras' LayerNormalization computed by kernels.layer_norm."""

import keras

from bert_tf.modeling import kernels


@keras.saving.register_keras_serializable(package="bert_tf")
class FusedLayerNorm(keras.layers.LayerNormalization):
    """keras.layers.LayerNormalization (same variables and config) over the last axis with
    gamma, as every BERT LayerNorm is (without beta, center=False, for ModernBERT's norms);
    computed by kernels.layer_norm: fewer ops than Keras' forward and, on TensorFlow, a
    gradient fused in one XLA kernel. Other settings fall back to Keras' own call.
    """

    def call(self, inputs):
        if (self.axis not in (-1, [-1], len(inputs.shape) - 1, [len(inputs.shape) - 1])
                or not self.scale or self.rms_scaling):
            return super().call(inputs)
        return kernels.layer_norm(inputs, self.gamma, self.beta if self.center else None,
                                  self.epsilon, self.compute_dtype)
