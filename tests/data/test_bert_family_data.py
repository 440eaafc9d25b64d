"""BERT-family data: sentence-order pairs, SpanBERT span masks, ALBERT n-gram masks and RoBERTa
full-sentence packing, offline (create_pretraining_data, local and Beam) and in tf.data (dynamic
masking)."""

import collections
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining import create_pretraining_data as cpd
from bert_tf.data import pretraining_dataset
from bert_tf.data.pretraining import tfrecord_io
from bert_tf.data import text_pretraining_dataset
from bert_tf.data.pretraining.demo_corpus import format_documents, pydoc_documents
from bert_tf.data.pretraining.masking_recipe import MaskingRecipe
from bert_tf.jobs.pretraining_data import PretrainingDataConfig

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, CLS, SEP, MASK = 0, 2, 3, 4


@pytest.fixture(scope="module")
def numbered(tmp_path_factory):
    """Documents whose words are t0, t1, ... in text order, each its own vocabulary id, so a
    token's id says where in the corpus it stands (id - 5 = its word number)."""
    root = tmp_path_factory.mktemp("numbered")
    rng = np.random.default_rng(0)
    documents, n = [], 0
    for _ in range(150):
        document = []
        for _ in range(rng.integers(2, 8)):
            length = int(rng.integers(2, 12))
            document.append(" ".join(f"t{n + i}" for i in range(length)))
            n += length
        documents.append(document)
    (root / "corpus.txt").write_text(format_documents(documents), encoding="utf-8")
    (root / "vocab.txt").write_text("\n".join(SPECIALS + [f"t{i}" for i in range(n)]) + "\n")
    sentence_starts, doc_of_word = set(), []
    n = 0
    for d, document in enumerate(documents):
        for sentence in document:
            sentence_starts.add(n)
            n += len(sentence.split())
            doc_of_word += [d] * len(sentence.split())
    return {"text": str(root / "corpus.txt"), "vocab": str(root / "vocab.txt"),
            "sentence_starts": sentence_starts, "doc_of_word": np.array(doc_of_word),
            "num_words": n, "root": root}


