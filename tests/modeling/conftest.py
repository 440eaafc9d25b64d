"""Small configs and feature batches shared by the modeling tests."""

import keras
import numpy as np
import pytest

from bert_tf.config import BertConfig


@pytest.fixture
def small_config():
    """A 2-layer, H=32, 4-head model over a 100-token vocabulary and 16 positions."""
    return BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=16)


def make_features(batch=4, seq_length=16, num_predictions=4, vocab_size=100, seed=0):
    """A pre-training feature dict (numpy) with real padding and 0-weighted prediction slots."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(seq_length // 2, seq_length + 1, size=batch)
    lengths[0] = seq_length
    mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype("int32")
    ids = rng.integers(5, vocab_size, size=(batch, seq_length)).astype("int32") * mask
    types = ((np.arange(seq_length)[None, :] >= lengths[:, None] // 2) * mask).astype("int32")
    positions = np.zeros((batch, num_predictions), "int32")
    weights = np.zeros((batch, num_predictions), "float32")
    for b in range(batch):
        count = num_predictions - 1 if b % 2 else num_predictions
        real = 1 + rng.permutation(lengths[b] - 1)[:count]
        positions[b, :len(real)] = np.sort(real)
        weights[b, :len(real)] = 1.0
    masked_ids = rng.integers(5, vocab_size, size=(batch, num_predictions)).astype("int32")
    masked_ids *= (weights > 0)
    return {
        "input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
        "masked_lm_positions": positions, "masked_lm_ids": masked_ids,
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.integers(0, 2, size=batch).astype("int32"),
    }


@pytest.fixture
def features():
    return make_features()


@pytest.fixture
def float32_policy():
    """Restores the global float32 policy after a test that changes it."""
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture
def make_batch():
    """The `make_features` function, for tests that need other sizes or seeds."""
    return make_features
