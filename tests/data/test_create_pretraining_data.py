"""create_pretraining_data: statistics of real records, determinism, workers, bad input, the CLI."""

import collections
import io
import itertools
import logging
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining import corpus_reading, instances
from bert_tf.data.pretraining import create_pretraining_data as cpd
from bert_tf.data.pretraining import demo_corpus
from bert_tf.text import WordpieceTokenizer, basic_tokenize

SEQ, PRED = 96, 14
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, CLS, SEP, MASK = 0, 2, 3, 4

# The feature spec of the original run_pretraining.py input_fn_builder.
ORIGINAL_SPEC = {
    "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
    "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "masked_lm_positions": tf.io.FixedLenFeature([PRED], tf.int64),
    "masked_lm_ids": tf.io.FixedLenFeature([PRED], tf.int64),
    "masked_lm_weights": tf.io.FixedLenFeature([PRED], tf.float32),
    "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
}


def write_vocab(path, documents, num_words):
    """Specials + the most frequent words + every character alone and as a "##" piece, so rarer
    words split into several pieces (exercising whole-word masking) and nothing is [UNK]."""
    counts = collections.Counter(
        w for doc in documents for s in doc for w in basic_tokenize(s, do_lower_case=True))
    words = [w for w, _ in counts.most_common(num_words)]
    chars = sorted({c for w in counts for c in w})
    singles = [c for c in chars if c not in set(words)]
    tokens = SPECIALS + words + singles + ["##" + c for c in chars]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    documents = demo_corpus.pydoc_documents()[:160]
    # Two input files, so file indexes take part in seeding and the glob has two matches.
    (root / "part-0.txt").write_text(demo_corpus.format_documents(documents[:90]),
                                     encoding="utf-8")
    (root / "part-1.txt").write_text(demo_corpus.format_documents(documents[90:]),
                                     encoding="utf-8")
    vocab_file = write_vocab(root / "vocab.txt", documents, 1500)
    return {"root": root, "pattern": str(root / "part-*.txt"), "vocab": vocab_file,
            "documents": documents}


def exact(message):
    """A pytest.raises(match=...) pattern for exactly `message`."""
    return "^" + re.escape(message) + "$"


def options(**overrides):
    values = dict(max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=2,
                  random_seed=7, documents_per_chunk=40)
    values.update(overrides)
    return cpd.PretrainingDataOptions(**values)


def run(corpus, out_dir, name="out.tfrecord", **kwargs):
    outputs = kwargs.pop("outputs", [str(out_dir / name)])
    opts = kwargs.pop("opts", options())
    stats = cpd.create_pretraining_data(corpus["pattern"], outputs, corpus["vocab"],
                                        options=opts, **kwargs)
    return stats, outputs


def read_records(paths, compression=""):
    return [r.numpy() for r in tf.data.TFRecordDataset(paths, compression_type=compression)]


def parse_all(records, spec=ORIGINAL_SPEC):
    parsed = [tf.io.parse_single_example(r, spec) for r in records]
    return {k: np.stack([p[k].numpy() for p in parsed]) for k in spec}


