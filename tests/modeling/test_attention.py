"""Attention and its masks: the blocked sliding window equals the full masked one, chunked
global attention equals the whole; rotary helpers."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import attention, rotary


def qkv(batch, length, heads=2, size=8, seed=0):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=(batch, length, heads, size)).astype("float32"))
            for _ in range(3)]


def segments(length):
    """Row 0: padded after 3/4 (an input_mask); row 1: three packed instances, then padding."""
    ids = np.zeros((2, length), "int32")
    ids[0, :3 * length // 4] = 1
    cut = [0, length // 5, length // 2, length - 3]
    for i in range(3):
        ids[1, cut[i]:cut[i + 1]] = i + 1
    return ids


@pytest.mark.parametrize("length, half_window", [(203, 8), (64, 8), (25, 8), (130, 5)])
def test_blocked_equals_full_masked(length, half_window):
    query, key, value = qkv(2, length)
    ids = segments(length)
    full = attention.dot_product_attention(query, key, value,
                                           attention.segment_bias(ids, half_window))
    blocked = attention.blocked_local_attention(query, key, value, ids, half_window)
    assert blocked.shape == (2, length, 2, 8)
    real = ids > 0
    np.testing.assert_allclose(blocked.numpy()[real], full.numpy()[real], atol=1e-6)


def test_window_limits_what_a_query_sees():
    """Changing a key beyond the window leaves the query's output unchanged; inside, not."""
    query, key, value = qkv(1, 100)
    ids = np.ones((1, 100), "int32")
    base = attention.local_attention(query, key, value, ids, 8).numpy()
    moved = value.numpy().copy()
    moved[0, 60] += 1.0
    changed = attention.local_attention(query, key, tf.constant(moved), ids, 8).numpy()
    differs = np.abs(changed - base).max(axis=(2, 3))[0] > 0
    assert np.flatnonzero(differs).tolist() == list(range(52, 69))


def test_dynamic_length_chooses_the_same_outputs():
    """Under tf.function with an unknown length the choice is a tf.cond; same values."""
    fn = tf.function(attention.local_attention, input_signature=[
        tf.TensorSpec([None, None, 2, 8], tf.float32)] * 3 + [
        tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32)])
    for length in (20, 90):
        query, key, value = qkv(2, length, seed=length)
        ids = segments(length)
        eager = attention.local_attention(query, key, value, ids, 8)
        np.testing.assert_allclose(fn(query, key, value, ids, 8).numpy()[ids > 0],
                                   eager.numpy()[ids > 0], atol=1e-6)


def test_rotary_is_a_relative_rotation():
    """q(p) . k(p') after rotation depends on p - p' only."""
    rng = np.random.default_rng(3)
    q = tf.constant(rng.normal(size=(1, 1, 1, 16)).astype("float32"))
    k = tf.constant(rng.normal(size=(1, 1, 1, 16)).astype("float32"))

    def score(p, p2):
        cos_q, sin_q = rotary.rotary_cos_sin(tf.constant([[p]]), 16, 10000.0)
        cos_k, sin_k = rotary.rotary_cos_sin(tf.constant([[p2]]), 16, 10000.0)
        return float(tf.reduce_sum(rotary.apply_rotary(q, cos_q, sin_q)
                                   * rotary.apply_rotary(k, cos_k, sin_k)))

    assert score(5, 2) == pytest.approx(score(105, 102), abs=1e-4)
    assert score(5, 2) != pytest.approx(score(5, 4), abs=1e-3)


@pytest.mark.parametrize("packed", [False, True])
def test_query_chunked_global_attention_equals_full(packed, monkeypatch):
    monkeypatch.setattr(attention, "QUERY_CHUNK", 16)
    query, key, value = qkv(2, 75)
    ids = segments(75)
    bias = (attention.segment_bias(ids) if packed
            else attention.padding_bias(ids > 0))
    full = attention.dot_product_attention(query, key, value, bias)
    chunked = attention.global_attention(query, key, value, bias, chunk_queries=True)
    real = ids > 0
    np.testing.assert_allclose(chunked.numpy()[real], full.numpy()[real], atol=1e-6)
