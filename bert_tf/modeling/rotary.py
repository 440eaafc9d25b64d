"""Rotary position embeddings (RoPE, Su et al. 2021) as ModernBERT applies them.

Each head's d channels are two halves (x1, x2) rotated pairwise by angle p * theta^(-2i/d):
x * cos + rotate_half(x) * sin with rotate_half(x) = (-x2, x1) (the "half" layout, not the
interleaved one), computed in float32. No variables: the base theta is a config value
(ModernBERT: 160,000 on global layers, 10,000 on local ones).
"""

import numpy as np
from keras import ops


def rotary_cos_sin(position_ids, head_size, theta):
    """cos and sin of every (position, channel) angle.

    Args:
      position_ids: int [B, S] (or [1, S]), each token's position.
      head_size: d, even.
      theta: the rotary base.

    Returns:
      (cos, sin): float32 [B, S, 1, d] each, broadcasting over heads.
    """
    # In float32 as the graph computed them (numpy's float64 power differs in the last bit).
    exponents_h = np.arange(0, head_size, 2, dtype=np.float32) / np.float32(head_size)
    inverse_frequency_h = (np.float32(1.0) / np.power(np.float32(theta), exponents_h)
                           ).astype(np.float32)
    angles_bsh = ops.expand_dims(ops.cast(position_ids, "float32"), -1) * inverse_frequency_h
    angles_bsd = ops.expand_dims(ops.concatenate([angles_bsh, angles_bsh], axis=-1), 2)
    return ops.cos(angles_bsd), ops.sin(angles_bsd)


def apply_rotary(x_bsad, cos, sin):
    """Rotates queries or keys.

    Args:
      x_bsad: float [B, S, A, d].
      cos, sin: float32 [B, S, 1, d] from `rotary_cos_sin`.

    Returns:
      float [B, S, A, d] of x's dtype.
    """
    x32 = ops.cast(x_bsad, "float32")
    first, second = ops.split(x32, 2, axis=-1)
    rotated = ops.concatenate([-second, first], axis=-1)
    return ops.cast(x32 * cos + rotated * sin, x_bsad.dtype)
