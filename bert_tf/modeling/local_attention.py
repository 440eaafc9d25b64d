"""Self-attention for the modern encoder: global (every key) and local (a sliding window).

Which keys a query may see is given by `segment_ids` [B, S]: a key is visible when it is real
(segment > 0) and in the query's segment. Unpacked rows pass input_mask (one segment of real
tokens); packed rows pass input_instance_ids (each instance its own segment). Local layers
further keep |query - key| <= half_window (ModernBERT's local_attention=128: 64 either side).

Local attention has two exact paths:
  full     scores [B, A, S, S] with a masked band; cheap for short inputs.
  blocked  the input cut into blocks of half_window tokens; block i's queries score the keys of
           blocks i-1, i, i+1 only ([B, S/c, A, c, 3c]), which covers the band. Memory and time
           grow linearly with S; used when S > 3 * half_window.
Both give the same outputs (tests/modeling/test_local_attention.py). New axes come from
tf.expand_dims, not `x[:, tf.newaxis]`: LiteRT refuses a StridedSlice with a new axis.

Inside `portable_attention()` (graphs traced for LiteRT) every attention takes its one dense
path, without the tf.cond between paths or the tf.map_fn over query chunks: LiteRT runs a cond
as IF subgraphs and has no builtin for the map's tensor lists.
"""

import contextlib
import contextvars

import tensorflow as tf

_PORTABLE = contextvars.ContextVar("portable_attention", default=False)


@contextlib.contextmanager
def portable_attention():
    """Attention traced inside has no data-dependent paths: BERT blocks run batched matmuls and
    a softmax whatever the input size (no small-input branch), modern blocks full (masked-band)
    local attention and unchunked global attention, so memory grows with the square of the
    request's length as the global layers' already does.

    For graphs leaving TensorFlow (LiteRT): the paths only pay off on TensorFlow's kernels, and
    LiteRT runs a cond as an IF over two subgraphs, which costs more than it saves (LiteRT int8,
    2-core AMD EPYC, short phrases: p50 1.9 -> 1.2 ms without it).
    """
    token = _PORTABLE.set(True)
    try:
        yield
    finally:
        _PORTABLE.reset(token)


def portable():
    """True inside `portable_attention()`."""
    return _PORTABLE.get()

# Added to the logits of hidden keys; exp() of it is 0 in float32.
_MASKED_LOGIT = -1e9
# The same inside portable_attention(): exp(-100) is still 0 in float32 next to any real logit
# (4e-44), and a full-int8 LiteRT model calibrates one int8 range for the logits plus this
# bias. With BERT's -10000 the real logits shared ~40 per int8 step and the fine-tuned
# all-MiniLM-L6-v2 classifier answered at chance (label agreement 0.518); with -100, -50 or
# -20 it agreed with float32 on 499 of 500 phrases.
PORTABLE_MASKED_LOGIT = -100.0


def masked_logit(value=_MASKED_LOGIT):
    """The logit bias of a hidden key: `value`, or PORTABLE_MASKED_LOGIT inside
    `portable_attention()`."""
    return PORTABLE_MASKED_LOGIT if portable() else value


def key_padding_bias(input_mask):
    """Args: input_mask int [B, S]. Returns: float32 [B, 1, 1, S], 0 or `masked_logit()`."""
    visible_b11s = tf.expand_dims(tf.expand_dims(tf.cast(input_mask, tf.bool), 1), 1)
    return tf.where(visible_b11s, 0.0, masked_logit())


def segment_bias(segment_ids, half_window=None):
    """Full [B, 1, S, S] bias: a key is visible when real, in the query's segment and (with a
    half_window) within half_window positions. Args: segment_ids int [B, S]."""
    segments = tf.cast(segment_ids, tf.int32)
    query_bs1, key_b1s = tf.expand_dims(segments, 2), tf.expand_dims(segments, 1)
    visible_bss = tf.logical_and(tf.equal(query_bs1, key_b1s), key_b1s > 0)
    if half_window is not None:
        positions = tf.range(tf.shape(segments)[1])
        distance_ss = tf.abs(tf.expand_dims(positions, 1) - tf.expand_dims(positions, 0))
        visible_bss = tf.logical_and(visible_bss, tf.expand_dims(distance_ss <= half_window, 0))
    return tf.expand_dims(tf.where(visible_bss, 0.0, masked_logit()), 1)


