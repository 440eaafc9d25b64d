"""Tests for bert_tf.text.layers.BertTokenizerLayer: parity with the Python tokenizer, export."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text.layers import BertTokenizerLayer
from bert_tf.text.tokenization import WordpieceTokenizer

from text_samples import random_texts, vocab_for_texts

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
NUM_TEXTS = 3000


@pytest.fixture(scope="module")
def texts():
    return random_texts(seed=7, count=NUM_TEXTS)


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def tokenizers(request, texts):
    vocab = vocab_for_texts(texts, request.param, seed=8)
    return (WordpieceTokenizer(vocab, do_lower_case=request.param),
            BertTokenizerLayer(vocab, do_lower_case=request.param))


def test_parity_with_python_tokenizer_on_generated_text(tokenizers, texts):
    python_tok, layer = tokenizers
    got = layer(tf.constant(texts)).to_list()
    expected = [python_tok.encode(t) for t in texts]
    mismatches = [(t, g, e) for t, g, e in zip(texts, got, expected) if g != e]
    assert not mismatches, mismatches[:3]
    # The generated strings do exercise [UNK] and multi-piece words.
    flat = [i for row in expected for i in row]
    assert flat.count(python_tok.unk_id) > 50
    assert sum(python_tok.convert_ids_to_tokens([i])[0].startswith("##") for i in flat) > 500


def test_tokenize_words_matches_python_word_grouping(tokenizers, texts):
    python_tok, layer = tokenizers
    subset = texts[:300]
    got = layer.tokenize_words(tf.constant(subset)).to_list()
    expected = [[python_tok.convert_tokens_to_ids(w) for w in python_tok.tokenize_words(t)]
                for t in subset]
    assert got == expected


def test_rules_on_hand_picked_strings():
    vocab = SPECIALS + ["hello", ",", "!", "北", "京", "a", "##a", "ж", "##ж", "e", "οδος", "ας",
                        "ασ", ".", "β", "$", "^", "5", "€", "5€", "k"]
    tok = WordpieceTokenizer(vocab)
    layer = BertTokenizerLayer(vocab)
    cases = ["Hello,\x00北京!", "ΟΔΟΣ ΑΣ. ΑΣ.Β", "$5^€ 5€", "a" * 100, "a" * 101,
             "ж" * 100, "ж" * 101, "é", "\u212a", "\u2028hello\u2029", ""]
    got = layer(tf.constant(cases)).to_list()
    assert got == [tok.encode(c) for c in cases]
    # 100 two-byte characters are 200 bytes: the limit counts characters, as the original does.
    assert got[5] == [vocab.index("ж")] + [vocab.index("##ж")] * 99
    assert got[6] == [1]


def test_invalid_utf8_bytes_are_dropped_like_python():
    vocab = SPECIALS + ["abcd", "e", "x"]
    layer = BertTokenizerLayer(vocab)
    raw = [b"ab\xffcd \xc3\xa9", b"\xc3x", b"x\xe2\x82"]
    tok = WordpieceTokenizer(vocab)
    assert layer(tf.constant(raw)).to_list() == [tok.encode(r) for r in raw]


def test_documented_difference_for_spacing_marks_out_of_canonical_order():
    # U+1D16D (combining class 226) before U+1D165 (class 216): Python's NFD swaps them inside
    # the word, the per-character table does not. Only uncased tokenization decomposes.
    text = "x\U0001d16d\U0001d165"
    vocab = SPECIALS + ["x", "##\U0001d16d", "##\U0001d165"]
    python_ids = WordpieceTokenizer(vocab).encode(text)
    layer_ids = BertTokenizerLayer(vocab)(tf.constant([text])).to_list()[0]
    assert python_ids == [5, 7, 6]
    assert layer_ids == [5, 6, 7]
    cased = BertTokenizerLayer(vocab, do_lower_case=False)(tf.constant([text])).to_list()[0]
    assert cased == WordpieceTokenizer(vocab, do_lower_case=False).encode(text) == [5, 6, 7]


def test_scalar_input_and_special_ids():
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]",
                                                                 "[MASK]", "hi"]
    layer = BertTokenizerLayer(vocab)
    assert (layer.pad_id, layer.unk_id, layer.cls_id, layer.sep_id, layer.mask_id) == (
        0, 100, 101, 102, 103)
    out = layer(tf.constant("Hi there"))
    assert out.dtype == tf.int32
    assert out.numpy().tolist() == [104, 100]


def test_vocab_file_path_and_get_config_round_trip(write_vocab_file):
    vocab = SPECIALS + ["hello", "##s", "world"]
    path = write_vocab_file(vocab)
    layer = BertTokenizerLayer(path, do_lower_case=False, max_input_chars_per_word=7)
    config = layer.get_config()
    assert config["vocab_file"] == vocab
    os.remove(path)  # The config holds the tokens, not the path.
    clone = BertTokenizerLayer.from_config(config)
    text = tf.constant(["hellos World helloworld"])
    assert clone(text).to_list() == layer(text).to_list() == [[5, 6, 1, 1]]
    # Registered for Keras serialization (e.g. inside a .keras file).
    revived = keras.layers.deserialize(keras.layers.serialize(layer))
    assert isinstance(revived, BertTokenizerLayer)
    assert revived(text).to_list() == [[5, 6, 1, 1]]


def test_runs_inside_tf_data_map():
    vocab = SPECIALS + ["the", "cat", "sat", "."]
    layer = BertTokenizerLayer(vocab)
    ds = tf.data.Dataset.from_tensor_slices(["The cat sat.", "cat", ""]).batch(2).map(layer)
    rows = [r for batch in ds for r in batch.to_list()]
    assert rows == [[5, 6, 7, 8], [6], []]


def test_saved_model_round_trip(tmp_path):
    vocab = SPECIALS + ["the", "cat", "sat", ".", "北", "ς"]
    layer = BertTokenizerLayer(vocab)

    class Tokenize(tf.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def __call__(self, text):
            ids = self.layer(text)
            return {"ids": ids.to_tensor(default_value=-1), "lengths": ids.row_lengths()}

    export_dir = str(tmp_path / "tokenizer")
    tf.saved_model.save(Tokenize(), export_dir)
    loaded = tf.saved_model.load(export_dir)
    text = tf.constant(["The cat sat. ΣΑΣ", "北京 cat"])
    out = loaded(text)
    expected = layer(text)
    np.testing.assert_array_equal(out["ids"].numpy(), expected.to_tensor(-1).numpy())
    np.testing.assert_array_equal(out["lengths"].numpy(), expected.row_lengths().numpy())
    assert expected.to_list() == [[5, 6, 7, 8, 1], [9, 1, 6]]

    # A fresh process with only TensorFlow and tensorflow_text (as a model server has) runs it.
    script = ("import tensorflow as tf, tensorflow_text\n"
              f"m = tf.saved_model.load({export_dir!r})\n"
              "print(m(tf.constant(['The cat sat. \u03a3\u0391\u03a3']))['ids'].numpy().tolist())")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[[5, 6, 7, 8, 1]]"


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"unk_token '<unk>' is not in the vocabulary\."):
        BertTokenizerLayer(SPECIALS, unk_token="<unk>")
    with pytest.raises(ValueError, match="vocabulary lacks the special token"):
        BertTokenizerLayer(["a", "b"])
    layer = BertTokenizerLayer(SPECIALS)
    with pytest.raises(ValueError, match=r"expects a tf.string tensor of shape \[batch\] or a "
                                         r"scalar, got shape \(1, 1\)"):
        layer(tf.constant([["a"]]))
