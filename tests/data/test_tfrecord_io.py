"""tfrecord_io: one instance -> a padded tf.train.Example; atomic sharded writing."""

import hashlib
import os
import re
import socket
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining import tfrecord_io

import zygote
from no_tensorflow import LOADED_FRAMEWORKS, run_fresh

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
        # Nothing is visible under the final names until the writer closes; the temporary
        # names say whose they are (a later run removes a killed writer's, never a live one's).
        assert not any(os.path.exists(p) for p in paths)
        # The host as 8 hex digits of its name's hash: a long shard name stays a file name.
        host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
        names = sorted(os.listdir(tmp_path))
        assert len(names) == len(paths)
        assert all(re.fullmatch(rf"\.tmp_[0-9a-f]{{8}}-{os.getpid()}-{host}_s{i}\.tfrecord",
                                name) for i, name in enumerate(names))
    assert writer.counts == [3, 2, 2] and writer.num_written == 7
    assert sorted(os.listdir(tmp_path)) == ["s0.tfrecord", "s1.tfrecord", "s2.tfrecord"]
    read = [[r.numpy() for r in tf.data.TFRecordDataset(p)] for p in paths]
    assert read == [records[0::3], records[1::3], records[2::3]]
    # Batches of framed records continue the round robin where single writes left it.
    with tfrecord_io.ShardedRecordWriter(paths) as writer:
        writer.write(records[0])
        writer.write_framed_many(tfrecord_io.frame_records(records[1:6]))
        writer.write_framed_many(tfrecord_io.frame_records(records[6:]))
    assert writer.counts == [3, 2, 2] and writer.num_written == 7
    assert [[r.numpy() for r in tf.data.TFRecordDataset(p)] for p in paths] == read


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


# ---------------------------------------------------------------------------------------------
# The hand-written encodings against TensorFlow's own.
# ---------------------------------------------------------------------------------------------


def tf_example(feature_names, values, s, p):
    """What TensorFlow's tf.train.Example would serialize for the same padded instance."""
    names = tfrecord_io.FEATURE_NAMES[feature_names]
    n, m = len(values["input_ids"]), len(values["masked_lm_positions"])

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    feature = {
        names["input_ids"]: ints(values["input_ids"] + [0] * (s - n)),
        names["input_mask"]: ints([1] * n + [0] * (s - n)),
        names["segment_ids"]: ints(values["segment_ids"] + [0] * (s - n)),
        "masked_lm_positions": ints(values["masked_lm_positions"] + [0] * (p - m)),
        "masked_lm_ids": ints(values["masked_lm_ids"] + [0] * (p - m)),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
            value=[1.0] * m + [0.0] * (p - m))),
        "next_sentence_labels": ints([values["next_sentence_label"]]),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature))


# Ids of every varint width (1, 2, 3 bytes, past the 2**16 lookup table, a full int64, a
# negative one stored as ten bytes) and positions past 127, so lengths and values take
# multi-byte varints; and no prediction at all.
WIDE = dict(input_ids=[2, 127, 128, 16383, 16384, 65535, 65536, 2**40, 2**63 - 1, -1]
            + [7] * 189 + [3], segment_ids=[0] * 100 + [1] * 100, masked_lm_positions=[1, 150, 199],
            masked_lm_ids=[127, 7, 3], next_sentence_label=0)
NO_PREDICTIONS = dict(INSTANCE, masked_lm_positions=[], masked_lm_ids=[])


@pytest.mark.parametrize("feature_names", ["v1", "v2"])
@pytest.mark.parametrize("values, s, p", [(INSTANCE, S, P), (WIDE, 256, 20),
                                          (NO_PREDICTIONS, S, P)])
def test_records_equal_tensorflows_serialization_and_parse_to_the_same_values(
        feature_names, values, s, p):
    ours = tfrecord_io.serialize_instance(**values, max_seq_length=s, max_predictions_per_seq=p,
                                          feature_names=feature_names)
    theirs = tf_example(feature_names, values, s, p)
    assert ours == theirs.SerializeToString(deterministic=True)
    assert tf.train.Example.FromString(ours) == theirs
    spec = tfrecord_io.parse_spec(s, p, feature_names)
    parsed = tf.io.parse_single_example(ours, spec)
    expected = tf.io.parse_single_example(theirs.SerializeToString(), spec)
    assert sorted(parsed) == sorted(expected)
    for name in spec:
        np.testing.assert_array_equal(parsed[name].numpy(), expected[name].numpy(), err_msg=name)
    names = tfrecord_io.FEATURE_NAMES[feature_names]
    np.testing.assert_array_equal(parsed[names["input_ids"]][:len(values["input_ids"])],
                                  values["input_ids"])


