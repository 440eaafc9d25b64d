"""Tests for BertTokenizerLayer.tokenize_with_offsets: ids as tokenize_words, spans in the input."""

import pytest
import tensorflow as tf

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