@pytest.fixture(scope="module")
def prose(tmp_path_factory):
    """The Python reference manual with a small vocabulary: rarer words split into pieces."""
    root = tmp_path_factory.mktemp("prose")
    documents = pydoc_documents()[:80]
    (root / "corpus.txt").write_text(format_documents(documents), encoding="utf-8")
    words = collections.Counter(w for doc in documents for sentence in doc
                                for w in re.findall(r"[a-z]+", sentence.lower()))
    chars = sorted(set("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?()[]{}'\"-_=+*/\\<>@#$%^&|~`"))
    tokens = SPECIALS + chars + ["##" + c for c in chars] + [
        w for w, _ in words.most_common(700) if len(w) > 1]
    (root / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return {"text": str(root / "corpus.txt"), "vocab": str(root / "vocab.txt"),
            "is_piece": np.array([t.startswith("##") for t in tokens]), "root": root}


def read(paths, seq, pred, span_boundaries=False):
    spec = tfrecord_io.parse_spec(seq, pred, span_boundaries=span_boundaries)
    parsed = [tf.io.parse_single_example(r, spec)
              for r in tf.data.TFRecordDataset(paths)]
    got = {k: np.stack([p[k].numpy() for p in parsed]) for k in spec}
    got["input_word_ids"] = got.pop("input_ids")
    got["next_sentence_labels"] = got["next_sentence_labels"][:, 0]
    return got


def collect(ds, num_batches=None):
    parts = collections.defaultdict(list)
    for batch in (ds if num_batches is None else ds.take(num_batches)):
        for name, value in batch.items():
            parts[name].append(value.numpy())
    return {name: np.concatenate(v) for name, v in parts.items()}


def unmask(got):
    ids = got["input_word_ids"].copy()
    for i, (positions, labels, weights) in enumerate(zip(
            got["masked_lm_positions"], got["masked_lm_ids"], got["masked_lm_weights"])):
        k = int(weights.sum())
        ids[i, positions[:k]] = labels[:k]
    return ids


def check_sentence_order(got):
    """Label 0: A's words come before B's in the text; label 1: after. Returns the labels."""
    original = unmask(got)
    for i, label in enumerate(got["next_sentence_labels"]):
        length = got["input_mask"][i].sum()
        seps = np.flatnonzero(original[i, :length] == SEP)
        assert len(seps) == 2 and seps[1] == length - 1
        a, b = original[i, 1:seps[0]], original[i, seps[0] + 1:length - 1]
        assert len(a) and len(b)
        # Each segment is contiguous text; the pair is adjacent text, in order or swapped.
        for segment in (a, b):
            np.testing.assert_array_equal(np.diff(segment), 1)
        first, second = (a, b) if label == 0 else (b, a)
        assert first.max() < second.min(), (i, label, a, b)
    return got["next_sentence_labels"]


def check_spans(got, is_piece):
    """Every span is masked whole, of whole words, with unmasked boundaries; returns the words
    per span and the masked fraction of real non-special tokens."""
    original = unmask(got)
    words_per_span, masked, candidates = [], 0, 0
    for i in range(len(original)):
        k = int(got["masked_lm_weights"][i].sum())
        positions = set(got["masked_lm_positions"][i, :k].tolist())
        length = got["input_mask"][i].sum()
        row = original[i]
        candidates += int(((row[:length] != CLS) & (row[:length] != SEP)).sum())
        masked += k
        spans = set(zip(got["span_left_boundaries"][i, :k].tolist(),
                        got["span_right_boundaries"][i, :k].tolist()))
        covered = set()
        for left, right in spans:
            inside = set(range(left + 1, right))
            assert inside and inside <= positions, (i, left, right)
            assert left not in positions and right not in positions  # boundaries stay visible
            assert not np.isin(row[left + 1:right], [CLS, SEP]).any()  # never across [SEP]
            assert not is_piece[row[left + 1]] or row[left] in (CLS, SEP)  # at a word start
            assert not is_piece[row[right]]  # ends at a word end
            covered |= inside
            words_per_span.append(int((~is_piece[row[left + 1:right]]).sum()))
        assert covered == positions
    return np.array(words_per_span), masked / candidates


def ngram_words(got, is_piece):
    """Words per n-gram of n-gram-masked rows (no boundaries recorded: n-grams never touch, so
    each run of consecutive masked positions is one); checks each is whole words inside one
    segment. Returns the words per n-gram and the masked fraction of real non-special
    tokens."""
    original = unmask(got)
    words_per_ngram, masked, candidates = [], 0, 0
    for i in range(len(original)):
        k = int(got["masked_lm_weights"][i].sum())
        positions = got["masked_lm_positions"][i, :k]
        length = got["input_mask"][i].sum()
        row = original[i]
        candidates += int(((row[:length] != CLS) & (row[:length] != SEP)).sum())
        masked += k
        for run in np.split(positions, np.flatnonzero(np.diff(positions) != 1) + 1):
            first, last = run[0], run[-1]
            assert row[first - 1] in (CLS, SEP) or not is_piece[row[first]], (i, run)
            assert not is_piece[row[last + 1]], (i, run)  # ends at a word end
            assert not np.isin(row[first:last + 1], [CLS, SEP]).any()
            words_per_ngram.append(int((~is_piece[row[first:last + 1]]).sum()))
    return np.array(words_per_ngram), masked / candidates


# ALBERT's n-gram lengths with N = 3: p(n) = (1/n) / (1 + 1/2 + 1/3), mean 18/11 words.
NGRAM_SHARES = np.array([6, 3, 2]) / 11


def options(**overrides):
    values = dict(max_seq_length=64, max_predictions_per_seq=12, dupe_factor=2,
                  random_seed=5, documents_per_chunk=20)
    values.update(overrides)
    return cpd.PretrainingDataOptions(**values)


def test_sop_records_are_balanced_and_really_swapped(numbered, tmp_path):
    out = str(tmp_path / "sop.tfrecord")
    stats = cpd.create_pretraining_data(numbered["text"], [out], numbered["vocab"],
                                        options=options(sentence_order_prediction=True,
                                                        dupe_factor=4))
    got = read([out], 64, 12)
    labels = check_sentence_order(got)
    assert len(labels) == stats.instances > 500
    assert abs(labels.mean() - 0.5) < 0.07, labels.mean()
    assert stats.random_next == labels.sum()
    # B is never random text: both segments come from the same document.
    doc_of = numbered["doc_of_word"]
    original = unmask(got)
    same_doc = [len(set(doc_of[row[(row > 4)] - 5])) == 1 for row in original]
    assert all(same_doc)


def test_sop_in_the_dynamic_pipeline(numbered):
    got = collect(text_pretraining_dataset(
        numbered["text"], vocab_file=numbered["vocab"], do_lower_case=True, batch_size=16,
        recipe=MaskingRecipe(max_seq_length=32, max_predictions_per_seq=5,
                             sentence_order_prediction=True),
        seed=3, block_lines=256, is_training=False))
    labels = check_sentence_order(got)
    assert len(labels) >= 200 and abs(labels.mean() - 0.5) < 0.1, (len(labels), labels.mean())
    with pytest.raises(ValueError, match="sentence_order_prediction=True makes sentence pairs"):
        text_pretraining_dataset(numbered["text"], vocab_file=numbered["vocab"],
                                 do_lower_case=True, batch_size=4,
                                 recipe=MaskingRecipe(max_seq_length=64,
                                                      max_predictions_per_seq=12,
                                                      sentence_order_prediction=True),
                                 use_next_sentence_label=False)


def test_span_masks_offline_are_whole_word_spans_of_mean_3_8_words(prose, tmp_path):
    out = str(tmp_path / "spans.tfrecord")
    stats = cpd.create_pretraining_data(
        prose["text"], [out], prose["vocab"],
        options=options(max_seq_length=512, max_predictions_per_seq=80, dupe_factor=1,
                        short_seq_prob=0.0, do_span_mask=True))
    got = read([out], 512, 80, span_boundaries=True)
    words, _ = check_spans(got, prose["is_piece"])
    # The budget is the usual one: round(0.15 * tokens incl. [CLS]/[SEP]) per instance.
    lengths = got["input_mask"].sum(axis=1)
    np.testing.assert_array_equal(got["masked_lm_weights"].sum(axis=1),
                                  np.minimum(80, np.round(0.15 * lengths)))
    assert stats.predictions / stats.tokens == pytest.approx(0.15, abs=0.003)
    # Lengths are drawn with mean 3.8 words; the budget cuts each instance's last span.
    assert len(words) > 300
    assert 3.4 < words.mean() < 3.9, words.mean()
    assert words.max() == 10 and (words == 1).mean() > 0.15
    # The 80/10/10 replacement is decided per span: a span is all [MASK] or (but for a random
    # id that happens to be [MASK]) has none; per token, most multi-token spans would be mixed.
    mixed = []
    for i in range(len(got["input_word_ids"])):
        k = int(got["masked_lm_weights"][i].sum())
        by_span = collections.defaultdict(list)
        for p, left in zip(got["masked_lm_positions"][i, :k], got["span_left_boundaries"][i, :k]):
            by_span[left].append(got["input_word_ids"][i, p] == MASK)
        mixed += [len(set(flags)) > 1 for flags in by_span.values()]
    assert np.mean(mixed) < 0.01


def test_ngram_masks_offline_are_whole_word_ngrams_of_albert_lengths(prose, tmp_path):
    """--ngram_mask=3 with sentence-order pairs (ALBERT's recipe): whole-word n-grams of 1-3
    words in ALBERT's shares, the usual budget, plain records (no span boundaries)."""
    out = str(tmp_path / "ngrams.tfrecord")
    # The options as bert-tf-create-pretraining-data makes them from its flags.
    config = PretrainingDataConfig(max_seq_length=256, max_predictions_per_seq=40,
                                   dupe_factor=2, short_seq_prob=0.0, random_seed=5,
                                   documents_per_chunk=20, sentence_order_prediction=True,
                                   ngram_mask=3)
    stats = cpd.create_pretraining_data(prose["text"], [out], prose["vocab"],
                                        options=config.instance_options())
    first = next(iter(tf.data.TFRecordDataset(out))).numpy()
    assert set(tf.train.Example.FromString(first).features.feature) == set(
        tfrecord_io.parse_spec(256, 40))
    got = read([out], 256, 40)
    words, fraction = ngram_words(got, prose["is_piece"])
    assert stats.predictions / stats.tokens == pytest.approx(0.15, abs=0.005)
    assert len(words) > 1000 and words.max() == 3
    shares = np.bincount(words, minlength=4)[1:] / len(words)
    # The budget cuts each instance's last n-gram short, which adds a few 1- and 2-grams.
    np.testing.assert_allclose(shares, NGRAM_SHARES, atol=0.04)
    assert abs(fraction - 0.15) < 0.01


def test_ngram_mask_refusals_name_the_flags(prose, tmp_path):
    for overrides, message in [
            (dict(ngram_mask=3, do_span_mask=True),
             "--ngram_mask and --do_span_mask are two span-length distributions (ALBERT's "
             "and SpanBERT's): pass one of them."),
            (dict(ngram_mask=1),
             "--ngram_mask=1 must be 0 (off) or at least 2 (n-grams of 1 to N whole words; "
             "one word alone is --do_whole_word_mask).")]:
        with pytest.raises(ValueError) as error:
            cpd.create_pretraining_data(prose["text"], [str(tmp_path / "x.tfrecord")],
                                        prose["vocab"], options=options(**overrides))
        assert str(error.value) == message
        assert not (tmp_path / "x.tfrecord").exists()


def test_sop_with_spans_is_byte_identical_across_workers_and_on_beam(numbered, tmp_path):
    opts = options(sentence_order_prediction=True, do_span_mask=True, documents_per_chunk=8)
    outputs = {}
    for workers in (1, 2):
        out = str(tmp_path / f"w{workers}.tfrecord")
        cpd.create_pretraining_data(numbered["text"], [out], numbered["vocab"], options=opts,
                                    num_workers=workers)
        outputs[workers] = open(out, "rb").read()
    assert outputs[1] == outputs[2]
    pytest.importorskip("apache_beam")
    from bert_tf.data.pretraining import beam_pipeline

    beam_pipeline.run_beam_pipeline(
        numbered["text"], str(tmp_path / "beam"), numbered["vocab"], options=opts,
        num_shards=2, pipeline_args=["--direct_num_workers=1", "--direct_running_mode=in_memory"])
    local = [r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / "w1.tfrecord"))]
    beam = [r.numpy() for r in tf.data.TFRecordDataset(
        [beam_pipeline.shard_path(str(tmp_path / "beam"), i, 2) for i in range(2)])]
    assert sorted(beam) == sorted(local)


