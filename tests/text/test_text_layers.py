"""Tests for bert_tf.text.layers.BertTokenizerLayer: parity with the Python tokenizer, export."""

import os
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text import load_tokenizer, tokenizer_layer
from bert_tf.text.layers import BertTokenizerLayer
from bert_tf.text.tokenization import WordpieceTokenizer

from text_samples import random_texts, save_ids_module, vocab_for_texts

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
    cases = ["Hello,\x00北京!", "ΟΔΟΣ ΑΣ. ΑΣ.Β", "$5^€ 5€", "a" * 200, "a" * 201,
             "ж" * 200, "ж" * 201, "é", "\u212a", "\u2028hello\u2029", ""]
    got = layer(tf.constant(cases)).to_list()
    assert got == [tok.encode(c) for c in cases]
    # 200 two-byte characters are 400 bytes: the limit counts characters, as the original does.
    assert got[5] == [vocab.index("ж")] + [vocab.index("##ж")] * 199
    assert got[6] == [1]


WORD_LIMIT_CHARS = ["a", "é", "ж", "\U0001d49c"]  # 1, 2, 2 and 4 UTF-8 bytes.


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_word_length_limit_is_200_characters_at_any_byte_width(do_lower_case):
    # The original FullTokenizer's limit: up to 200 characters a word is split into pieces,
    # one more makes it [UNK]. A 200-character word is up to 800 bytes; lower-casing strips
    # the accent of "é" (1 byte each), the cased face keeps it (2 bytes each).
    vocab = SPECIALS + [t for c in WORD_LIMIT_CHARS + ["É", "e"] for t in (c, "##" + c)] + ["x"]
    tok = WordpieceTokenizer(vocab, do_lower_case=do_lower_case)
    layer = BertTokenizerLayer(vocab, do_lower_case=do_lower_case)
    assert layer._long_lookup is None  # Short pieces only: FastWordpieceTokenizer does it all.
    words = [c * n for c in WORD_LIMIT_CHARS + ["É"] for n in (199, 200, 201)]
    text = [w + " x" for w in words]
    got = layer(tf.constant(text)).to_list()
    got_words = layer.tokenize_words(tf.constant(text)).to_list()
    x_id = vocab.index("x")
    for word, ids, grouped in zip(words, got, got_words):
        python_ids = tok.encode(word + " x")
        assert ids == python_ids, (word[0], len(word))
        assert grouped == [tok.convert_tokens_to_ids(w) for w in tok.tokenize_words(word + " x")]
        char = ("e" if word[0] in "éÉ" else word[0]) if do_lower_case else word[0]
        if len(word) == 201:
            expected = [1, x_id]
        else:
            expected = [vocab.index(char)] + [vocab.index("##" + char)] * (len(word) - 1) + [x_id]
        assert ids == expected, (word[0], len(word))
    # The argument still works, also for multi-byte characters.
    short = BertTokenizerLayer(vocab, do_lower_case=do_lower_case, max_input_chars_per_word=3)
    assert short(tf.constant(["жжж жжжж"])).to_list() == [
        [vocab.index("ж"), vocab.index("##ж"), vocab.index("##ж"), 1]]


