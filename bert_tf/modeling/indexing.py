"""Gathering the hidden states at given positions of each row (masked tokens, span boundaries,
packed instances' [CLS])."""

from keras import ops


def gather_positions(sequence_bsh, positions_bp):
    """The rows' vectors at the given positions.

    One gather over the flattened [B*S, H] states (as the original BERT's gather_indexes): its
    gradient is a sum into [B*S, H] rows on every backend.

    Args:
      sequence_bsh: float [B, S, H].
      positions_bp: int [B, P], indices into S.

    Returns:
      float [B, P, H].
    """
    shape = ops.shape(sequence_bsh)
    batch, length, width = shape[0], shape[1], sequence_bsh.shape[-1]
    positions_bp = ops.cast(positions_bp, "int32")
    offsets_b1 = ops.expand_dims(ops.arange(batch, dtype="int32") * length, 1)
    flat_n = ops.reshape(positions_bp + offsets_b1, [-1])
    gathered_nh = ops.take(ops.reshape(sequence_bsh, [-1, width]), flat_n, axis=0)
    return ops.reshape(gathered_nh, [batch, ops.shape(positions_bp)[1], width])
