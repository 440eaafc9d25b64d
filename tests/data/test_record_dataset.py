"""Tests for bert_tf.data.pretraining_dataset (pretraining/record_dataset.py): TFRecords as the
original writes them -> batches."""

import gzip
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import pretraining_dataset
from bert_tf.data.pretraining.record_dataset import expand_input_patterns, inspect_first_record

S, P = 16, 4
V1_NAMES = {"input_word_ids": "input_ids", "input_type_ids": "segment_ids"}


def make_example(index, seq_length=S, max_predictions=P):
    """One example's values (model names) derived from `index`, so a read-back is checkable."""
    n_real = 5 + index % (seq_length - 5)
    ids = [100 + index] + [(index * 7 + j) % 50 + 5 for j in range(1, n_real)]
    ids += [0] * (seq_length - n_real)
    mask = [1] * n_real + [0] * (seq_length - n_real)
    types = [0] * (n_real // 2) + [1] * (n_real - n_real // 2) + [0] * (seq_length - n_real)
    n_pred = 1 + index % max_predictions
    positions = list(range(1, n_pred + 1)) + [0] * (max_predictions - n_pred)
    lm_ids = [ids[p] for p in positions[:n_pred]] + [0] * (max_predictions - n_pred)
    weights = [1.0] * n_pred + [0.0] * (max_predictions - n_pred)
    return {
        "input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
        "masked_lm_positions": positions, "masked_lm_ids": lm_ids, "masked_lm_weights": weights,
        "next_sentence_labels": [index % 2],
    }


def serialize(values, names="v1", drop=(), overrides=None):
    """tf.train.Example bytes: every int as int64 and the weights as float, like the original."""
    feature = {}
    for name, value in values.items():
        disk = V1_NAMES.get(name, name) if names == "v1" else name
        if disk in drop:
            continue
        if name == "masked_lm_weights":
            feature[disk] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
        else:
            feature[disk] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
    feature.update(overrides or {})
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_records(path, indices, names="v1", **kwargs):
    records = [serialize(make_example(i), names) for i in indices]
    if path.endswith(".gz"):
        options = tf.io.TFRecordOptions(compression_type="GZIP")
    else:
        options = None
    with tf.io.TFRecordWriter(path, options) as writer:
        for record in records:
            writer.write(record)
    return path


def collect(ds):
    """All batches concatenated: dict name -> np.ndarray [N, ...]."""
    parts = {}
    for batch in ds:
        for name, value in batch.items():
            parts.setdefault(name, []).append(value.numpy())
    return {name: np.concatenate(v) for name, v in parts.items()}


def test_round_trip_both_name_sets_exact_values(tmp_path):
    f1 = write_records(str(tmp_path / "a.tfrecord"), range(0, 6), names="v1")
    f2 = write_records(str(tmp_path / "b.tfrecord"), range(6, 12), names="v2")
    ds = pretraining_dataset([f1, f2], batch_size=4, max_seq_length=S,
                             max_predictions_per_seq=P, is_training=False)
    spec = ds.element_spec
    assert spec["input_word_ids"] == tf.TensorSpec([4, S], tf.int32)
    assert spec["input_mask"] == tf.TensorSpec([4, S], tf.int32)
    assert spec["input_type_ids"] == tf.TensorSpec([4, S], tf.int32)
    assert spec["masked_lm_positions"] == tf.TensorSpec([4, P], tf.int32)
    assert spec["masked_lm_ids"] == tf.TensorSpec([4, P], tf.int32)
    assert spec["masked_lm_weights"] == tf.TensorSpec([4, P], tf.float32)
    assert spec["next_sentence_labels"] == tf.TensorSpec([4], tf.int32)
    got = collect(ds)
    assert len(got["input_word_ids"]) == 12  # 12 records, batches of 4, nothing dropped
    for i in range(12):
        want = make_example(i)
        for name, value in want.items():
            expected = np.asarray(value).reshape(got[name][i].shape)
            np.testing.assert_array_equal(got[name][i], expected, err_msg=f"{name}[{i}]")


def test_eval_drops_partial_last_batch_for_static_shapes(tmp_path):
    f = write_records(str(tmp_path / "a.tfrecord"), range(10))
    got = collect(pretraining_dataset(f, batch_size=4, max_seq_length=S, max_predictions_per_seq=P,
                                      is_training=False))
    np.testing.assert_array_equal(got["input_word_ids"][:, 0], 100 + np.arange(8))


def test_gzip_by_suffix_and_by_argument(tmp_path):
    gz = write_records(str(tmp_path / "a.tfrecord.gz"), range(4))
    got = collect(pretraining_dataset(gz, batch_size=2, max_seq_length=S,
                                      max_predictions_per_seq=P, is_training=False))
    np.testing.assert_array_equal(got["input_word_ids"][:, 0], [100, 101, 102, 103])
    renamed = str(tmp_path / "gzipped_no_suffix")
    os.rename(gz, renamed)
    with pytest.raises(ValueError, match="pass compression='GZIP'"):
        pretraining_dataset(renamed, batch_size=2, max_seq_length=S, max_predictions_per_seq=P)
    got = collect(pretraining_dataset(renamed, batch_size=2, max_seq_length=S,
                                      max_predictions_per_seq=P, is_training=False,
                                      compression="GZIP"))
    np.testing.assert_array_equal(got["input_word_ids"][:, 0], [100, 101, 102, 103])
    with gzip.open(renamed, "rb") as f:  # really GZIP on disk
        assert len(f.read()) > 0


def test_globs_comma_lists_and_lists_expand_in_order(tmp_path):
    for name in ("x-1.tfrecord", "x-0.tfrecord", "y.tfrecord"):
        write_records(str(tmp_path / name), range(1))
    x, y = str(tmp_path / "x-*.tfrecord"), str(tmp_path / "y.tfrecord")
    want = [str(tmp_path / "x-0.tfrecord"), str(tmp_path / "x-1.tfrecord"), y]
    assert expand_input_patterns(f"{x},{y}") == want
    assert expand_input_patterns([x, y, y]) == want
    assert expand_input_patterns(f" {x} , {y} ,") == want


def test_empty_glob_names_the_pattern(tmp_path):
    pattern = str(tmp_path / "nothing-*.tfrecord")
    with pytest.raises(ValueError) as e:
        pretraining_dataset(pattern, batch_size=2, max_seq_length=S, max_predictions_per_seq=P)
    assert str(e.value) == f'No files match input pattern "{pattern}".'


def test_training_is_deterministic_under_seed_and_shuffles(tmp_path):
    files = [write_records(str(tmp_path / f"s{k}.tfrecord"), range(10 * k, 10 * k + 10))
             for k in range(3)]

    def first_ids(seed):
        ds = pretraining_dataset(files, batch_size=5, max_seq_length=S, max_predictions_per_seq=P,
                                 seed=seed, shuffle_buffer_size=8)
        return np.concatenate([b["input_word_ids"][:, 0].numpy() for b in ds.take(12)])

    a, b, c = first_ids(1), first_ids(1), first_ids(2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # 60 ids span two epochs of 30 records (epochs overlap a little through the buffer).
    assert set(a.tolist()) == set(100 + np.arange(30))
    assert max(np.bincount(a - 100)) <= 3
    assert a[:30].tolist() != sorted(a[:30].tolist())


def _context(num_pipelines, pipeline_id, replicas):
    return tf.distribute.InputContext(num_input_pipelines=num_pipelines,
                                      input_pipeline_id=pipeline_id,
                                      num_replicas_in_sync=replicas)


def test_input_context_shards_files_and_uses_per_replica_batch(tmp_path):
    files = [write_records(str(tmp_path / f"f{k}.tfrecord"), range(4 * k, 4 * k + 4))
             for k in range(4)]
    seen = []
    for pipeline_id in range(2):
        ds = pretraining_dataset(files, batch_size=8, max_seq_length=S, max_predictions_per_seq=P,
                                 is_training=False, input_context=_context(2, pipeline_id, 4))
        assert ds.element_spec["input_word_ids"].shape == (2, S)  # 8 global / 4 replicas
        seen.append(set(collect(ds)["input_word_ids"][:, 0].tolist()))
    assert seen[0].isdisjoint(seen[1])
    assert seen[0] | seen[1] == set(100 + np.arange(16))


def test_input_context_shards_records_when_fewer_files_than_pipelines(tmp_path):
    f = write_records(str(tmp_path / "one.tfrecord"), range(12))
    seen = []
    for pipeline_id in range(3):
        ds = pretraining_dataset(f, batch_size=9, max_seq_length=S, max_predictions_per_seq=P,
                                 seed=0, input_context=_context(3, pipeline_id, 3))
        assert ds.element_spec["input_word_ids"].shape == (3, S)
        # 60 draws: the shuffle buffer spans several repeats of the shard, so 12 draws could
        # miss one of its records (p ~ 0.13, depending on the global seed earlier tests set).
        ids = np.concatenate([b["input_word_ids"][:, 0].numpy() for b in ds.take(20)])
        seen.append(set(ids.tolist()))
    assert all(len(s) == 4 for s in seen)  # 4 records per shard, repeated
    assert seen[0] | seen[1] | seen[2] == set(100 + np.arange(12))


def test_nsp_off_does_not_need_labels_and_yields_zeros(tmp_path):
    path = str(tmp_path / "nolabel.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for i in range(4):
            w.write(serialize(make_example(i), "v2", drop=("next_sentence_labels",)))
    with pytest.raises(ValueError, match='no feature "next_sentence_labels"'):
        pretraining_dataset(path, batch_size=2, max_seq_length=S, max_predictions_per_seq=P)
    got = collect(pretraining_dataset(path, batch_size=2, max_seq_length=S,
                                      max_predictions_per_seq=P, is_training=False,
                                      use_next_sentence_label=False))
    np.testing.assert_array_equal(got["next_sentence_labels"], [0, 0, 0, 0])


def _write_one(path, record):
    with tf.io.TFRecordWriter(path) as w:
        w.write(record)
    return path


def test_wrong_sequence_length_names_file_feature_and_flag(tmp_path):
    path = write_records(str(tmp_path / "len16.tfrecord"), range(2))
    with pytest.raises(ValueError) as e:
        pretraining_dataset(path, batch_size=2, max_seq_length=32, max_predictions_per_seq=P)
    assert str(e.value) == (f'{path}: feature "input_ids" has length 16, expected int64_list of '
                            "length 32 (max_seq_length).")
    with pytest.raises(ValueError) as e:
        pretraining_dataset(path, batch_size=2, max_seq_length=S, max_predictions_per_seq=20)
    assert str(e.value) == (f'{path}: feature "masked_lm_positions" has length {P}, expected '
                            "int64_list of length 20 (max_predictions_per_seq).")


def test_missing_feature_names_file_and_feature(tmp_path):
    path = _write_one(str(tmp_path / "m.tfrecord"),
                      serialize(make_example(0), "v1", drop=("masked_lm_ids",)))
    with pytest.raises(ValueError) as e:
        pretraining_dataset(path, batch_size=1, max_seq_length=S, max_predictions_per_seq=P)
    assert str(e.value) == (f'{path}: the first record has no feature "masked_lm_ids" '
                            "(expected int64_list of length 4 (max_predictions_per_seq)).")


def test_wrong_type_names_file_feature_and_kinds(tmp_path):
    weights_as_ints = tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * P))
    path = _write_one(str(tmp_path / "t.tfrecord"), serialize(
        make_example(0), "v1", overrides={"masked_lm_weights": weights_as_ints}))
    with pytest.raises(ValueError) as e:
        pretraining_dataset(path, batch_size=1, max_seq_length=S, max_predictions_per_seq=P)
    assert str(e.value) == (f'{path}: feature "masked_lm_weights" is a int64_list, expected '
                            "float_list of length 4 (max_predictions_per_seq).")


def test_no_input_ids_under_either_name(tmp_path):
    path = _write_one(str(tmp_path / "n.tfrecord"),
                      serialize(make_example(0), "v1", drop=("input_ids",)))
    with pytest.raises(ValueError) as e:
        pretraining_dataset(path, batch_size=1, max_seq_length=S, max_predictions_per_seq=P)
    assert str(e.value).startswith(
        f"{path}: the first record has neither input_ids (original names) nor input_word_ids "
        "(v2 names); found features ['input_mask',")


def test_empty_file_and_garbage_file(tmp_path):
    empty = str(tmp_path / "empty.tfrecord")
    open(empty, "wb").close()
    with pytest.raises(ValueError) as e:
        pretraining_dataset(empty, batch_size=1, max_seq_length=S, max_predictions_per_seq=P)
    assert str(e.value) == (f"{empty}: holds no records (expected tf.train.Example pre-training "
                            "records).")
    garbage = str(tmp_path / "garbage.tfrecord")
    with open(garbage, "wb") as f:
        f.write(b"this is not a tfrecord file at all, just some text" * 3)
    with pytest.raises(ValueError, match=f"{garbage}: not a readable TFRecord file"):
        pretraining_dataset(garbage, batch_size=1, max_seq_length=S, max_predictions_per_seq=P)


def test_record_that_is_not_an_example(tmp_path):
    path = _write_one(str(tmp_path / "x.tfrecord"), b"\xff\xff not a protocol buffer")
    with pytest.raises(ValueError) as e:
        pretraining_dataset(path, batch_size=1, max_seq_length=S, max_predictions_per_seq=P)
    assert str(e.value) == f"{path}: the first record is not a tf.train.Example."


def test_vocab_size_check(tmp_path):
    path = write_records(str(tmp_path / "v.tfrecord"), range(2))
    assert inspect_first_record(path, max_seq_length=S, max_predictions_per_seq=P,
                                vocab_size=101) == "v1"
    with pytest.raises(ValueError) as e:
        pretraining_dataset(path, batch_size=1, max_seq_length=S, max_predictions_per_seq=P,
                            vocab_size=100)
    assert str(e.value) == (f'{path}: feature "input_ids" holds id 100, outside the vocabulary '
                            "[0, 100) (vocab_size); were the records made with another vocab?")


def test_bad_later_file_is_reported_before_reading(tmp_path):
    good = write_records(str(tmp_path / "a-good.tfrecord"), range(2), names="v2")
    bad = str(tmp_path / "b-bad.tfrecord")
    with tf.io.TFRecordWriter(bad) as w:
        w.write(serialize(make_example(0, seq_length=8), "v2"))
    with pytest.raises(ValueError) as e:
        pretraining_dataset(str(tmp_path / "*.tfrecord"), batch_size=1, max_seq_length=S,
                            max_predictions_per_seq=P)
    assert str(e.value) == (f'{bad}: feature "input_word_ids" has length 8, expected int64_list '
                            "of length 16 (max_seq_length).")
    assert inspect_first_record(good, max_seq_length=S, max_predictions_per_seq=P) == "v2"


def test_out_of_vocab_id_in_a_later_record_is_named_when_parsed(tmp_path):
    # Record i starts with id 100 + i: the first record passes the eager check at vocab_size=101,
    # the second (id 101) must fail in the pipeline with the feature, file and vocab_size named.
    path = write_records(str(tmp_path / "v.tfrecord"), range(2))
    for is_training in (False, True):
        ds = pretraining_dataset(path, batch_size=2, max_seq_length=S, max_predictions_per_seq=P,
                                 vocab_size=101, is_training=is_training, seed=1)
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            collect(ds.take(1))
        message = e.value.message
        assert ("pretraining_dataset: feature input_word_ids holds an id outside the "
                "vocabulary [0, 101) (vocab_size); were the records made with another vocab? "
                "File and offending id:") in message
        assert path in message and "[101]" in message
    # In range everywhere: read as usual.
    got = collect(pretraining_dataset(path, batch_size=2, max_seq_length=S,
                                      max_predictions_per_seq=P, vocab_size=102,
                                      is_training=False))
    assert got["input_word_ids"][:, 0].tolist() == [100, 101]
