"""TensorFlow-only kernels of the model code, chosen by bert_tf/modeling/kernels.py.

The only module of `bert_tf.modeling` that imports TensorFlow; it is imported only when Keras
runs on TensorFlow. Each function computes what its keras.ops counterpart computes, faster on
TensorFlow's CPU kernels.
"""

import functools
import math

import tensorflow as tf

from bert_tf import quiet_logs

# Up to this many rows (batch x tokens), inference attention runs on TensorFlow's own kernels
# instead of oneDNN's. A oneDNN call hands its work to every intra-op thread; on a few KB of
# scores that hand-off costs more than the arithmetic (2-core VM, batch 1, 8 heads of 64: the
# attention of 4 blocks at 16 tokens 1.11 -> 0.41 ms, at 64 tokens 1.75 -> 1.42 ms; at 96
# tokens oneDNN is faster).
SMALL_ATTENTION_ROWS = 64

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715


def _xla_kernel(fn):
    """fn (tensor arguments only) as one XLA kernel, traced once per combination of argument
    dtypes with every shape unknown (XLA compiles it for each concrete shape): an eager loop
    over changing lengths (dynamic padding) then neither retraces it each batch nor gets
    TensorFlow's retracing warning about a function the user never wrote. A graph calling it
    still infers its outputs' shapes from the call's. `.traced`: the tf.functions by argument
    dtypes."""
    traced = {}

    @functools.wraps(fn)
    def call(*args):
        args = [tf.convert_to_tensor(a) for a in args]
        key = tuple(a.dtype for a in args)
        if key not in traced:
            traced[key] = tf.function(
                fn, jit_compile=True, autograph=False,
                input_signature=[tf.TensorSpec(None, a.dtype) for a in args])
        return traced[key](*args)
    call.traced = traced
    return call


# Both GELUs run forward and backward (its gradient from x alone) in one fused XLA kernel each:
# TensorFlow 2.21's element-wise CPU kernels are built without AVX2/FMA, and tf.nn.gelu is about
# eight of them forward; autodiff through it ran about a dozen more and kept their
# intermediates. On a [4096, 2048] FFN activation (BERT-small): forward + backward 118 -> 65 ms
# with the fused gradient (2-core AVX2 CPU); the forward alone 22.9 -> 7.9 ms CPU in bfloat16,
# 20.2 -> 8.4 ms in float32 (2-core AMD EPYC, AVX-512). Graphs traced under
# kernels.inference_only() (exports) keep tf.nn.gelu: they need no XLA.
@tf.custom_gradient
def _gelu_tanh(x):
    return _gelu_tanh_forward(x), lambda dy: _gelu_tanh_grad(dy, x)


@tf.custom_gradient
def _gelu_erf(x):
    return _gelu_erf_forward(x), lambda dy: _gelu_erf_grad(dy, x)


def gelu(x, approximate):
    """GELU with a fused forward and gradient. x: float [...]."""
    return _gelu_tanh(x) if approximate else _gelu_erf(x)


def _gelu_forward(x, approximate):
    """tf.nn.gelu in x's dtype, computed in float32 or wider."""
    wide = tf.float32 if x.dtype.size < 4 else x.dtype
    return tf.cast(tf.nn.gelu(tf.cast(x, wide), approximate=approximate), x.dtype)


@_xla_kernel
def _gelu_tanh_forward(x):
    """The tanh-approximate GELU of x float [...], in x's dtype."""
    return _gelu_forward(x, True)


@_xla_kernel
def _gelu_erf_forward(x):
    """The exact (erf) GELU of x float [...], in x's dtype."""
    return _gelu_forward(x, False)


@_xla_kernel
def _gelu_tanh_grad(dy, x):
    """dy * d/dx 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3); float32 inside."""
    x = tf.cast(x, tf.float32)
    t = tf.tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * (x * x * x)))
    du_dx = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_CUBIC * (x * x))
    dgelu = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx
    return tf.cast(tf.cast(dy, tf.float32) * dgelu, dy.dtype)


