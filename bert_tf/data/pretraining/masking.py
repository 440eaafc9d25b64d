"""Masking a batch of packed sequences in the graph: tokens or whole words, or SpanBERT spans.

The raw-text pipeline (text_dataset) calls these on each batch with a stateless seed, so every
epoch sees fresh masks; they follow the original's recipe (80% [MASK], 10% random id, 10% kept)
with the same outputs as pre-training TFRecords.
"""

import math

import numpy as np
import tensorflow as tf


def split_seed(seed, count):
    """`count` independent stateless seeds [count, 2] from one seed [2]."""
    return tf.random.experimental.stateless_split(seed, num=count)


def mask_batch(features, seed, *, vocab_size, cls_id, sep_id, mask_id, max_predictions_per_seq,
               masked_lm_prob=0.15, is_continuation=None):
    """Chooses and applies MLM masks to a packed batch with stateless random ops.

    Per sequence, n = min(P, max(1, round(masked_lm_prob * c))) of its c real non-special tokens
    are chosen (whole words when `is_continuation` is given: a word's "##" pieces go with it, and
    words are taken in random order while they fit in n). Each chosen token becomes [MASK] with
    probability 0.8, a random vocabulary id with 0.1, and stays itself with 0.1.

    Args:
      features: dict with input_word_ids, input_mask (int32 [B, S]); other entries are passed on.
      seed: int [2] stateless seed; the same seed gives the same masks.
      vocab_size: V; random replacements are drawn from [0, V).
      cls_id, sep_id: ids never chosen for prediction (nor is padding).
      mask_id: the [MASK] id.
      max_predictions_per_seq: P.
      masked_lm_prob: fraction of tokens to predict (a float, or a float32 scalar tensor).
      is_continuation: optional bool [V], True for pieces that continue a word (whole-word mask).

    Returns:
      `features` with input_word_ids masked and masked_lm_positions, masked_lm_ids int32 [B, P]
      (ascending real positions first, then 0-padding) and masked_lm_weights float32 [B, P].
    """
    s_choose, s_kind, s_random = tf.unstack(split_seed(seed, 3))
    ids = features["input_word_ids"]
    batch, seq_length = tf.shape(ids)[0], ids.shape[1]
    candidate = (features["input_mask"] > 0) & (ids != cls_id) & (ids != sep_id)  # [B, S]
    num_candidates = tf.reduce_sum(tf.cast(candidate, tf.float32), axis=1)
    num_to_predict = tf.minimum(max_predictions_per_seq, tf.maximum(1, tf.cast(
        tf.round(num_candidates * masked_lm_prob), tf.int32)))  # [B]

    score = tf.random.stateless_uniform(tf.shape(ids), s_choose)  # [B, S]
    if is_continuation is not None:
        continues = tf.gather(is_continuation, ids) & candidate
        previous_candidate = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])
        word_start = candidate & ~(continues & previous_candidate)
        word = tf.maximum(tf.cumsum(tf.cast(word_start, tf.int32), axis=1) - 1, 0)  # [B, S]
        score = tf.gather(score, word, batch_dims=1)  # one score per word
    # Candidates in random order (a word's pieces stay together, in position order).
    order = tf.argsort(tf.where(candidate, score, 2.0), axis=1, stable=True)  # [B, S]
    rank = tf.range(1, seq_length + 1)[tf.newaxis, :]
    taken_candidate = tf.gather(candidate, order, batch_dims=1)
    if is_continuation is None:
        accept = taken_candidate & (rank <= num_to_predict[:, tf.newaxis])
    else:
        # A word is taken if all of its pieces fit: compare the rank of its last piece.
        rows = tf.range(batch)[:, tf.newaxis]
        taken_word = tf.gather(word, order, batch_dims=1)
        segment = tf.where(taken_candidate, rows * seq_length + taken_word, batch * seq_length)
        word_last_rank = tf.math.unsorted_segment_max(tf.broadcast_to(rank, tf.shape(order)),
                                                      segment, batch * seq_length + 1)
        accept = taken_candidate & (tf.gather(word_last_rank, segment)
                                    <= num_to_predict[:, tf.newaxis])
    # Accepted positions are a prefix of `order` of length <= P; sort them, pad with S.
    top = tf.where(accept[:, :max_predictions_per_seq], order[:, :max_predictions_per_seq],
                   seq_length)
    top = tf.sort(top, axis=1)
    is_real = top < seq_length  # [B, P]
    positions = tf.where(is_real, top, 0)
    original = tf.gather(ids, positions, batch_dims=1)  # [B, P]

    kind = tf.random.stateless_uniform(tf.shape(positions), s_kind)
    return _replace(features, positions, is_real, original, kind, s_random, vocab_size, mask_id)


def _replace(features, positions, is_real, original, kind, seed, vocab_size, mask_id):
    """The 80/10/10 replacement at the chosen positions, and the MLM label features.

    Args:
      positions, is_real, original: int32 / bool / int32 [B, P]: chosen positions (padding
        slots 0), which slots are real, and the ids there before masking.
      kind: float32 [B, P] uniform draws: < 0.8 [MASK], < 0.9 kept, else a random id.
      seed: int64 [2] stateless seed of the random ids.

    Returns:
      features with input_word_ids replaced and masked_lm_positions / _ids / _weights [B, P].
    """
    ids = features["input_word_ids"]
    random_ids = tf.random.stateless_uniform(tf.shape(positions), seed, minval=0,
                                             maxval=vocab_size, dtype=tf.int32)
    replacement = tf.where(kind < 0.8, mask_id, tf.where(kind < 0.9, original, random_ids))
    # Padding slots point at position 0 ([CLS]) and write its own id back: a no-op.
    replacement = tf.where(is_real, replacement, original)
    rows = tf.broadcast_to(tf.range(tf.shape(ids)[0])[:, tf.newaxis], tf.shape(positions))
    masked_ids = tf.tensor_scatter_nd_update(ids, tf.stack([rows, positions], axis=-1),
                                             replacement)
    out = dict(features)
    out["input_word_ids"] = masked_ids
    out["masked_lm_positions"] = positions
    out["masked_lm_ids"] = tf.where(is_real, original, 0)
    out["masked_lm_weights"] = tf.cast(is_real, tf.float32)
    return out


def _shift_left(x, offset, fill):
    """x[:, w + offset] at column w ([B, W]; columns past the end hold `fill`)."""
    if offset == 0:
        return x
    pad = tf.fill([tf.shape(x)[0], offset], tf.constant(fill, x.dtype))
    return tf.concat([x[:, offset:], pad], axis=1)