def full_attention(query_bsad, key_bsad, value_bsad, bias, dropout=None):
    """softmax(q k^T + bias) v per head; the softmax in float32.

    Args:
      query_bsad (already scaled), key_bsad, value_bsad: float [B, S, A, d].
      bias: float32 [B, 1, 1, S] or [B, 1, S, S].
      dropout: optional callable applied to the probabilities [B, A, S, S].

    Returns:
      float [B, S, A, d].
    """
    query_basd, key_basd, value_basd = (
        tf.transpose(x, [0, 2, 1, 3]) for x in (query_bsad, key_bsad, value_bsad))
    scores_bass = tf.matmul(query_basd, key_basd, transpose_b=True)
    # Keras casts float call arguments to the compute dtype; the softmax runs in float32.
    scores_bass = tf.cast(scores_bass, tf.float32) + tf.cast(bias, tf.float32)
    probs_bass = tf.cast(tf.nn.softmax(scores_bass, axis=-1), query_bsad.dtype)
    if dropout is not None:
        probs_bass = dropout(probs_bass)
    return tf.transpose(tf.matmul(probs_bass, value_basd), [0, 2, 1, 3])


# Global attention at inference over more than this many tokens runs in chunks of as many
# queries, so its scores take [B, A, chunk, S] at a time instead of [B, A, S, S] (8,192 tokens,
# 12 heads: 0.4 GB instead of 3.2 GB in float32).
QUERY_CHUNK = 1024


def global_attention(query_bsad, key_bsad, value_bsad, bias, dropout=None,
                     chunk_queries=False):
    """full_attention; with chunk_queries (inference), in chunks of QUERY_CHUNK queries when
    S > 2 * QUERY_CHUNK (the same values; peak memory linear in S per chunk)."""
    if not chunk_queries or portable():
        return full_attention(query_bsad, key_bsad, value_bsad, bias, dropout)

    def whole():
        return full_attention(query_bsad, key_bsad, value_bsad, bias)

    def chunked():
        shape = tf.shape(query_bsad)
        batch, length = shape[0], shape[1]
        heads, size = query_bsad.shape[2], query_bsad.shape[3]
        count = (length + QUERY_CHUNK - 1) // QUERY_CHUNK
        pad = count * QUERY_CHUNK - length
        queries = tf.pad(query_bsad, [[0, 0], [0, pad], [0, 0], [0, 0]])
        queries_nbcad = tf.transpose(
            tf.reshape(queries, [batch, count, QUERY_CHUNK, heads, size]), [1, 0, 2, 3, 4])
        bias32 = tf.cast(bias, tf.float32)
        per_query = tf.shape(bias32)[2] > 1  # [B, 1, S, S] (packed rows) or [B, 1, 1, S].
        bias_rows = tf.pad(bias32, [[0, 0], [0, 0], [0, tf.where(per_query, pad, 0)], [0, 0]])

        def one(index_and_queries):
            index, queries_bcad = index_and_queries
            rows = tf.cond(per_query,
                           lambda: bias_rows[:, :, index * QUERY_CHUNK:
                                             (index + 1) * QUERY_CHUNK],
                           lambda: bias_rows)
            return full_attention(queries_bcad, key_bsad, value_bsad, rows)

        # One chunk at a time: chunks run in parallel would hold their scores together.
        context_nbcad = tf.map_fn(one, (tf.range(count), queries_nbcad),
                                  fn_output_signature=query_bsad.dtype, parallel_iterations=1)
        context_bsad = tf.reshape(tf.transpose(context_nbcad, [1, 0, 2, 3, 4]),
                                  [batch, count * QUERY_CHUNK, heads, size])
        return context_bsad[:, :length]

    length = query_bsad.shape[1]
    if length is not None:
        return chunked() if length > 2 * QUERY_CHUNK else whole()
    return tf.cond(tf.shape(query_bsad)[1] > 2 * QUERY_CHUNK, chunked, whole)


def _neighbour_blocks(x_bn_, axis_pad):
    """[B, n, c, ...] -> [B, n, 3c, ...]: each block with its left and right neighbour (zero
    blocks beyond the ends)."""
    padded = tf.pad(x_bn_, [[0, 0], [1, 1]] + axis_pad)
    count = tf.shape(x_bn_)[1]
    return tf.concat([padded[:, :count], padded[:, 1:count + 1], padded[:, 2:count + 2]],
                     axis=2)


def blocked_local_attention(query_bsad, key_bsad, value_bsad, segment_ids, half_window,
                            dropout=None):
    """Sliding-window attention computed block by block (linear in S).

    Args:
      query_bsad (already scaled), key_bsad, value_bsad: float [B, S, A, d].
      segment_ids: int [B, S] (see the module docstring).
      half_window: keys within this many positions either side are visible; also the block
        size c.
      dropout: optional callable applied to the probabilities [B, n, A, c, 3c].

    Returns:
      float [B, S, A, d], equal to full_attention with segment_bias(segment_ids, half_window).
    """
    block = half_window
    shape = tf.shape(query_bsad)
    batch, length = shape[0], shape[1]
    heads, size = query_bsad.shape[2], query_bsad.shape[3]
    count = (length + block - 1) // block
    pad = count * block - length

    def blocks(x_bsad):  # [B, S, A, d] -> [B, n, c, A, d]
        x_bsad = tf.pad(x_bsad, [[0, 0], [0, pad], [0, 0], [0, 0]])
        return tf.reshape(x_bsad, [batch, count, block, heads, size])

    query_bncad = blocks(query_bsad)
    key_bnkad = _neighbour_blocks(blocks(key_bsad), [[0, 0], [0, 0], [0, 0]])
    value_bnkad = _neighbour_blocks(blocks(value_bsad), [[0, 0], [0, 0], [0, 0]])
    # [B, n, A, c, d] x [B, n, A, d, 3c] -> [B, n, A, c, 3c]
    scores_bnack = tf.matmul(tf.transpose(query_bncad, [0, 1, 3, 2, 4]),
                             tf.transpose(key_bnkad, [0, 1, 3, 4, 2]))

    segments_bnc = tf.reshape(tf.pad(tf.cast(segment_ids, tf.int32), [[0, 0], [0, pad]]),
                              [batch, count, block])
    key_segments_bnk = _neighbour_blocks(segments_bnc, [[0, 0]])
    visible_bnck = tf.logical_and(
        tf.equal(tf.expand_dims(segments_bnc, 3), tf.expand_dims(key_segments_bnk, 2)),
        tf.expand_dims(key_segments_bnk, 2) > 0)
    # Query r of block i is at i*c + r, key t of its window at (i-1)*c + t: the band is
    # |t - c - r| <= half_window, the same [c, 3c] pattern in every block.
    offset_ck = (tf.expand_dims(tf.range(3 * block), 0) - block
                 - tf.expand_dims(tf.range(block), 1))
    visible_bnck = tf.logical_and(visible_bnck, tf.abs(offset_ck) <= half_window)
    bias_bn1ck = tf.expand_dims(tf.where(visible_bnck, 0.0, _MASKED_LOGIT), 2)

    scores_bnack = tf.cast(scores_bnack, tf.float32) + bias_bn1ck
    probs_bnack = tf.cast(tf.nn.softmax(scores_bnack, axis=-1), query_bsad.dtype)
    if dropout is not None:
        probs_bnack = dropout(probs_bnack)
    context_bnacd = tf.matmul(probs_bnack, tf.transpose(value_bnkad, [0, 1, 3, 2, 4]))
    context_bsad = tf.reshape(tf.transpose(context_bnacd, [0, 1, 3, 2, 4]),
                              [batch, count * block, heads, size])
    return context_bsad[:, :length]


def local_attention(query_bsad, key_bsad, value_bsad, segment_ids, half_window,
                    dropout=None):
    """Sliding-window attention: the full masked path up to 3 * half_window tokens, the
    blocked one beyond (chosen statically when S is known, else by tf.cond)."""
    def full():
        return full_attention(query_bsad, key_bsad, value_bsad,
                              segment_bias(segment_ids, half_window), dropout)

    def blocked():
        return blocked_local_attention(query_bsad, key_bsad, value_bsad, segment_ids,
                                       half_window, dropout)

    length = query_bsad.shape[1]
    if portable():
        return full()
    if length is not None:
        return full() if length <= 3 * half_window else blocked()
    return tf.cond(tf.shape(query_bsad)[1] <= 3 * half_window, full, blocked)