@pytest.fixture(scope="module")
def main_run(corpus, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("main_run")
    stats, outputs = run(corpus, out_dir, outputs=[str(out_dir / "a.tfrecord"),
                                                   str(out_dir / "b.tfrecord")])
    records = read_records(outputs)
    return {"stats": stats, "outputs": outputs, "records": records, "f": parse_all(records)}


def originals(f):
    """input_ids with the masked positions restored: the tokens before masking, [N, S]."""
    ids = f["input_ids"].copy()
    for row, (positions, labels, weights) in enumerate(
            zip(f["masked_lm_positions"], f["masked_lm_ids"], f["masked_lm_weights"])):
        n = int(weights.sum())
        ids[row, positions[:n]] = labels[:n]
    return ids


def test_records_parse_with_the_original_feature_spec(main_run):
    f, stats = main_run["f"], main_run["stats"]
    assert len(main_run["records"]) == stats.instances > 1000
    assert f["input_ids"].shape == (stats.instances, SEQ)
    assert f["masked_lm_weights"].shape == (stats.instances, PRED)
    assert stats.documents == 160
    # Round-robin over the two shards.
    counts = [len(read_records([p])) for p in main_run["outputs"]]
    assert abs(counts[0] - counts[1]) <= 1


def test_cls_sep_segments_mask_and_padding(main_run):
    f = main_run["f"]
    orig = originals(f)
    for row in range(len(orig)):
        n = int(f["input_mask"][row].sum())
        assert 5 <= n <= SEQ
        assert (f["input_mask"][row, :n] == 1).all() and (f["input_mask"][row, n:] == 0).all()
        assert (f["input_ids"][row, n:] == PAD).all()
        assert orig[row, 0] == CLS and orig[row, n - 1] == SEP
        seps = np.flatnonzero(orig[row, :n] == SEP)
        assert len(seps) == 2 and 1 < seps[0] < n - 2
        assert not (orig[row, 1:n] == CLS).any()
        segments = f["segment_ids"][row]
        assert (segments[:seps[0] + 1] == 0).all() and (segments[seps[0] + 1:n] == 1).all()
        assert (segments[n:] == 0).all()


def test_masked_positions_weights_and_labels(main_run):
    f = main_run["f"]
    orig = originals(f)
    for row in range(len(orig)):
        n = int(f["input_mask"][row].sum())
        weights = f["masked_lm_weights"][row]
        m = int(weights.sum())
        assert m >= 1
        assert (weights[:m] == 1.0).all() and (weights[m:] == 0.0).all()
        positions = f["masked_lm_positions"][row]
        assert (np.diff(positions[:m]) > 0).all()  # sorted and unique
        assert (positions[m:] == 0).all() and (f["masked_lm_ids"][row, m:] == 0).all()
        assert (positions[:m] > 0).all() and (positions[:m] < n).all()
        assert not np.isin(orig[row, positions[:m]], [CLS, SEP, PAD]).any()
        # Unmasked tokens are untouched.
        unmasked = np.setdiff1d(np.arange(n), positions[:m])
        assert (f["input_ids"][row, unmasked] == orig[row, unmasked]).all()


def test_segments_come_from_the_corpus_so_labels_are_the_original_tokens(main_run, corpus):
    # With masked_lm_ids put back, A and B must be contiguous token runs of corpus documents
    # (truncation trims only their ends); a wrong label would break the match.
    tokenizer = WordpieceTokenizer(corpus["vocab"])
    docs = [" " + " ".join(str(i) for s in doc for i in tokenizer.encode(s)) + " "
            for doc in corpus["documents"]]
    text = "|".join(docs)
    f = main_run["f"]
    orig = originals(f)
    for row in range(0, len(orig), 7):
        n = int(f["input_mask"][row].sum())
        sep = int(np.flatnonzero(orig[row, :n] == SEP)[0])
        a = " " + " ".join(str(i) for i in orig[row, 1:sep]) + " "
        b = " " + " ".join(str(i) for i in orig[row, sep + 1:n - 1]) + " "
        assert a in text and b in text
        if f["next_sentence_labels"][row, 0] == 0:
            # B after A (after A's first occurrence: a repeated phrase may precede the real A).
            assert any(a in d and d.find(b, d.index(a) + 1) > 0 for d in docs)


def test_unused_segments_are_put_back_so_instances_tile_the_document():
    tokenizer = WordpieceTokenizer(SPECIALS + [f"w{i}" for i in range(200)])
    maker = cpd.InstanceMaker(tokenizer, cpd.PretrainingDataOptions(
        max_seq_length=12, max_predictions_per_seq=2, short_seq_prob=0.0))
    # One-token sentences never need truncation, so the A segments (and B when it follows A) of
    # consecutive instances must spell out the document exactly, random B or not.
    documents = [[[5 + 40 * d + i] for i in range(37)] for d in range(4)]
    labels = []
    for seed in range(20):
        spelled = []
        for instance in maker.instances_from_document(documents, 1, random.Random(seed)):
            ids = list(instance.input_ids)
            for position, original in zip(instance.masked_lm_positions, instance.masked_lm_ids):
                ids[position] = original
            assert len(ids) <= 12
            sep = ids.index(SEP)
            a, b = ids[1:sep], ids[sep + 1:-1]
            spelled += a
            labels.append(instance.next_sentence_label)
            if instance.next_sentence_label == 0:
                spelled += b
            else:
                # A contiguous run of one other document of the pool.
                other = (b[0] - 5) // 40
                assert other != 1 and b == list(range(b[0], b[0] + len(b)))
                assert (b[-1] - 5) // 40 == other
        assert spelled == [segment[0] for segment in documents[1]]
    assert 0.35 < np.mean(labels) < 0.75


def test_masking_statistics(main_run):
    f = main_run["f"]
    orig = originals(f)
    lengths = f["input_mask"].sum(axis=1)
    num_predictions = f["masked_lm_weights"].sum(axis=1).astype(int)
    # Exactly the original's budget: min(P, max(1, round(len(tokens) * 0.15))).
    expected = np.minimum(PRED, np.maximum(1, np.round(lengths * 0.15).astype(int)))
    np.testing.assert_array_equal(num_predictions, expected)
    assert main_run["stats"].predictions == num_predictions.sum()
    fraction = num_predictions.sum() / (lengths - 3).sum()  # of non-special tokens
    assert 0.145 < fraction < 0.165

    masked = kept = replaced = 0
    for row in range(len(orig)):
        m = num_predictions[row]
        positions = f["masked_lm_positions"][row, :m]
        now = f["input_ids"][row, positions]
        masked += (now == MASK).sum()
        kept += (now == orig[row, positions]).sum()
        replaced += ((now != MASK) & (now != orig[row, positions])).sum()
    total = num_predictions.sum()
    assert masked + kept + replaced == total > 10000
    assert abs(masked / total - 0.8) < 0.015
    assert abs(kept / total - 0.1) < 0.012
    assert abs(replaced / total - 0.1) < 0.012


def test_next_sentence_labels_and_lengths(main_run):
    f = main_run["f"]
    labels = f["next_sentence_labels"][:, 0]
    assert set(np.unique(labels)) == {0, 1}
    # 50/50 where A's chunk has two or more sentences; a chunk of one sentence (a long sentence,
    # a document's last one) always takes a random B, as in the original, so 1 is a bit more
    # frequent.
    assert 0.45 < labels.mean() < 0.62
    assert main_run["stats"].random_next == labels.sum()
    lengths = f["input_mask"].sum(axis=1)
    assert lengths.max() == SEQ and lengths.min() >= 5


def test_whole_word_masking_masks_whole_words(corpus, tmp_path):
    stats, outputs = run(corpus, tmp_path, opts=options(do_whole_word_mask=True, dupe_factor=1))
    f = parse_all(read_records(outputs))
    orig = originals(f)
    tokenizer = WordpieceTokenizer(corpus["vocab"])
    continuation = np.array([t.startswith("##") for t in tokenizer.inv_vocab])
    pieces_masked = 0
    for row in range(len(orig)):
        m = int(f["masked_lm_weights"][row].sum())
        n = int(f["input_mask"][row].sum())
        masked = set(f["masked_lm_positions"][row, :m].tolist())
        for p in masked:
            # The rest of the word (following "##" pieces) is masked too ...
            if p + 1 < n and continuation[orig[row, p + 1]]:
                assert p + 1 in masked
            # ... and so is its start, unless the word was cut by truncation or follows [SEP].
            if continuation[orig[row, p]] and orig[row, p - 1] not in (CLS, SEP):
                assert p - 1 in masked
                pieces_masked += 1
        assert m <= PRED
    assert pieces_masked > 100
    lengths = f["input_mask"].sum(axis=1)
    budget = np.minimum(PRED, np.maximum(1, np.round(lengths * 0.15).astype(int)))
    predicted = f["masked_lm_weights"].sum(axis=1)
    # Words that do not fit the budget are skipped, so some instances predict fewer tokens.
    assert (predicted <= budget).all() and predicted.sum() > 0.9 * budget.sum()


def test_byte_identical_across_runs_and_worker_counts(corpus, main_run, tmp_path):
    outputs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    run(corpus, tmp_path, outputs=outputs, num_workers=2)
    for mine, reference in zip(outputs, main_run["outputs"]):
        with open(mine, "rb") as f1, open(reference, "rb") as f2:
            assert f1.read() == f2.read()
    other = tmp_path / "seed8.tfrecord"
    run(corpus, tmp_path, outputs=[str(other)], opts=options(random_seed=8))
    assert set(read_records([str(other)])) != set(main_run["records"])


def test_small_shuffle_buffers_write_the_same_records(corpus, main_run, tmp_path):
    # Buffers smaller than a chunk's records exchange them batch by batch (and 1 keeps the
    # order); every buffer size writes the same records.
    reference = sorted(main_run["records"])
    orders = []
    for size in (1, 50, 7000):
        out = tmp_path / f"buffer{size}.tfrecord"
        run(corpus, tmp_path, outputs=[str(out)], shuffle_buffer_size=size)
        records = read_records([str(out)])
        assert sorted(records) == reference
        orders.append(records)
    assert orders[0] != orders[1] != orders[2]


def test_rerun_same_seed_is_byte_identical(corpus, tmp_path):
    first = run(corpus, tmp_path, name="1.tfrecord", opts=options(dupe_factor=1))[1][0]
    second = run(corpus, tmp_path, name="2.tfrecord", opts=options(dupe_factor=1))[1][0]
    with open(first, "rb") as f1, open(second, "rb") as f2:
        assert f1.read() == f2.read()


def test_gzip_output_reads_back_with_the_same_records(corpus, main_run, tmp_path):
    outputs = [str(tmp_path / "a.tfrecord.gz"), str(tmp_path / "b.tfrecord.gz")]
    run(corpus, tmp_path, outputs=outputs, compression="GZIP")
    with open(outputs[0], "rb") as f:
        assert f.read(2) == b"\x1f\x8b"  # the gzip magic number
    assert read_records(outputs, "GZIP") == main_run["records"]


def test_v2_feature_names_hold_the_same_values(corpus, main_run, tmp_path):
    outputs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    run(corpus, tmp_path, outputs=outputs, opts=options(feature_names="v2"))
    v2_spec = dict(ORIGINAL_SPEC)
    v2_spec["input_word_ids"] = v2_spec.pop("input_ids")
    v2_spec["input_type_ids"] = v2_spec.pop("segment_ids")
    f = parse_all(read_records(outputs), v2_spec)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_single_example(read_records(outputs)[0], ORIGINAL_SPEC)
    np.testing.assert_array_equal(f["input_word_ids"], main_run["f"]["input_ids"])
    np.testing.assert_array_equal(f["input_type_ids"], main_run["f"]["segment_ids"])
    np.testing.assert_array_equal(f["masked_lm_ids"], main_run["f"]["masked_lm_ids"])


def test_records_feed_the_pretraining_dataset_reader(main_run):
    from bert_tf.data.pretraining.record_dataset import pretraining_dataset

    ds = pretraining_dataset(main_run["outputs"], batch_size=8, max_seq_length=SEQ,
                             max_predictions_per_seq=PRED, is_training=False)
    batch = next(iter(ds))
    assert batch["input_word_ids"].shape == (8, SEQ)
    assert batch["masked_lm_weights"].shape == (8, PRED)


def test_lazy_shuffle_is_a_uniform_permutation_drawn_only_as_far_as_used():
    for n in [0, 1, 2, 3, 64, 65, 300]:
        items = list(range(n))
        assert sorted(instances._iter_shuffled(items, random.Random(n))) == list(range(n))
    # Taking k elements consumes the same draws as the first k of a full pass.
    prefix = list(itertools.islice(instances._iter_shuffled(list(range(50)), random.Random(3)), 5))
    assert prefix == list(instances._iter_shuffled(list(range(50)), random.Random(3)))[:5]
    # Uniform: each of 4 items comes first, and each of the 24 orders occurs, equally often.
    rng = random.Random(0)
    trials = 24_000
    orders = collections.Counter(tuple(instances._iter_shuffled([0, 1, 2, 3], rng))
                                 for _ in range(trials))
    assert len(orders) == 24
    # 1000 expected per order; 5 standard deviations is about +-160.
    assert all(abs(count - trials / 24) < 160 for count in orders.values()), orders


def test_truncation_removes_what_trimming_one_token_at_a_time_removes():
    def reference(a, b, max_num_tokens, rng):
        front_a = front_b = 0
        while len(a) + len(b) > max_num_tokens:
            longer = a if len(a) > len(b) else b
            if rng.random() < 0.5:
                del longer[0]
                front_a += longer is a
                front_b += longer is b
            else:
                longer.pop()
        return front_a, front_b

    cases = random.Random(0)
    len_a, len_b, budgets, want = [], [], [], []
    for _ in range(300):
        a, b = list(range(cases.randint(1, 40))), list(range(cases.randint(0, 40)))
        budget = cases.randint(2, 60)
        len_a.append(len(a))
        len_b.append(len(b))
        budgets.append(budget)
        reference(a, b, budget, cases)
        want.append((len_a[-1] - len(a), len_b[-1] - len(b)))
    for (la, lb, budget), expected in zip(zip(len_a, len_b, budgets), want):
        drops = instances.truncation_drops(np.array([la]), np.array([lb]), budget)
        assert (int(drops[0][0]), int(drops[1][0])) == expected, (la, lb, budget)
    # Each removed token comes from the front with probability 1/2, independently: the front
    # count is Binomial(drops, 0.5), which the vectorised truncation draws. (27, 19) with a
    # budget of 30 removes 12 from A (8, then alternating with B) and 4 from B.
    drops = instances.truncation_drops(np.array([27]), np.array([19]), 30)
    assert (int(drops[0][0]), int(drops[1][0])) == (12, 4)
    rng = random.Random(1)
    fronts = np.array([reference(list(range(27)), list(range(19)), 30, rng)
                       for _ in range(4000)])
    assert abs(fronts[:, 0].mean() - 6) < 0.1 and abs(fronts[:, 0].var() - 3) < 0.3
    assert abs(fronts[:, 1].mean() - 2) < 0.06 and abs(fronts[:, 1].var() - 1) < 0.1


@pytest.mark.parametrize("extra_line", [
    "plain words",  # the whole chunk is tokenized in one pass
    "a\x0bb c\u2028d",  # str.split() splits where the tokenizer does not: line by line
    "x \ue000 y",  # a break character in the text: line by line
])
def test_chunk_tokenization_equals_tokenizing_each_line(corpus, extra_line):
    tokenizer = WordpieceTokenizer(corpus["vocab"])
    maker = cpd.InstanceMaker(tokenizer, options(max_seq_length=8, max_predictions_per_seq=2))
    documents = [["Héllo, WORLD!", "naïve café\tdéjà-vu (ΣΑΣ Σ)", "\x00\x01"],
                 ["\x00"],  # no token at all: the document is dropped
                 ["中文 text 123", extra_line, "the quick brown fox jumps over a lazy dog"]]
    keys = [(0, 0), (0, 1), (1, 0)]
    stats = cpd.CreationStats()
    chunk_tokens = maker._tokenize_chunk(corpus_reading.DocumentChunk(keys, documents), stats)
    segments = [[tokenizer.encode(line) for line in lines] for lines in documents]
    segments = [[ids for ids in doc if ids] for doc in segments]
    assert chunk_tokens.keys == [key for key, doc in zip(keys, segments) if doc]
    flat = [ids for doc in segments for ids in doc]
    assert chunk_tokens.tokens.tolist() == [i for ids in flat for i in ids]
    offsets = chunk_tokens.offsets
    assert [chunk_tokens.tokens[a:b].tolist() for a, b in zip(offsets, offsets[1:])] == flat
    assert chunk_tokens.first_segment == [0, 2, 2 + len(segments[2])]
    # Sentences longer than max_seq_length - 3 = 5 tokens, counted per file.
    long = [sum(len(ids) > 5 for ids in doc) for doc in segments]
    assert stats.long_lines == sum(long) > 0
    assert stats.long_lines_per_file == {f: n for f, n in ((0, long[0]), (1, long[2])) if n}


def test_creating_records_does_not_import_tensorflow(repo_root, corpus, main_run, tmp_path):
    # Main process and workers stay TensorFlow-free, which is most of their start-up time and
    # memory. Without TensorFlow loaded the workers are forked (not spawned): their shards are
    # byte for byte those of the in-process run.
    outputs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    code = (
        "import sys\n"
        "from bert_tf.data.pretraining import create_pretraining_data as cpd\n"
        "assert 'tensorflow' not in sys.modules\n"
        "if __name__ == '__main__':\n"
        "    cpd.logging.set_verbosity(cpd.logging.INFO)\n"
        f"    cpd.create_pretraining_data({corpus['pattern']!r}, {outputs!r}, "
        f"{corpus['vocab']!r}, options=cpd.PretrainingDataOptions(max_seq_length={SEQ}, "
        f"max_predictions_per_seq={PRED}, dupe_factor=2, random_seed=7, "
        "documents_per_chunk=40), num_workers=2)\n"
        "    print('tensorflow' in sys.modules)\n")
    script = tmp_path / "run.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=repo_root), timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    assert re.search(r"Peak RSS: writer \d+ MB, largest worker \d+ MB\.", result.stderr)
    for mine, reference in zip(outputs, main_run["outputs"]):
        with open(mine, "rb") as f1, open(reference, "rb") as f2:
            assert f1.read() == f2.read()


def test_progress_line_reports_rates_instances_and_eta():
    stats = cpd.CreationStats(documents=300, instances=4000, num_bytes=2_500_000)
    assert cpd.format_progress(stats, 1500, 10.0, 10_000_000) == (
        "300 documents (30.0 docs/s, 0.25 MB/s), 4000 instances made, 1500 written, "
        "25.0% of input, ETA 0:00:30")
    assert cpd.format_progress(cpd.CreationStats(), 0, 2.0, 100).endswith(
        "0.0% of input, ETA unknown")


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_a_bar_on_a_terminal_and_log_lines_otherwise(caplog):
    stats = cpd.CreationStats(documents=10, instances=50, num_bytes=500)
    terminal = _Terminal()
    progress = cpd._Progress(1000, stream=terminal)
    progress.update(stats, 20, force=True)
    text = terminal.getvalue()
    assert text.startswith("\r[##########..........] 10 documents (")
    assert text.endswith("50 instances made, 20 written, 50.0% of input, ETA 0:00:00\x1b[K\n")
    caplog.set_level(logging.INFO, logger="absl")
    piped = io.StringIO()
    progress = cpd._Progress(1000, stream=piped)
    progress.update(stats, 20)  # within the interval: nothing
    progress.update(stats, 20, force=True)
    assert piped.getvalue() == ""
    lines = [r.getMessage() for r in caplog.records if "documents (" in r.getMessage()]
    assert len(lines) == 1 and lines[0].endswith("50 instances made, 20 written, 50.0% of "
                                                 "input, ETA 0:00:00.")


# ---------------------------------------------------------------------------------------------
# Bad input.
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def small(tmp_path, corpus):
    """A tiny vocab + helpers to write inputs in tmp_path."""
    def make(name, text):
        path = tmp_path / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        return str(path)

    return {"dir": tmp_path, "vocab": corpus["vocab"], "make": make}


def create(small, inputs, output="out.tfrecord", **kwargs):
    opts = kwargs.pop("opts", options(dupe_factor=1))
    output = str(small["dir"] / output) if not os.path.isabs(output) else output
    return cpd.create_pretraining_data(inputs, output, kwargs.pop("vocab", small["vocab"]),
                                       options=opts, **kwargs)


def test_empty_glob_names_the_pattern(small):
    pattern = str(small["dir"] / "nothing-*.txt")
    with pytest.raises(ValueError, match=exact(f'No files match input pattern "{pattern}".')):
        create(small, pattern)


def test_empty_files_are_skipped_and_all_empty_is_an_error(small, caplog):
    empty = small["make"]("empty.txt", "")
    good = small["make"]("good.txt", "The first sentence is here.\nThe second one.\n\n"
                                     "Another document starts.\nIt ends now.\n")
    caplog.set_level(logging.INFO, logger="absl")
    stats = create(small, f"{empty},{good}")
    assert stats.documents == 2 and stats.instances >= 2
    assert f"Input file {empty} is empty; skipping it." in caplog.text
    with pytest.raises(ValueError, match=exact(f"All input files are empty: {empty}.")):
        create(small, empty, output="out2.tfrecord")
    assert not os.path.exists(small["dir"] / "out2.tfrecord")


def test_file_without_blank_lines_is_one_document(small, caplog):
    path = small["make"]("one.txt", "\n".join(f"Sentence number {i} is here." for i in range(30)))
    caplog.set_level(logging.INFO, logger="absl")
    # Five dupes make ~20 instances, so some are random next (half are) whatever the seed draws.
    stats = create(small, path, opts=options(dupe_factor=5))
    assert stats.documents == 1 and stats.instances >= 10
    assert (f"{path} has no blank line between sentences: read as one document of 30 "
            "sentences.") in caplog.text
    # A one-document corpus has nowhere else to take random next segments from: said so.
    assert stats.random_next > 0
    assert (f"The corpus holds a single document: the {stats.random_next} random next segments "
            "(next_sentence_labels=1) come from that same document.") in caplog.text


def test_random_next_segments_come_from_another_file_when_each_file_is_one_document(tmp_path):
    # Two files, each a single document without blank lines, with disjoint words: a label-1 B
    # must be the other file's words (it used to be the same document: chunks never spanned
    # files), a label-0 B the same file's.
    words = {name: [f"{name}{i}" for i in range(40)] for name in ("a", "b")}
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(SPECIALS + words["a"] + words["b"]) + "\n", encoding="utf-8")
    for name in ("a", "b"):
        lines = [" ".join(words[name][(i + j) % 40] for j in range(9)) for i in range(30)]
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "out.tfrecord"
    stats = cpd.create_pretraining_data(f"{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}",
                                        str(output), str(vocab), options=options(dupe_factor=5))
    assert stats.documents == 2
    f = parse_all(read_records([str(output)]))
    orig = originals(f)
    first_b = len(SPECIALS) + 40  # ids of file b's words start here
    sources = collections.Counter()
    for row in range(len(orig)):
        n = int(f["input_mask"][row].sum())
        sep = int(np.flatnonzero(orig[row, :n] == SEP)[0])
        a, b = orig[row, 1:sep], orig[row, sep + 1:n - 1]
        a_file, b_file = set((a >= first_b).tolist()), set((b >= first_b).tolist())
        assert len(a_file) == 1 and len(b_file) == 1  # each segment from one file
        label = int(f["next_sentence_labels"][row, 0])
        assert (a_file != b_file) == (label == 1), (row, label)
        sources[(a_file.pop(), label)] += 1
    # Both documents made random-next and actual-next instances.
    assert min(sources[(False, 1)], sources[(True, 1)], sources[(False, 0)],
               sources[(True, 0)]) > 0