@_xla_kernel
def _gelu_erf_grad(dy, x):
    """dy * d/dx x Phi(x) = dy * (Phi(x) + x phi(x)); float32 inside."""
    x = tf.cast(x, tf.float32)
    cdf = 0.5 * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))
    pdf = tf.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
    return tf.cast(tf.cast(dy, tf.float32) * (cdf + x * pdf), dy.dtype)


def layer_norm(x, gamma, beta, epsilon, compute_dtype, forward):
    """`forward(x, gamma, beta, epsilon)` (kernels.layer_norm_forward) cast to compute_dtype,
    with the gradients of x, gamma and beta fused in one XLA kernel that recomputes the
    statistics from x (instead of autodiff's ~20 element-wise and reduction kernels; 1.05-1.12x
    per BERT-tiny training step).

    Args: x float [..., H]; gamma, beta float [H].
    """
    @tf.custom_gradient
    def normalize(x, gamma, beta):
        def grad(dy):
            dx, dgamma, dbeta = _layer_norm_grad(dy, x, gamma, tf.constant(epsilon, tf.float32))
            return dx, tf.cast(dgamma, gamma.dtype), tf.cast(dbeta, beta.dtype)
        return tf.cast(forward(x, gamma, beta, epsilon), compute_dtype), grad
    return normalize(x, tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta))


@_xla_kernel
def _layer_norm_grad(dy, x, gamma, epsilon):
    """Gradients of gamma * (x - mean) / sqrt(var + eps) + beta; float32 inside.

    Args: dy, x: float [..., H]; gamma: float [H]; epsilon: float32 []. Returns: dx [..., H]
    (x's dtype), dgamma and dbeta float32 [H].
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
    rows = tf.range(tf.rank(x) - 1)  # every axis but the last (the trace knows no rank)
    return (tf.cast(dx, x.dtype), tf.reduce_sum(dy32 * xhat, axis=rows),
            tf.reduce_sum(dy32, axis=rows))


def before_first_graph():
    """Spends TensorFlow's one-time oneDNN type notice, which the first graph holding a
    transpose of a non-float type would print (this module's int32 views, the modern encoder's
    int64 index transposes): bert_tf.quiet_logs.absorb_onednn_type_notice."""
    quiet_logs.absorb_onednn_type_notice()


# Dropout keeps an element when its 16 random bits are >= rate * 2^16; rates from here up
# (where that threshold would not fit 16 bits) take TensorFlow's float dropout.
MAX_DROPOUT_RATE = 65535.5 / 65536


def replica_seed(seed):
    """The int32 [2] stateless seed of this replica from a SeedGenerator's [2] state: the state
    as Keras casts it on one replica, else that folded with the replica's id in its sync group.
    The replicas of a mirrored strategy read the same generator state; with one seed they would
    drop the same positions of their different examples."""
    if seed.dtype != tf.int32:  # stateless ops under XLA take int32 seeds, as Keras casts
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return seed
    return tf.random.experimental.stateless_fold_in(seed, context.replica_id_in_sync_group)


def categorical(logits_nv, seed):
    """kernels.categorical on TensorFlow: keras.random.categorical's draw on this replica's
    seed. logits float [N, V]; seed: a SeedGenerator's [2] state. Returns int32 [N, 1]."""
    drawn = tf.random.stateless_categorical(logits_nv, 1, replica_seed(seed))
    return tf.cast(drawn, tf.int32)


def dropout(x, rate, seed):
    """kernels.dropout on TensorFlow. x float [...]; seed: a SeedGenerator's [2] state."""
    seed = replica_seed(seed)
    if rate >= MAX_DROPOUT_RATE:  # Keras' own form, on this replica's seed
        return tf.zeros_like(x) if rate >= 1 else tf.nn.experimental.stateless_dropout(
            x, rate, seed)
    size = tf.size(x)
    # Two 16-bit draws from each 32-bit word: half of Philox's work.
    words = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None, maxval=None,
                                        dtype=tf.uint32)
    bits = tf.reshape(tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size], tf.shape(x))
    threshold = tf.constant(round(rate * 65536), tf.uint16)
    scale = tf.constant(1.0 / (1.0 - rate), tf.float32)

    @tf.custom_gradient
    def drop(x):
        return (_apply_dropout(x, bits, threshold, scale),
                lambda dy: _apply_dropout(dy, bits, threshold, scale))
    return drop(x)


