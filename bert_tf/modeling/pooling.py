"""Sentence pooling: one vector per input from the encoder's token vectors.

The modes are sentence-transformers' (its `Pooling` module), computed the same way so converted
models give the same vectors:

  cls                   sequence_output[:, 0] (the [CLS] token's last state; not the tanh pooler)
  max                   max over the real tokens (padding set to -1e9 first)
  mean                  sum(x * mask) / max(sum(mask), 1e-9) over the real tokens ([CLS] and
                        [SEP] included)
  mean_sqrt_len_tokens  sum(x * mask) / sqrt(max(sum(mask), 1e-9))

Several modes concatenate in the order given (sentence-transformers' older configs imply the
order above), so the width is len(modes) * H.
"""

import keras
from keras import ops

from bert_tf.config import check_pooling_modes

@keras.saving.register_keras_serializable(package="bert_tf")
class SentencePooling(keras.layers.Layer):
    """Pools token vectors [B, S, H] with input_mask [B, S] into [B, len(modes) * H] (float32).

    Args:
      modes: one or more of POOLING_MODES (see the module doc).
      normalize: divide each vector by max(its L2 norm, 1e-12) (sentence-transformers'
        Normalize module), so dot products are cosine similarities.
      **kwargs: `name`, `dtype`.

    Examples:

    >>> import numpy as np
    >>> pool = SentencePooling("mean")
    >>> x = np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]], "float32")
    >>> keras.ops.convert_to_numpy(pool(x, np.array([[1, 1, 0]]))).tolist()
    [[2.0, 3.0]]
    """

    def __init__(self, modes=("mean",), normalize=False, **kwargs):
        super().__init__(**kwargs)
        self.modes = check_pooling_modes(modes, f"{type(self).__name__}")
        self.normalize = bool(normalize)

    def call(self, sequence_bsh, input_mask_bs):
        x_bsh = ops.cast(sequence_bsh, "float32")
        mask_bs1 = ops.expand_dims(ops.cast(input_mask_bs, "float32"), -1)
        pooled = []
        count_b1 = ops.maximum(ops.sum(mask_bs1, axis=1), 1e-9)
        for mode in self.modes:
            if mode == "cls":
                pooled.append(x_bsh[:, 0])
            elif mode == "max":
                pooled.append(ops.max(ops.where(mask_bs1 > 0, x_bsh, -1e9), axis=1))
            else:
                summed_bh = ops.sum(x_bsh * mask_bs1, axis=1)
                pooled.append(summed_bh / (count_b1 if mode == "mean" else ops.sqrt(count_b1)))
        vectors_bd = pooled[0] if len(pooled) == 1 else ops.concatenate(pooled, axis=-1)
        if self.normalize:
            norm_b1 = ops.sqrt(ops.sum(ops.square(vectors_bd), axis=-1, keepdims=True))
            vectors_bd = vectors_bd / ops.maximum(norm_b1, 1e-12)
        return vectors_bd

    def compute_output_spec(self, sequence_bsh, input_mask_bs):
        return keras.KerasTensor((sequence_bsh.shape[0], len(self.modes) * sequence_bsh.shape[-1]),
                                 "float32")

    def get_config(self):
        return dict(super().get_config(), modes=list(self.modes), normalize=self.normalize)
