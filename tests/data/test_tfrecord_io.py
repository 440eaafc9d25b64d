"""tfrecord_io: one instance -> a padded tf.train.Example; atomic sharded writing."""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import tfrecord_io

S, P = 8, 3
INSTANCE = dict(input_ids=[2, 10, 4, 3, 11, 12, 3], segment_ids=[0, 0, 0, 0, 1, 1, 1],
                masked_lm_positions=[2, 5], masked_lm_ids=[13, 12], next_sentence_label=1)


def serialize(feature_names="v1", **overrides):
    values = dict(INSTANCE, **overrides)
    return tfrecord_io.serialize_instance(**values, max_seq_length=S, max_predictions_per_seq=P,
                                          feature_names=feature_names)


def test_v1_record_parses_with_the_original_spec_and_is_padded():
    spec = {
        "input_ids": tf.io.FixedLenFeature([S], tf.int64),
        "input_mask": tf.io.FixedLenFeature([S], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([S], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([P], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([P], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([P], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    f = {k: v.numpy() for k, v in tf.io.parse_single_example(serialize(), spec).items()}
    np.testing.assert_array_equal(f["input_ids"], [2, 10, 4, 3, 11, 12, 3, 0])
    np.testing.assert_array_equal(f["input_mask"], [1, 1, 1, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(f["segment_ids"], [0, 0, 0, 0, 1, 1, 1, 0])
    np.testing.assert_array_equal(f["masked_lm_positions"], [2, 5, 0])
    np.testing.assert_array_equal(f["masked_lm_ids"], [13, 12, 0])
    np.testing.assert_array_equal(f["masked_lm_weights"], [1.0, 1.0, 0.0])
    np.testing.assert_array_equal(f["next_sentence_labels"], [1])
    assert spec == tfrecord_io.parse_spec(S, P, "v1")


def test_v2_names_and_int64_storage():
    example = tf.train.Example.FromString(serialize("v2"))
    features = example.features.feature
    assert sorted(features) == ["input_mask", "input_type_ids", "input_word_ids",
                                "masked_lm_ids", "masked_lm_positions", "masked_lm_weights",
                                "next_sentence_labels"]
    for name in features:
        expected = "float_list" if name == "masked_lm_weights" else "int64_list"
        assert features[name].WhichOneof("kind") == expected
    parsed = tf.io.parse_single_example(serialize("v2"), tfrecord_io.parse_spec(S, P, "v2"))
    np.testing.assert_array_equal(parsed["input_word_ids"], [2, 10, 4, 3, 11, 12, 3, 0])


def test_serialization_is_deterministic_bytes():
    assert serialize() == serialize()
    assert serialize() != serialize(next_sentence_label=0)


@pytest.mark.parametrize("overrides, message", [
    (dict(input_ids=list(range(9)), segment_ids=[0] * 9),
     "input_ids has 9 ids and segment_ids 9; expected equal lengths <= max_seq_length=8."),
    (dict(segment_ids=[0] * 6),
     "input_ids has 7 ids and segment_ids 6; expected equal lengths <= max_seq_length=8."),
    (dict(masked_lm_positions=[1, 2, 3, 4], masked_lm_ids=[5, 6, 7, 8]),
     "masked_lm_positions has 4 entries and masked_lm_ids 4; expected equal lengths <= "
     "max_predictions_per_seq=3."),
])
def test_bad_lengths_are_reported(overrides, message):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        serialize(**overrides)


def test_unknown_feature_names():
    with pytest.raises(ValueError, match=re.escape("feature_names must be \"v1\" or \"v2\", "
                                                   "got 'v9'.")):
        serialize("v9")


def test_sharded_writer_round_robin_and_rename(tmp_path):
    paths = [str(tmp_path / f"s{i}.tfrecord") for i in range(3)]
    records = [serialize(next_sentence_label=i % 2, masked_lm_ids=[i, i]) for i in range(7)]
    with tfrecord_io.ShardedRecordWriter(paths) as writer:
        for record in records:
            writer.write(record)
        # Nothing is visible under the final names until the writer closes.
        assert not any(os.path.exists(p) for p in paths)
    assert writer.counts == [3, 2, 2] and writer.num_written == 7
    assert sorted(os.listdir(tmp_path)) == ["s0.tfrecord", "s1.tfrecord", "s2.tfrecord"]
    read = [[r.numpy() for r in tf.data.TFRecordDataset(p)] for p in paths]
    assert read == [records[0::3], records[1::3], records[2::3]]


def test_sharded_writer_leaves_nothing_on_error(tmp_path):
    paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    with pytest.raises(RuntimeError, match="boom"):
        with tfrecord_io.ShardedRecordWriter(paths) as writer:
            writer.write(serialize())
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_gzip_shards(tmp_path):
    path = str(tmp_path / "a.tfrecord.gz")
    with tfrecord_io.ShardedRecordWriter([path], "GZIP") as writer:
        writer.write(serialize())
    with open(path, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    assert [r.numpy() for r in tf.data.TFRecordDataset(path, "GZIP")] == [serialize()]


def test_check_output_files_errors(tmp_path):
    missing = str(tmp_path / "nope" / "x.tfrecord")
    with pytest.raises(ValueError, match=re.escape(
            f"Output directory {tmp_path / 'nope'} does not exist (for output file {missing}); "
            "create it first.")):
        tfrecord_io.check_output_files([missing])
    twice = str(tmp_path / "x.tfrecord")
    with pytest.raises(ValueError, match=re.escape(f"Output file {twice} is listed twice.")):
        tfrecord_io.check_output_files([twice, twice])
    with pytest.raises(ValueError, match="^No output file given.$"):
        tfrecord_io.check_output_files([])
    with pytest.raises(ValueError, match=re.escape('compression must be "" or "GZIP"')):
        tfrecord_io.check_output_files([twice], "ZLIB")


def test_unwritable_output_is_reported_before_any_work(tmp_path):
    # /proc exists but no file can be created in it (whoever runs the tests, root included).
    with pytest.raises(ValueError, match="^" + re.escape(
            "Output file /proc/o.tfrecord cannot be written: cannot create a file in /proc "
            "(No such file or directory).") + "$"):
        tfrecord_io.check_output_files([str(tmp_path / "fine.tfrecord"), "/proc/o.tfrecord"])
    (tmp_path / "adir").mkdir()
    with pytest.raises(ValueError, match="^" + re.escape(
            f"Output file {tmp_path / 'adir'} is a directory.") + "$"):
        tfrecord_io.check_output_files([str(tmp_path / "adir")])
    # The write probe leaves nothing behind.
    assert os.listdir(tmp_path) == ["adir"]
