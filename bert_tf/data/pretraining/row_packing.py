"""Packing of whole pre-training instances into rows of max_seq_length (Krell et al. 2021).

No TensorFlow here: create_pretraining_data's workers use it. An instance is never split; a
row holds at most max_instances_per_row instances whose lengths sum to <= max_seq_length and
whose masked-LM predictions sum to <= max_predictions_per_row.
"""

import bisect
import math


def default_max_instances_per_row(max_seq_length):
    """I when not given: one instance per 16 tokens of the row (short documents fill a row)."""
    return max(2, max_seq_length // 16)


def default_max_predictions_per_row(max_seq_length, masked_lm_prob, max_instances_per_row):
    """P per packed row when not given: enough for any row, so it never limits the packing.

    Each instance predicts max(1, round(len * masked_lm_prob)) <= len * masked_lm_prob + 0.5
    tokens, so a row of K <= I instances and <= S tokens needs at most S * p + I / 2.
    """
    return min(max_seq_length,
               int(math.floor(max_seq_length * masked_lm_prob)) + math.ceil(
                   max_instances_per_row / 2) + 1)


def pack_instances(lengths, predictions, *, max_seq_length, max_instances_per_row,
                   max_predictions_per_row):
    """Best-fit decreasing assignment of instances to rows; deterministic.

    Instances are placed longest first (ties in input order), each into the open row whose
    free space is the smallest that still fits it (ties: the row opened first) and that has
    room for its instances and predictions, else into a new row.

    Args:
      lengths: list of int, tokens per instance (each <= max_seq_length).
      predictions: list of int, masked-LM predictions per instance (each <=
        max_predictions_per_row).
      max_seq_length: S, tokens per row.
      max_instances_per_row: I.
      max_predictions_per_row: P.

    Returns:
      list of rows in the order they were opened, each a list of instance indices in the
      order they were placed (the order they take in the row).
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    rows, row_space, row_predictions = [], [], []
    # free space -> ids of open rows with that much space, in opening order; `spaces` holds
    # the keys with at least one row, sorted.
    by_space, spaces = {}, []

    def remove(row, space):
        bucket = by_space[space]
        bucket.remove(row)
        if not bucket:
            del by_space[space]
            del spaces[bisect.bisect_left(spaces, space)]

    def add(row, space):
        bucket = by_space.get(space)
        if bucket is None:
            by_space[space] = bucket = []
            bisect.insort(spaces, space)
        bisect.insort(bucket, row)

    for i in order:
        length, preds = lengths[i], predictions[i]
        chosen = None
        for space in spaces[bisect.bisect_left(spaces, length):]:
            for row in by_space[space]:
                if row_predictions[row] + preds <= max_predictions_per_row:
                    chosen = row
                    break
            if chosen is not None:
                break
        if chosen is None:
            chosen = len(rows)
            rows.append([])
            row_space.append(max_seq_length)
            row_predictions.append(0)
        else:
            remove(chosen, row_space[chosen])
        rows[chosen].append(i)
        row_space[chosen] -= length
        row_predictions[chosen] += preds
        # A full row (no token or instance slot left) is closed.
        if row_space[chosen] > 0 and len(rows[chosen]) < max_instances_per_row:
            add(chosen, row_space[chosen])
    return rows
