"""The weight initializer every BERT layer uses."""

import keras


def truncated_normal(stddev):
    """The initializer of every kernel and embedding: truncated normal, cut at 2 stddev."""
    return keras.initializers.TruncatedNormal(stddev=stddev)