def test_chunks_span_files_and_the_last_never_holds_one_document_alone(tmp_path):
    paths = []
    for name, num_documents in (("a", 3), ("b", 1), ("c", 2)):
        path = tmp_path / f"{name}.txt"
        path.write_text("\n\n".join(f"{name} doc {i}." for i in range(num_documents)) + "\n",
                        encoding="utf-8")
        paths.append(str(path))
    chunks = list(cpd.iter_document_chunks(paths, 2))
    assert [c.keys for c in chunks] == [[(0, 0), (0, 1)], [(0, 2), (1, 0)],
                                        [(2, 0), (2, 1)]]
    assert [c.documents for c in chunks][1] == [["a doc 2."], ["b doc 0."]]
    assert sum(c.num_bytes for c in chunks) == sum(os.path.getsize(p) for p in paths)
    assert [len(c.documents) for c in cpd.iter_document_chunks(paths, 4)] == [4, 2]
    assert [len(c.documents) for c in cpd.iter_document_chunks(paths[:2], 2)] == [2, 2]
    # Five documents: the last chunk takes the fifth instead of leaving it alone.
    assert [len(c.documents) for c in cpd.iter_document_chunks(paths[:2] + paths[1:2], 4)] == [5]
    chunks = list(cpd.iter_document_chunks([paths[0], paths[2]], 2))
    assert [c.keys for c in chunks] == [[(0, 0), (0, 1)], [(0, 2), (1, 0), (1, 1)]]