@_xla_kernel
def _apply_dropout(x, bits, threshold, scale):
    """x * scale where bits >= threshold, else 0; in x's dtype."""
    return tf.where(bits >= threshold, x * tf.cast(scale, x.dtype), tf.zeros_like(x))


def matmul_transposed(a_nk, b_mk):
    return tf.matmul(a_nk, b_mk, transpose_b=True)


def _transpose_bits(x, perm):
    """tf.transpose of a float32 x through an int32 view of its bits.

    Same values; TensorFlow's int32 transpose is its own kernel (run on the calling thread for
    small tensors), not oneDNN's float one.
    """
    return tf.bitcast(tf.transpose(tf.bitcast(x, tf.int32), perm), tf.float32)


@tf.custom_gradient
def _transpose_inline(x, perm):
    """_transpose_bits, differentiable (the gradient transposes back)."""
    inverse = tf.math.invert_permutation(perm)
    return _transpose_bits(x, perm), lambda dy: (_transpose_inline(dy, inverse), None)


def _small_attention(query_bsad, key_bsad, value_bsad, attention_bias, transpose):
    """Inference attention for a few rows (float32, no dropout), on TensorFlow's own kernels:
    BatchMatMulV3 (oneDNN replaces BatchMatMulV2 and Einsum, not V3), transposes through
    `_transpose_inline` and a softmax of element-wise ops.

    Args: float32 [B, S, A, d] each (queries scaled); attention_bias: float32 [B, 1, 1, S] or
      [B, 1, S, S]. Returns: float32 [B, S, A, d].
    """
    to_heads = tf.constant([0, 2, 1, 3])
    query_basd = transpose(query_bsad, to_heads)
    key_badt = transpose(key_bsad, tf.constant([0, 2, 3, 1]))
    value_basd = transpose(value_bsad, to_heads)
    scores_bass = tf.raw_ops.BatchMatMulV3(x=query_basd, y=key_badt, Tout=tf.float32)
    scores_bass = scores_bass + attention_bias
    exp_bass = tf.exp(scores_bass - tf.reduce_max(scores_bass, axis=-1, keepdims=True))
    probs_bass = exp_bass / tf.reduce_sum(exp_bass, axis=-1, keepdims=True)
    context_basd = tf.raw_ops.BatchMatMulV3(x=probs_bass, y=value_basd, Tout=tf.float32)
    return transpose(context_basd, to_heads)


def attention_by_rows(query_bsad, key_bsad, value_bsad, attention_bias, batched,
                      differentiable=True):
    """`_small_attention` up to SMALL_ATTENTION_ROWS rows (B x S), else batched(); chosen here
    for static shapes, else by tf.cond. differentiable=False: its transposes carry no custom
    gradient (graphs that are never differentiated, e.g. exports)."""
    def small():
        return _small_attention(query_bsad, key_bsad, value_bsad, attention_bias,
                                _transpose_inline if differentiable else _transpose_bits)

    batch, length = query_bsad.shape[:2]
    if batch is not None and length is not None:
        return small() if batch * length <= SMALL_ATTENTION_ROWS else batched()
    shape = tf.shape(query_bsad)
    return tf.cond(shape[0] * shape[1] <= SMALL_ATTENTION_ROWS, small, batched)


def map_one_at_a_time(fn, elements, output_dtype):
    """tf.map_fn with one iteration in flight (its default runs several, holding their
    intermediates together)."""
    return tf.map_fn(fn, elements, fn_output_signature=output_dtype, parallel_iterations=1)


def replicas_in_sync():
    return tf.distribute.get_strategy().num_replicas_in_sync


def executing_eagerly():
    return tf.executing_eagerly()
