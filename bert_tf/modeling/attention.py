"""Scaled dot-product attention and its masks: the one owner of which keys a query sees.

Hidden keys get an additive logit bias:
  MASKED_LOGIT           -10000, the original BERT's value (modeling.py): converted
                         checkpoints reproduce its outputs, and exp() of it is 0 in float32 next
                         to any real logit.
  PORTABLE_MASKED_LOGIT  -100, inside `kernels.portable_attention()` (LiteRT graphs): a full-int8
                         LiteRT model calibrates one int8 range for the logits plus this bias;
                         with -10000 the real logits shared ~40 per int8 step and the fine-tuned
                         all-MiniLM-L6-v2 classifier answered at chance (label agreement 0.518),
                         with -100, -50 or -20 it agreed with float32 on 499 of 500 phrases.
                         exp(-100) is still 0 in float32 next to a real logit (4e-44).

Which keys a query may see: `padding_bias` hides padding keys (input_mask); `segment_bias`
hides keys of another segment (packed rows: input_instance_ids, each instance its own segment;
0 is padding) and, with a half window, keys further away than that (local attention).

Attention of the modern encoder: global (every visible key; chunked over queries for long
inference inputs) or local (a sliding window of half_window keys either side) with two exact
paths:
  full     scores [B, A, S, S] with a masked band; cheap for short inputs.
  blocked  the input cut into blocks of half_window tokens; block i's queries score the keys of
           blocks i-1, i, i+1 only ([B, S/c, A, c, 3c]), which covers the band. Memory and time
           grow linearly with S; used when S > 3 * half_window.
Both give the same outputs (tests/modeling/test_attention.py). New axes come from expand_dims,
not `x[:, None]`: LiteRT refuses a StridedSlice with a new axis. Inside portable_attention()
every attention takes its one dense path.
"""

from keras import ops

from bert_tf.modeling import kernels

MASKED_LOGIT = -10000.0
PORTABLE_MASKED_LOGIT = -100.0

# Global attention at inference over more than 2x this many tokens runs in chunks of as many
# queries, so its scores take [B, A, chunk, S] at a time instead of [B, A, S, S] (8,192 tokens,
# 12 heads: 0.4 GB instead of 3.2 GB in float32).
QUERY_CHUNK = 1024


def masked_logit():
    """The logit bias of a hidden key: MASKED_LOGIT, or PORTABLE_MASKED_LOGIT inside
    `kernels.portable_attention()`."""
    return PORTABLE_MASKED_LOGIT if kernels.portable() else MASKED_LOGIT


def padding_bias(input_mask):
    """Args: input_mask int [B, S], 1 = real token. Returns: float32 [B, 1, 1, S]: 0 for real
    keys, `masked_logit()` for padding."""
    mask_b11s = ops.cast(ops.expand_dims(ops.expand_dims(input_mask, 1), 1), "float32")
    return (1.0 - mask_b11s) * masked_logit()


def segment_bias(segment_ids, half_window=None):
    """[B, 1, S, S] bias: a key is visible when real (segment > 0), in the query's segment and
    (with a half_window) within half_window positions. Args: segment_ids int [B, S]."""
    segments = ops.cast(segment_ids, "int32")
    query_bs1, key_b1s = ops.expand_dims(segments, 2), ops.expand_dims(segments, 1)
    visible_bss = ops.logical_and(ops.equal(query_bs1, key_b1s), key_b1s > 0)
    if half_window is not None:
        positions = ops.arange(ops.shape(segments)[1])
        distance_ss = ops.abs(ops.expand_dims(positions, 1) - ops.expand_dims(positions, 0))
        visible_bss = ops.logical_and(visible_bss,
                                      ops.expand_dims(distance_ss <= half_window, 0))
    return ops.expand_dims(ops.where(visible_bss, 0.0, masked_logit()), 1)


def _to_heads(x_bsad):
    return ops.transpose(x_bsad, [0, 2, 1, 3])


