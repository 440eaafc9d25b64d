"""FusedLayerNorm: Keras' LayerNormalization with a gradient fused into one XLA kernel."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="bert_tf")
class FusedLayerNorm(keras.layers.LayerNormalization):
    """keras.layers.LayerNormalization (same variables, forward and config) with a fused gradient.

    The forward pass computes what Keras' does with fewer ops (`_layer_norm_forward`); the
    backward recomputes the statistics from x in one XLA kernel instead of autodiff's ~20
    element-wise and reduction kernels. Only for a normalization over the last axis with gamma
    (as every BERT LayerNorm is); without beta (center=False, ModernBERT's norms) beta is 0.
    """

    def call(self, inputs):
        if (self.axis not in (-1, [-1], len(inputs.shape) - 1, [len(inputs.shape) - 1])
                or not self.scale or self.rms_scaling):
            return super().call(inputs)
        gamma = tf.convert_to_tensor(self.gamma)
        beta = tf.convert_to_tensor(self.beta) if self.center else tf.zeros_like(gamma)
        return _layer_norm(inputs, gamma, beta, self.epsilon, self.compute_dtype)


def _layer_norm(x, gamma, beta, epsilon, compute_dtype):
    """Keras' LayerNorm forward over the last axis, with a fused gradient for x, gamma, beta."""
    @tf.custom_gradient
    def normalize(x, gamma, beta):
        def grad(dy):
            dx, dgamma, dbeta = _layer_norm_grad(dy, x, gamma, epsilon)
            return dx, tf.cast(dgamma, gamma.dtype), tf.cast(dbeta, beta.dtype)
        return tf.cast(_layer_norm_forward(x, gamma, beta, epsilon), compute_dtype), grad
    return normalize(x, gamma, beta)


def _layer_norm_forward(x, gamma, beta, epsilon):
    """gamma * (x - mean) / sqrt(var + eps) + beta over the last axis, in x's dtype (float32
    statistics for a float16/bfloat16 x, as Keras computes them).

    Seven element-wise and reduction ops, none of them a oneDNN call: at batch 1 and 16 tokens
    that costs less than keras.ops.layer_normalization, and at 128 tokens ~35% less (CPU).
    """
    x32 = tf.cast(x, tf.float32)
    mean = tf.reduce_mean(x32, axis=-1, keepdims=True)
    centered = x32 - mean
    variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
    scale = tf.math.rsqrt(variance + epsilon) * tf.cast(gamma, tf.float32)
    return tf.cast(centered * scale + tf.cast(beta, tf.float32), x.dtype)


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