def test_one_sentence_documents_still_make_random_next_instances(small, tmp_path):
    path = small["make"]("single.txt", "\n\n".join(f"Only sentence {i} of its document."
                                                     for i in range(20)))
    stats = create(small, path)
    assert stats.documents == 20 and stats.instances == 20
    f = parse_all(read_records([str(tmp_path / "out.tfrecord")]))
    assert (f["next_sentence_labels"] == 1).all()  # one sentence: B is always random


def test_lines_longer_than_max_seq_length_are_truncated(small, tmp_path, caplog):
    long_line = " ".join(["the value of the object"] * 200)
    path = small["make"]("long.txt", f"{long_line}\n{long_line}\n\nShort one.\nShort two.\n")
    other = small["make"]("other.txt", f"Short three.\n\n{long_line}\nShort four.\n")
    opts = options(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1)
    caplog.set_level(logging.INFO, logger="absl")
    stats = create(small, f"{path},{other}", opts=opts)
    assert stats.instances >= 2
    assert stats.long_lines == 3 and stats.long_lines_per_file == {0: 2, 1: 1}
    # Logged once per file (with its count), and the total in the summary.
    assert caplog.text.count(f"{path}: 2 sentences are longer than --max_seq_length=32 - 3 = 29 "
                             "tokens and were truncated.") == 1
    assert caplog.text.count(f"{other}: 1 sentences are longer than") == 1
    assert ("3 sentences in total were longer than --max_seq_length=32 - 3 = 29 tokens and were "
            "truncated.") in caplog.text
    spec = {k: tf.io.FixedLenFeature([32 if v.shape[0] == SEQ else v.shape[0]], v.dtype)
            for k, v in ORIGINAL_SPEC.items() if k in ("input_ids", "input_mask")}
    f = parse_all(read_records([str(tmp_path / "out.tfrecord")]), spec)
    assert f["input_mask"].sum(axis=1).max() == 32


