"""Tests for bert_tf.text.input_packing: pack_inputs (Python) and BertPackInputs (in-graph)."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text.input_packing import BertPackInputs, pack_inputs, truncated_lengths

CLS, SEP, PAD = 101, 102, 0


def _reference_truncate(tokens_a, tokens_b, max_length):
    """The original _truncate_seq_pair: pop from the longer list, from B on ties."""
    tokens_a, tokens_b = list(tokens_a), list(tokens_b)
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()
    return tokens_a, tokens_b


def _reference_pack(a, b, seq_length):
    """The original run_classifier layout, with ids instead of strings."""
    if b:
        a, b = _reference_truncate(a, b, seq_length - 3)
    else:
        a = a[:seq_length - 2]
    ids = [CLS] + a + [SEP]
    types = [0] * len(ids)
    if b:
        ids += b + [SEP]
        types += [1] * (len(b) + 1)
    mask = [1] * len(ids)
    pad = seq_length - len(ids)
    return ids + [PAD] * pad, mask + [0] * pad, types + [0] * pad


def test_single_segment():
    out = pack_inputs([7, 8], max_seq_length=6, cls_id=CLS, sep_id=SEP)
    assert out == {"input_word_ids": [CLS, 7, 8, SEP, 0, 0],
                   "input_mask": [1, 1, 1, 1, 0, 0],
                   "input_type_ids": [0, 0, 0, 0, 0, 0]}


def test_pair_and_pad_id():
    out = pack_inputs([7], [8, 9], max_seq_length=7, cls_id=CLS, sep_id=SEP, pad_id=5)
    assert out == {"input_word_ids": [CLS, 7, SEP, 8, 9, SEP, 5],
                   "input_mask": [1, 1, 1, 1, 1, 1, 0],
                   "input_type_ids": [0, 0, 0, 1, 1, 1, 0]}


def test_empty_a_and_empty_b():
    assert pack_inputs([], [8], max_seq_length=5, cls_id=CLS, sep_id=SEP)["input_word_ids"] == [
        CLS, SEP, 8, SEP, 0]
    # An empty B is absent, as in the original (`if tokens_b:`): no second [SEP], and A may use
    # the position it would have taken.
    out = pack_inputs([1, 2, 3, 4], [], max_seq_length=5, cls_id=CLS, sep_id=SEP)
    assert out["input_word_ids"] == [CLS, 1, 2, 3, SEP]
    assert out["input_type_ids"] == [0] * 5
    assert pack_inputs([], max_seq_length=3, cls_id=CLS, sep_id=SEP)["input_mask"] == [1, 1, 0]
    # B truncated away entirely (ties pop from B) also loses its [SEP], as in the original.
    assert pack_inputs([1], [2], max_seq_length=4, cls_id=CLS, sep_id=SEP) == {
        "input_word_ids": [CLS, 1, SEP, 0], "input_mask": [1, 1, 1, 0],
        "input_type_ids": [0, 0, 0, 0]}


def test_too_short_for_special_tokens():
    with pytest.raises(ValueError) as e:
        pack_inputs([1], max_seq_length=1, cls_id=CLS, sep_id=SEP)
    assert str(e.value) == ("max_seq_length=1 is too short: [CLS] A [SEP] needs at least 2 "
                            "positions.")
    with pytest.raises(ValueError) as e:
        pack_inputs([1], [2], max_seq_length=2, cls_id=CLS, sep_id=SEP)
    assert str(e.value) == ("max_seq_length=2 is too short: [CLS] A [SEP] B [SEP] needs at "
                            "least 3 positions.")
    with pytest.raises(ValueError, match=r"seq_length=1 is too short: \[CLS\] A \[SEP\] needs"):
        BertPackInputs(1, CLS, SEP)
    with pytest.raises(ValueError, match=r"seq_length=2 is too short: \[CLS\] A \[SEP\] B"):
        BertPackInputs(2, CLS, SEP)([tf.ragged.constant([[1]]), tf.ragged.constant([[2]])])


def test_truncated_lengths_match_popping_loop():
    for len_a, len_b, budget in itertools.product(range(15), range(15), range(15)):
        kept_a, kept_b = _reference_truncate(range(len_a), range(len_b), budget)
        assert truncated_lengths(len_a, len_b, budget) == (len(kept_a), len(kept_b))


def test_python_and_in_graph_pack_identically_over_many_length_pairs():
    pairs = list(itertools.product(range(0, 13), range(0, 13)))
    seg_a = [list(range(1, la + 1)) for la, _ in pairs]
    seg_b = [list(range(50, 50 + lb)) for _, lb in pairs]
    for seq_length in (3, 4, 7, 10, 16, 30):
        layer = BertPackInputs(seq_length, CLS, SEP)
        out = layer([tf.ragged.constant(seg_a, dtype=tf.int64, ragged_rank=1, inner_shape=()),
                     tf.ragged.constant(seg_b, dtype=tf.int32, ragged_rank=1, inner_shape=())])
        for key in out:
            assert out[key].dtype == tf.int32 and out[key].shape == (len(pairs), seq_length)
        for i, (a, b) in enumerate(zip(seg_a, seg_b)):
            python = pack_inputs(a, b, max_seq_length=seq_length, cls_id=CLS, sep_id=SEP)
            ids, mask, types = _reference_pack(a, b, seq_length)
            assert python == {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
            for key in out:
                assert out[key][i].numpy().tolist() == python[key], (seq_length, a, b, key)


def test_one_segment_dense_path_packs_as_python_over_many_lengths():
    seg_a = [list(range(1, n + 1)) for n in range(21)]
    for seq_length in (2, 3, 7, 16):
        out = BertPackInputs(seq_length, CLS, SEP, pad_id=9)(tf.ragged.constant(seg_a))
        for key in out:
            assert out[key].dtype == tf.int32 and out[key].shape == (len(seg_a), seq_length)
        for i, a in enumerate(seg_a):
            python = pack_inputs(a, max_seq_length=seq_length, cls_id=CLS, sep_id=SEP, pad_id=9)
            for key in out:
                assert out[key][i].numpy().tolist() == python[key], (seq_length, a, key)
    unbatched = BertPackInputs(4, CLS, SEP)(tf.constant([5, 6, 7]))
    assert unbatched["input_word_ids"].numpy().tolist() == [CLS, 5, 6, SEP]
    assert unbatched["input_mask"].numpy().tolist() == [1, 1, 1, 1]


def test_single_segment_layer_word_grouped_and_unbatched_inputs():
    layer = BertPackInputs(5, CLS, SEP)
    out = layer(tf.ragged.constant([[1, 2, 3, 4, 5], []]))
    np.testing.assert_array_equal(out["input_word_ids"], [[CLS, 1, 2, 3, SEP], [CLS, SEP, 0, 0, 0]])
    np.testing.assert_array_equal(out["input_mask"], [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    words = tf.ragged.constant([[[1, 2], [3]], [[4]]])  # [B, (words), (pieces)]
    out = layer([words])
    np.testing.assert_array_equal(out["input_word_ids"], [[CLS, 1, 2, 3, SEP], [CLS, 4, SEP, 0, 0]])
    out = layer([tf.constant([1, 2]), tf.constant([3])])  # One unbatched example.
    assert out["input_word_ids"].numpy().tolist() == [CLS, 1, SEP, 3, SEP]
    assert out["input_type_ids"].numpy().tolist() == [0, 0, 0, 1, 1]


def test_layer_in_tf_data_and_get_config():
    layer = BertPackInputs.from_config(BertPackInputs(6, 2, 3, pad_id=9).get_config())
    layer = keras.layers.deserialize(keras.layers.serialize(layer))
    assert isinstance(layer, BertPackInputs)
    assert (layer.seq_length, layer.cls_id, layer.sep_id, layer.pad_id) == (6, 2, 3, 9)
    ds = tf.data.Dataset.from_tensor_slices(
        (tf.ragged.constant([[5, 6, 7, 8, 9], [5]]), tf.ragged.constant([[10, 11], []])))
    ds = ds.batch(2).map(lambda a, b: layer([a, b]))
    batch = next(iter(ds))
    assert batch["input_word_ids"].shape.as_list() == [2, 6]
    np.testing.assert_array_equal(batch["input_word_ids"],
                                  [[2, 5, 6, 3, 10, 3], [2, 5, 3, 9, 9, 9]])
    np.testing.assert_array_equal(batch["input_type_ids"], [[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]])
