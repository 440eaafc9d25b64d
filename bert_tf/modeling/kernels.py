"""The one place where the model code's kernels are chosen by Keras backend.

The layers are written with `keras.ops` and run on TensorFlow and JAX alike. A few operations
have a faster TensorFlow-only form (bert_tf/modeling/tf_kernels.py, the only module of
`bert_tf.modeling` that imports TensorFlow): GELU and LayerNorm with their gradient fused in one
XLA kernel, inference attention over a few rows on TensorFlow's own kernels, and a query-chunk
loop that holds one chunk at a time. Every layer calls the functions here; on JAX they are the
`keras.ops` forms, which XLA fuses by itself.

On JAX with a GPU, attention without dropout on its probabilities runs in cuDNN's fused
(flash) kernel through jax.nn.dot_product_attention (`fused_attention`; BERT_TF_FUSED_ATTENTION
=off keeps XLA's own).

Two contexts change what is traced inside them (graphs that leave the training process):
  portable_attention()  no data-dependent paths (LiteRT: a cond runs as two subgraphs), and
                        hidden keys masked with PORTABLE_MASKED_LOGIT (see attention.py);
  inference_only()      no custom gradients (a SavedModel cannot save their Python functions
                        and warns on load; serving never takes a gradient).
`export_tracing()` enters what an export needs of them.
"""

import contextlib
import contextvars
import os

import keras
from keras import ops

# bert_tf.modeling (this package) refused any other backend before Keras was imported.
BACKEND = keras.backend.backend()

if BACKEND == "tensorflow":
    from bert_tf.modeling import tf_kernels as _tf_kernels

    jax = None
else:
    import jax

    _tf_kernels = None

_PORTABLE = contextvars.ContextVar("portable_attention", default=False)
_INFERENCE_ONLY = contextvars.ContextVar("inference_only", default=False)


@contextlib.contextmanager
def _set(variable):
    token = variable.set(True)
    try:
        yield
    finally:
        variable.reset(token)


def portable_attention():
    """Attention traced inside has no data-dependent paths: BERT blocks run batched matmuls and
    a softmax whatever the input size (no few-row branch), modern blocks full (masked-band)
    local attention and unchunked global attention, so memory grows with the square of the
    request's length as the global layers' already does.

    For graphs leaving TensorFlow (LiteRT): the paths only pay off on TensorFlow's kernels, and
    LiteRT runs a cond as an IF over two subgraphs, which costs more than it saves (LiteRT int8,
    2-core AMD EPYC, short phrases: p50 1.9 -> 1.2 ms without it).
    """
    return _set(_PORTABLE)


def portable():
    """True inside `portable_attention()`."""
    return _PORTABLE.get()


@contextlib.contextmanager
def export_tracing(leaves_tensorflow):
    """The contexts an export traces its graph in: `inference_only()`, and for a graph that
    leaves TensorFlow's runtime (LiteRT, ONNX, OpenVINO) `portable_attention()` too."""
    with inference_only(), (portable_attention() if leaves_tensorflow
                            else contextlib.nullcontext()):
        yield


def inference_only():
    """Layers traced inside use no custom gradients (the forward values are the same)."""
    return _set(_INFERENCE_ONLY)


def _fused_gradients():
    return _tf_kernels is not None and not _INFERENCE_ONLY.get()


def gelu(x, approximate):
    """GELU: the tanh approximation (approximate=True) or the exact erf form; x float [...]."""
    if _fused_gradients():
        return _tf_kernels.gelu(x, approximate)
    return ops.gelu(x, approximate=approximate)


def layer_norm(x, gamma, beta, epsilon, compute_dtype):
    """gamma * (x - mean) / sqrt(var + eps) + beta over the last axis.

    Args: x float [..., H]; gamma, beta float [H] (beta may be None: no shift).
    Returns: [..., H] in compute_dtype; the statistics in float32 (as Keras computes them).
    """
    if _tf_kernels is not None:
        # Every model graph holds a LayerNorm: before the first one runs, TensorFlow's one-time
        # oneDNN type notice (which its int transposes would print) goes where nobody sees it.
        _tf_kernels.before_first_graph()
    if _fused_gradients():
        if beta is None:
            beta = ops.zeros_like(gamma)
        return _tf_kernels.layer_norm(x, gamma, beta, epsilon, compute_dtype, layer_norm_forward)
    return ops.cast(layer_norm_forward(x, gamma, beta, epsilon), compute_dtype)


def layer_norm_forward(x, gamma, beta, epsilon):
    """The LayerNorm forward in x's dtype, float32 inside.

    Seven element-wise and reduction ops; on TensorFlow none of them a oneDNN call: at batch 1
    and 16 tokens that costs less than keras.ops.layer_normalization, and at 128 tokens ~35%
    less (CPU).
    """
    x32 = ops.cast(x, "float32")
    mean = ops.mean(x32, axis=-1, keepdims=True)
    centered = x32 - mean
    variance = ops.mean(ops.square(centered), axis=-1, keepdims=True)
    scale = ops.rsqrt(variance + epsilon) * ops.cast(gamma, "float32")
    normalized = centered * scale
    if beta is not None:
        normalized = normalized + ops.cast(beta, "float32")
    return ops.cast(normalized, x.dtype)


