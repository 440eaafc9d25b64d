"""Packed rows (several pre-training instances in one row, Krell et al. 2021): ids and checks.

A packed row carries `input_instance_ids` int32 [B, S]: 1..K, the 1-based index of the
instance each token belongs to (each instance one contiguous run, in order), 0 on padding.
The encoder derives from it a block-diagonal attention mask and per-instance position ids
(`instance_attention_bias`, `instance_position_ids`); `check_instance_ids` rejects rows whose
ids break that rule (eagerly, in NumPy; data.pretraining.row_packing_tf.assert_instance_ids is
the same check inside a tf.data pipeline).
"""

import numpy as np
from keras import ops

from bert_tf.modeling import attention

FEATURE = "input_instance_ids"


def instance_attention_bias(instance_ids):
    """Block-diagonal additive attention bias from instance ids.

    Args:
      instance_ids: int [B, S], 0 on padding.

    Returns:
      float32 [B, 1, S, S]: 0 where query and key share a non-zero id, attention.masked_logit()
      elsewhere.
    """
    return attention.segment_bias(instance_ids)


def instance_position_ids(instance_ids):
    """Each token's offset in its own instance: the count of earlier tokens with its id.

    For contiguous instances this is 0 at the instance's first token ([CLS]), 1 at the next...
    Padding (id 0) gets the count of earlier padding tokens, which stays below S.

    Args:
      instance_ids: int [B, S].

    Returns:
      int32 [B, S].
    """
    ids_bs = ops.cast(instance_ids, "int32")
    same_bss = ops.equal(ops.expand_dims(ids_bs, 2), ops.expand_dims(ids_bs, 1))
    # earlier_ss[s, t] = t < s (strictly lower triangle).
    positions_s = ops.arange(ops.shape(ids_bs)[1])
    earlier_ss = ops.expand_dims(positions_s, 0) < ops.expand_dims(positions_s, 1)
    return ops.sum(ops.cast(ops.logical_and(same_bss, earlier_ss), "int32"), axis=-1)


def _first_error(ids_bs, mask_bs):
    """(row, position, reason) of the first inconsistent token, or None. numpy int [B, S]."""
    for row in range(ids_bs.shape[0]):
        ids, mask = ids_bs[row], mask_bs[row]
        previous = 0  # id of the last real token seen
        for pos in range(ids.shape[0]):
            token_id = int(ids[pos])
            if mask[pos] == 0:
                if token_id != 0:
                    return row, pos, f"id {token_id} on padding (input_mask=0; expected 0)"
                continue
            if token_id <= 0:
                return row, pos, f"id {token_id} on a real token (input_mask=1; expected >= 1)"
            if token_id == previous:
                if mask[pos - 1] == 0:
                    return row, pos, (f"instance {token_id} resumes after padding (each "
                                      "instance must be one contiguous run)")
                continue
            if token_id != previous + 1:
                expected = "1" if previous == 0 else f"{previous} or {previous + 1}"
                return row, pos, (f"id {token_id} follows {previous} (expected {expected}: "
                                  "instance ids must be 1, 2, ... in order, each one "
                                  "contiguous run)")
            previous = token_id
    return None


def check_instance_ids(instance_ids, input_mask):
    """Raises ValueError unless `instance_ids` is a consistent packing of the row(s).

    Rules: 0 exactly where input_mask is 0; the real tokens' ids start at 1 and each equals
    the previous real token's id or one more; an id never resumes after padding.

    Args:
      instance_ids: int [S] or [B, S] (numpy, list or an eager tensor of any backend).
      input_mask: int [S] or [B, S], same shape.

    Raises:
      ValueError: the message starts with `input_instance_ids` and names the row and position.
    """
    ids = np.asarray(ops.convert_to_numpy(instance_ids))
    mask = np.asarray(ops.convert_to_numpy(input_mask))
    if ids.shape != mask.shape or ids.ndim not in (1, 2):
        raise ValueError(f"{FEATURE}: shape {ids.shape} must equal input_mask's {mask.shape} "
                         "and be [S] or [B, S]")
    if ids.ndim == 1:
        ids, mask = ids[np.newaxis], mask[np.newaxis]
    ids, mask = ids.astype(np.int64), mask.astype(np.int64)
    # Vectorized first (the same rules, with the running maximum standing in for the last
    # real token's id, which it equals up to the first error); the token loop only names it.
    real = mask != 0
    seen = np.maximum.accumulate(np.where(real, ids, 0), axis=1)
    previous = np.pad(seen[:, :-1], [(0, 0), (1, 0)])
    previous_real = np.pad(real[:, :-1], [(0, 0), (1, 0)])
    step = ids - previous
    ok = np.where(real, (ids >= 1) & ((step == 1) | ((step == 0) & previous_real)), ids == 0)
    bad_rows = np.flatnonzero(~ok.all(axis=1))
    if not bad_rows.size:
        return
    row = int(bad_rows[0])
    _, pos, reason = _first_error(ids[row:row + 1], mask[row:row + 1])
    raise ValueError(f"{FEATURE}: row {row}, position {pos}: {reason}")
