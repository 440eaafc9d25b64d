"""Packing masked instances whole into rows in the graph (the raw-text pipeline's row packing).

First-fit decreasing into rows of S tokens with at most I instances and P predictions; the rows
are what create_pretraining_data --pack_sequences writes (row_packing.py packs those, in
numpy, outside the graph). `assert_instance_ids` checks packed rows inside a tf.data pipeline.
"""

import tensorflow as tf

from bert_tf.modeling.packing_checks import FEATURE


def _first_fit_decreasing(lengths, predictions, max_seq_length, max_instances_per_row,
                          max_predictions_per_row):
    """Assigns N instances to rows, longest first, each to the first row it fits in.

    Args:
      lengths, predictions: int32 [N], each <= S and <= P.

    Returns:
      (row, slot, offset) int32 [N]: the instance's row (rows 0..R-1 are used), its 1-based
      index in the row and the row position of its first token.
    """
    n = tf.size(lengths)
    order = tf.argsort(-lengths, stable=True)
    zeros = tf.zeros([n], tf.int32)

    def body(j, row_len, row_count, row_pred, row, slot, offset):
        i = order[j]
        length, preds = lengths[i], predictions[i]
        fits = ((row_len + length <= max_seq_length) & (row_count < max_instances_per_row)
                & (row_pred + preds <= max_predictions_per_row))
        # Rows open in order and an empty row always fits, so the first fit exists.
        r = tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32)
        at_r, at_i = [[r]], [[i]]
        row = tf.tensor_scatter_nd_update(row, at_i, [r])
        slot = tf.tensor_scatter_nd_update(slot, at_i, [row_count[r] + 1])
        offset = tf.tensor_scatter_nd_update(offset, at_i, [row_len[r]])
        return (j + 1, tf.tensor_scatter_nd_add(row_len, at_r, [length]),
                tf.tensor_scatter_nd_add(row_count, at_r, [1]),
                tf.tensor_scatter_nd_add(row_pred, at_r, [preds]), row, slot, offset)

    _, _, _, _, row, slot, offset = tf.while_loop(
        lambda j, *_: j < n, body, (tf.constant(0), zeros, zeros, zeros, zeros, zeros, zeros))
    return row, slot, offset