def test_invalid_utf8_is_replaced_with_a_warning_naming_file_and_line(small, caplog):
    path = small["make"]("bad.txt", b"A fine line.\nA bad \xff\xfe byte here.\n\nMore text.\n")
    caplog.set_level(logging.INFO, logger="absl")
    stats = create(small, path)
    assert stats.documents == 2
    assert (f"{path}:2: invalid UTF-8 (invalid start byte); replaced the bad bytes with "
            "U+FFFD.") in caplog.text


def test_input_without_any_token_is_an_error_and_writes_nothing(small):
    path = small["make"]("controls.txt", "\x00\x01\n\n\x02\n")
    with pytest.raises(ValueError, match="^No documents with any token in the input files"):
        create(small, path)
    assert os.listdir(small["dir"]) == ["controls.txt"]  # no output, no temporary file


def test_bad_vocab_gives_the_tokenizer_error(small):
    good = small["make"]("good.txt", "Some text.\n")
    empty_vocab = small["make"]("vocab_empty.txt", "")
    with pytest.raises(ValueError, match=exact(
            f"vocab_file '{empty_vocab}' is empty; expected one token per line.")):
        create(small, good, vocab=empty_vocab)
    no_mask = small["make"]("vocab_nomask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nsome\n")
    with pytest.raises(ValueError, match=r"lacks the special token\(s\) \[MASK\]"):
        create(small, good, vocab=no_mask)


