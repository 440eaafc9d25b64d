"""Tests for bert_tf.text.sentencepiece_layer: the Python SentencePieceTokenizer's ids in-graph."""

import json

import keras
import pytest
import tensorflow as tf

from bert_tf.data.tasks.squad import whitespace_split
from bert_tf.text import bpe
from bert_tf.text.sentencepiece import (WORD_START, SentencePieceTokenizer, ends_in_digit_comma,
                                        prepare_text)
from bert_tf.text.sentencepiece_layer import SentencePieceTokenizerLayer

from sentencepiece_fixtures import (cjk_lines, make_sentencepiece_model, number_lines,
                                    python_doc_lines)
from text_samples import ids_in_a_fresh_process, random_texts, save_ids_module

EDGE_CASES = [
    "1990, 2,000,000 and 3,", "(1,000)", "x1990, 12,345,678, ٣,٤ ²,", "``quoted'' and ''odd``",
    "Crème Brûlée naïve", "nai\u0308ve ﬁne Ⅸ ½", "ΟΔΟΣ ΣΑΣ", "ΑΣ.Σ ΣΣ Σ aΣ'Σ", "İstanbul ǅemal",
    "\u2c2f\ua7c0 \U00010570", "tab\there\nnew\r\nline\u3000ideo\u00a0nbsp\u2028\x85end",
    "a[MASK]b [MASK] [MASK][MASK]", "[MASK]", " [MASK] ", "[CLS] x [SEP]", "<unk> and <pad>",
    "[mask] [MASK", "", " ", "\t\n\u3000", "😀 👍🏽 🇩🇪 ❤️", "a\x00b \x00", "\x00",
    "\u0301 only marks \u0301\u0308", "\U000e0001\ue000\U0001e7ff",
    # Segmentations of equal score ("▁*" "**" "***********"), which tensorflow_text's
    # SentencepieceTokenizer op puts in another order than the Python package.
    "*" * 14, "-" * 13, "_" * 11, "3.1400000",
]


@pytest.fixture(scope="module")
def model_proto():
    return make_sentencepiece_model()


@pytest.fixture(scope="module")
def corpus():
    """Prose, generated multilingual strings, CJK, numbers and the edge cases: list of str."""
    return (python_doc_lines()[::25] + random_texts(seed=7, count=300) + cjk_lines()
            + number_lines(60, seed=1) + EDGE_CASES)


@pytest.fixture(scope="module")
def layers(model_proto):
    return {lower: SentencePieceTokenizerLayer(model_proto, do_lower_case=lower)
            for lower in (True, False)}


def _mismatches(layer, python, texts):
    tokenize = tf.function(layer.call, input_signature=[tf.TensorSpec([None], tf.string)])
    got = tokenize(tf.constant(texts)).to_list()
    expected = [python.encode(t) for t in texts]
    return [(t, g, e) for t, g, e in zip(texts, got, expected) if g != e]


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_ids_equal_the_python_tokenizer(model_proto, layers, corpus, do_lower_case):
    python = SentencePieceTokenizer(model_proto, do_lower_case)
    assert _mismatches(layers[do_lower_case], python, corpus) == []
    # The corpus reaches every branch of step 4: pieces cut before the comma that start a word
    # and that continue one.
    cut = [p for t in corpus for chunk, special in python.split_special_tokens(t)
           if special is None
           for p in python.processor.encode_as_pieces(prepare_text(chunk, do_lower_case))
           if ends_in_digit_comma(p)]
    assert any(p.startswith(WORD_START) for p in cut) and any(
        not p.startswith(WORD_START) for p in cut)
    assert len(corpus) > 800


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_preparation_equals_python(layers, corpus, do_lower_case):
    """Step 2 alone, where a 1000-piece English model maps most of the text to <unk>."""
    texts = corpus + ["ΟΔΟΣ ΣΑΣ", "ὈΔΥΣΣΕΎΣ", "Σ", "aΣ", "Σa", "ΑΣ\x00Σ", "ΑΣ\u00adΣ\u0301",
                      "\u2c2f\ua7c0\U00010570\U000105c9\U00011383", "ﬃ Ⅷ ㎏ ǅ ẞ İI",
                      "e\u0301\u0327\u0316 \u1100\u1161\u11a8 각"]
    got = layers[do_lower_case]._prepare(tf.constant(texts)).numpy()
    assert [t for t, g in zip(texts, got)
            if g.decode("utf-8") != prepare_text(t, do_lower_case)] == []
    # str.lower's final sigma, which the layer reads off Python, not TensorFlow's ICU; and
    # Unicode 14 capitals that TensorFlow's ICU does not lower.
    assert got[len(corpus)].decode() == ("οδος σας" if do_lower_case else "ΟΔΟΣ ΣΑΣ")
    if do_lower_case:
        assert got[len(corpus) + 7].decode()[:3] == "\u2c5f\ua7c1\U00010597"


