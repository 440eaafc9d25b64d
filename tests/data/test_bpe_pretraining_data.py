"""Pre-training records from a byte-level BPE tokenizer.json (a ModernBERT's), and a
pre-training run on them: ids as in running text, whole words masked whole, the run directory
carrying the tokenizer.json."""

import json
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining import create_pretraining_data as cpd
from bert_tf.data.pretraining import demo_corpus
from bert_tf.text import load_tokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "text"))
import bpe_fixtures  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from command_batch import REPO_ROOT, run_commands  # noqa: E402

SEQ, PRED = 64, 10
SPEC = {"input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
        "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([PRED], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([PRED], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([PRED], tf.float32)}


def _corpus(path, count=30, odd_spaces=False):
    """Writes pydoc documents; returns them. odd_spaces: words also separated by a tab, U+3000,
    a form feed (which sends create_pretraining_data's chunk down its line-by-line path) and a
    trailing U+00A0, which must not change any id."""
    documents = demo_corpus.pydoc_documents()[:count]
    written = documents
    if odd_spaces:
        written = [[line.replace(" ", "\u3000 ", 1).replace(" ", "\t", 1).replace(" ", "\x0c", 1)
                    + " \u00a0" for line in doc] for doc in documents]
    path.write_text(demo_corpus.format_documents(written), encoding="utf-8")
    return documents


def test_records_hold_running_text_ids_and_mask_whole_words(tmp_path):
    documents = _corpus(tmp_path / "corpus.txt", odd_spaces=True)
    out = str(tmp_path / "bpe.tfrecord")
    options = cpd.PretrainingDataOptions(max_seq_length=SEQ, max_predictions_per_seq=PRED,
                                         dupe_factor=1, random_seed=3, do_whole_word_mask=True,
                                         documents_per_chunk=10)
    stats = cpd.create_pretraining_data(str(tmp_path / "corpus.txt"), [out],
                                        bpe_fixtures.BPE_TOKENIZER_JSON, options=options)
    # Worker processes load the same tokenizer: the same records.
    cpd.create_pretraining_data(str(tmp_path / "corpus.txt"), [out + ".2"],
                                bpe_fixtures.BPE_TOKENIZER_JSON, options=options, num_workers=2)
    assert [r.numpy() for r in tf.data.TFRecordDataset([out + ".2"])] == [
        r.numpy() for r in tf.data.TFRecordDataset([out])]
    records = [tf.io.parse_single_example(r, SPEC)
               for r in tf.data.TFRecordDataset([out])]
    assert stats.instances == len(records) > 20
    _check_running_text_and_whole_words(
        documents, [(r["input_ids"].numpy(), r["input_mask"].numpy(),
                     r["masked_lm_positions"].numpy(), r["masked_lm_ids"].numpy(),
                     r["masked_lm_weights"].numpy()) for r in records])


def _check_running_text_and_whole_words(documents, rows):
    """rows: (ids, input_mask, masked_lm_positions, masked_lm_ids, masked_lm_weights) arrays.
    Every segment's original ids are a run of the documents' running-text ids, and a masked
    word is masked whole."""
    tok = load_tokenizer(bpe_fixtures.BPE_TOKENIZER_JSON)
    # Every line's words as they read after a space (so a line's first word too starts with
    # "Ġ"): a document's ids are those of its words joined by single spaces, one encode each.
    expected = ",".join(",".join(str(i) for i in tok.encode(" " + " ".join(
        " ".join(line.split()) for line in doc))) for doc in documents)
    starts_word = np.array([t.startswith("\u0120") for t in tok.inv_vocab])
    multi_piece_words = 0
    for ids, input_mask, positions, masked_ids, weights in rows:
        positions = positions[weights > 0]
        original = ids.copy()
        original[positions] = masked_ids[:len(positions)]
        real = original[input_mask > 0]  # rows pad with id 0
        assert real[0] == tok.cls_id and real[-1] == tok.sep_id
        for segment in np.split(real[1:-1], np.flatnonzero(real[1:-1] == tok.sep_id)):
            segment = segment[segment != tok.sep_id]
            assert len(segment) and "," + ",".join(map(str, segment)) + "," in (
                "," + expected + ",")
        masked = set(positions.tolist())
        for p in positions:
            if not starts_word[original[p]]:  # a word's later piece: the piece before too
                assert p - 1 in masked or original[p - 1] in (tok.cls_id, tok.sep_id)
            nxt = p + 1
            if nxt < len(real) and original[nxt] not in (tok.cls_id, tok.sep_id) \
                    and not starts_word[original[nxt]]:
                assert nxt in masked
                multi_piece_words += 1
    assert multi_piece_words > 10  # words of several pieces were masked, all pieces together


def test_raw_text_masked_on_the_fly_reads_as_the_records(tmp_path):
    """--input_text_file with a BPE --vocab_file: the same running-text ids as the records
    (odd whitespace between words included), whole words masked whole."""
    from bert_tf.data.pretraining.masking_recipe import MaskingRecipe
    from bert_tf.data.pretraining.text_dataset import text_pretraining_dataset

    documents = _corpus(tmp_path / "corpus.txt", odd_spaces=True)
    dataset = text_pretraining_dataset(
        str(tmp_path / "corpus.txt"), vocab_file=bpe_fixtures.BPE_TOKENIZER_JSON,
        do_lower_case=None, batch_size=8, use_next_sentence_label=False, is_training=False,
        recipe=MaskingRecipe(max_seq_length=SEQ, max_predictions_per_seq=PRED,
                             do_whole_word_mask=True))
    rows = []
    for batch in dataset.take(6):
        batch = {k: v.numpy() for k, v in batch.items()}
        rows += zip(batch["input_word_ids"], batch["input_mask"], batch["masked_lm_positions"],
                    batch["masked_lm_ids"], batch["masked_lm_weights"])
    assert len(rows) == 48
    _check_running_text_and_whole_words(documents, rows)


def test_python_whitespace_class_is_str_isspace():
    from bert_tf.data.pretraining import text_dataset

    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    found = tf.strings.regex_replace(tf.constant(chars), f"[^{text_dataset.PYTHON_WHITESPACE[1:]}",
                                     "").numpy().decode("utf-8")
    assert found == "".join(c for c in chars if c.isspace())


def test_pretraining_run_on_bpe_records_keeps_the_tokenizer_json(tmp_path):
    _corpus(tmp_path / "corpus.txt", count=40)
    bpe = bpe_fixtures.BPE_TOKENIZER_JSON
    other = bpe_fixtures.write_tiny_byte_level_tokenizer(str(tmp_path / "other.json"))
    records, run = str(tmp_path / "records.tfrecord"), str(tmp_path / "run")
    data = ["--input_file=" + str(tmp_path / "corpus.txt"), f"--output_file={records}",
            f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}", "--dupe_factor=1",
            "--do_whole_word_mask"]
    pretrain = [f"--bert_config_file={REPO_ROOT}/official_configs/models/"
                "modernbert_demo_tiny.json", f"--input_file={records}", f"--output_dir={run}",
                "--do_train", "--use_next_sentence_label=false", f"--max_seq_length={SEQ}",
                f"--max_predictions_per_seq={PRED}", "--train_batch_size=8",
                "--save_checkpoints_steps=2", "--learning_rate=1e-3", "--num_warmup_steps=1"]
    results = run_commands([
        ("bert_tf.cli.create_pretraining_data", data + [f"--vocab_file={bpe}"]),
        ("bert_tf.cli.create_pretraining_data",
         data + [f"--vocab_file={bpe}", "--do_lower_case", f"--output_file={records}.2"]),
        ("bert_tf.run_pretraining", pretrain + [f"--vocab_file={bpe}", "--num_train_steps=2"]),
        ("bert_tf.run_pretraining", pretrain + [f"--vocab_file={other}",
                                                "--num_train_steps=4"]),
        ("bert_tf.run_pretraining",
         [a for a in pretrain if not a.startswith(("--input_file", "--output_dir"))]
         + [f"--vocab_file={bpe}", f"--input_text_file={tmp_path / 'corpus.txt'}",
            f"--output_dir={tmp_path / 'text_run'}", "--do_whole_word_mask",
            "--num_train_steps=1"]),
    ], env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    made, cased_contradiction, trained, other_tokenizer, text_input = results
    assert made.returncode == 0, made.stderr[-2000:]
    assert cased_contradiction.returncode != 0
    assert f"do_lower_case=True contradicts tokenizer file '{bpe}'" in cased_contradiction.stderr
    assert not os.path.exists(records + ".2")
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert sorted(n for n in os.listdir(run) if n.startswith(("tokenizer", "vocab"))) == [
        "tokenizer.json"]
    assert load_tokenizer(os.path.join(run, "tokenizer.json")).fingerprint() == \
        load_tokenizer(bpe).fingerprint()
    flags_text = open(os.path.join(run, "run_pretraining.flags"), encoding="utf-8").read()
    assert "--nodo_lower_case" in flags_text.split("\n")  # the cased file's casing, recorded
    assert other_tokenizer.returncode != 0
    refusal = other_tokenizer.stderr.strip().splitlines()[-1]
    assert refusal.startswith(f"run_pretraining: error: --output_dir={run} holds checkpoints of "
                              f"a run with other settings ({run}/bert_tf_run.json); resuming "
                              "would mix them: the tokenizer differs (sha256 "), refusal
    assert f" now: --vocab_file={other})" in refusal
    # Raw text masked on the fly with the BPE: the run keeps the tokenizer.json too.
    assert text_input.returncode == 0, text_input.stderr[-3000:]
    assert os.path.exists(os.path.join(tmp_path, "text_run", "tokenizer.json"))
    assert not os.path.exists(os.path.join(tmp_path, "text_run", "vocab.txt"))


def test_a_tokenizer_json_without_a_mask_token_is_refused_naming_it(tmp_path):
    path = bpe_fixtures.write_tiny_byte_level_tokenizer(str(tmp_path / "tokenizer.json"))
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["model"]["vocab"]["[MSK]"] = data["model"]["vocab"].pop("[MASK]")
    for token in data["added_tokens"]:
        token["content"] = "[MSK]" if token["content"] == "[MASK]" else token["content"]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    (tmp_path / "corpus.txt").write_text("One line.\nTwo lines.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(
            f"--vocab_file={path} has no mask ([MASK] or <mask>) token; pre-training records "
            "need [CLS], [SEP] and a mask token.")):
        cpd.create_pretraining_data(str(tmp_path / "corpus.txt"),
                                    [str(tmp_path / "out.tfrecord")], path)
    assert not (tmp_path / "out.tfrecord").exists()
