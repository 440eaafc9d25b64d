"""InstanceSerializer gives the bytes of tfrecord_io.serialize_instance, which TensorFlow parses."""

import random

import numpy as np
import pytest

from bert_tf.data.pretraining import tfrecord_io
from bert_tf.data.pretraining.instance_serializer import InstanceSerializer


def random_instance(rng, seq_length, max_predictions, vocab_size, spans):
    num_tokens = rng.randint(5, seq_length)
    len_a = rng.randint(1, num_tokens - 4)
    input_ids = [rng.randrange(vocab_size) for _ in range(num_tokens)]
    segment_ids = [0] * (len_a + 2) + [1] * (num_tokens - len_a - 2)
    positions = sorted(rng.sample(range(1, num_tokens), rng.randint(0, min(max_predictions,
                                                                           num_tokens - 1))))
    ids = [rng.randrange(vocab_size) for _ in positions]
    lefts = [p - 1 for p in positions] if spans else None
    rights = [p + 1 for p in positions] if spans else None
    return input_ids, segment_ids, positions, ids, rng.randint(0, 1), lefts, rights


# S above 128 (two-byte positions) and a vocabulary past 2**14 (three-byte ids) and 2**16.
@pytest.mark.parametrize("seq_length,max_predictions,vocab_size,feature_names,spans", [
    (128, 20, 30522, "v1", False),
    (64, 10, 100, "v2", False),
    (512, 80, 120_000, "v1", True),
    (200, 30, 250, "v2", True),
])
def test_serializer_bytes_equal_serialize_instance(seq_length, max_predictions, vocab_size,
                                                feature_names, spans):
    serializer = InstanceSerializer(seq_length, max_predictions, feature_names, vocab_size)
    rng = random.Random(seq_length)
    for _ in range(200):
        input_ids, segment_ids, positions, ids, label, lefts, rights = random_instance(
            rng, seq_length, max_predictions, vocab_size, spans)
        expected = tfrecord_io.serialize_instance(
            input_ids, segment_ids, positions, ids, label, max_seq_length=seq_length,
            max_predictions_per_seq=max_predictions, feature_names=feature_names,
            span_left_boundaries=lefts, span_right_boundaries=rights)
        first_segment = segment_ids.count(0)
        assert serializer.serialize(input_ids, first_segment, positions, ids, label, lefts,
                              rights) == expected


# Positions of one byte and of two; ids of one, two and three bytes.
@pytest.mark.parametrize("seq_length,max_predictions,vocab_size,feature_names", [
    (128, 20, 30522, "v1"),
    (64, 10, 100, "v2"),
    (300, 40, 5000, "v1"),
])
def test_batch_encoding_equals_encoding_each_instance(seq_length, max_predictions, vocab_size,
                                                      feature_names):
    serializer = InstanceSerializer(seq_length, max_predictions, feature_names, vocab_size)
    rng = random.Random(vocab_size)
    instances = [random_instance(rng, seq_length, max_predictions, vocab_size, False)
                 for _ in range(150)]
    ids = np.zeros((len(instances), seq_length), dtype=np.int32)
    positions = np.zeros((len(instances), max_predictions), dtype=np.int64)
    masked_ids = np.zeros((len(instances), max_predictions), dtype=np.int64)
    for row, (input_ids, _, pos, m_ids, _, _, _) in enumerate(instances):
        ids[row, :len(input_ids)] = input_ids
        positions[row, :len(pos)] = pos
        masked_ids[row, :len(m_ids)] = m_ids
    records = serializer.serialize_batch(
        ids, np.array([len(x[0]) for x in instances]),
        np.array([x[1].count(0) for x in instances]), positions, masked_ids,
        np.array([len(x[2]) for x in instances]), np.array([x[4] for x in instances]))
    assert len(records) == len(instances)
    for record, (input_ids, segment_ids, pos, m_ids, label, _, _) in zip(records, instances):
        assert record == serializer.serialize(input_ids, segment_ids.count(0), pos, m_ids, label)


def test_serializer_parses_with_tensorflow_to_the_instance():
    tf = pytest.importorskip("tensorflow")
    serializer = InstanceSerializer(16, 4, "v1", 40_000)
    record = serializer.serialize([2, 39_999, 17, 3, 200, 3], 4, [1, 4], [5, 6], 1)
    parsed = tf.io.parse_single_example(record, tfrecord_io.parse_spec(16, 4))
    assert parsed["input_ids"].numpy().tolist() == [2, 39_999, 17, 3, 200, 3] + [0] * 10
    assert parsed["segment_ids"].numpy().tolist() == [0] * 4 + [1] * 2 + [0] * 10
    assert parsed["input_mask"].numpy().tolist() == [1] * 6 + [0] * 10
    assert parsed["masked_lm_positions"].numpy().tolist() == [1, 4, 0, 0]
    assert parsed["masked_lm_ids"].numpy().tolist() == [5, 6, 0, 0]
    assert parsed["masked_lm_weights"].numpy().tolist() == [1.0, 1.0, 0.0, 0.0]
    assert parsed["next_sentence_labels"].numpy().tolist() == [1]


def test_serializer_rejects_oversized_instances():
    serializer = InstanceSerializer(8, 2, "v1", 100)
    with pytest.raises(ValueError, match="An instance of 9 tokens and 0 predictions exceeds "
                                         "max_seq_length=8 or max_predictions_per_seq=2."):
        serializer.serialize([1] * 9, 3, [], [], 0)
    with pytest.raises(ValueError, match='feature_names must be "v1" or "v2", got \'v3\'.'):
        InstanceSerializer(8, 2, "v3", 100)