def test_reader_takes_records_with_and_without_span_boundaries(numbered, tmp_path):
    spans, plain = str(tmp_path / "spans.tfrecord"), str(tmp_path / "plain.tfrecord")
    cpd.create_pretraining_data(numbered["text"], [spans], numbered["vocab"],
                                options=options(do_span_mask=True))
    cpd.create_pretraining_data(numbered["text"], [plain], numbered["vocab"], options=options())
    kwargs = dict(batch_size=8, max_seq_length=64, max_predictions_per_seq=12,
                  is_training=False)
    with_spans = next(iter(pretraining_dataset(spans, span_boundaries=True, **kwargs)))
    written = read([spans], 64, 12, span_boundaries=True)
    for name in ("span_left_boundaries", "span_right_boundaries", "masked_lm_positions"):
        assert with_spans[name].dtype == tf.int32
        np.testing.assert_array_equal(with_spans[name], written[name][:8])
    for path in (spans, plain):
        batch = next(iter(pretraining_dataset(path, **kwargs)))
        assert "span_left_boundaries" not in batch
    with pytest.raises(ValueError) as error:
        pretraining_dataset(plain, span_boundaries=True, **kwargs)
    assert str(error.value) == (
        f'{plain}: the first record has no feature "span_left_boundaries" (expected int64_list '
        "of length 12 (max_predictions_per_seq)); the span-boundary objective needs records "
        "made with create_pretraining_data --do_span_mask.")