def test_missing_output_directory_fails_before_reading_input(small):
    output = str(small["dir"] / "no_such_dir" / "out.tfrecord")
    # The input pattern matches nothing: the output error must come first.
    with pytest.raises(ValueError, match=exact(
            f"Output directory {small['dir'] / 'no_such_dir'} does not exist "
            f"(for output file {output}); create it first.")):
        create(small, str(small["dir"] / "missing-*.txt"), output=output)


def test_gzip_requires_gz_names(small):
    good = small["make"]("good.txt", "Some text.\n")
    with pytest.raises(ValueError, match="must end in .gz when writing GZIP records"):
        create(small, good, compression="GZIP")
    with pytest.raises(ValueError, match="ends in .gz but records are not compressed"):
        create(small, good, output="out.tfrecord.gz")


@pytest.mark.parametrize("overrides, message", [
    (dict(masked_lm_prob=0.0), "--masked_lm_prob=0.0 must be in (0, 1)."),
    (dict(masked_lm_prob=1.5), "--masked_lm_prob=1.5 must be in (0, 1)."),
    (dict(max_seq_length=4), "--max_seq_length=4 must be at least 5"),
    (dict(max_predictions_per_seq=0), "--max_predictions_per_seq=0 must be at least 1."),
    (dict(short_seq_prob=-0.1), "--short_seq_prob=-0.1 must be in [0, 1]."),
    (dict(dupe_factor=0), "--dupe_factor=0 must be at least 1."),
    (dict(feature_names="v3"), '--feature_names=v3 must be "v1" or "v2".'),
    (dict(documents_per_chunk=1), "--documents_per_chunk=1 must be at least 2 (random next "
                                  "segments come from another document of the chunk)."),
])
def test_invalid_options_name_the_flag(small, overrides, message):
    with pytest.raises(ValueError) as error:
        create(small, "unused", opts=options(**overrides))
    assert str(error.value).startswith(message)


