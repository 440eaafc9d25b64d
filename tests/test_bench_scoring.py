"""tools/bench_scoring.py: the one scorer of pre-trained encoders the time_to_quality case and
the recipe ablations use (fixed masks, the linear probe, the representation statistics, the
classification set) on small inputs whose answers are known."""

import os
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))

import bench_scoring  # noqa: E402

from bert_tf.text import WordpieceTokenizer  # noqa: E402

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]


def test_fixed_masks_are_the_same_for_every_call_and_mask_only_text():
    tokenizer = WordpieceTokenizer(TOKENS)
    ids = list(range(5, 100)) * 8
    first = bench_scoring.fixed_masks(ids, tokenizer, max_seq_length=32, max_rows=10)
    again = bench_scoring.fixed_masks(ids, tokenizer, max_seq_length=32, max_rows=10)
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])
    inputs, positions = first["input_word_ids"], first["masked_lm_positions"]
    # 760 ids in rows of 30 pieces: 25 rows, of which at most 10; P = round(0.15 * 30) = 4.
    assert inputs.shape == (10, 32) and positions.shape == (10, 4)
    assert (inputs[:, 0] == tokenizer.cls_id).all() and (inputs[:, -1] == tokenizer.sep_id).all()
    assert ((positions >= 1) & (positions <= 30)).all()
    assert all(len(set(row)) == 4 for row in positions)
    # The originals are the text's ids at those positions: row r holds ids[30 r: 30 r + 30].
    for r in range(10):
        np.testing.assert_array_equal(first["masked_lm_ids"][r],
                                      np.array(ids[30 * r:30 * r + 30])[positions[r] - 1])
    masked = np.take_along_axis(inputs, positions, 1)
    # 80% [MASK], 10% random, 10% kept, of 40 positions: most are [MASK], and every position
    # outside the masks keeps its id.
    assert (masked == tokenizer.mask_id).mean() > 0.5
    unmasked = np.ones_like(inputs, bool)
    np.put_along_axis(unmasked, positions, False, 1)
    rows = np.array([[tokenizer.cls_id] + ids[30 * r:30 * r + 30] + [tokenizer.sep_id]
                     for r in range(10)])
    np.testing.assert_array_equal(inputs[unmasked], rows[unmasked])


def test_probe_reads_a_linearly_separable_class_and_not_noise():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, len(bench_scoring.LABELS), 500)
    centres = rng.normal(size=(len(bench_scoring.LABELS), 16))
    features = centres[labels] + 0.3 * rng.normal(size=(500, 16))
    assert bench_scoring.probe_accuracy(features[:400], labels[:400], features[400:],
                                        labels[400:]) > 0.95
    noise = rng.normal(size=(500, 16))
    chance = bench_scoring.probe_accuracy(noise[:400], labels[:400], noise[400:], labels[400:])
    assert chance < 0.4  # 5 classes: 0.2 expected


def test_representation_stats_of_collapsed_and_spread_vectors():
    rng = np.random.default_rng(0)
    common = rng.normal(size=64)
    collapsed = bench_scoring.representation_stats(common + 1e-3 * rng.normal(size=(200, 64)))
    spread = bench_scoring.representation_stats(rng.normal(size=(200, 64)))
    assert collapsed["mean_cosine"] > 0.99
    assert abs(spread["mean_cosine"]) < 0.05
    # Isotropic noise of 64 dimensions: an effective rank near 64; a rank-1 set: 1.
    assert spread["effective_rank"] > 50
    line = np.outer(rng.normal(size=200), common)
    assert bench_scoring.representation_stats(line)["effective_rank"] == pytest.approx(1, abs=0.01)


def test_classification_split_is_stratified_and_seeded():
    rows = [(f"text {i}", bench_scoring.LABELS[i % 5]) for i in range(100)]
    train, dev = bench_scoring.split_classification(rows, dev_fraction=0.3)
    assert (train, dev) == bench_scoring.split_classification(rows, dev_fraction=0.3)
    assert len(dev) == 30 and len(train) == 70 and not set(train) & set(dev)
    assert sorted(label for _, label in dev) == sorted(bench_scoring.LABELS * 6)


def test_topic_texts_are_stdlib_docstrings_labelled_by_module_topic():
    rows = bench_scoring.topic_texts()
    labels = dict(rows)
    assert len(labels) == len(rows) > 1500
    assert {label for _, label in rows} == set(bench_scoring.LABELS)
    import math

    assert labels[bench_scoring.first_paragraph(math.floor.__doc__)] == "numbers"
    assert all(5 <= len(text.split()) <= 60 for text, _ in rows)