def test_plain_shards_are_byte_identical_to_tensorflows_writer(tmp_path):
    records = [serialize(masked_lm_ids=[i, 2 * i]) for i in range(5)] + [b"", b"x" * 300]
    ours = str(tmp_path / "ours.tfrecord")
    with tfrecord_io.ShardedRecordWriter([ours]) as writer:
        for record in records:
            writer.write(record)
    theirs = str(tmp_path / "theirs.tfrecord")
    with tf.io.TFRecordWriter(theirs) as writer:
        for record in records:
            writer.write(record)
    with open(ours, "rb") as a, open(theirs, "rb") as b:
        assert a.read() == b.read()
    # TensorFlow's reader checks both CRCs of every record.
    assert [r.numpy() for r in tf.data.TFRecordDataset(ours)] == records
    assert len(tfrecord_io.frame_record(b"abc")) == 3 + 16
    assert tfrecord_io.frame_records(records) == [tfrecord_io.frame_record(r) for r in records]


def test_gzip_shards_read_back_and_are_deterministic(tmp_path):
    records = [serialize(masked_lm_ids=[i, i]) for i in range(50)]
    paths = [str(tmp_path / "a.tfrecord.gz"), str(tmp_path / "b.tfrecord.gz")]
    for path in paths:
        with tfrecord_io.ShardedRecordWriter([path], "GZIP") as writer:
            for record in records:
                writer.write(record)
    assert [r.numpy() for r in tf.data.TFRecordDataset(paths[0], "GZIP")] == records
    # No file name or time in the gzip header: equal records, equal bytes.
    with open(paths[0], "rb") as a, open(paths[1], "rb") as b:
        assert a.read() == b.read()


def test_writing_records_does_not_import_tensorflow(tmp_path):
    # A fresh interpreter: the test process itself has TensorFlow loaded.
    code = (
        "import sys\n"
        "import bert_tf.data.pretraining.create_pretraining_data\n"
        "from bert_tf.data.pretraining import tfrecord_io\n"
        f"with tfrecord_io.ShardedRecordWriter([{str(tmp_path / 'x.tfrecord.gz')!r}], 'GZIP') "
        "as w:\n"
        "    w.write(b'abc')\n"
        f"print({LOADED_FRAMEWORKS})\n")
    result = run_fresh(code, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / "x.tfrecord.gz"),
                                                       "GZIP")] == [b"abc"]


@pytest.mark.parametrize("first_import", [
    "import bert_tf.data.pretraining.record_dataset",
    "import bert_tf.data.pretraining.text_dataset",
    "from bert_tf.data.pretraining.record_dataset import expand_input_patterns",
    "import bert_tf.data",
])
def test_package_exports_stay_the_functions_whatever_is_imported_first(repo_root, first_import):
    # The package exports the pipelines as functions; no submodule import may replace them.
    code = (
        f"{first_import}\n"
        "import bert_tf.data\n"
        "from bert_tf.data import pretraining_dataset, text_pretraining_dataset\n"
        "import bert_tf.data.pretraining.record_dataset\n"
        "print(type(pretraining_dataset).__name__, pretraining_dataset.__module__,\n"
        "      bert_tf.data.pretraining_dataset is pretraining_dataset,\n"
        "      text_pretraining_dataset.__module__)\n")
    # A process that has imported no bert_tf module (forked from a server that imported only
    # TensorFlow and Keras: tests/zygote.py), so `first_import` really comes first.
    env = dict(os.environ, PYTHONPATH=repo_root)
    result = subprocess.run([zygote.shared_python(env), "-c", code], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["function", "bert_tf.data.pretraining.record_dataset", "True",
                                     "bert_tf.data.pretraining.text_dataset"]