def test_invalid_num_workers_names_the_flag(small):
    with pytest.raises(ValueError, match=r"^--num_workers=0 must be at least 1.$"):
        create(small, "unused", num_workers=0)


def test_capped_predictions_are_warned_and_counted(small, corpus, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="absl")
    opts = options(max_predictions_per_seq=5, dupe_factor=1)
    stats = cpd.create_pretraining_data(corpus["pattern"], str(tmp_path / "capped.tfrecord"),
                                        corpus["vocab"], options=opts)
    assert ("--max_predictions_per_seq=5 is below round(--max_seq_length=96 * "
            "--masked_lm_prob=0.15) = 14") in caplog.text
    spec = {"input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
            "masked_lm_weights": tf.io.FixedLenFeature([5], tf.float32)}
    f = parse_all(read_records([str(tmp_path / "capped.tfrecord")]), spec)
    wanted = np.maximum(1, np.round(f["input_mask"].sum(axis=1) * 0.15).astype(int))
    assert (f["masked_lm_weights"].sum(axis=1) == np.minimum(wanted, 5)).all()
    assert stats.capped_predictions == np.maximum(wanted - 5, 0).sum() > 0
    assert stats.capped_instances == (wanted > 5).sum()
    assert (f"--max_predictions_per_seq=5 capped {stats.capped_instances} of "
            f"{stats.instances} instances, dropping {stats.capped_predictions} predictions"
            ) in caplog.text