def test_vocabulary_pieces_over_256_bytes_match_like_python():
    # FastWordpieceTokenizer refuses pieces over 256 bytes; the original matches any piece of
    # at most 200 characters, e.g. 129..200 Cyrillic letters (258..400 bytes) or 65+ four-byte
    # characters. Words over 256 bytes then take the exact path.
    long_pieces = ["ж" * 150, "##" + "ж" * 129, "\U0001d49c" * 65, "é" * 200, "##" + "é" * 130]
    vocab = SPECIALS + [t for c in WORD_LIMIT_CHARS for t in (c, "##" + c)] + long_pieces + [
        "ж" * 128, "a" * 250, "x", "ж" * 201]
    texts = ["ж" * n for n in (128, 129, 149, 150, 151, 200, 201)]
    texts += ["a" + "ж" * 129, "a" + "ж" * 199]
    texts += ["\U0001d49c" * n for n in (64, 65, 66, 200)]
    texts += ["É" * n for n in (130, 199, 200, 201)] + ["é" * 199 + " x " + "é" * 200]
    texts += ["hello " + "ж" * 150 + " x a" * 3, "a" * 200, "", "x"]
    ids = {t: i for i, t in enumerate(vocab)}
    rng = random.Random(3)
    texts += ["".join(rng.choice("жжжжжa") for _ in range(rng.randint(120, 205)))
              for _ in range(20)]
    for do_lower_case in (True, False):
        tok = WordpieceTokenizer(vocab, do_lower_case=do_lower_case)
        layer = BertTokenizerLayer(vocab, do_lower_case=do_lower_case)
        assert layer._long_lookup is not None  # The exact path is in use.
        got = layer(tf.constant(texts)).to_list()
        assert got == [tok.encode(t) for t in texts]
        assert layer.tokenize_words(tf.constant(texts)).to_list() == [
            [tok.convert_tokens_to_ids(w) for w in tok.tokenize_words(t)] for t in texts]
        # In a graph too (the exact path has a while loop), and for an empty batch.
        graph_fn = tf.function(layer.call, input_signature=[tf.TensorSpec([None], tf.string)])
        assert graph_fn(tf.constant(texts)).to_list() == got
        assert graph_fn(tf.constant([], tf.string)).to_list() == []
        assert graph_fn(tf.constant(["x a", ""])).to_list() == [[ids["x"], ids["a"]], []]
    # Exact pieces of the cased face: longest match first, whatever the byte length.
    zh_cont, script, script_cont = ids["##ж"], ids["\U0001d49c"], ids["##\U0001d49c"]
    assert got[0] == [ids["ж" * 128]]
    assert got[1] == [ids["ж" * 128], zh_cont]
    assert got[3] == [ids["ж" * 150]]
    assert got[5] == [ids["ж" * 150]] + [zh_cont] * 50
    assert got[6] == [1]  # 201 characters: [UNK] even though the vocabulary has the word.
    assert got[7] == [ids["a"], ids["##" + "ж" * 129]]
    assert got[8] == [ids["a"], ids["##" + "ж" * 129]] + [zh_cont] * 70
    assert got[9] == [script] + [script_cont] * 63
    assert got[12] == [ids["\U0001d49c" * 65]] + [script_cont] * 135
    assert got[17] == ([ids["é"], ids["##" + "é" * 130]] + [ids["##é"]] * 68
                       + [ids["x"], ids["é" * 200]])
    assert got[19] == [ids["a"]] + [ids["##a"]] * 199  # "a" * 250 is out of reach.


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


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "sentencepiece"])
def test_corpus_lines_are_blank_exactly_where_str_strip_makes_them_empty(kind):
    """A line of only non-ASCII whitespace (U+00A0 from HTML, U+3000, U+0085, U+001C) is a
    document break for raw-text pre-training as for create_pretraining_data (str.strip());
    tf.strings.strip, ASCII only, left it a sentence in WordPiece's pipeline."""
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    python_tok = {"wordpiece": lambda: WordpieceTokenizer(SPECIALS + ["x", "y"]),
                  "bpe": lambda: load_tokenizer(os.path.join(fixtures, "bpe_tokenizer.json")),
                  "sentencepiece": lambda: load_tokenizer(os.path.join(fixtures, "spiece.model"),
                                                          do_lower_case=True)}[kind]()
    layer = tokenizer_layer(python_tok)
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    assert len(spaces) == 29
    lines = spaces + ["".join(spaces), "\u00a0", " \u00a0 ", "\u3000\r", "\u200b", "\x00",
                      "\u00a0x\u3000", "\u2028x y\x85"]
    got = layer.corpus_lines(tf.constant(lines))
    assert [line == b"" for line in got.numpy()] == [not line.strip() for line in lines]
    assert [line == b"" for line in got.numpy()].count(True) == 33
    # What is left tokenizes as create_pretraining_data tokenizes the line.
    assert layer(got).to_list() == [python_tok.encode_line(line) for line in lines]


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
    loaded = tf.saved_model.load(save_ids_module(layer, str(tmp_path / "tokenizer")))
    text = tf.constant(["The cat sat. ΣΑΣ", "北京 cat"])
    out = loaded(text)
    expected = layer(text)
    np.testing.assert_array_equal(out["ids"].numpy(), expected.to_tensor(-1).numpy())
    np.testing.assert_array_equal(out["lengths"].numpy(), expected.row_lengths().numpy())
    assert expected.to_list() == [[5, 6, 7, 8, 1], [9, 1, 6]]

    # That such a SavedModel runs in a fresh process with only TensorFlow and tensorflow_text
    # (as a model server has) is proved once, for every export's text signature, by
    # tests/serving (serving_client.py, test_signatures.py), not again here.


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"unk_token '<unk>' is not in the vocabulary\."):
        BertTokenizerLayer(SPECIALS, unk_token="<unk>")
    with pytest.raises(ValueError, match="vocabulary lacks the special token"):
        BertTokenizerLayer(["a", "b"])
    layer = BertTokenizerLayer(SPECIALS)
    with pytest.raises(ValueError, match=r"expects a tf.string tensor of shape \[batch\] or a "
                                         r"scalar, got shape \(1, 1\)"):
        layer(tf.constant([["a"]]))