def dot_product_attention(query_bsad, key_bsad, value_bsad, bias, dropout=None):
    """softmax(q k^T + bias) v per head; the softmax in float32.

    Args:
      query_bsad (already scaled), key_bsad, value_bsad: float [B, S, A, d].
      bias: float32 [B, 1, 1, S] or [B, 1, S, S].
      dropout: optional callable applied to the probabilities [B, A, S, S] (None when no
        dropout is active: then a fused kernel may compute it, kernels.fused_attention).

    Returns:
      float [B, S, A, d].
    """
    if dropout is None:
        fused = kernels.fused_attention(query_bsad, key_bsad, value_bsad, bias)
        if fused is not None:
            return fused
    query_basd, value_basd = _to_heads(query_bsad), _to_heads(value_bsad)
    key_badt = ops.transpose(key_bsad, [0, 2, 3, 1])
    scores_bass = ops.matmul(query_basd, key_badt)
    # Keras casts float call arguments to the compute dtype; the softmax runs in float32.
    scores_bass = ops.cast(scores_bass, "float32") + ops.cast(bias, "float32")
    probs_bass = ops.cast(ops.softmax(scores_bass, axis=-1), query_bsad.dtype)
    if dropout is not None:
        probs_bass = dropout(probs_bass)
    return _to_heads(ops.matmul(probs_bass, value_basd))


def global_attention(query_bsad, key_bsad, value_bsad, bias, dropout=None,
                     chunk_queries=False):
    """dot_product_attention; with chunk_queries (inference), in chunks of QUERY_CHUNK queries
    when S > 2 * QUERY_CHUNK (the same values; peak memory linear in S per chunk)."""
    if not chunk_queries or kernels.portable():
        return dot_product_attention(query_bsad, key_bsad, value_bsad, bias, dropout)

    def whole():
        return dot_product_attention(query_bsad, key_bsad, value_bsad, bias)

    def chunked():
        batch, length = ops.shape(query_bsad)[0], ops.shape(query_bsad)[1]
        heads, size = query_bsad.shape[2], query_bsad.shape[3]
        count = (length + QUERY_CHUNK - 1) // QUERY_CHUNK
        pad = count * QUERY_CHUNK - length
        queries = ops.pad(query_bsad, [[0, 0], [0, pad], [0, 0], [0, 0]])
        queries_nbcad = ops.transpose(
            ops.reshape(queries, [batch, count, QUERY_CHUNK, heads, size]), [1, 0, 2, 3, 4])
        bias32 = ops.cast(bias, "float32")
        if bias.shape[2] == 1:  # [B, 1, 1, S]: the same bias for every chunk's queries.
            def one(index_and_queries):
                return dot_product_attention(index_and_queries[1], key_bsad, value_bsad,
                                             bias32)
        else:  # [B, 1, S, S] (packed rows): each chunk takes its rows.
            bias_rows = ops.pad(bias32, [[0, 0], [0, 0], [0, pad], [0, 0]])

            def one(index_and_queries):
                index, queries_bcad = index_and_queries
                rows = ops.slice(bias_rows, [0, 0, index * QUERY_CHUNK, 0],
                                 [ops.shape(bias_rows)[0], 1, QUERY_CHUNK,
                                  ops.shape(bias_rows)[3]])
                return dot_product_attention(queries_bcad, key_bsad, value_bsad, rows)

        context_nbcad = kernels.map_one_at_a_time(
            one, (ops.arange(count), queries_nbcad), query_bsad.dtype)
        context_bsad = ops.reshape(ops.transpose(context_nbcad, [1, 0, 2, 3, 4]),
                                   [batch, count * QUERY_CHUNK, heads, size])
        return context_bsad[:, :length]

    length = query_bsad.shape[1]
    return kernels.by_length(length if length is not None else ops.shape(query_bsad)[1],
                             2 * QUERY_CHUNK, whole, chunked)