# ---------------------------------------------------------------------------------------------
# The command line.
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_end_to_end(corpus, main_run, repo_root, tmp_path):
    outputs = f"{tmp_path / 'a.tfrecord'},{tmp_path / 'b.tfrecord'}"
    env = dict(os.environ, PYTHONPATH=repo_root)
    command = [sys.executable, os.path.join(repo_root, "tools", "create_pretraining_data.py"),
               f"--input_file={corpus['pattern']}", f"--output_file={outputs}",
               f"--vocab_file={corpus['vocab']}", "--do_lower_case", f"--max_seq_length={SEQ}",
               f"--max_predictions_per_seq={PRED}", "--dupe_factor=2", "--random_seed=7",
               "--documents_per_chunk=40"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Wrote" in result.stderr and "docs/s" in result.stderr
    assert read_records(outputs.split(",")) == main_run["records"]

    bad = subprocess.run(command[:2] + ["--input_file=" + str(tmp_path / "none*.txt"),
                                        f"--output_file={tmp_path / 'c.tfrecord'}",
                                        f"--vocab_file={corpus['vocab']}"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1
    assert bad.stderr.strip().endswith(
        f'create_pretraining_data: error: No files match input pattern "{tmp_path}/none*.txt".')

    # An output nobody can create: the flag error message, no traceback, nothing read first.
    unwritable = subprocess.run(command[:2] + ["--input_file=" + str(tmp_path / "none*.txt"),
                                               "--output_file=/proc/o.tfrecord",
                                               f"--vocab_file={corpus['vocab']}"],
                                env=env, capture_output=True, text=True, timeout=300)
    assert unwritable.returncode == 1
    assert "Traceback" not in unwritable.stderr
    assert unwritable.stderr.strip().endswith(
        "create_pretraining_data: error: Output file /proc/o.tfrecord cannot be written: cannot "
        "create a file in /proc (No such file or directory).")
    # A directory given as the input: named before anything is read or written.
    (tmp_path / "indir").mkdir()
    unreadable = subprocess.run(command[:2] + [f"--input_file={tmp_path / 'indir'}",
                                               f"--output_file={tmp_path / 'd.tfrecord'}",
                                               f"--vocab_file={corpus['vocab']}"],
                                env=env, capture_output=True, text=True, timeout=300)
    assert unreadable.returncode == 1
    assert unreadable.stderr.strip().endswith(
        f'create_pretraining_data: error: Input "{tmp_path / "indir"}" is a directory; expected a '
        f'file or a glob of files (e.g. "{tmp_path / "indir"}/*").')
    assert not os.path.exists(tmp_path / "d.tfrecord")


def test_partial_shards_of_killed_writers_are_removed_and_live_ones_kept(small, caplog):
    """kill -9 left hidden partial shards (.tmp_<token>_<shard>, tens of MB each) that no rerun
    removed; each killed run added more."""
    import hashlib
    import socket

    directory = small["dir"]
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    other_host = f"{int(host, 16) ^ 1:08x}"
    dead = _finished_pid()
    live = subprocess.Popen(["sleep", "60"])
    names = {
        "dead": f".tmp_0123abcd-{dead}-{host}_out.tfrecord",
        "dead_x": f".tmp_0123abcd-{dead}-{host}_x_out.tfrecord",  # of x_out.tfrecord
        "live": f".tmp_0123abcd-{live.pid}-{host}_out.tfrecord",
        "other_host": f".tmp_0123abcd-{dead}-{other_host}_out.tfrecord",
        "unknown": ".tmp_0123abcd_out.tfrecord",  # an earlier bert_tf's: no writer named
        "other_output": f".tmp_0123abcd-{dead}-{host}_other.tfrecord",
    }
    try:
        for name in names.values():
            (directory / name).write_bytes(b"partial")
        path = small["make"]("in.txt", "The first sentence is here.\nThe second one.\n\n"
                                       "Another document starts.\nIt ends now.\n")
        caplog.set_level(logging.INFO, logger="absl")
        create(small, path, output=f"{directory}/out.tfrecord,{directory}/x_out.tfrecord")
    finally:
        live.kill()
        live.wait()
    left = {name for name in os.listdir(directory) if name.startswith(".tmp_")}
    assert left == {names[k] for k in ("live", "other_host", "unknown", "other_output")}
    removed = ", ".join(str(directory / names[k]) for k in ("dead", "dead_x"))
    assert f"Removed 2 partial shard(s) that killed runs left: {removed}" in caplog.text
    assert ("Kept 1 partial shard(s) of an earlier bert_tf, whose writer cannot be told (a "
            "killed run's if no other command writes these outputs: remove them): "
            f"{directory / names['unknown']}") in caplog.text


def _finished_pid():
    """The pid of a process that has ended (and was reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid
