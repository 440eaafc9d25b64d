"""Packed pre-training data: create_pretraining_data --pack_sequences, the packed reader, the
packed raw-text pipeline, and their bad-input errors."""

import collections
import itertools
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining import create_pretraining_data as cpd
from bert_tf.data.pretraining import demo_corpus
from bert_tf.data import pretraining_dataset
from bert_tf.data.pretraining import row_packing
from bert_tf.data import text_pretraining_dataset
from bert_tf.data.pretraining.masking_recipe import MaskingRecipe
from bert_tf.data.pretraining import tfrecord_io
from bert_tf.data.pretraining.record_dataset import record_layout
from bert_tf.text import build_vocab, write_vocab

SEQ, PRED, SLOTS = 64, 14, 6
CLS, SEP = 2, 3


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("packing_corpus")
    documents = demo_corpus.short_documents()[:120]
    (root / "a.txt").write_text(demo_corpus.format_documents(documents[:70]), encoding="utf-8")
    (root / "b.txt").write_text(demo_corpus.format_documents(documents[70:]), encoding="utf-8")
    write_vocab(build_vocab(str(root / "a.txt"), 1500, True), str(root / "vocab.txt"))
    return {"root": root, "pattern": f"{root / 'a.txt'},{root / 'b.txt'}",
            "vocab": str(root / "vocab.txt")}


def exact(message):
    return "^" + re.escape(message) + "$"


def options(**overrides):
    values = dict(max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=2,
                  random_seed=5, documents_per_chunk=30, do_whole_word_mask=True,
                  max_instances_per_row=SLOTS)
    values.update(overrides)
    return cpd.PretrainingDataOptions(**values)


def read(path):
    return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def values(example, name):
    feature = example.features.feature[name]
    return list(feature.int64_list.value or feature.float_list.value)


def unpacked_instances(records):
    """Each unpacked record as a hashable (ids, segments, positions, masked ids, label)."""
    out = []
    for record in records:
        e = tf.train.Example.FromString(record)
        n = int(sum(values(e, "input_mask")))
        m = int(sum(values(e, "masked_lm_weights")))
        out.append((tuple(values(e, "input_ids")[:n]), tuple(values(e, "segment_ids")[:n]),
                    tuple(values(e, "masked_lm_positions")[:m]),
                    tuple(values(e, "masked_lm_ids")[:m]), values(e, "next_sentence_labels")[0]))
    return out


def split_packed_row(record, spans=False):
    """The instances of a packed row, in the unpacked tuple form, after checking the row."""
    e = tf.train.Example.FromString(record)
    ids, mask = values(e, "input_ids"), values(e, "input_mask")
    instance_ids, segments = values(e, "instance_ids"), values(e, "segment_ids")
    m = int(sum(values(e, "masked_lm_weights")))
    positions, masked = values(e, "masked_lm_positions")[:m], values(e, "masked_lm_ids")[:m]
    k = int(sum(values(e, "next_sentence_weights")))
    starts, labels = values(e, "next_sentence_positions"), values(e, "next_sentence_labels")
    n = int(sum(mask))
    assert len(ids) == SEQ and mask == [1] * n + [0] * (SEQ - n)
    assert len(starts) == len(labels) == SLOTS and starts[k:] == [0] * (SLOTS - k)
    # Instance ids 1..k, each one contiguous run, 0 on padding; [CLS] at every start.
    assert instance_ids[n:] == [0] * (SEQ - n)
    runs = [key for key, _ in itertools.groupby(instance_ids[:n])]
    assert runs == list(range(1, k + 1))
    assert starts[:k] == [instance_ids.index(j) for j in range(1, k + 1)]
    assert all(ids[s] == CLS for s in starts[:k])
    ends = starts[1:k] + [n]
    out = []
    for j, (start, end) in enumerate(zip(starts[:k], ends)):
        assert ids[end - 1] == SEP
        inside = [i for i, p in enumerate(positions) if start <= p < end]
        if spans:
            for i in inside:
                for name in ("span_left_boundaries", "span_right_boundaries"):
                    assert start <= values(e, name)[i] < end
        out.append((tuple(ids[start:end]), tuple(segments[start:end]),
                    tuple(positions[i] - start for i in inside),
                    tuple(masked[i] for i in inside), labels[j]))
    # Every prediction lies inside some instance.
    assert sum(len(x[2]) for x in out) == m
    return out