def _neighbour_blocks(x_bn_, axis_pad):
    """[B, n, c, ...] -> [B, n, 3c, ...]: each block with its left and right neighbour (zero
    blocks beyond the ends)."""
    padded = ops.pad(x_bn_, [[0, 0], [1, 1]] + axis_pad)
    count = ops.shape(x_bn_)[1]
    return ops.concatenate(
        [padded[:, :count], padded[:, 1:count + 1], padded[:, 2:count + 2]], axis=2)


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
      float [B, S, A, d], equal to dot_product_attention with segment_bias(segment_ids,
      half_window).
    """
    block = half_window
    batch, length = ops.shape(query_bsad)[0], ops.shape(query_bsad)[1]
    heads, size = query_bsad.shape[2], query_bsad.shape[3]
    count = (length + block - 1) // block
    pad = count * block - length

    def blocks(x_bsad):  # [B, S, A, d] -> [B, n, c, A, d]
        x_bsad = ops.pad(x_bsad, [[0, 0], [0, pad], [0, 0], [0, 0]])
        return ops.reshape(x_bsad, [batch, count, block, heads, size])

    query_bncad = blocks(query_bsad)
    key_bnkad = _neighbour_blocks(blocks(key_bsad), [[0, 0], [0, 0], [0, 0]])
    value_bnkad = _neighbour_blocks(blocks(value_bsad), [[0, 0], [0, 0], [0, 0]])
    # [B, n, A, c, d] x [B, n, A, d, 3c] -> [B, n, A, c, 3c]
    scores_bnack = ops.matmul(ops.transpose(query_bncad, [0, 1, 3, 2, 4]),
                              ops.transpose(key_bnkad, [0, 1, 3, 4, 2]))

    segments_bnc = ops.reshape(ops.pad(ops.cast(segment_ids, "int32"), [[0, 0], [0, pad]]),
                               [batch, count, block])
    key_segments_bnk = _neighbour_blocks(segments_bnc, [[0, 0]])
    visible_bnck = ops.logical_and(
        ops.equal(ops.expand_dims(segments_bnc, 3), ops.expand_dims(key_segments_bnk, 2)),
        ops.expand_dims(key_segments_bnk, 2) > 0)
    # Query r of block i is at i*c + r, key t of its window at (i-1)*c + t: the band is
    # |t - c - r| <= half_window, the same [c, 3c] pattern in every block.
    offset_ck = (ops.expand_dims(ops.arange(3 * block), 0) - block
                 - ops.expand_dims(ops.arange(block), 1))
    visible_bnck = ops.logical_and(visible_bnck, ops.abs(offset_ck) <= half_window)
    bias_bn1ck = ops.expand_dims(ops.where(visible_bnck, 0.0, MASKED_LOGIT), 2)

    scores_bnack = ops.cast(scores_bnack, "float32") + bias_bn1ck
    probs_bnack = ops.cast(ops.softmax(scores_bnack, axis=-1), query_bsad.dtype)
    if dropout is not None:
        probs_bnack = dropout(probs_bnack)
    context_bnacd = ops.matmul(probs_bnack, ops.transpose(value_bnkad, [0, 1, 3, 2, 4]))
    context_bsad = ops.reshape(ops.transpose(context_bnacd, [0, 1, 3, 2, 4]),
                               [batch, count * block, heads, size])
    return context_bsad[:, :length]


def local_attention(query_bsad, key_bsad, value_bsad, segment_ids, half_window,
                    dropout=None):
    """Sliding-window attention: the full masked path up to 3 * half_window tokens, the
    blocked one beyond."""
    def full():
        return dot_product_attention(query_bsad, key_bsad, value_bsad,
                                     segment_bias(segment_ids, half_window), dropout)

    def blocked():
        return blocked_local_attention(query_bsad, key_bsad, value_bsad, segment_ids,
                                       half_window, dropout)

    # A fused kernel makes the full band cheaper than the blocks for any length it takes.
    if kernels.portable() or (dropout is None and kernels.fused_attention_applies(query_bsad)):
        return full()
    length = query_bsad.shape[1]
    return kernels.by_length(length if length is not None else ops.shape(query_bsad)[1],
                             3 * half_window, full, blocked)