def test_span_masks_in_the_dynamic_pipeline(prose):
    ds = text_pretraining_dataset(
        prose["text"], vocab_file=prose["vocab"], do_lower_case=True, batch_size=16,
        recipe=MaskingRecipe(max_seq_length=256, max_predictions_per_seq=40, do_span_mask=True),
        seed=11, is_training=True, use_next_sentence_label=False)
    assert ds.element_spec["span_left_boundaries"] == tf.TensorSpec([16, 40], tf.int32)
    got = collect(ds, num_batches=4)
    words, fraction = check_spans(got, prose["is_piece"])
    assert fraction == pytest.approx(0.15, abs=0.005)
    assert 3.2 < words.mean() < 3.9, words.mean()
    kinds = []
    for i in range(len(got["input_word_ids"])):
        k = int(got["masked_lm_weights"][i].sum())
        now = got["input_word_ids"][i, got["masked_lm_positions"][i, :k]]
        kinds += [now[got["span_left_boundaries"][i, :k] == left].tolist()
                  for left in set(got["span_left_boundaries"][i, :k])]
    as_mask = np.mean([all(t == MASK for t in span) for span in kinds])
    assert abs(as_mask - 0.8) < 0.1, as_mask


def test_ngram_masks_in_the_dynamic_pipeline(prose, numbered):
    ds = text_pretraining_dataset(
        prose["text"], vocab_file=prose["vocab"], do_lower_case=True, batch_size=16,
        recipe=MaskingRecipe(max_seq_length=256, max_predictions_per_seq=40, ngram_mask=3),
        seed=11, is_training=True, use_next_sentence_label=False)
    assert "span_left_boundaries" not in ds.element_spec
    got = collect(ds, num_batches=6)
    words, fraction = ngram_words(got, prose["is_piece"])
    assert fraction == pytest.approx(0.15, abs=0.005)
    assert len(words) > 1000 and words.max() == 3
    shares = np.bincount(words, minlength=4)[1:] / len(words)
    np.testing.assert_allclose(shares, NGRAM_SHARES, atol=0.04)
    # Packed rows (short documents: several instances per row): each instance is masked with
    # its n-grams, then packed whole.
    packed = collect(text_pretraining_dataset(
        numbered["text"], vocab_file=numbered["vocab"], do_lower_case=True, batch_size=8,
        recipe=MaskingRecipe(max_seq_length=128, max_predictions_per_seq=40, ngram_mask=3,
                             pack_sequences=True),
        seed=11, is_training=False, use_next_sentence_label=True), num_batches=4)
    assert "span_left_boundaries" not in packed and packed["input_instance_ids"].max() > 1
    words, fraction = ngram_words(packed, np.zeros(numbered["num_words"] + 5, bool))
    assert words.max() == 3 and abs(fraction - 0.15) < 0.02


