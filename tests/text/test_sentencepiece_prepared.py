"""Tests for bert_tf.text.sentencepiece_prepared: a SentencePiece model whose normaliser does
ALBERT's preparation, so TensorFlow Text's fast SentencePiece op alone (what LiteRT has)
segments raw text as the Python tokenizer segments prepared text."""

import unicodedata

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text import sentencepiece_prepared
from bert_tf.text.sentencepiece import (WORD_START, SentencePieceTokenizer, import_library,
                                        prepare_text)

from sentencepiece_fixtures import cjk_lines, make_sentencepiece_model, python_doc_lines

# Text the preparation changes: whitespace runs and ends, the ``'' quotes, accents (composed
# and combining), ligatures, full-width and other compatibility forms, ß, dotted capital I,
# control and format characters, and digits before commas (step 4, not the prepared model's).
EDGE_CASES = [
    "  two  spaces\tand a tab\nnewline\r\n\u3000ideographic\u00a0nbsp\u2028end  ",
    "``quoted'' and ''odd`` ```three'''", "Crème Brûlée naïve nai\u0308ve", "ﬁne ﬂow Ⅸ ½ ㍿",
    "ＦＵＬＬ ｗｉｄｔｈ ｶﾞ", "Straße İstanbul ǅemal µ", "a\x07b\x1fc\u200bd\ufeffe\u200df",
    "1990, 2,000,000 and 3,", "x1990, (1,000)", "", " ", "\t\n", "\u0301 marks \u0301\u0308",
    "😀 👍🏽 🇩🇪 ❤️", "北京大学 東京タワー 서울의 봄",
]


def _code_point_texts(do_lower_case):
    """"a{c}b" for every code point whose preparation or normalisation could do something
    (whitespace, compatibility or canonical decompositions, combining marks, case, control
    and format characters), and every seventh other assigned code point."""
    texts = []
    for code in range(1, 0x110000):
        c = chr(code)
        category = unicodedata.category(c)
        if category in ("Cn", "Cs"):
            continue
        acts = (c.isspace() or unicodedata.normalize("NFKD", c) != c or unicodedata.combining(c)
                or category in ("Cc", "Cf", "Mn", "Me") or (do_lower_case and c.lower() != c))
        if acts or code % 7 == 0:
            texts.append(f"a{c}b")
    return texts


@pytest.fixture(scope="module")
def model_proto():
    return make_sentencepiece_model()


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_fast_op_on_raw_text_gives_the_python_segmentation_of_prepared_text(model_proto,
                                                                          do_lower_case):
    python = SentencePieceTokenizer(model_proto, do_lower_case)
    prepared = sentencepiece_prepared.prepared_model_proto(python)
    texts = (python_doc_lines()[::4] + cjk_lines() + EDGE_CASES
             + _code_point_texts(do_lower_case))
    assert len(texts) > 55_000
    want = python.processor.encode([prepare_text(t, do_lower_case) for t in texts])
    got = tf_text.FastSentencepieceTokenizer(prepared).tokenize(tf.constant(texts)).to_list()
    assert [t for t, w, g in zip(texts, want, got) if w != g] == []
    # Pieces and scores are the model's, ids mean what they meant; the special pieces are
    # stand-ins, the unknown's one more piece.
    library = import_library()
    original = library.SentencePieceProcessor(model_proto=model_proto)
    changed = library.SentencePieceProcessor(model_proto=prepared)
    specials = sentencepiece_prepared.special_ids(python)
    assert specials == tuple(sorted(python.special_token_ids)) and len(specials) == 5
    standins = {i: sentencepiece_prepared.standin(k) for k, i in enumerate(specials)}
    standins[python.vocab_size] = standins.pop(python.unk_id)
    assert changed.get_piece_size() == python.vocab_size + 1
    assert [(changed.id_to_piece(i), changed.get_score(i)) for i in range(python.vocab_size + 1)
            ] == [(standins[i], 0.0) if i in standins else
                  (original.id_to_piece(i), original.get_score(i))
                  for i in range(python.vocab_size + 1)]


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_special_pieces_are_cut_out_and_the_documented_differences(model_proto,
                                                                   do_lower_case):
    """TensorFlow Text's fast op on the prepared model: special pieces written in the text come
    out whole (as their stand-ins), after a lone word start the graph drops, while text that
    only normalises to a special piece's text stays text; a word-final capital sigma
    lower-cases to σ (str.lower's ς needs the characters around it)."""
    python = SentencePieceTokenizer(model_proto, do_lower_case=do_lower_case)
    fast = tf_text.FastSentencepieceTokenizer(
        sentencepiece_prepared.prepared_model_proto(python))
    word_start = sentencepiece_prepared.word_start_id(python)
    unknown = sentencepiece_prepared.unknown_standin_id(python)
    cut_out = sentencepiece_prepared.standin_ids(python)
    assert word_start == python.vocab[WORD_START] and unknown == python.vocab_size
    assert cut_out == {python.vocab[t] for t in ("<pad>", "[CLS]", "[SEP]", "[MASK]")} | {
        unknown}

    def ids(text):
        ids = fast.tokenize(tf.constant([text])).to_list()[0]
        return [python.unk_id if i == unknown else i
                for k, i in enumerate(ids) if not (i == word_start and ids[k + 1] in cut_out)]

    for text in ["The cat [MASK] on the[SEP]mat <unk>", "[MASK][MASK] [CLS]x[SEP]", " [MASK] ",
                 "<pad>x", "[mask] x", "x [MASK]", "a<unk>b <unk> <unk><unk>",
                 # Text that normalises to a special piece's text, and the stand-ins.
                 "<PAD> x <Pad>", "<UNK>", "‹pád> ＜pad＞ x <\u0338pad>", "[MÁSK] x [ÇLS]",
                 "［MASK］", "\U0010f000 x\U0010f004y \U0010fffd"]:
        assert ids(text) == python.convert_tokens_to_ids(
            [p for chunk, special in python.split_special_tokens(text)
             for p in ([chunk] if special is not None else
                       python.processor.encode_as_pieces(prepare_text(chunk, do_lower_case)))])
    if not do_lower_case:
        return
    for text in ["ΟΔΟΣ ΣΑΣ.", "aΣ"]:
        want = python.processor.encode_as_pieces(prepare_text(text, True))
        assert "ς" in "".join(want)
        assert fast.tokenize(tf.constant([text])).to_list()[0] == python.convert_tokens_to_ids(
            [p.replace("ς", "σ") for p in want])
    # A mark between two characters that compose: Python drops it and the model's normaliser
    # composes them; the prepared model's rules see them apart (the pieces' surfaces show it).
    library = import_library().SentencePieceProcessor(
        model_proto=sentencepiece_prepared.prepared_model_proto(python))
    for text, composed in [("\u1100\u0301\u1161", "\uac00"), ("\u0b47\u0301\u0b3e", "\u0b4b")]:
        assert python.tokenize(text) == [WORD_START, composed]
        assert library.encode_as_pieces(text) == [WORD_START, text.replace("\u0301", "")]


def test_id_table_is_the_python_cut_per_id_and_the_unknown_for_its_stand_in(model_proto):
    python = SentencePieceTokenizer(model_proto)
    table, counts = sentencepiece_prepared.id_table(python)
    assert table.shape[0] == counts.shape[0] == python.vocab_size + 1
    assert sentencepiece_prepared.unknown_standin_id(python) == python.vocab_size
    assert table[-1].tolist() == [python.unk_id] + [-1] * (table.shape[1] - 1)
    assert counts[-1] == 1
    assert table.dtype == counts.dtype == np.int32
    cut = [i for i in range(python.vocab_size) if counts[i] > 1]
    assert len(cut) > 20
    for i in range(python.vocab_size):
        pieces = python.cut_digit_commas([python.inv_vocab[i]])
        row = table[i, :counts[i]].tolist()
        assert row == ([i] if i in python.special_token_ids
                       else python.convert_tokens_to_ids(pieces))
        assert (table[i, counts[i]:] == -1).all()
    comma = python.vocab[","]
    assert all(table[i, counts[i] - 1] == comma for i in cut)


def test_a_model_without_a_character_map():
    """An identity normaliser (no character map to decompile): the preparation's rules
    alone."""
    model = make_sentencepiece_model(normalization_rule_name="identity")
    assert not sentencepiece_prepared._normalizer_spec(model).get(2)  # precompiled_charsmap
    for do_lower_case in (True, False):
        python = SentencePieceTokenizer(model, do_lower_case)
        fast = tf_text.FastSentencepieceTokenizer(
            sentencepiece_prepared.prepared_model_proto(python))
        texts = python_doc_lines()[::40] + EDGE_CASES
        want = python.processor.encode([prepare_text(t, do_lower_case) for t in texts])
        got = fast.tokenize(tf.constant(texts)).to_list()
        assert [t for t, w, g in zip(texts, want, got) if w != g] == []


def test_special_pieces_stay_text_when_a_stand_in_is_a_piece():
    model = make_sentencepiece_model(user_defined_symbols=("\U0010f000",))
    python = SentencePieceTokenizer(model)
    assert sentencepiece_prepared.special_ids(python) == ()
    assert sentencepiece_prepared.standin_ids(python) == frozenset()
    assert sentencepiece_prepared.unknown_standin_id(python) is None
    assert len(sentencepiece_prepared.id_table(python)[1]) == python.vocab_size
    fast = tf_text.FastSentencepieceTokenizer(sentencepiece_prepared.prepared_model_proto(python))
    ids = fast.tokenize(tf.constant(["x [MASK]"])).to_list()[0]
    assert python.vocab["[MASK]"] not in ids and python.encode("x [MASK]")[-1] == python.vocab[
        "[MASK]"]


def test_a_normaliser_that_keeps_whitespace_runs_is_refused():
    model = make_sentencepiece_model(remove_extra_whitespaces=False)
    assert not sentencepiece_prepared.removes_extra_whitespace(model)
    assert sentencepiece_prepared.removes_extra_whitespace(make_sentencepiece_model())
    with pytest.raises(ValueError) as refused:
        sentencepiece_prepared.prepared_model_proto(SentencePieceTokenizer(model))
    assert str(refused.value) == (
        "SentencePiece model: the model's normaliser keeps runs of whitespace "
        "(normalizer_spec.remove_extra_whitespaces is off), which ALBERT's preparation "
        "collapses; no prepared model reproduces that.")