def dropout(x, rate, seed_generator):
    """x with each element zeroed with probability `rate` and the others scaled by
    1 / (1 - rate), drawn from `seed_generator` (a keras.random.SeedGenerator); x float [...].

    On TensorFlow 16 random bits decide each element (rate rounded to a multiple of 2^-16)
    and one XLA kernel applies the mask forward and backward: the float random numbers and
    element-wise kernels of keras.random.dropout (bfloat16 on Eigen, without native
    arithmetic) cost 2.3x the CPU time (2-core AMD EPYC, BERT-small attention probabilities
    [32, 8, 128, 128], forward and backward: 26 -> 11.5 ms). JAX fuses Keras' own form.
    Under a TensorFlow distribution strategy each replica folds its id into the drawn seed,
    so replicas mask their examples independently (one replica: the seed as drawn).
    """
    if _tf_kernels is not None:
        return _tf_kernels.dropout(x, rate, seed_generator.next())
    return keras.random.dropout(x, rate, seed=seed_generator)


def categorical(logits_nv, seed_generator):
    """One index per row drawn from softmax(logits_nv) (float [N, V]) with `seed_generator`:
    int32 [N, 1]. keras.random.categorical's draw; under a TensorFlow distribution strategy
    each replica folds its id into the seed, as `dropout` does.
    """
    if _tf_kernels is not None:
        return _tf_kernels.categorical(logits_nv, seed_generator.next())
    return keras.random.categorical(logits_nv, 1, dtype="int32", seed=seed_generator)


def matmul_transposed(a_nk, b_mk):
    """a b^T: [N, K] x [M, K] -> [N, M] (e.g. hidden states against the tied word-embedding
    table). TensorFlow multiplies by the transpose in its matmul kernel; an explicit transpose
    of a [30522, 768] table cost ~10% of the product forward + backward (2-core CPU). XLA folds
    the transpose into the dot by itself."""
    if _tf_kernels is not None:
        return _tf_kernels.matmul_transposed(a_nk, b_mk)
    return ops.matmul(a_nk, ops.transpose(b_mk))


def few_row_attention(query_bsad, key_bsad, value_bsad, attention_bias, batched, training,
                      compute_dtype):
    """Attention of BERT's blocks: `batched()` (the keras.ops form), except for float32
    inference on TensorFlow, where inputs of a few rows take TensorFlow's own kernels (see
    tf_kernels.SMALL_ATTENTION_ROWS; outside portable_attention()).

    Args: query_bsad (scaled), key_bsad, value_bsad float [B, S, A, d]; attention_bias float32
      [B, 1, 1, S] or [B, 1, S, S]; batched: () -> [B, S, A, d].
    """
    if _tf_kernels is None or training or compute_dtype != "float32" or portable():
        return batched()
    return _tf_kernels.attention_by_rows(query_bsad, key_bsad, value_bsad, attention_bias,
                                         batched, differentiable=not _INFERENCE_ONLY.get())


def _fused_implementation(query_bsad):
    """"cudnn" where jax.nn.dot_product_attention's fused kernel applies (JAX on a GPU,
    bfloat16 or float16, a head size that is a multiple of 8 up to 128), "xla" when
    BERT_TF_FUSED_ATTENTION=xla asks for the same function on any device (tests), else None."""
    if jax is None:
        return None
    setting = os.environ.get("BERT_TF_FUSED_ATTENTION", "auto")
    if setting == "xla":
        return "xla"
    head_size = query_bsad.shape[-1]
    if (setting == "off" or jax.default_backend() != "gpu"
            or str(query_bsad.dtype) not in ("bfloat16", "float16")
            or head_size is None or head_size % 8 or head_size > 128):
        return None
    return "cudnn"


def fused_attention_applies(query_bsad):
    """True when `fused_attention` computes attention for queries like these."""
    return _fused_implementation(query_bsad) is not None


def fused_attention(query_bsad, key_bsad, value_bsad, bias):
    """softmax(q k^T + bias) v in one fused kernel, or None where none applies (see
    _fused_implementation); no dropout on the probabilities.

    Args: query_bsad (already scaled), key_bsad, value_bsad [B, S, A, d]; bias float32
      [B, 1, 1, S] or [B, 1, S, S]. Returns: [B, S, A, d] or None.
    """
    implementation = _fused_implementation(query_bsad)
    if implementation is None:
        return None
    return jax.nn.dot_product_attention(
        query_bsad, key_bsad, value_bsad, bias=ops.cast(bias, query_bsad.dtype), scale=1.0,
        implementation=implementation)


def by_length(length, threshold, short, long):
    """short() when the static or traced `length` <= threshold, else long().

    A static length picks in Python; an unknown one (a TensorFlow signature with a None
    dimension) by a cond in the graph. A symbolic one (JAX export's shape polymorphism, one
    graph for every length) takes short(): each caller's short path answers any length.
    """
    if isinstance(length, int):
        return short() if length <= threshold else long()
    if BACKEND == "jax":
        return short()
    return ops.cond(length <= threshold, short, long)


def map_one_at_a_time(fn, elements, output_dtype):
    """[fn(e) for e in elements] stacked along axis 0, one element at a time (so only one
    result's intermediates are alive at once). elements: a tuple of tensors [N, ...]; fn
    returns one tensor of output_dtype."""
    if _tf_kernels is not None:
        return _tf_kernels.map_one_at_a_time(fn, elements, output_dtype)
    return ops.map(fn, elements)


def replicas_in_sync():
    """How many replicas each compute a share of one global batch's mean loss: the
    tf.distribute strategy's replicas on TensorFlow; 1 on JAX, whose distribution API computes
    the loss over the global batch."""
    return _tf_kernels.replicas_in_sync() if _tf_kernels is not None else 1


def is_concrete(x):
    """True when x holds values (eager), not a traced placeholder (tf.function, jax.jit)."""
    if _tf_kernels is not None:
        return _tf_kernels.executing_eagerly()
    return not isinstance(x, jax.core.Tracer)
