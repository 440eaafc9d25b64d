"""Longer inputs for learned position embeddings: extend the table by copying or interpolating.

A model pre-trained with max_position_embeddings=512 has learned rows for positions 0..511 only.
`extend_position_embeddings` returns the same model with a longer table whose first 512 rows are
the learned ones and whose new rows start from the learned trajectory rather than from noise, so
fine-tuning (or further pre-training) on long inputs starts close to the original behaviour:

  copy         the table tiled: row p = row p mod N (Longformer's initialization);
  interpolate  the new M - N rows are the whole table resampled linearly to M - N rows, one
               smooth pass over the learned positions whatever the ratio M / N (for M = 2N it
               equals copy; for M = 1.5N copy would repeat only the table's first half).

Models with sinusoidal position embeddings need none of this: they take any length.
"""

import numpy as np

from keras import ops

from bert_tf.modeling.encoder_base import Encoder

EXTENSION_METHODS = ("copy", "interpolate")


def extend_position_table(table, new_length, method="copy"):
    """A [new_length, W] position table whose first N rows are `table`'s.

    Args:
      table: float array [N, W], the learned rows.
      new_length: M > N.
      method: "copy" (row p = table[p mod N]) or "interpolate" (rows N..M-1 = `table` linearly
        resampled to M - N rows, from its first row to its last).

    Returns:
      numpy array [M, W] of table's dtype.

    Raises:
      ValueError: an unknown method, or new_length not larger than N.
    """
    table = np.asarray(table)
    length = table.shape[0]
    if method not in EXTENSION_METHODS:
        raise ValueError(f"method={method!r} is not one of {', '.join(EXTENSION_METHODS)}")
    if new_length <= length:
        raise ValueError(f"new length {new_length} must exceed the table's {length} rows")
    extra = new_length - length
    if method == "copy":
        new_rows = table[np.arange(length, new_length) % length]
    else:
        where = np.linspace(0.0, length - 1, extra) if extra > 1 else np.zeros(1)
        below = np.floor(where).astype(np.int64)
        above = np.minimum(below + 1, length - 1)
        weight = (where - below)[:, np.newaxis]
        new_rows = (1.0 - weight) * table[below] + weight * table[above]
    return np.concatenate([table, new_rows.astype(table.dtype)], axis=0)


def _with_max_positions(config, new_length):
    """The get_config() dict of a BertEncoder, or of a model holding one, with a new length."""
    if "encoder" in config:
        encoder_config = dict(config["encoder"])
        encoder_config["config"] = _with_max_positions(encoder_config["config"], new_length)
        return dict(config, encoder=encoder_config)
    return dict(config, config=dict(config["config"], max_position_embeddings=new_length))


def extend_position_embeddings(model, new_length, method="copy"):
    """The same model (a new instance) with its learned position table extended to new_length.

    Every other weight is copied unchanged; the result's config has
    max_position_embeddings=new_length, so it saves, loads and fine-tunes like any model.

    Args:
      model: a BertEncoder, or a model with an `.encoder` BertEncoder whose get_config holds
        it (BertPretrainer, BertClassifier, BertSpanLabeler, BertTokenClassifier).
      new_length: M, larger than the current max_position_embeddings.
      method: "copy" or "interpolate" (see `extend_position_table`).

    Returns:
      A model of the same class.

    Raises:
      ValueError: sinusoidal position embeddings (nothing to extend), an unknown method, or a
        new length that is not larger.
    """
    encoder = model if isinstance(model, Encoder) else model.encoder
    config = encoder.config
    if config.position_embedding_type != "learned":
        raise ValueError(f"position_embedding_type={config.position_embedding_type!r} has no "
                         "learned table to extend; it takes any input length as it is")
    if method not in EXTENSION_METHODS:
        raise ValueError(f"method={method!r} is not one of {', '.join(EXTENSION_METHODS)}")
    if new_length <= config.max_position_embeddings:
        raise ValueError(f"new length {new_length} must exceed max_position_embeddings="
                         f"{config.max_position_embeddings}")
    table = encoder.embedding_layer.position_embeddings.embeddings
    extended = type(model).from_config(_with_max_positions(model.get_config(), new_length))
    # Both models are built the same way, so their weights come in the same order.
    for old, new in zip(model.weights, extended.weights):
        if old is table:
            new.assign(extend_position_table(ops.convert_to_numpy(old), new_length, method))
        else:
            new.assign(old)
    return extended
