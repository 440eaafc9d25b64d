"""Tests for bert_tf.data.text_pretraining_dataset: raw text -> masked batches in tf.data."""

import collections
import dataclasses
import gzip
import logging
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import pretraining_dataset
from bert_tf.data import text_pretraining_dataset
from bert_tf.data.pretraining.demo_corpus import format_documents, pydoc_documents
from bert_tf.data.pretraining.masking import mask_batch
from bert_tf.data.pretraining.masking_recipe import MaskingRecipe
from bert_tf.text import BertTokenizerLayer

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, UNK, CLS, SEP, MASK = range(5)
S, P, B = 64, 12, 16
EXPECTED_SPEC = {
    "input_word_ids": tf.TensorSpec([B, S], tf.int32),
    "input_mask": tf.TensorSpec([B, S], tf.int32),
    "input_type_ids": tf.TensorSpec([B, S], tf.int32),
    "masked_lm_positions": tf.TensorSpec([B, P], tf.int32),
    "masked_lm_ids": tf.TensorSpec([B, P], tf.int32),
    "masked_lm_weights": tf.TensorSpec([B, P], tf.float32),
    "next_sentence_labels": tf.TensorSpec([B], tf.int32),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The Python reference manual (stdlib, offline) as a text corpus and a small WordPiece vocab.

    The vocab holds single characters and "##" characters plus the 700 most frequent words, so
    rarer words split into several pieces (whole-word masking has real multi-piece words).
    """
    root = tmp_path_factory.mktemp("corpus")
    documents = pydoc_documents()[:80]
    text_path = root / "corpus.txt"
    text_path.write_text(format_documents(documents), encoding="utf-8")
    words = collections.Counter(
        w for doc in documents for sentence in doc for w in re.findall(r"[a-z]+", sentence.lower()))
    chars = sorted(set("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?()[]{}'\"-_=+*/\\<>@#$%^&|~`"))
    vocab = SPECIALS + chars + ["##" + c for c in chars] + [
        w for w, _ in words.most_common(700) if len(w) > 1]
    vocab_path = root / "vocab.txt"
    vocab_path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return {"text": str(text_path), "vocab": str(vocab_path), "tokens": vocab,
            "documents": documents, "dir": root}


RECIPE_FIELDS = {f.name for f in dataclasses.fields(MaskingRecipe)}

def make(corpus, text_patterns="corpus", **overrides):
    """The pipeline over the corpus (or `text_patterns`) with small test settings."""
    kwargs = dict(vocab_file=corpus["vocab"], do_lower_case=True, batch_size=B, seed=7,
                  block_lines=512)
    recipe = dict(max_seq_length=S, max_predictions_per_seq=P)
    for name, value in overrides.items():
        (recipe if name in RECIPE_FIELDS else kwargs)[name] = value
    if text_patterns == "corpus":
        text_patterns = corpus["text"]
    return text_pretraining_dataset(text_patterns, recipe=MaskingRecipe(**recipe), **kwargs)


def collect(ds, num_batches=None):
    ds = ds if num_batches is None else ds.take(num_batches)
    parts = collections.defaultdict(list)
    for batch in ds:
        for name, value in batch.items():
            parts[name].append(value.numpy())
    return {name: np.concatenate(v) for name, v in parts.items()}


def unmask(got):
    """Input ids with the original tokens put back at the masked positions: [N, S]."""
    ids = got["input_word_ids"].copy()
    rows = np.arange(len(ids))[:, None].repeat(P, axis=1)
    real = got["masked_lm_weights"] > 0
    ids[rows[real], got["masked_lm_positions"][real]] = got["masked_lm_ids"][real]
    return ids


def check_invariants(got, tokens):
    """Structure every batch must have, whatever the mode."""
    ids, mask, types = got["input_word_ids"], got["input_mask"], got["input_type_ids"]
    positions, weights = got["masked_lm_positions"], got["masked_lm_weights"]
    original = unmask(got)
    lengths = mask.sum(axis=1)
    assert (lengths >= 3).all() and (lengths <= S).all()
    for i in range(len(ids)):
        n = lengths[i]
        assert (mask[i, :n] == 1).all() and (mask[i, n:] == 0).all()
        assert (ids[i, n:] == PAD).all() and (types[i, n:] == 0).all()
        assert original[i, 0] == CLS and original[i, n - 1] == SEP
        real = weights[i] > 0
        k = int(real.sum())
        assert (weights[i, :k] == 1).all() and (weights[i, k:] == 0).all()  # real ones first
        pos = positions[i, :k]
        assert (np.diff(pos) > 0).all(), "positions sorted and unique"
        assert (pos > 0).all() and (pos < n - 1).all(), "never [CLS], the last [SEP] or padding"
        assert not np.isin(original[i, pos], [CLS, SEP, PAD]).any(), "never a special token"
        assert (positions[i, k:] == 0).all() and (got["masked_lm_ids"][i, k:] == 0).all()
        untouched = np.ones(S, bool)
        untouched[pos] = False
        np.testing.assert_array_equal(ids[i, untouched], original[i, untouched])
    assert original.max() < len(tokens)


def test_element_spec_matches_the_tfrecord_reader(corpus, tmp_path):
    record = tmp_path / "one.tfrecord"
    ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))  # noqa: E731
    feature = {name: ints([0] * S) for name in ("input_ids", "input_mask", "segment_ids")}
    feature.update({name: ints([0] * P) for name in ("masked_lm_positions", "masked_lm_ids")})
    feature["masked_lm_weights"] = tf.train.Feature(float_list=tf.train.FloatList(value=[0.0] * P))
    feature["next_sentence_labels"] = ints([0])
    with tf.io.TFRecordWriter(str(record)) as writer:
        writer.write(tf.train.Example(
            features=tf.train.Features(feature=feature)).SerializeToString())
    reader = pretraining_dataset(str(record), batch_size=B, max_seq_length=S,
                                 max_predictions_per_seq=P)
    text = make(corpus)
    assert text.element_spec == reader.element_spec == EXPECTED_SPEC
    # A pure graph (no Python callbacks), so it can run on tf.data service workers / feed TPUs.
    graph = text._as_serialized_graph().numpy()
    assert b"FastWordpieceTokenizeWithOffsets" in graph
    assert b"PyFunc" not in graph and b"EagerPyFunc" not in graph


def test_nsp_pairs_statistics_and_structure(corpus):
    got = collect(make(corpus, is_training=False))
    tokens = corpus["tokens"]
    check_invariants(got, tokens)
    n = len(got["input_word_ids"])
    assert n >= 20 * B  # about one pair per 3 sentences of ~1900
    original = unmask(got)
    mask, types, labels = got["input_mask"], got["input_type_ids"], got["next_sentence_labels"]
    # Segments: [CLS] A [SEP] type 0, then B [SEP] type 1; exactly two [SEP], each segment real.
    for i in range(n):
        length = mask[i].sum()
        seps = np.flatnonzero(original[i, :length] == SEP)
        assert len(seps) == 2 and seps[1] == length - 1 and 1 < seps[0] < length - 2
        np.testing.assert_array_equal(types[i, :seps[0] + 1], 0)
        np.testing.assert_array_equal(types[i, seps[0] + 1:length], 1)
    # As the original: 50% random B, plus every one-sentence chunk.
    assert 0.45 <= labels.mean() <= 0.65, labels.mean()
    # Real continuations that were not truncated are contiguous text of one document.
    tokenizer = BertTokenizerLayer(corpus["vocab"])
    doc_streams = [" ".join(map(str, tokenizer(tf.constant(doc)).flat_values.numpy()))
                   for doc in corpus["documents"]]
    checked = 0
    for i in np.flatnonzero(labels == 0):
        length = mask[i].sum()
        if length >= S:  # maybe truncated
            continue
        seps = np.flatnonzero(original[i, :length] == SEP)
        a_b = np.concatenate([original[i, 1:seps[0]], original[i, seps[0] + 1:length - 1]])
        needle = " ".join(map(str, a_b))
        assert any(needle in stream for stream in doc_streams), i
        checked += 1
    assert checked >= 20
    # Random next sentences come from another document than A.
    from_other_doc = []
    for i in np.flatnonzero(labels == 1):
        length = mask[i].sum()
        seps = np.flatnonzero(original[i, :length] == SEP)
        a = " ".join(map(str, original[i, 1:seps[0]]))
        b = " ".join(map(str, original[i, seps[0] + 1:length - 1]))
        a_docs = {d for d, stream in enumerate(doc_streams) if a in stream}
        b_docs = {d for d, stream in enumerate(doc_streams) if b in stream}
        assert a_docs and b_docs
        from_other_doc.append(bool(b_docs - a_docs))
    assert np.mean(from_other_doc) > 0.9


def test_nsp_within_one_long_document(corpus, tmp_path):
    # A book-like corpus: one document longer than a block. Random next sentences then come from
    # the other half of the block, so labels stay balanced instead of all 0.
    sentences = [s for doc in corpus["documents"] for s in doc][:600]
    path = tmp_path / "book.txt"
    path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    got = collect(make(corpus, text_patterns=str(path), is_training=False, block_lines=300))
    check_invariants(got, corpus["tokens"])
    assert 0.4 <= got["next_sentence_labels"].mean() <= 0.75  # 50% + one-sentence chunks


def test_masking_statistics(corpus):
    ds = make(corpus, is_training=True, use_next_sentence_label=False)
    assert ds.element_spec == EXPECTED_SPEC
    got = collect(ds, num_batches=30)
    check_invariants(got, corpus["tokens"])
    original = unmask(got)
    candidates = (got["input_mask"] == 1) & ~np.isin(original, [CLS, SEP])
    weights = got["masked_lm_weights"]
    fraction = weights.sum() / candidates.sum()
    assert abs(fraction - 0.15) < 0.01, fraction
    # Per sequence: exactly min(P, max(1, round(0.15 * candidates))).
    want = np.minimum(P, np.maximum(1, np.round(0.15 * candidates.sum(axis=1))))
    np.testing.assert_array_equal(weights.sum(axis=1), want)
    real = weights > 0
    rows = np.arange(len(weights))[:, None].repeat(P, axis=1)[real]
    now = got["input_word_ids"][rows, got["masked_lm_positions"][real]]
    before = got["masked_lm_ids"][real]
    as_mask, kept = np.mean(now == MASK), np.mean(now == before)
    assert abs(as_mask - 0.8) < 0.03, as_mask
    assert abs(kept - 0.1) < 0.03, kept
    assert abs(1 - as_mask - kept - 0.1) < 0.03
    np.testing.assert_array_equal(got["next_sentence_labels"], 0)


def test_mlm_only_sequences_are_the_token_stream_cut_in_order(corpus):
    got = collect(make(corpus, is_training=False, use_next_sentence_label=False,
                       short_seq_prob=0.0))
    check_invariants(got, corpus["tokens"])
    original = unmask(got)
    np.testing.assert_array_equal(got["input_type_ids"], 0)
    tokenizer = BertTokenizerLayer(corpus["vocab"])
    lines = [s for doc in corpus["documents"] for s in doc]
    stream = tokenizer(tf.constant(lines)).flat_values.numpy()
    # One block (512 lines) -> full windows of S - 2 tokens, the block's last one shorter.
    body = np.concatenate([row[1:mask_len - 1] for row, mask_len in
                           zip(original, got["input_mask"].sum(axis=1))])
    np.testing.assert_array_equal(body, stream[:len(body)])
    assert len(body) > len(stream) - (B + 4) * (S - 2)  # only the partial last batch is missing
    full = got["input_mask"].sum(axis=1) == S
    assert full.mean() > 0.9


def test_whole_word_masking_takes_every_piece(corpus):
    got = collect(make(corpus, is_training=False, use_next_sentence_label=False,
                       do_whole_word_mask=True), num_batches=20)
    check_invariants(got, corpus["tokens"])
    is_piece = np.array([t.startswith("##") for t in corpus["tokens"]])
    original = unmask(got)
    multi_piece_words = 0
    for i in range(len(original)):
        length = got["input_mask"][i].sum()
        chosen = np.zeros(S, bool)
        chosen[got["masked_lm_positions"][i][got["masked_lm_weights"][i] > 0]] = True
        for p in range(2, length - 1):
            if is_piece[original[i, p]] and original[i, p - 1] not in (CLS, SEP):
                assert chosen[p] == chosen[p - 1], (i, p)  # a word is taken whole or not at all
                multi_piece_words += chosen[p]
    assert multi_piece_words > 50
    fraction = got["masked_lm_weights"].sum() / (got["input_mask"].sum() - 2 * len(original))
    assert 0.12 < fraction <= 0.15, fraction


def test_same_seed_same_stream_new_masks_every_epoch(corpus, tmp_path):
    # 40 one-line documents of exactly S - 2 whole-word tokens: without NSP and short sequences
    # every line is one sequence, so a sequence can be followed from epoch to epoch.
    words = [t for t in corpus["tokens"][5:] if re.fullmatch("[a-z]{3,}", t)]
    lines = [" ".join(words[(7 * i + j) % len(words)] for j in range(S - 2)) for i in range(40)]
    path = tmp_path / "lines.txt"
    path.write_text("\n\n".join(lines) + "\n", encoding="utf-8")

    def run(seed):
        return collect(make(corpus, text_patterns=str(path), use_next_sentence_label=False,
                            short_seq_prob=0.0, seed=seed, batch_size=8, shuffle_buffer_size=16),
                       num_batches=25)  # 200 sequences = 5 epochs

    first, again, other = run(3), run(3), run(4)
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    assert not np.array_equal(first["masked_lm_positions"], other["masked_lm_positions"])
    masks_seen = collections.defaultdict(set)
    for row, positions in zip(unmask(first), first["masked_lm_positions"]):
        assert (row[1:S - 1] != PAD).all()  # one full line per sequence
        masks_seen[row.tobytes()].add(positions.tobytes())
    assert len(masks_seen) == 40
    # Every line seen >= 4 times, nearly always with a different mask each time.
    assert np.mean([len(m) >= 3 for m in masks_seen.values()]) > 0.9


def test_mask_batch_on_known_input():
    ids = np.array([[CLS, 10, 11, 12, 13, SEP, 14, 15, SEP, PAD],
                    [CLS, 20, 21, SEP, PAD, PAD, PAD, PAD, PAD, PAD]], np.int32)
    features = {"input_word_ids": tf.constant(ids), "input_mask": tf.constant((ids > 0) * 1)}
    out = mask_batch(features, tf.constant([1, 2], tf.int64), vocab_size=30, cls_id=CLS,
                     sep_id=SEP, mask_id=MASK, max_predictions_per_seq=3, masked_lm_prob=0.5)
    weights = out["masked_lm_weights"].numpy()
    np.testing.assert_array_equal(weights.sum(axis=1), [3, 1])  # min(3, round(6 * .5)), round(1)
    positions = out["masked_lm_positions"].numpy()
    for i in range(2):
        real = positions[i][weights[i] > 0]
        np.testing.assert_array_equal(out["masked_lm_ids"].numpy()[i][weights[i] > 0],
                                      ids[i, real])
        assert set(real) <= set(np.flatnonzero(~np.isin(ids[i], [CLS, SEP, PAD])))
    again = mask_batch(features, tf.constant([1, 2], tf.int64), vocab_size=30, cls_id=CLS,
                       sep_id=SEP, mask_id=MASK, max_predictions_per_seq=3, masked_lm_prob=0.5)
    np.testing.assert_array_equal(again["input_word_ids"], out["input_word_ids"])


def test_input_context_shards_files_with_per_replica_batch(corpus, tmp_path):
    documents = corpus["documents"]
    (tmp_path / "part-0.txt").write_text(format_documents(documents[0::2]), encoding="utf-8")
    with gzip.open(tmp_path / "part-1.txt.gz", "wt", encoding="utf-8") as f:  # read as GZIP
        f.write(format_documents(documents[1::2]))
    seen = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id,
                                             num_replicas_in_sync=2)
        ds = make(corpus, text_patterns=str(tmp_path / "part-*"), is_training=False,
                  use_next_sentence_label=False, input_context=context, batch_size=2 * B)
        assert ds.element_spec["input_word_ids"].shape == (B, S)
        seen.append({row.tobytes() for row in unmask(collect(ds))})
    assert len(seen[0]) > 50 and len(seen[1]) > 50
    assert seen[0].isdisjoint(seen[1])
    # Pipeline 1 read the GZIP file: its sequences are the odd documents' text.
    tokenizer = BertTokenizerLayer(corpus["vocab"])
    odd = tokenizer(tf.constant([s for doc in documents[1::2] for s in doc])).flat_values.numpy()
    odd_text = " ".join(map(str, odd))
    for row in map(lambda r: np.frombuffer(r, np.int32), seen[1]):
        body = row[1:np.flatnonzero(row == SEP)[-1]]
        assert " ".join(map(str, body)) in odd_text


def test_tfds_source_from_a_prepared_local_dataset(corpus, tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")

    class TinyPydocCorpus(tfds.core.GeneratorBasedBuilder):
        """Documents of the reference manual, one example per document."""

        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
                {"text": tfds.features.Text()}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for i, doc in enumerate(corpus["documents"][:40]):
                yield i, {"text": "\n".join(doc)}

    data_dir = str(tmp_path / "tfds")
    TinyPydocCorpus(data_dir=data_dir).download_and_prepare()
    got = collect(make(corpus, text_patterns=None, tfds_name="tiny_pydoc_corpus",
                       tfds_data_dir=data_dir, is_training=False, use_next_sentence_label=False,
                       short_seq_prob=0.0))
    check_invariants(got, corpus["tokens"])
    # TFDS shuffles examples when it prepares them: follow its order.
    texts = [ex["text"].numpy().decode() for ex in tfds.load(
        "tiny_pydoc_corpus", split="train", data_dir=data_dir, download=False)]
    assert sorted(texts) == sorted("\n".join(doc) for doc in corpus["documents"][:40])
    tokenizer = BertTokenizerLayer(corpus["vocab"])
    stream = tokenizer(tf.constant([line for text in texts for line in text.split("\n")]))
    body = np.concatenate([row[1:n - 1] for row, n in
                           zip(unmask(got), got["input_mask"].sum(axis=1))])
    np.testing.assert_array_equal(body, stream.flat_values.numpy()[:len(body)])
    with pytest.raises(ValueError, match='TFDS dataset "tiny_pydoc_corpus" .* is not prepared'):
        make(corpus, text_patterns=None, tfds_name="tiny_pydoc_corpus",
             tfds_data_dir=str(tmp_path / "empty"))

    class TinyBlankCorpus(TinyPydocCorpus):
        """Documents without any non-blank line: found when the dataset is built."""

        def _generate_examples(self):
            for i in range(3):
                yield i, {"text": "\n \n" * i}

    TinyBlankCorpus(data_dir=data_dir).download_and_prepare()
    with pytest.raises(ValueError) as e:
        make(corpus, text_patterns=None, tfds_name="tiny_blank_corpus", tfds_data_dir=data_dir)
    assert str(e.value) == ('text_pretraining_dataset: TFDS dataset "tiny_blank_corpus" (split '
                            '"train") has no text: every "text" is empty or blank.')


def test_argument_errors(corpus, tmp_path):
    pattern = str(tmp_path / "missing-*.txt")
    with pytest.raises(ValueError) as e:
        make(corpus, text_patterns=pattern)
    assert str(e.value) == f'No files match input pattern "{pattern}".'
    with pytest.raises(ValueError) as e:
        make(corpus, max_predictions_per_seq=S + 1)
    assert str(e.value) == f"max_predictions_per_seq={S + 1} must be in [1, max_seq_length={S}]."
    with pytest.raises(ValueError) as e:
        make(corpus, max_seq_length=4)
    assert str(e.value).startswith("max_seq_length=4 must be >= 5")
    with pytest.raises(ValueError, match=r"masked_lm_prob=0\.0 must be in \(0, 1\]"):
        make(corpus, masked_lm_prob=0.0)
    with pytest.raises(ValueError, match="Pass exactly one of text_patterns"):
        make(corpus, tfds_name="wikipedia")


def test_truncated_gzip_text_is_an_error_naming_the_file(corpus, tmp_path):
    # TextLineDataset ends silently at the cut: without the check the run trained on the part
    # before it. The cut is past the first 64 KiB the content check reads.
    whole = tmp_path / "whole.txt.gz"
    with gzip.open(whole, "wt", encoding="utf-8") as f:
        f.write(open(corpus["text"], encoding="utf-8").read() * 4)
    cut = tmp_path / "cut.txt.gz"
    data = whole.read_bytes()
    cut.write_bytes(data[:len(data) * 3 // 4])
    assert len(gzip.decompress(data)) > 2 * 65536
    with pytest.raises(ValueError) as e:
        make(corpus, text_patterns=f"{whole},{cut}")
    assert str(e.value) == (
        f"{cut}: cannot read it as gzip (Compressed file ended before the end-of-stream marker "
        "was reached); the file is truncated or corrupt.")
    assert next(iter(make(corpus, text_patterns=str(whole))))["input_word_ids"].shape == (B, S)


def test_text_without_any_line_is_an_error_when_built(corpus, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    blank = tmp_path / "blank.txt.gz"
    with gzip.open(blank, "wt", encoding="utf-8") as f:
        f.write("\n   \n\t\n\n")
    for is_training in (True, False):
        with pytest.raises(ValueError) as e:
            make(corpus, text_patterns=f"{empty},{blank}", is_training=is_training)
        assert str(e.value) == (
            f"text_pretraining_dataset: no text in {empty}, {blank}: every file is empty or "
            "holds only blank lines (expected one sentence per line, a blank line between "
            "documents).")
    # One file with text is enough; blank files beside it are fine.
    ds = make(corpus, text_patterns=f"{empty},{corpus['text']}", is_training=False)
    assert next(iter(ds))["input_word_ids"].shape == (B, S)


def test_a_line_of_unicode_whitespace_breaks_documents_as_in_the_records(tmp_path):
    """A line of only U+00A0 (HTML's &nbsp;), U+3000 or U+0085 is blank for
    create_pretraining_data (str.strip()), so a document break in raw text too: it merged two
    documents into one, with no [SEP] between them."""
    from bert_tf.data.pretraining.corpus_reading import iter_file_documents

    sentences = ["the first sentence .", "the second sentence .", "another document here .",
                 "and its end .", "a third one ."]
    text = tmp_path / "documents.txt"
    text.write_text("\n".join(sentences[:2] + ["\u00a0"] + sentences[2:4] + [" \u3000\x85 "]
                              + sentences[4:]) + "\n", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    tokens = SPECIALS + sorted({w for s in sentences for w in s.split()})
    vocab.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    documents = [lines for lines, _ in iter_file_documents(str(text)) if lines]
    assert documents == [sentences[:2], sentences[2:4], sentences[4:]]
    got = collect(text_pretraining_dataset(
        str(text), vocab_file=str(vocab), do_lower_case=True, batch_size=1,
        recipe=MaskingRecipe(max_seq_length=S, max_predictions_per_seq=1, masked_lm_prob=0.01),
        use_next_sentence_label=False, full_sentences=True, is_training=False))
    row = got["input_word_ids"][0]
    real = got["masked_lm_weights"][0] > 0
    row[got["masked_lm_positions"][0][real]] = got["masked_lm_ids"][0][real]
    assert " ".join(tokens[i] for i in row[:got["input_mask"][0].sum()]) == (
        "[CLS] the first sentence . the second sentence . [SEP] another document here . and "
        "its end . [SEP] a third one . [SEP]")
    # A file of such lines only holds no text, as for create_pretraining_data.
    blank = tmp_path / "blank.txt"
    blank.write_text("\u00a0\n\u3000\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no text in .*blank.txt: every file is empty or holds "
                                         "only blank lines"):
        make({"vocab": str(vocab)}, text_patterns=str(blank), use_next_sentence_label=False)


def test_training_on_text_that_makes_no_sequence_fails_instead_of_spinning(corpus, tmp_path):
    # Non-blank lines (so the build-time check passes) that hold no token at all.
    controls = tmp_path / "controls.txt"
    controls.write_text("\x00\x01\n\x02\n\n\x03\n", encoding="utf-8")
    for nsp in (True, False):
        ds = make(corpus, text_patterns=str(controls), use_next_sentence_label=nsp)
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            next(iter(ds))
        assert (f"text_pretraining_dataset: 1000 blocks of 512 lines in a row made no sequence "
                f"from {controls}; the input has no token or (with next-sentence prediction) "
                "too few sentences to pair") in e.value.message
    with pytest.raises(ValueError) as e:
        make(corpus, block_lines=1)
    assert str(e.value) == ("block_lines=1 must be >= 2 with next-sentence prediction (a block "
                            "of one line can make no sentence pair).")


def test_capped_predictions_are_warned(corpus, caplog):
    caplog.set_level(logging.WARNING, logger="absl")
    make(corpus)  # round(64 * 0.15) = 10 <= P = 12: no warning
    assert "max_predictions_per_seq" not in caplog.text
    make(corpus, max_predictions_per_seq=5)
    assert ("max_predictions_per_seq=5 is below round(max_seq_length=64 * masked_lm_prob=0.15) "
            "= 10: long sequences get only 5 predictions (as the original caps them).") in (
                caplog.text)


def test_a_single_sentence_with_next_sentence_prediction_is_an_error_when_built(corpus,
                                                                               tmp_path):
    """POOR: a one-line --input_text_file failed inside the graph with a raw traceback."""
    one = tmp_path / "one.txt"
    one.write_text("\nthe only sentence .\n\n", encoding="utf-8")
    with pytest.raises(ValueError) as e:
        make(corpus, text_patterns=str(one), use_next_sentence_label=True)
    assert str(e.value) == (
        f"text_pretraining_dataset: {one} holds a single sentence (one non-blank line); "
        "next-sentence prediction needs at least two (expected one sentence per line), or pass "
        "use_next_sentence_label=False (--use_next_sentence_label=false).")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError) as e:
        make(corpus, text_patterns=f"{one},{blank}", use_next_sentence_label=True)
    assert str(e.value).startswith(
        f"text_pretraining_dataset: {one}, {blank} together hold a single sentence (one ")
    two = tmp_path / "two.txt"
    two.write_text("the first sentence .\nthe second one .\n", encoding="utf-8")
    make(corpus, text_patterns=str(two), use_next_sentence_label=True)


def test_a_falling_masking_rate_follows_the_progress_variable(corpus):
    """Each batch is masked at masked_lm_prob -> masked_lm_prob_end for the share of training
    done that it reads when it is made; evaluation keeps masked_lm_prob."""
    progress = tf.Variable(0.0, trainable=False)
    # P = 12 holds 0.18 of a full row's 62 candidates.
    kwargs = dict(use_next_sentence_label=False, masked_lm_prob=0.18, masked_lm_prob_end=0.06)
    ds = make(corpus, is_training=True, masking_progress=progress, **kwargs)
    for done, rate in ((0.0, 0.18), (1.0, 0.06), (0.5, 0.12), (7.0, 0.06)):
        progress.assign(done)
        got = collect(ds, num_batches=4)  # a new iterator: no batch made before the assign
        check_invariants(got, corpus["tokens"])
        candidates = ((got["input_mask"] == 1)
                      & ~np.isin(unmask(got), [CLS, SEP])).sum(axis=1)
        want = np.maximum(1, np.round(np.float32(rate) * candidates))
        np.testing.assert_allclose(got["masked_lm_weights"].sum(axis=1), want, atol=1)
        assert abs(got["masked_lm_weights"].sum() / candidates.sum() - rate) < 0.01, done
    evaluation = collect(make(corpus, is_training=False, **kwargs), num_batches=4)
    candidates = ((evaluation["input_mask"] == 1)
                  & ~np.isin(unmask(evaluation), [CLS, SEP])).sum()
    assert abs(evaluation["masked_lm_weights"].sum() / candidates - 0.18) < 0.01
    with pytest.raises(ValueError, match="masked_lm_prob_end needs masking_progress"):
        make(corpus, is_training=True, **kwargs)
    with pytest.raises(ValueError, match=r"masked_lm_prob_end=1.5 must be in \(0, 1\]"):
        make(corpus, is_training=True, masking_progress=progress,
             **dict(kwargs, masked_lm_prob_end=1.5))