def test_ngram_masks_of_sentencepiece_words_in_the_dynamic_pipeline(prose):
    """Raw text tokenized in the graph by a SentencePiece model (ALBERT's layout: [CLS] 2,
    [SEP] 3, as here): the n-grams are whole words by ALBERT's rule for its pieces
    (SentencePieceTokenizer.continuation_ids), at ALBERT's rate."""
    import os

    from bert_tf.text import load_tokenizer

    model_file = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "text", "fixtures", "spiece.model")
    tokenizer = load_tokenizer(model_file)
    is_piece = np.zeros(tokenizer.vocab_size, bool)
    is_piece[sorted(tokenizer.continuation_ids())] = True
    got = collect(text_pretraining_dataset(
        prose["text"], vocab_file=model_file, do_lower_case=True, batch_size=16,
        recipe=MaskingRecipe(max_seq_length=128, max_predictions_per_seq=20, ngram_mask=3,
                             sentence_order_prediction=True),
        seed=11, is_training=True, use_next_sentence_label=True), num_batches=4)
    words, fraction = ngram_words(got, is_piece)
    assert words.max() == 3 and len(words) > 300 and abs(fraction - 0.15) < 0.02
    # Words of several pieces were masked whole.
    masked_ids = np.take_along_axis(unmask(got), got["masked_lm_positions"], axis=1)
    assert is_piece[masked_ids[got["masked_lm_weights"] > 0]].sum() > 50


def test_full_sentences_pack_whole_sentences_across_documents(numbered):
    got = collect(text_pretraining_dataset(
        numbered["text"], vocab_file=numbered["vocab"], do_lower_case=True, batch_size=8,
        recipe=MaskingRecipe(max_seq_length=32, max_predictions_per_seq=5), seed=3,
        block_lines=1000, is_training=False, use_next_sentence_label=False,
        full_sentences=True))
    original = unmask(got)
    starts, doc_of = numbered["sentence_starts"], numbered["doc_of_word"]
    np.testing.assert_array_equal(got["input_type_ids"], 0)
    previous_end, crossings = -1, 0
    lengths = got["input_mask"].sum(axis=1)
    for row, length in zip(original, lengths):
        assert row[0] == CLS and row[length - 1] == SEP
        body = row[1:length - 1]
        words = body[body != SEP] - 5
        # The text continues where the previous sequence stopped, at a sentence start.
        assert words[0] == previous_end + 1 and words[0] in starts
        np.testing.assert_array_equal(np.diff(words), 1)
        # An inner [SEP] stands exactly where the document changes.
        seps = np.flatnonzero(body == SEP)
        docs = doc_of[words]
        changes = np.flatnonzero(np.diff(docs)) + 1
        np.testing.assert_array_equal(seps - np.arange(len(seps)), changes)
        crossings += len(seps)
        previous_end = words[-1]
        # Full: the next sentence would not have fitted in the 30-token budget.
        following = previous_end + 1
        if following < numbered["num_words"]:
            next_len = min(s for s in starts | {numbered["num_words"]} if s > following) - following
            extra = int(doc_of[following] != doc_of[previous_end])
            assert len(body) + extra + next_len > 30
    assert crossings > 20
    assert previous_end + 1 > numbered["num_words"] - 8 * 30  # only the last partial batch lost
