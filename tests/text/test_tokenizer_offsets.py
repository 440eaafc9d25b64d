"""Tests for BertTokenizerLayer.tokenize_with_offsets: ids as tokenize_words, spans in the input."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tasks.token_tagger import split_words
from bert_tf.text.layers import BertTokenizerLayer, valid_utf8
from bert_tf.text.tokenization import WordpieceTokenizer, basic_tokenize

from text_samples import random_texts, vocab_for_texts

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _spans(starts, ends):
    """[texts][words][pieces] starts and ends -> [texts][words] lists of (start, end)."""
    return [[list(zip(ws, we)) for ws, we in zip(s, e)] for s, e in zip(starts, ends)]


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_offsets_cover_each_word_of_generated_text(do_lower_case):
    texts = random_texts(seed=11, count=300)
    vocab = vocab_for_texts(texts, do_lower_case, seed=12)
    python_tok = WordpieceTokenizer(vocab, do_lower_case=do_lower_case)
    layer = BertTokenizerLayer(vocab, do_lower_case=do_lower_case)
    ids, starts, ends = layer.tokenize_with_offsets(tf.constant(texts))
    assert ids.to_list() == layer.tokenize_words(tf.constant(texts)).to_list()
    assert ids.to_list() == [[python_tok.convert_tokens_to_ids(w)
                              for w in python_tok.tokenize_words(t)] for t in texts]
    checked_words = 0
    spans_of_texts = _spans(starts.to_list(), ends.to_list())
    for text, word_spans, word_ids in zip(texts, spans_of_texts, ids.to_list()):
        words = basic_tokenize(text, do_lower_case)
        assert len(words) == len(word_spans)
        previous_end = 0
        for word, spans, piece_ids in zip(words, word_spans, word_ids):
            assert len(spans) == len(piece_ids)
            word_start, word_end = spans[0][0], spans[-1][1]
            assert previous_end <= word_start < word_end <= len(text)
            # The span re-tokenizes to the word itself. A capital sigma may lose the context
            # that made it final, so the two sigmas count as one letter.
            again = basic_tokenize(text[word_start:word_end], do_lower_case)
            assert [w.replace("ς", "σ") for w in again] == [word.replace("ς", "σ")], (
                text, word, (word_start, word_end))
            # Pieces follow each other; they share a character only when it expanded into
            # several code points (uncased Hangul), and only deleted characters lie between.
            for (start, end), (next_start, _) in zip(spans, spans[1:]):
                assert start < end and next_start >= end - 1
                assert not basic_tokenize(text[end:next_start], do_lower_case)
            previous_end = word_end
            checked_words += 1
    assert checked_words > 1000


def test_exact_offsets_on_hand_picked_strings():
    vocab = SPECIALS + ["un", "##aff", "##able", ",", "hello", "e", "x", "北", "ab", "##cd",
                        "σ", "##σ", "ς", "##ς", "."]
    layer = BertTokenizerLayer(vocab)
    texts = ["Hello, unaffable!", "  x\x00x ÉX北", "ΣΣ.", "a" * 201 + " x", "", "   "]
    ids, starts, ends = layer.tokenize_with_offsets(tf.constant(texts))
    assert _spans(starts.to_list(), ends.to_list()) == [
        [[(0, 5)], [(5, 6)], [(7, 9), (9, 12), (12, 16)], [(16, 17)]],
        [[(2, 5)], [(6, 8)], [(8, 9)]],  # "x\x00x" is [UNK]; "ÉX" is "e" "##x" -> [UNK].
        [[(0, 1), (1, 2)], [(2, 3)]],
        [[(0, 201)], [(202, 203)]],
        [],
        [],
    ]
    assert ids.to_list()[2] == [[vocab.index("σ"), vocab.index("##ς")], [vocab.index(".")]]
    # Undecodable bytes become U+FFFD, one code point each, which the rules then delete.
    raw = tf.constant([b"ab\xffcd \xc3\xa9"])
    assert valid_utf8(raw).numpy()[0].decode("utf-8") == "ab\ufffdcd \u00e9"
    ids, starts, ends = layer.tokenize_with_offsets(raw)
    assert ids.to_list() == [[[vocab.index("ab"), vocab.index("##cd")], [vocab.index("e")]]]
    assert _spans(starts.to_list(), ends.to_list()) == [[[(0, 2), (3, 5)], [(6, 7)]]]
    # A scalar gives one text's [(words), (pieces)].
    ids, starts, ends = layer.tokenize_with_offsets(tf.constant("x hello"))
    assert ids.to_list() == [[vocab.index("x")], [vocab.index("hello")]]
    assert starts.to_list() == [[0], [2]] and ends.to_list() == [[1], [7]]


def test_offsets_on_the_exact_path_for_pieces_over_256_bytes():
    vocab = SPECIALS + ["ж" * 150, "##ж", "ж", "a", "##" + "ж" * 129, "x"]
    layer = BertTokenizerLayer(vocab)
    assert layer._long_lookup is not None
    texts = ["x " + "ж" * 160, "a" + "ж" * 129 + "ж", "ж" * 201]
    ids, starts, ends = layer.tokenize_with_offsets(tf.constant(texts))
    assert ids.to_list() == layer.tokenize_words(tf.constant(texts)).to_list()
    assert _spans(starts.to_list(), ends.to_list()) == [
        [[(0, 1)], [(2, 152)] + [(i, i + 1) for i in range(152, 162)]],
        [[(0, 1), (1, 130), (130, 131)]],
        [[(0, 201)]],
    ]


def test_offsets_in_a_graph_and_for_an_empty_batch():
    vocab = SPECIALS + ["the", "cat", "##s", "."]
    layer = BertTokenizerLayer(vocab)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def spans(text):
        ids, starts, ends = layer.tokenize_with_offsets(text)
        return ids.merge_dims(1, 2).to_tensor(-1), starts.merge_dims(1, 2).to_tensor(-1), \
            ends.merge_dims(1, 2).to_tensor(-1)

    ids, starts, ends = spans(tf.constant(["The cats.", "cat"]))
    assert ids.numpy().tolist() == [[5, 6, 7, 8], [6, -1, -1, -1]]
    assert starts.numpy().tolist() == [[0, 4, 7, 8], [0, -1, -1, -1]]
    assert ends.numpy().tolist() == [[3, 7, 8, 9], [3, -1, -1, -1]]
    assert spans(tf.constant([], tf.string))[0].shape == (0, 0)


def _tagger_words(tok, text):
    """The words bert_tf.tasks.TokenTagger reads in `text`: [(start, end, ids)]."""
    words, starts, ends = split_words(text)
    return [(s, e, tok.encode_word(w) or [tok.unk_id]) for w, s, e in zip(words, starts, ends)]


def test_word_spans_are_the_taggers_words_whole():
    """The tagging export's words are TokenTagger's (split_words), at the same offsets: a word
    keeps the characters the rules delete at its edges (the export cut "Cafe\\u0301" to "Cafe"
    and "\\x00null\\x01" to "null"), a word of them only is one [UNK], a word the rules split
    holds all its parts' pieces."""
    vocab = SPECIALS + ["cafe", "naive", "resume", "null", "word", "x", "y", ".", "=", "北", "京"]
    ids_of = {t: [vocab.index(t)] for t in vocab}
    unk = [vocab.index("[UNK]")]
    texts = ["Café naïve Cafe\u0301 résumé", "\x00null\x01 word", "\ufeff x", "x.\u0301 y",
             "北\x00京", "x\u2028y \u2260", "x\u2260y", "", "   "]
    layer = BertTokenizerLayer(vocab)
    ids, starts, ends = layer.tokenize_with_word_spans(tf.constant(texts))
    got = [list(zip(s, e, i)) for s, e, i in zip(starts.to_list(), ends.to_list(), ids.to_list())]
    assert got == [
        [(0, 4, ids_of["cafe"]), (5, 10, ids_of["naive"]), (11, 16, ids_of["cafe"]),
         (17, 23, ids_of["resume"])],
        [(0, 6, ids_of["null"]), (7, 11, ids_of["word"])],
        [(0, 1, unk), (2, 3, ids_of["x"])],
        [(0, 1, ids_of["x"]), (1, 2, ids_of["."]), (2, 3, unk), (4, 5, ids_of["y"])],
        [(0, 1, ids_of["北"]), (1, 2, unk), (2, 3, ids_of["京"])],
        [(0, 3, ids_of["x"] + ids_of["y"]), (4, 5, ids_of["="])],
        [(0, 3, ids_of["x"] + ids_of["="] + ids_of["y"])],
        [],
        [],
    ]
    tok = WordpieceTokenizer(vocab)
    assert got == [_tagger_words(tok, t) for t in texts]
    # The pieces' own offsets stay at their characters (SQuAD answers are cut there).
    _, piece_starts, piece_ends = layer.tokenize_with_offsets(tf.constant(texts[:2]))
    assert _spans(piece_starts.to_list(), piece_ends.to_list()) == [
        [[(0, 4)], [(5, 10)], [(11, 15)], [(17, 23)]], [[(1, 5)], [(7, 11)]]]
    # A scalar gives one text's [(words), (pieces)] and [(words)].
    ids, starts, ends = layer.tokenize_with_word_spans(tf.constant("\x00x y\x01"))
    assert (ids.to_list(), starts.numpy().tolist(), ends.numpy().tolist()) == (
        [ids_of["x"], ids_of["y"]], [0, 3], [2, 5])


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_word_spans_of_generated_text_are_the_taggers(do_lower_case):
    texts = random_texts(seed=11, count=300)
    vocab = vocab_for_texts(texts, do_lower_case, seed=12)
    tok = WordpieceTokenizer(vocab, do_lower_case=do_lower_case)
    layer = BertTokenizerLayer(vocab, do_lower_case=do_lower_case)
    spans = tf.function(layer.tokenize_with_word_spans,
                        input_signature=[tf.TensorSpec([None], tf.string)])
    ids, starts, ends = spans(tf.constant(texts))
    checked = 0
    for text, word_ids, word_starts, word_ends in zip(texts, ids.to_list(), starts.to_list(),
                                                      ends.to_list()):
        expected = _tagger_words(tok, text)
        assert list(zip(word_starts, word_ends)) == [(s, e) for s, e, _ in expected], text
        for got_ids, (start, end, expected_ids) in zip(word_ids, expected):
            # A capital sigma is final or not by the whole text here, by the word in Python.
            if "\u03a3" not in text[start:end]:
                assert got_ids == expected_ids, (text, text[start:end])
                checked += 1
    assert checked > 5000
    assert [r.shape[0] for r in spans(tf.constant([], tf.string))] == [0, 0, 0]


