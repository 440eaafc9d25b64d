"""Tests for bert_tf.text.bpe_trainer and `bert-tf-build-vocab --tokenizer=bpe`."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from pydoc_data.topics import topics

from bert_tf.text import bpe, bpe_trainer

from bpe_fixtures import BPE_TOKENIZER_JSON

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _reference_tool():
    path = os.path.join(REPO, "tools", "make_bpe_reference.py")
    spec = importlib.util.spec_from_file_location("make_bpe_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_merges_equal_the_tokenizers_trainer():
    """The fixture's merges were learned by `tokenizers`' BpeTrainer (tools/make_bpe_reference.py)
    from CPython's pydoc topics and CJK samples; the same text gives the same merges, in order."""
    tool = _reference_tool()
    lines = tool.corpus_lines()
    with open(BPE_TOKENIZER_JSON, encoding="utf-8") as f:
        reference = [tuple(m) for m in json.load(f)["model"]["merges"]]
    # The fixture's texts come from this Python's own files: a CPython whose pydoc topics
    # differ cannot reproduce it (regenerate the fixture there).
    counts = bpe_trainer.count_words(lines, ("NFC",), special_tokens=())
    alphabet, merges = bpe_trainer.learn_merges(counts, tool._VOCAB_SIZE - 256, min_frequency=2)
    assert len(reference) == 3044
    assert merges == reference
    assert alphabet == sorted(bpe.bytes_to_unicode())


def test_ties_go_to_the_lowest_ids_and_repeats_merge_left_to_right():
    # (a,a), (a,b) and (b,c) all count 3; ids follow code points, so (a,a) < (a,b) < (b,c).
    # "aaaa" then merges as (aa)(aa), not a(aa)a.
    counts = {"abc": 3, "aaaa": 1}
    _, merges = bpe_trainer.learn_merges(counts, 10, min_frequency=1)
    assert merges == [("a", "a"), ("a", "b"), ("ab", "c"), ("aa", "aa")]
    _, merges = bpe_trainer.learn_merges(counts, 10, min_frequency=2)
    assert merges == [("a", "a"), ("a", "b"), ("ab", "c")]
    _, merges = bpe_trainer.learn_merges(counts, 2, min_frequency=1)
    assert merges == [("a", "a"), ("a", "b")]


def _corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(topics[k] for k in sorted(topics)[:60]), encoding="utf-8")
    return path


def _run_tool(*args):
    return subprocess.run([sys.executable, os.path.join(REPO, "tools", "build_vocab.py"), *args],
                          capture_output=True, text=True, timeout=300)


def test_command_writes_a_tokenizer_json_that_encodes_its_corpus(tmp_path):
    corpus = _corpus(tmp_path)
    output = tmp_path / "tokenizer.json"
    result = _run_tool("--tokenizer=bpe", f"--input_file={corpus}", "--vocab_size=1200",
                       "--reserved_tokens=<doc>", f"--output_file={output}")
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "tokenizer.json"]
    tokenizer = bpe.load_tokenizer_json(str(output))
    assert tokenizer.vocab_size == 1200
    assert tokenizer.inv_vocab[:6] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<doc>"]
    assert (tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (
        0, 2, 3, 4)
    assert tokenizer.inv_vocab[6:262] == sorted(bpe.bytes_to_unicode())
    lines = [line for line in corpus.read_text(encoding="utf-8").split("\n") if line.strip()]
    words = bytes_ = tokens = 0
    for line in lines:
        ids = tokenizer.encode(line)
        assert tokenizer.decode(ids) == line  # Byte-level: lossless, no [UNK].
        words += len(line.split())
        bytes_ += len(line.encode("utf-8"))
        tokens += len(ids)
    # The learned merges compress the text they came from: 6.8 bytes per whitespace-split word
    # (indented code and prose); 3.18 bytes and 2.13 tokens per word at this size.
    assert bytes_ / tokens > 3.0 and tokens / words < 2.2
    # Cased by default; [MASK] takes the space before it, as ModernBERT's.
    assert tokenizer.encode("The") != tokenizer.encode("the")
    assert tokenizer.encode("a [MASK] b") == tokenizer.encode("a") + [4] + tokenizer.encode(" b")


def test_lower_case_and_the_tokenizers_library_read_the_file_alike(tmp_path):
    data = bpe_trainer.build_bpe_tokenizer(str(_corpus(tmp_path)), 600, do_lower_case=True)
    assert data["normalizer"] == {"type": "Sequence",
                                  "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}
    path = tmp_path / "lower.json"
    bpe_trainer.write_tokenizer_json(data, str(path))
    tokenizer = bpe.load_tokenizer_json(str(path))
    texts = ["The Zürich [MASK] said: \"don't\" 3.14 — 北京 😀", "THE END\tof  it\n", "Cafe\u0301"]
    assert tokenizer.encode("The Zürich SAID") == tokenizer.encode("the zürich said")
    tokenizers = pytest.importorskip(
        "tokenizers", reason="Hugging Face tokenizers is not installed (the merges test above "
                             "compares with a file it trained)")
    live = tokenizers.Tokenizer.from_file(str(path))
    for text in texts:
        assert live.encode(text).ids == tokenizer.with_special_tokens(tokenizer.encode(text))


def test_bad_input_is_named_and_nothing_is_written(tmp_path):
    corpus = _corpus(tmp_path)
    result = _run_tool("--tokenizer=bpe", f"--input_file={corpus}", "--vocab_size=200",
                       f"--output_file={tmp_path}/tokenizer.json")
    assert result.returncode != 0
    assert ("vocab_size=200 is smaller than the 5 special tokens plus the 256 byte characters "
            "every byte-level BPE vocabulary holds (261).") in result.stderr
    result = _run_tool("--tokenizer=bpe", f"--input_file={corpus}", "--vocab_size=400",
                       f"--output_file={tmp_path}/vocab.txt")
    assert result.returncode != 0
    assert (f"--output_file={tmp_path}/vocab.txt: --tokenizer=bpe writes a tokenizer.json; "
            "expected a .json name (e.g. tokenizer.json)") in result.stderr
    result = _run_tool("--tokenizer=bpe", f"--input_file={corpus}", "--vocab_size=400",
                       "--max_unique_chars=50", f"--output_file={tmp_path}/t.json")
    assert result.returncode != 0
    assert ("--max_unique_chars only applies to --tokenizer=wordpiece, not --tokenizer=bpe."
            in result.stderr)
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n\n")
    with pytest.raises(ValueError, match="The input files hold no words"):
        bpe_trainer.build_bpe_tokenizer(str(empty), 400)
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "empty.txt"]