def pack_instances(features, *, max_seq_length, max_instances_per_row, max_predictions_per_row):
    """Packs masked instances (one per row of `features`) whole into fewer rows.

    Args:
      features: dict of one instance per row: input_word_ids, input_mask, input_type_ids int32
        [N, S] (real tokens first); masked_lm_positions, masked_lm_ids int32 [N, P'] and
        masked_lm_weights float32 [N, P'] (P' <= P predictions each); next_sentence_labels
        int32 [N]; optional span_left_boundaries, span_right_boundaries int32 [N, P'].
      max_seq_length: S. max_instances_per_row: I. max_predictions_per_row: P.

    Returns:
      dict of R <= N rows: input_word_ids, input_mask, input_type_ids, input_instance_ids
      int32 [R, S]; masked_lm_positions, masked_lm_ids int32 [R, P], masked_lm_weights
      float32 [R, P] (row positions, instance by instance); next_sentence_positions,
      next_sentence_labels int32 [R, I], next_sentence_weights float32 [R, I]; span
      boundaries [R, P] (row positions) when given.
    """
    seq_length = max_seq_length
    mask = features["input_mask"] > 0  # [N, S]
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    is_prediction = features["masked_lm_weights"] > 0  # [N, P']
    predictions = tf.reduce_sum(tf.cast(is_prediction, tf.int32), axis=1)
    row, slot, offset = _first_fit_decreasing(lengths, predictions, seq_length,
                                              max_instances_per_row, max_predictions_per_row)
    num_rows = tf.reduce_max(row) + 1

    # Tokens: instance i's token t goes to (row[i], offset[i] + t).
    destination = offset[:, tf.newaxis] + tf.range(seq_length)[tf.newaxis, :]  # [N, S]
    rows_ns = tf.broadcast_to(row[:, tf.newaxis], tf.shape(destination))
    at = tf.boolean_mask(tf.stack([rows_ns, destination], axis=-1), mask)  # [T, 2]
    shape = tf.stack([num_rows, seq_length])

    def scatter(values_ns):
        out = tf.scatter_nd(at, tf.boolean_mask(values_ns, mask), shape)
        return tf.ensure_shape(out, [None, seq_length])

    out = {
        "input_word_ids": scatter(features["input_word_ids"]),
        "input_mask": scatter(tf.cast(mask, tf.int32)),
        "input_type_ids": scatter(features["input_type_ids"]),
        "input_instance_ids": scatter(tf.broadcast_to(slot[:, tf.newaxis],
                                                      tf.shape(destination))),
    }

    def by_row(key, values, width, row_of):
        """values [M] in key order, grouped into rows [R, width] (0-padded)."""
        order = tf.argsort(key, stable=True)
        ragged = tf.RaggedTensor.from_value_rowids(tf.gather(values, order),
                                                   tf.gather(row_of, order), nrows=num_rows)
        return ragged.to_tensor(default_value=tf.zeros([], values.dtype),
                                shape=[None, width])

    # Predictions, in row order (a row position is unique within its row).
    shift = offset[:, tf.newaxis]
    row_np = tf.broadcast_to(row[:, tf.newaxis], tf.shape(is_prediction))
    pred_row = tf.boolean_mask(row_np, is_prediction)
    pred_position = tf.boolean_mask(features["masked_lm_positions"] + shift, is_prediction)
    pred_key = pred_row * seq_length + pred_position
    width = max_predictions_per_row
    out["masked_lm_positions"] = by_row(pred_key, pred_position, width, pred_row)
    out["masked_lm_ids"] = by_row(pred_key, tf.boolean_mask(features["masked_lm_ids"],
                                                            is_prediction), width, pred_row)
    out["masked_lm_weights"] = by_row(pred_key, tf.ones_like(pred_position, tf.float32),
                                      width, pred_row)
    for name in ("span_left_boundaries", "span_right_boundaries"):
        if name in features:
            out[name] = by_row(pred_key, tf.boolean_mask(features[name] + shift, is_prediction),
                               width, pred_row)
    # One next-sentence slot per instance, at its [CLS].
    cls_key = row * seq_length + offset
    slots = max_instances_per_row
    out["next_sentence_positions"] = by_row(cls_key, offset, slots, row)
    out["next_sentence_labels"] = by_row(cls_key, features["next_sentence_labels"], slots, row)
    out["next_sentence_weights"] = by_row(cls_key, tf.ones_like(offset, tf.float32), slots, row)
    return out


def assert_instance_ids(instance_ids, input_mask):
    """In-graph form of modeling.packing_checks.check_instance_ids (e.g. in a tf.data map);
    [S] or [B, S].

    Returns:
      `instance_ids`, after an assertion that fails at run time with InvalidArgumentError
      (message starting with `input_instance_ids`) on an inconsistent row.
    """
    ids = tf.convert_to_tensor(instance_ids)
    ids_bs = tf.cast(tf.reshape(ids, [-1, tf.shape(ids)[-1]]), tf.int32)
    mask_bs = tf.cast(tf.reshape(input_mask, tf.shape(ids_bs)), tf.int32)
    real_bs = mask_bs > 0
    # The id of the last real token at or before each position (0 before the first).
    last_bs = tf.scan(lambda carry, x: tf.where(x[1], x[0], carry),
                      (tf.transpose(ids_bs), tf.transpose(real_bs)),
                      initializer=tf.zeros_like(ids_bs[:, 0]))
    last_bs = tf.transpose(last_bs)
    previous_bs = tf.pad(last_bs[:, :-1], [[0, 0], [1, 0]])
    previous_real_bs = tf.pad(real_bs[:, :-1], [[0, 0], [1, 0]])
    step_bs = ids_bs - previous_bs
    ok_bs = tf.where(
        real_bs,
        (ids_bs >= 1) & ((step_bs == 1) | ((step_bs == 0) & previous_real_bs)),
        tf.equal(ids_bs, 0))
    bad = tf.where(tf.logical_not(ok_bs))
    check = tf.debugging.Assert(
        tf.reduce_all(ok_bs),
        [f"{FEATURE}: inconsistent packed row (0 exactly on padding, real tokens 1, 2, ... in "
         "order, each instance one contiguous run); first bad [row, position]:", bad[:1],
         "ids of that row:", tf.gather(ids_bs, bad[:1, 0])], summarize=4096)
    with tf.control_dependencies([check]):
        return tf.identity(ids)