def test_tagger_classes_are_split_words_rules_for_every_code_point():
    from bert_tf.text import layers, tokenization

    block_index, blocks = layers._tagger_classes()
    got = blocks.reshape([-1, 256])[block_index].reshape([-1])
    chars = [chr(c) for c in range(0x110000)]
    alone = np.array([tokenization.is_punctuation_char(c) or tokenization.is_cjk_char(ord(c))
                      for c in chars])
    space = np.array([tokenization.is_whitespace_char(c) for c in chars])
    np.testing.assert_array_equal(got, np.where(alone, 2, np.where(space, 1, 0)))


def test_word_spans_of_whole_word_layers_are_their_pieces_spans():
    from bert_tf.text import load_tokenizer, tokenizer_layer

    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    layer = tokenizer_layer(load_tokenizer(os.path.join(fixtures, "bpe_tokenizer.json")))
    texts = tf.constant(["New York's café.", "", "x\u00a0y"])
    ids, starts, ends = layer.tokenize_with_word_spans(texts)
    piece_ids, piece_starts, piece_ends = layer.tokenize_with_offsets(texts)
    assert ids.to_list() == piece_ids.to_list()
    assert starts.to_list() == [[s[0] for s in row] for row in piece_starts.to_list()]
    assert ends.to_list() == [[e[0] for e in row] for row in piece_ends.to_list()]
    assert starts.to_list()[0] == [0, 4, 8, 11, 15] and ends.to_list()[0] == [3, 8, 10, 15, 16]