@pytest.fixture(scope="module")
def packed_run(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("packed")
    unpacked_stats = cpd.create_pretraining_data(corpus["pattern"], str(out / "plain.tfrecord"),
                                                 corpus["vocab"], options=options())
    stats = cpd.create_pretraining_data(corpus["pattern"], str(out / "packed.tfrecord"),
                                        corpus["vocab"], options=options(pack_sequences=True))
    return {"dir": out, "stats": stats, "unpacked_stats": unpacked_stats,
            "plain": read(str(out / "plain.tfrecord")),
            "packed": read(str(out / "packed.tfrecord"))}


def test_packed_rows_hold_exactly_the_unpacked_instances(packed_run):
    packed = [x for record in packed_run["packed"] for x in split_packed_row(record)]
    plain = unpacked_instances(packed_run["plain"])
    assert len(plain) > 300
    assert collections.Counter(packed) == collections.Counter(plain)
    stats = packed_run["stats"]
    assert stats.instances == len(plain) and stats.rows == len(packed_run["packed"])
    assert stats.tokens == packed_run["unpacked_stats"].tokens


def test_real_token_fraction_at_128(corpus, tmp_path):
    fractions = {}
    for pack in (False, True):
        opts = options(max_seq_length=128, max_predictions_per_seq=24, dupe_factor=1,
                       max_instances_per_row=0, pack_sequences=pack)
        stats = cpd.create_pretraining_data(corpus["pattern"], str(tmp_path / f"{pack}.tfr"),
                                            corpus["vocab"], options=opts)
        assert stats.rows == len(read(str(tmp_path / f"{pack}.tfr")))
        fractions[pack] = stats.tokens / (stats.rows * 128)
    assert fractions[True] >= 0.85 and fractions[False] < 0.7, fractions


def test_span_masking_boundaries_stay_inside_their_instance(corpus, tmp_path):
    opts = options(pack_sequences=True, do_span_mask=True, feature_names="v2", dupe_factor=1)
    cpd.create_pretraining_data(corpus["pattern"], str(tmp_path / "s.tfrecord"),
                                corpus["vocab"], options=opts)
    records = read(str(tmp_path / "s.tfrecord"))
    # v2 names: input_word_ids / input_type_ids; the checks read the v1 names, so rename.
    for record in records:
        e = tf.train.Example.FromString(record)
        for v1, v2 in (("input_ids", "input_word_ids"), ("segment_ids", "input_type_ids")):
            e.features.feature[v1].CopyFrom(e.features.feature[v2])
        assert split_packed_row(e.SerializeToString(), spans=True)


def test_pack_instances_respects_every_limit():
    lengths = [60, 10, 30, 30, 50, 4, 64, 20, 20, 20, 20]
    preds = [9, 2, 5, 5, 8, 1, 10, 3, 3, 3, 3]
    rows = row_packing.pack_instances(lengths, preds, max_seq_length=64,
                                           max_instances_per_row=3, max_predictions_per_row=12)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    for row in rows:
        assert sum(lengths[i] for i in row) <= 64 and len(row) <= 3
        assert sum(preds[i] for i in row) <= 12
    # Longest first, each into the fullest row that still fits.
    assert rows == [[6], [0, 5], [4, 1], [2, 3], [7, 8, 9], [10]]


def test_packed_reader_gives_the_model_inputs(packed_run):
    path = str(packed_run["dir"] / "packed.tfrecord")
    assert record_layout(path) == (SEQ, PRED, SLOTS)
    assert record_layout(str(packed_run["dir"] / "plain.tfrecord")) is None
    batch = next(iter(pretraining_dataset(path, batch_size=4, max_seq_length=SEQ,
                                          max_predictions_per_seq=PRED, is_training=False,
                                          max_instances_per_row=SLOTS)))
    shapes = {k: (tuple(v.shape), v.dtype.name) for k, v in batch.items()}
    assert shapes == {
        "input_word_ids": ((4, SEQ), "int32"), "input_mask": ((4, SEQ), "int32"),
        "input_type_ids": ((4, SEQ), "int32"), "input_instance_ids": ((4, SEQ), "int32"),
        "masked_lm_positions": ((4, PRED), "int32"), "masked_lm_ids": ((4, PRED), "int32"),
        "masked_lm_weights": ((4, PRED), "float32"),
        "next_sentence_positions": ((4, SLOTS), "int32"),
        "next_sentence_labels": ((4, SLOTS), "int32"),
        "next_sentence_weights": ((4, SLOTS), "float32")}
    first = tf.train.Example.FromString(packed_run["packed"][0])
    np.testing.assert_array_equal(batch["input_instance_ids"][0], values(first, "instance_ids"))
    np.testing.assert_array_equal(batch["next_sentence_positions"][0],
                                  values(first, "next_sentence_positions"))


def test_packed_and_unpacked_files_given_to_the_wrong_reader(packed_run):
    packed = str(packed_run["dir"] / "packed.tfrecord")
    plain = str(packed_run["dir"] / "plain.tfrecord")
    with pytest.raises(ValueError, match=exact(
            f'{packed}: holds packed rows (feature "instance_ids", written by '
            "create_pretraining_data --pack_sequences) but unpacked records were expected; "
            "read it as packed (run_pretraining detects packed records by itself).")):
        pretraining_dataset(packed, batch_size=2, max_seq_length=SEQ,
                            max_predictions_per_seq=PRED)
    with pytest.raises(ValueError, match=exact(
            f'{plain}: holds unpacked records (no feature "instance_ids") but packed rows were '
            "expected (--pack_sequences); make them with create_pretraining_data "
            "--pack_sequences, or read the file as unpacked.")):
        pretraining_dataset(plain, batch_size=2, max_seq_length=SEQ,
                            max_predictions_per_seq=PRED, max_instances_per_row=SLOTS)


@pytest.mark.parametrize("instance_ids, starts, message", [
    ([1, 1, 1, 1, 1, 3, 3, 3, 3, 3], [0, 5],
     "input_instance_ids: row 0, position 5: id 3 follows 1 (expected 1 or 2: instance ids "
     "must be 1, 2, ... in order, each one contiguous run)"),
    ([1, 1, 1, 1, 1, 2, 2, 2, 2, 2], [0, 4],
     "next_sentence_positions [0, 4] (next_sentence_weights sum 2) do not match the starts "
     "[0, 5] of the 2 instances in instance_ids."),
])
def test_inconsistent_instance_ids_fail_up_front(tmp_path, instance_ids, starts, message):
    path = str(tmp_path / "bad.tfrecord")
    ids = [CLS, 7, SEP, 8, SEP] * 2
    row = tfrecord_io.serialize_packed_row(
        ids, [0, 0, 0, 1, 1] * 2, instance_ids, [1], [9], starts, [0, 1], max_seq_length=12,
        max_predictions_per_seq=2, max_instances_per_row=3)
    with tfrecord_io.ShardedRecordWriter([path]) as writer:
        writer.write(row)
    with pytest.raises(ValueError, match=exact(f"{path}: record 0: {message}")):
        pretraining_dataset(path, batch_size=1, max_seq_length=12, max_predictions_per_seq=2,
                            max_instances_per_row=3)


def test_packed_raw_text_pipeline(corpus):
    predictions = row_packing.default_max_predictions_per_row(SEQ, 0.15, SLOTS)
    ds = text_pretraining_dataset(
        corpus["pattern"], vocab_file=corpus["vocab"], do_lower_case=True, batch_size=8,
        recipe=MaskingRecipe(max_seq_length=SEQ, max_predictions_per_seq=predictions,
                             pack_sequences=True, max_instances_per_row=SLOTS),
        seed=3, is_training=False, pack_buffer_size=64)
    real = total = instances = 0
    for batch in ds:
        b = {k: v.numpy() for k, v in batch.items()}
        assert b["input_instance_ids"].shape == (8, SEQ)
        assert b["masked_lm_positions"].shape == (8, predictions)
        assert b["next_sentence_labels"].shape == (8, SLOTS)
        for r in range(8):
            ids, inst, mask = b["input_word_ids"][r], b["input_instance_ids"][r], b["input_mask"][r]
            n = int(mask.sum())
            assert (mask[:n] == 1).all() and (inst[n:] == 0).all()
            k = int(b["next_sentence_weights"][r].sum())
            starts = b["next_sentence_positions"][r][:k]
            assert inst[:n].max() == k and (np.diff(inst[:n]) >= 0).all()
            assert list(starts) == [int(np.argmax(inst == j)) for j in range(1, k + 1)]
            assert (ids[starts] == CLS).all()
            m = int(b["masked_lm_weights"][r].sum())
            positions = b["masked_lm_positions"][r][:m]
            assert (positions < n).all() and not np.isin(positions, starts).any()
            assert (np.diff(positions) > 0).all()
            # Each instance was masked on its own (at least one prediction each).
            for j in range(1, k + 1):
                assert ((inst[positions] == j).sum()) >= 1
            real += n
            instances += k
        total += 8 * SEQ
    assert real / total > 0.9 and instances > 200, (real / total, instances)


@pytest.mark.slow
def test_packed_output_is_byte_identical_for_any_number_of_workers(corpus, packed_run,
                                                                     tmp_path):
    cpd.create_pretraining_data(corpus["pattern"], str(tmp_path / "w2.tfrecord"),
                                corpus["vocab"], options=options(pack_sequences=True),
                                num_workers=2)
    assert ((tmp_path / "w2.tfrecord").read_bytes()
            == (packed_run["dir"] / "packed.tfrecord").read_bytes())


@pytest.mark.slow
def test_cli_packs_with_the_default_predictions_per_row(corpus, tmp_path):
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tool = os.path.join(repo, "tools", "create_pretraining_data.py")
    common = [sys.executable, tool, f"--input_file={corpus['pattern']}",
              f"--vocab_file={corpus['vocab']}", "--max_seq_length=128", "--dupe_factor=1"]
    env = dict(os.environ, PYTHONPATH=repo)
    proc = subprocess.run(common + [f"--output_file={tmp_path / 'p.tfrecord'}",
                                    "--pack_sequences"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # I = 128 // 16 = 8 and P = floor(128 * 0.15) + ceil(8 / 2) + 1 = 24.
    assert record_layout(str(tmp_path / "p.tfrecord")) == (128, 24, 8)
    assert "--pack_sequences: 24 masked positions per row (--max_predictions_per_seq)." \
        in proc.stderr
    proc = subprocess.run(common + [f"--output_file={tmp_path / 'u.tfrecord'}",
                                    "--max_instances_per_row=4"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0
    assert "--max_instances_per_row needs --pack_sequences." in proc.stderr
