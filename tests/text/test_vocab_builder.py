"""Tests for bert_tf.text.vocab_builder and the tools/build_vocab.py CLI."""

import logging
import os
import subprocess
import sys

import pytest
from pydoc_data.topics import topics

from bert_tf.text import tokenization, vocab_builder
from bert_tf.text.tokenization import WordpieceTokenizer, load_vocab
from bert_tf.text.vocab_builder import build_vocab, count_words, expand_input_files, write_vocab
from no_tensorflow import LOADED_FRAMEWORKS, run_fresh

VOCAB_SIZE = 600


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    """A slice of the Python reference manual (stdlib pydoc_data) split over two files."""
    text = "\n".join(topics[k] for k in sorted(topics))
    text = text[: len(text) // 8]
    directory = tmp_path_factory.mktemp("corpus")
    half = len(text) // 2
    (directory / "part1.txt").write_text(text[:half], encoding="utf-8")
    (directory / "part2.txt").write_text(text[half:], encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def learned_vocab(corpus_dir):
    return build_vocab(str(corpus_dir / "*.txt"), VOCAB_SIZE, do_lower_case=True)


def test_learning_imports_no_tensorflow_and_learns_what_tensorflow_texts_module_does(
        corpus_dir, tmp_path):
    """A fresh interpreter (this one has TensorFlow loaded) learns the vocabulary with
    TensorFlow Text's learner read from its file, and prepares the demo data (what
    bert-tf-prepare-demo-data runs): no TensorFlow, no tensorflow_text, and the same tokens as
    the learner imported from tensorflow_text here."""
    import json

    import tensorflow_text  # noqa: F401  Loaded: this process uses the package's own module.

    assert vocab_builder.wordpiece_learner().__name__ == (
        "tensorflow_text.tools.wordpiece_vocab.wordpiece_tokenizer_learner_lib")
    expected = build_vocab(str(corpus_dir / "*.txt"), VOCAB_SIZE, do_lower_case=True)
    code = ("import json, sys\n"
            "from bert_tf.data.pretraining import demo_corpus\n"
            "from bert_tf.text.vocab_builder import build_vocab, wordpiece_learner\n"
            f"vocab = build_vocab({str(corpus_dir / '*.txt')!r}, {VOCAB_SIZE}, True)\n"
            "data = demo_corpus.prepare_demo_data(demo_corpus.DemoDataConfig(output_dir="
            f"{str(tmp_path / 'demo')!r}, vocab_size=1000, dupe_factor=1, num_workers=1))\n"
            "print(json.dumps([vocab, data['train_instances'], wordpiece_learner().__name__, "
            f"{LOADED_FRAMEWORKS}]))")
    result = run_fresh(code)
    assert result.returncode == 0, result.stderr
    vocab, instances, learner, loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert (learner, loaded) == ("bert_tf.text._wordpiece_learner", [])
    assert vocab == expected
    assert instances > 500 and len(load_vocab(str(tmp_path / "demo" / "vocab.txt"))) > 900


def test_vocab_size_and_special_tokens(learned_vocab):
    assert 0.95 * VOCAB_SIZE <= len(learned_vocab) <= VOCAB_SIZE
    assert learned_vocab[:5] == list(tokenization.SPECIAL_TOKENS)
    assert len(set(learned_vocab)) == len(learned_vocab)
    # Uncased: no upper-case letters, and learned multi-character pieces of both kinds.
    assert not any(c.isupper() for t in learned_vocab for c in t if not t.startswith("["))
    assert any(len(t) > 4 and not t.startswith("##") for t in learned_vocab)
    assert any(len(t) > 4 and t.startswith("##") for t in learned_vocab)


def test_tokenizer_covers_corpus_with_few_unknowns(learned_vocab, corpus_dir, tmp_path):
    path = str(tmp_path / "vocab.txt")
    write_vocab(learned_vocab, path)
    tok = WordpieceTokenizer(path)
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    ids = [i for f in sorted(corpus_dir.glob("*.txt"))
           for i in tok.encode(f.read_text(encoding="utf-8"))]
    assert len(ids) > 10_000
    assert ids.count(tok.unk_id) / len(ids) < 0.01
    # Learned pieces are used: far fewer tokens than characters.
    assert len(ids) < 0.5 * sum(len(f.read_text()) for f in corpus_dir.glob("*.txt"))


def test_cased_vocab_keeps_case(corpus_dir):
    vocab = build_vocab([str(corpus_dir / "part1.txt")], 300, do_lower_case=False,
                        reserved_tokens=["[unused0]"])
    assert vocab[:6] == list(tokenization.SPECIAL_TOKENS) + ["[unused0]"]
    assert any(c.isupper() for t in vocab[6:] for c in t)
    assert len(vocab) <= 300


def test_words_are_split_like_the_tokenizer(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("Héllo,world 北京\nhello\x00 WORLD!\n", encoding="utf-8")
    assert count_words([str(path)], do_lower_case=True) == {
        "hello": 2, ",": 1, "world": 2, "北": 1, "京": 1, "!": 1}


def test_words_over_the_tokenizer_limit_are_not_counted(tmp_path):
    # The default matches WordpieceTokenizer's (and the original's) 200 characters.
    path = tmp_path / "t.txt"
    path.write_text(f"{'ж' * 200} {'ж' * 201} {'a' * 199} x\n", encoding="utf-8")
    assert count_words([str(path)], do_lower_case=False) == {"ж" * 200: 1, "a" * 199: 1, "x": 1}
    assert count_words([str(path)], False, max_input_chars_per_word=199) == {"a" * 199: 1, "x": 1}


def test_non_utf8_input_is_replaced_with_warning(tmp_path, caplog):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"caf\xe9 bar\n")
    with caplog.at_level(logging.WARNING):
        counts = count_words([str(path)], do_lower_case=True)
    assert counts == {"caf": 1, "bar": 1}
    assert f"{path} is not valid UTF-8" in caplog.text


def test_errors(tmp_path):
    with pytest.raises(ValueError) as e:
        expand_input_files(f"{tmp_path}/*.txt")
    assert str(e.value) == f"Input pattern '{tmp_path}/*.txt' matches no file."
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n\x00\n")
    with pytest.raises(ValueError) as e:
        build_vocab(str(empty), 100, True)
    assert str(e.value) == f"The input files hold no words: {empty}."
    with pytest.raises(ValueError, match="vocab_size=5 leaves no room"):
        build_vocab(str(empty), 5, True)
    with pytest.raises(FileNotFoundError) as e:
        write_vocab(list(tokenization.SPECIAL_TOKENS), str(tmp_path / "no" / "vocab.txt"))
    assert str(e.value) == (f"Output directory '{tmp_path}/no' of '{tmp_path}/no/vocab.txt' "
                            "does not exist.")
    with pytest.raises(ValueError, match=r"Token 5 \('a b'\) is empty or contains whitespace"):
        write_vocab(list(tokenization.SPECIAL_TOKENS) + ["a b"], str(tmp_path / "v.txt"))


def _run_tool(repo_root, *args):
    # A fresh interpreter: learning a vocabulary imports no TensorFlow, so it starts in ~1 s.
    return subprocess.run([sys.executable, os.path.join(repo_root, "tools", "build_vocab.py"),
                           *args], capture_output=True, text=True, timeout=300)


def test_cli_builds_vocab(repo_root, corpus_dir, tmp_path):
    output = tmp_path / "vocab.txt"
    result = _run_tool(repo_root, f"--input_file={corpus_dir}/part1.txt,{corpus_dir}/part2.txt",
                       "--vocab_size=400", "--do_lower_case=false", f"--output_file={output}")
    assert result.returncode == 0, result.stderr
    vocab = load_vocab(str(output))
    assert 380 <= len(vocab) <= 400
    assert vocab["[PAD]"] == 0 and vocab["[MASK]"] == 4
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp")]


def test_cli_errors(repo_root, tmp_path):
    result = _run_tool(repo_root, f"--input_file={tmp_path}/*.txt", "--vocab_size=100",
                       f"--output_file={tmp_path}/vocab.txt")
    assert result.returncode != 0
    assert f"Input pattern '{tmp_path}/*.txt' matches no file." in result.stderr
    result = _run_tool(repo_root, f"--input_file={tmp_path}/*.txt", "--vocab_size=100",
                       f"--output_file={tmp_path}/missing/vocab.txt")
    assert result.returncode != 0
    assert f"directory '{tmp_path}/missing' does not exist" in result.stderr