def test_hand_picked_ids(model_proto, layers):
    python = SentencePieceTokenizer(model_proto)
    layer = layers[True]
    ids = layer(tf.constant(["a[MASK]b", "ΟΔΟΣ ΣΑΣ", "", "(1,000)"])).to_list()
    assert ids[0][1] == layer.mask_id == python.mask_id == 4
    assert python.convert_ids_to_tokens(ids[0]) == python.tokenize("a[MASK]b")
    assert ids[1] == python.encode("ΟΔΟΣ ΣΑΣ")
    assert ids[2] == []
    # "1," is a piece of the model; ALBERT's rule cuts it.
    assert ids[3] == python.encode("(1,000)")
    assert [python.inv_vocab[i] for i in ids[3]][1:3] == ["1", ","]
    assert "1," in python.vocab
    assert (layer.cls_id, layer.sep_id, layer.pad_id, layer.mask_id, layer.unk_id) == (
        2, 3, 0, 4, 1)
    assert layer.vocab_size == python.vocab_size == 1000
    assert (layer.kind, layer.litert_kernels, layer.do_lower_case) == (
        "SentencePiece", True, True)


def test_scalars_ragged_shape_and_invalid_utf8(model_proto, layers):
    python = SentencePieceTokenizer(model_proto)
    layer = layers[True]
    out = layer(tf.constant(["one two", "three"]))
    assert out.dtype == tf.int32 and out.row_splits.dtype == tf.int64
    assert layer(tf.constant("one two")).numpy().tolist() == python.encode("one two")
    raw = b"ab\xffcd \xfe x\x00y"
    assert layer(tf.constant([raw])).to_list()[0] == python.encode(raw)
    with pytest.raises(ValueError, match="shape \\[batch\\] or a scalar"):
        layer(tf.constant([["a"]]))


def test_in_tf_data_map(model_proto, layers):
    python = SentencePieceTokenizer(model_proto)
    texts = ["In 1990, 2,000 people.", "", "  Crème [MASK] brûlée  "]
    ds = tf.data.Dataset.from_tensor_slices(texts).map(layers[True])
    assert [r.numpy().tolist() for r in ds] == [python.encode(t) for t in texts]


def _word_spans(text, ids, starts, ends, python, unk_id):
    """The words that offsets cover in a text, after checking that each word's pieces are
    encode_word of the word (or [unk_id] for a word without pieces), that every piece of a
    word spans the whole word, and that words come in order without overlapping."""
    words, previous_end = [], 0
    for word_ids, word_starts, word_ends in zip(ids, starts, ends):
        assert len(word_ids) == len(word_starts) > 0
        assert set(word_starts) == {word_starts[0]} and set(word_ends) == {word_ends[0]}
        assert previous_end <= word_starts[0] < word_ends[0] <= len(text)
        word = text[word_starts[0]:word_ends[0]]
        assert word_ids == (python.encode_word(word) or [unk_id]), (text, word)
        words.append(word)
        previous_end = word_ends[0]
    return words


@pytest.mark.parametrize("words", ["pieces", "whitespace"])
def test_tokenize_with_offsets_gives_each_word_its_ids_and_span(model_proto, layers, words):
    python = SentencePieceTokenizer(model_proto)
    layer = layers[True]
    # tf_text's regex split stops at a NUL character (as for BpeTokenizerLayer).
    texts = (python_doc_lines()[::200] + number_lines(10, seed=2)
             + EDGE_CASES + random_texts(seed=9, count=40))
    texts = [t.replace("\x00", "") for t in texts]
    ids, starts, ends = layer.tokenize_with_offsets(tf.constant(texts), words=words)
    checked = 0
    for text, i, s, e in zip(texts, ids.to_list(), starts.to_list(), ends.to_list()):
        found = _word_spans(text, i, s, e, python, layer.unk_id)
        if words == "whitespace":
            assert found == whitespace_split(text)[0]
        else:  # The words hold every character but whitespace.
            assert "".join(found) == "".join(c for c in text if ord(c) not in bpe.WHITE_SPACE)
        checked += len(found)
    assert checked > 500
    # GPT-2's words: punctuation and contractions apart. A word that preparation deletes (a
    # lone mark) gets the unknown id, as the tagging data give it.
    ids, starts, ends = layer.tokenize_with_offsets(tf.constant(["New York's x \u0301 1990,"]),
                                                    words=words)
    found = _word_spans("New York's x \u0301 1990,", ids.to_list()[0], starts.to_list()[0],
                        ends.to_list()[0], python, layer.unk_id)
    assert found == (["New", "York", "'s", "x", "\u0301", "1990", ","] if words == "pieces"
                     else ["New", "York's", "x", "\u0301", "1990,"])
    assert python.encode("\u0301") == [] and [layer.unk_id] in ids.to_list()[0]


def test_question_and_context(model_proto, layers):
    python = SentencePieceTokenizer(model_proto)
    questions = ["What did 2,000 people pay?", "Who?"]
    contexts = ["In 1990, about 2,000 people paid 5.", "Crème brûlée [MASK]."]
    question_ids, ids, starts, ends = layers[True].tokenize_question_and_context(
        tf.constant(questions), tf.constant(contexts))
    assert question_ids.to_list() == [python.encode(q) for q in questions]
    assert ids.to_list() == [[python.encode_word(w) for w in c.split()] for c in contexts]
    assert [[s[0] for s in row] for row in starts.to_list()][1] == [0, 6, 13]


def test_corpus_lines_masks_texts_and_assets(model_proto, layers):
    layer = layers[True]
    lines = tf.constant(["  two  words\t", "\u3000 \n", "x"])
    assert layer.corpus_lines(lines).numpy().tolist() == [b"two  words", b"", b"x"]
    python = SentencePieceTokenizer(model_proto)
    for line in ["  two  words\t", "\u3000 \n", "x"]:
        assert layer(layer.corpus_lines(tf.constant([line]))).to_list()[0] == \
            python.encode_line(line)
    layer.check_masks_in_text()
    masked = layer.tokenize_with_masks(tf.constant(["The [MASK] sat."]))
    assert masked.to_list() == [python.encode("The [MASK] sat.")]
    assert masked.to_list()[0].count(layer.mask_id) == 1
    texts = layer.token_texts()
    assert texts[:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert texts[python.vocab[WORD_START + "the"]] == " the"
    assert len(texts) == layer.vocab_size
    assert layer.asset() == ("spiece.model", model_proto)
    assert layer.export_info() == {"tokenizer": "SentencePiece (assets/spiece.model)"}


def test_get_config_round_trip(model_proto, layers):
    texts = tf.constant(["In 1990, Crème [MASK] ΣΑΣ.", ""])
    for layer in layers.values():
        config = json.loads(json.dumps(layer.get_config()))
        clone = SentencePieceTokenizerLayer.from_config(config)
        assert clone.model_proto == model_proto
        assert clone.do_lower_case == layer.do_lower_case
        assert clone(texts).to_list() == layer(texts).to_list()
    assert keras.saving.get_registered_object(
        "bert_tf>SentencePieceTokenizerLayer") is SentencePieceTokenizerLayer
    with pytest.raises(ValueError, match="not base64"):
        SentencePieceTokenizerLayer("spiece.model")
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        SentencePieceTokenizerLayer(b"not a model")


def test_saved_model_gives_the_same_ids_in_a_fresh_process(model_proto, layers, tmp_path):
    """The SavedModel holds the model's bytes: a process with only TensorFlow and
    tensorflow_text (as a model server has) gives the Python tokenizer's ids."""
    export_dir = save_ids_module(layers[True], str(tmp_path / "sentencepiece_tokenizer"))
    texts = EDGE_CASES + number_lines(5, seed=3)
    python = SentencePieceTokenizer(model_proto)
    assert ids_in_a_fresh_process(export_dir, texts, tmp_path) == [python.encode(t)
                                                                   for t in texts]


def test_other_model_kinds_use_the_sentencepiece_op():
    """A BPE-type model (which the fast op cannot segment) and one without [MASK]."""
    proto = make_sentencepiece_model(model_type="bpe", control_symbols=("[CLS]", "[SEP]"))
    layer = SentencePieceTokenizerLayer(proto, do_lower_case=False)
    assert type(layer._sentencepiece).__name__ == "SentencepieceTokenizer"
    python = SentencePieceTokenizer(proto, do_lower_case=False)
    texts = python_doc_lines()[::60] + number_lines(20, seed=4) + EDGE_CASES
    assert _mismatches(layer, python, texts) == []
    assert layer.mask_id is None
    with pytest.raises(ValueError, match="no mask piece"):
        layer.check_masks_in_text()
    assert (layer.litert_kernels, layer.litert_problem) == (
        False, "LiteRT's SentencePiece kernel takes only unigram models without byte pieces "
        "whose pieces start words with \u2581")
    # A unigram model whose normaliser keeps whitespace runs: the fast op, but no LiteRT route
    # (bert_tf.text.sentencepiece_prepared).
    layer = SentencePieceTokenizerLayer(make_sentencepiece_model(remove_extra_whitespaces=False))
    assert type(layer._sentencepiece).__name__ == "FastSentencepieceTokenizer"
    assert (layer.litert_kernels, layer.litert_problem) == (
        False, "the model's normaliser keeps runs of whitespace (normalizer_spec."
        "remove_extra_whitespaces is off), which ALBERT's preparation collapses")