def span_mask_batch(features, seed, *, vocab_size, cls_id, sep_id, mask_id,
                    max_predictions_per_seq, is_continuation, masked_lm_prob=0.15,
                    span_geometric_p=0.2, max_span_length=10, span_length_weights=None):
    """SpanBERT's span masking of a packed batch (or ALBERT's n-gram masking, given the
    n-grams' span_length_weights), with stateless random ops.

    The budget is mask_batch's: n = min(P, max(1, round(masked_lm_prob * c))) of a sequence's c
    real non-special tokens. Spans of whole words are chosen one at a time, in parallel over
    the batch: a length l is drawn from a geometric distribution (p = span_geometric_p)
    truncated to [1, max_span_length], and the span starts at a uniformly random word where l
    words fit whole (consecutive, not across [SEP], not touching an earlier span, so boundary
    tokens stay unmasked); when no start fits l words, at a random start where a shorter span
    fits; a word that would overshoot the budget ends the span. Each span becomes [MASK] with
    probability 0.8, random ids with 0.1 and stays itself with 0.1, decided once per span.

    Args:
      features: dict with input_word_ids, input_mask (int32 [B, S]); other entries are passed on.
      seed: int [2] stateless seed; the same seed gives the same masks.
      vocab_size: V; random replacements are drawn from [0, V).
      cls_id, sep_id: ids never masked; a [SEP] also separates words.
      mask_id: the [MASK] id.
      max_predictions_per_seq: P.
      is_continuation: bool [V], True for "##" pieces (they join the word before them).
      masked_lm_prob: fraction of tokens to predict (a float, or a float32 scalar tensor).
      span_geometric_p: p of the span-length distribution, in (0, 1].
      max_span_length: M, the longest span in words.
      span_length_weights: None (the geometric distribution above), or the relative weights
        of lengths 1..M (list of M positive floats; M replaces max_span_length), e.g.
        MaskingRecipe.span_length_weights() of ALBERT's n-grams.

    Returns:
      `features` with input_word_ids masked, masked_lm_positions, masked_lm_ids int32 [B, P],
      masked_lm_weights float32 [B, P] (as mask_batch), and span_left_boundaries,
      span_right_boundaries int32 [B, P]: per prediction, the position just before / after its
      span (0 on padding slots).
    """
    s_length, s_start, s_kind, s_random = tf.unstack(split_seed(seed, 4))
    ids = features["input_word_ids"]
    batch, seq_length = tf.shape(ids)[0], ids.shape[1]
    num_words = seq_length  # W: a sequence has at most S words
    candidate = (features["input_mask"] > 0) & (ids != cls_id) & (ids != sep_id)  # [B, S]
    num_candidates = tf.reduce_sum(tf.cast(candidate, tf.float32), axis=1)
    num_to_predict = tf.minimum(max_predictions_per_seq, tf.maximum(1, tf.cast(
        tf.round(num_candidates * masked_lm_prob), tf.int32)))  # [B]

    # Words: a candidate starts one unless it is a "##" piece right after another candidate.
    continues = tf.gather(is_continuation, ids) & candidate
    previous_candidate = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])
    word_start = candidate & ~(continues & previous_candidate)
    word = tf.cumsum(tf.cast(word_start, tf.int32), axis=1) - 1  # [B, S]
    rows = tf.range(batch)[:, tf.newaxis]
    # Non-candidates go to a dump segment past the B*W real ones.
    segment = tf.where(candidate, rows * num_words + word, batch * num_words)
    positions_bs = tf.broadcast_to(tf.range(seq_length)[tf.newaxis, :], tf.shape(ids))

    def per_word(values, reduce):
        out = reduce(values, segment, batch * num_words + 1)[:-1]
        return tf.reshape(out, [batch, num_words])

    word_len = per_word(tf.cast(candidate, tf.int32), tf.math.unsorted_segment_sum)  # [B, W]
    word_first = per_word(positions_bs, tf.math.unsorted_segment_min)
    word_last = per_word(positions_bs, tf.math.unsorted_segment_max)
    valid = word_len > 0
    # touch_next[b, w]: word w + 1 directly follows word w (no [SEP] or padding between).
    touch_next = (valid & _shift_left(valid, 1, False)
                  & (word_last + 1 == _shift_left(word_first, 1, -1)))
    touch_prev = tf.pad(touch_next[:, :-1], [[0, 0], [1, 0]])
    word_index = tf.range(num_words)[tf.newaxis, :]

    # Inverse CDF of the truncated geometric distribution over 1..M, or of the weights given.
    q = 1.0 - span_geometric_p
    tail = q ** max_span_length
    if span_length_weights is not None:
        max_span_length = len(span_length_weights)
        cumulative = np.cumsum(np.asarray(span_length_weights, np.float64))
        cdf = tf.constant((cumulative / cumulative[-1])[:-1][np.newaxis, :])  # [1, M - 1]

    def draw_lengths(step):
        if span_length_weights is None and q == 0.0:
            return tf.ones([batch], tf.int32)
        u = tf.random.stateless_uniform(
            [batch], tf.random.experimental.stateless_fold_in(s_length, step), dtype=tf.float64)
        if span_length_weights is not None:
            # 1 + the number of cumulative shares at or below u.
            rows = tf.broadcast_to(cdf, [batch, max_span_length - 1])
            return 1 + tf.reshape(tf.searchsorted(rows, u[:, tf.newaxis], side="right",
                                                  out_type=tf.int32), [batch])
        length = 1 + tf.floor(tf.math.log(1.0 - u * (1.0 - tail)) / math.log(q))
        return tf.clip_by_value(tf.cast(length, tf.int32), 1, max_span_length)

    def body(step, masked, span_first, span_last, used):
        # free[b, w]: word w can be masked without touching a masked word.
        masked_prev = tf.pad(masked[:, :-1], [[0, 0], [1, 0]])
        free = (valid & ~masked & ~(touch_prev & masked_prev)
                & ~(touch_next & _shift_left(masked, 1, False)))
        remaining = (num_to_predict - used)[:, tf.newaxis]
        # fits[j][b, w]: words w..w+j are consecutive, free and within the budget.
        fits, ok, pieces = [], free, word_len
        ok &= pieces <= remaining
        fits.append(ok)
        for j in range(1, max_span_length):
            ok = (ok & _shift_left(touch_next, j - 1, False) & _shift_left(free, j, False))
            pieces = pieces + _shift_left(word_len, j, 0)
            fits.append(ok & (pieces <= remaining))
        fit_len = tf.add_n([tf.cast(f, tf.int32) for f in fits])  # [B, W], prefix property
        length = draw_lengths(step)[:, tf.newaxis]
        whole = fit_len >= length
        any_whole = tf.reduce_any(whole, axis=1, keepdims=True)
        eligible = tf.where(any_whole, whole, fit_len >= 1)
        score = tf.random.stateless_uniform(
            tf.shape(fit_len), tf.random.experimental.stateless_fold_in(s_start, step))
        start = tf.argmax(tf.where(eligible, score, -1.0), axis=1, output_type=tf.int32)
        active = tf.reduce_any(eligible, axis=1) & (used < num_to_predict)  # [B]
        span_length = tf.minimum(length[:, 0], tf.gather(fit_len, start, batch_dims=1))
        start_bw, end_bw = start[:, tf.newaxis], (start + span_length - 1)[:, tf.newaxis]
        new = (active[:, tf.newaxis] & (word_index >= start_bw) & (word_index <= end_bw))
        masked |= new
        span_first = tf.where(new, start_bw, span_first)
        span_last = tf.where(new, end_bw, span_last)
        used += tf.reduce_sum(tf.where(new, word_len, 0), axis=1)
        return step + 1, masked, span_first, span_last, used

    def cond(step, masked, span_first, span_last, used):
        # Every productive step masks at least one piece, so P steps always suffice.
        return (step < max_predictions_per_seq) & tf.reduce_any(used < num_to_predict)

    zeros_bw = tf.zeros([batch, num_words], tf.int32)
    _, masked, span_first, span_last, _ = tf.while_loop(
        cond, body, (tf.constant(0), tf.zeros([batch, num_words], tf.bool), zeros_bw, zeros_bw,
                     tf.zeros([batch], tf.int32)))

    safe_word = tf.maximum(word, 0)
    token_masked = candidate & tf.gather(masked, safe_word, batch_dims=1)  # [B, S]
    top = tf.sort(tf.where(token_masked, positions_bs, seq_length), axis=1)
    top = top[:, :max_predictions_per_seq]
    is_real = top < seq_length  # [B, P]
    positions = tf.where(is_real, top, 0)
    original = tf.gather(ids, positions, batch_dims=1)
    position_word = tf.gather(safe_word, positions, batch_dims=1)  # [B, P]
    first = tf.gather(span_first, position_word, batch_dims=1)
    last = tf.gather(span_last, position_word, batch_dims=1)
    left = tf.where(is_real, tf.gather(word_first, first, batch_dims=1) - 1, 0)
    right = tf.where(is_real, tf.gather(word_last, last, batch_dims=1) + 1, 0)

    # One replacement kind per span, read at the span's first word.
    kind_bw = tf.random.stateless_uniform([batch, num_words], s_kind)
    kind = tf.gather(kind_bw, first, batch_dims=1)
    out = _replace(features, positions, is_real, original, kind, s_random, vocab_size, mask_id)
    out["span_left_boundaries"] = left
    out["span_right_boundaries"] = right
    return out
