"""SQuAD post-processing on hand-built windows and logits: n-best, max context, no-answer."""

import json
import math

import numpy as np
import pytest

from bert_tf.data.tasks import squad
from bert_tf.data.tasks.squad_postprocess import (
    compute_predictions,
    get_final_text,
    predict_example,
    write_predictions,
)
from bert_tf.text import WordpieceTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "a", "b", "c", "d", "e", "f",
         "g", "h", "i", "j", "cafe", "zurich", ",", ".", "北", "京", "大", "学", "in", "1999"]


@pytest.fixture
def tokenizer():
    return WordpieceTokenizer(VOCAB, do_lower_case=True)


def _windows(tokenizer, context, max_seq_length, doc_stride=2, qid="q"):
    data = [{"paragraphs": [{"context": context, "qas": [{"id": qid, "question": "who"}]}]}]
    examples, _ = squad.read_squad_examples(data, "t", is_training=False,
                                            version_2_with_negative=False)
    features = list(squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=max_seq_length, doc_stride=doc_stride,
        max_query_length=1, is_training=False))
    return examples, features


def _logits(features, seq_length, points, base=0.0):
    """Logits `base` except {(window, position): (start, end)}."""
    start = np.full((len(features), seq_length), base, np.float32)
    end = np.full((len(features), seq_length), base, np.float32)
    for (window, position), (s, e) in points.items():
        start[window, position], end[window, position] = s, e
    return start, end


def _predict(example, features, start, end, **kwargs):
    kwargs = dict(dict(n_best_size=20, max_answer_length=30, do_lower_case=True,
                       version_2_with_negative=False), **kwargs)
    return predict_example(example, features, list(start), list(end), **kwargs)


@pytest.mark.parametrize("pred, orig, lower, expected", [
    ("steve smith", "Steve Smith's", True, "Steve Smith"),
    ("1895", "(1895-1943).", True, "1895"),
    ("cafe", "Café,", True, "Café"),
    ("Café", "Café,", False, "Café"),
    ("京 大", "北京大学", True, "京大"),
    ("zurich", "(Zürich)", True, "Zürich"),
    # Failures return the original words whole: text not found, ...
    ("geneva", "Zürich", True, "Zürich"),
    # ... and lengths that differ once the tokenizer dropped a character (U+200B, Cf).
    ("smith", "Smith\u200b's", True, "Smith\u200b's"),
])
def test_get_final_text(pred, orig, lower, expected):
    assert get_final_text(pred, orig, lower) == expected


def test_answers_at_window_edges(tokenizer):
    # 10 pieces, 4 per window (S=8 with "[CLS] who [SEP]" and the last [SEP]), stride 2.
    (example,), features = _windows(tokenizer, "a b c d e f g h i j", 8)
    assert len(features) == 4
    # Position 6 of the last window is its last context piece ("j"), position 3 of the first
    # its first ("a").
    start, end = _logits(features, 8, {(3, 6): (9.0, 9.0)})
    text, nbest, odds = _predict(example, features, start, end)
    assert (text, odds) == ("j", None)
    assert nbest[0]["start_logit"] == nbest[0]["end_logit"] == 9.0
    start, end = _logits(features, 8, {(0, 3): (9.0, 0.0), (0, 4): (0.0, 9.0)})
    assert _predict(example, features, start, end)[0] == "a b"


def test_a_piece_is_scored_only_in_its_max_context_window(tokenizer):
    (example,), features = _windows(tokenizer, "a b c d e f g h i j", 8)
    # "f" is at position 6 of window 1 (no right context) and position 4 of window 2 (its
    # max-context window). The higher start logit of window 1 does not count.
    start, end = _logits(features, 8, {(1, 6): (10.0, 4.0), (2, 4): (5.0, 5.0)})
    text, nbest, _ = _predict(example, features, start, end)
    assert text == "f"
    assert (nbest[0]["start_logit"], nbest[0]["end_logit"]) == (5.0, 5.0)
    # An end logit in a window still counts when the start is that window's max context.
    start, end = _logits(features, 8, {(1, 4): (6.0, 0.0), (1, 6): (0.0, 6.0)})
    assert _predict(example, features, start, end)[0] == "d e f"


def test_span_rules_order_and_probabilities(tokenizer):
    (example,), features = _windows(tokenizer, "a b c d", 16)
    # Positions: 3 a, 4 b, 5 c, 6 d. The best end (b) precedes the best start (c).
    start, end = _logits(features, 16, {(0, 5): (8.0, 0.0), (0, 4): (-5.0, 9.0),
                                        (0, 6): (-5.0, 1.0)}, base=-5.0)
    text, nbest, _ = _predict(example, features, start, end)
    assert text == "c d"
    assert _predict(example, features, start, end, max_answer_length=1)[0] == "c"
    assert _predict(example, features, start, end, max_answer_length=1,
                    n_best_size=1)[0] == "empty"
    # Every span of the 4 context pieces, each once.
    texts = [e["text"] for e in nbest]
    assert len(texts) == len(set(texts)) == 10
    scores = [e["start_logit"] + e["end_logit"] for e in nbest]
    assert scores == sorted(scores, reverse=True)
    total = sum(math.exp(s) for s in scores)
    assert nbest[0]["probability"] == pytest.approx(math.exp(scores[0]) / total)
    assert sum(e["probability"] for e in nbest) == pytest.approx(1.0)
    # No valid span at all (the single best start is [CLS]): the original's placeholder.
    start, end = _logits(features, 16, {(0, 0): (5.0, 5.0)})
    assert _predict(example, features, start, end, n_best_size=1)[0] == "empty"


def test_same_text_from_two_spans_is_listed_once(tokenizer):
    (example,), features = _windows(tokenizer, "a b a", 16)
    start, end = _logits(features, 16, {(0, 3): (4.0, 4.0), (0, 5): (3.0, 3.0)})
    _, nbest, _ = _predict(example, features, start, end)
    # Scores: a (pos 3-3) 8, "a b a" 7, a (5-5) 6 is dropped, "a b" 4, "b a" 3, "b" 0.
    assert [e["text"] for e in nbest] == ["a", "a b a", "a b", "b a", "b"]
    assert nbest[0]["start_logit"] == 4.0


def test_no_answer_null_score_and_threshold(tokenizer):
    (example,), features = _windows(tokenizer, "a b c d e f g h i j", 8)
    # Null scores per window 6, 7, 4, 8: the null score is the minimum, of window 2.
    points = {(0, 0): (3.0, 3.0), (1, 0): (3.5, 3.5), (2, 0): (2.0, 2.0), (3, 0): (4.0, 4.0),
              (2, 4): (2.5, 2.5)}
    start, end = _logits(features, 8, points)
    v2 = dict(version_2_with_negative=True)
    text, nbest, odds = _predict(example, features, start, end, **v2)
    # Best span "f" (window 2): 5.0; null 4.0: odds = 4 - 5 = -1 <= 0 -> the span.
    assert (text, odds) == ("f", -1.0)
    null = [e for e in nbest if e["text"] == ""]
    assert len(null) == 1 and (null[0]["start_logit"], null[0]["end_logit"]) == (2.0, 2.0)
    text, _, odds = _predict(example, features, start, end, null_score_diff_threshold=-1.5,
                             **v2)
    assert (text, odds) == ("", -1.0)
    # The null answer outscoring every span.
    start, end = _logits(features, 8, {(w, 0): (6.0, 6.0) for w in range(4)})
    text, nbest, odds = _predict(example, features, start, end, **v2)
    assert text == "" and nbest[0]["text"] == "" and odds == 12.0
    # Only the null answer is valid: "" with odds against a zero span score.
    start, end = _logits(features, 8, {(w, 0): (1.0, 2.0) for w in range(4)})
    assert _predict(example, features, start, end, n_best_size=1, **v2) == (
        "", [{"text": "", "probability": 1.0, "start_logit": 1.0, "end_logit": 2.0}], 3.0)


def test_unicode_context_answers_in_original_spelling(tokenizer):
    context = "Café Zürich, 北京大学 in 1999."
    (example,), features = _windows(tokenizer, context, 32)
    tokens = features[0].tokens
    assert tokens[3:] == ["cafe", "zurich", ",", "北", "京", "大", "学", "in", "1999", ".",
                          "[SEP]"]
    start, end = _logits(features, 32, {(0, 4): (5.0, 5.0)})
    assert _predict(example, features, start, end)[0] == "Zürich"
    start, end = _logits(features, 32, {(0, 7): (5.0, 0.0), (0, 8): (0.0, 5.0)})
    assert _predict(example, features, start, end)[0] == "京大"
    start, end = _logits(features, 32, {(0, 3): (5.0, 0.0), (0, 4): (0.0, 5.0)})
    assert _predict(example, features, start, end)[0] == "Café Zürich"


def _answer_and_offset(example, features, points, length=32):
    start, end = _logits(features, length, points)
    text, nbest, _ = _predict(example, features, start, end, spans=True)
    return text, nbest[0]["word"], nbest[0]["offset"]


def test_answers_are_cut_where_their_pieces_lie(tokenizer):
    # An unspaced paragraph is one context word: the answer is the span's own characters,
    # not the first place its text occurs (get_final_text's "北京" at offset 0).
    (example,), features = _windows(tokenizer, "北京大学北京大", 32)
    assert features[0].tokens[3:10] == ["北", "京", "大", "学", "北", "京", "大"]
    assert features[0].token_to_char_span[7] == (4, 5)
    assert _answer_and_offset(example, features, {(0, 7): (5.0, 0.0), (0, 8): (0.0, 5.0)}) == (
        "北京", 0, 4)
    # An [UNK] piece inside the paragraph is its own character, not the whole paragraph.
    (example,), features = _windows(tokenizer, "北京是大学", 32)
    assert features[0].tokens[3:8] == ["北", "京", "[UNK]", "大", "学"]
    assert _answer_and_offset(example, features, {(0, 5): (5.0, 5.0)}) == ("是", 0, 2)
    assert _answer_and_offset(example, features, {(0, 4): (5.0, 0.0), (0, 6): (0.0, 5.0)}) == (
        "京是大", 0, 1)
    # Uncased Hangul: a syllable decomposes into jamo pieces, each covering the syllable.
    hangul = WordpieceTokenizer(VOCAB + ["ᄒ", "##ᅡ", "##ᆫ", "##ᄀ", "##ᅮ", "##ᆨ"],
                                do_lower_case=True)
    (example,), features = _windows(hangul, "in 한국 1999", 32)
    assert features[0].tokens[4:10] == ["ᄒ", "##ᅡ", "##ᆫ", "##ᄀ", "##ᅮ", "##ᆨ"]
    assert _answer_and_offset(example, features, {(0, 4): (5.0, 0.0), (0, 6): (0.0, 5.0)}) == (
        "한", 1, 0)
    assert _answer_and_offset(example, features, {(0, 6): (5.0, 0.0), (0, 10): (0.0, 5.0)}) == (
        "한국 1999", 1, 0)
    # An answer ending inside a word keeps the characters of that word's pieces only.
    (example,), features = _windows(tokenizer, "Café, Zürich.", 32)
    assert _answer_and_offset(example, features, {(0, 3): (5.0, 0.0), (0, 5): (0.0, 5.0)}) == (
        "Café, Zürich", 0, 0)


def test_compute_and_write_predictions(tokenizer, tmp_path):
    data = [{"paragraphs": [
        {"context": "a b c d e f g h i j", "qas": [{"id": "q1", "question": "who"}]},
        {"context": "Café Zürich", "qas": [{"id": "q2", "question": "who"}]},
        {"context": " \u200b ", "qas": [{"id": "q3", "question": "who"}]}]}]
    examples, _ = squad.read_squad_examples(data, "t", is_training=False,
                                            version_2_with_negative=True)
    features = list(squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=8, doc_stride=2, max_query_length=1,
        is_training=False))
    # q3's context has no token, so no window.
    assert [f.example_index for f in features] == [0, 0, 0, 0, 1]
    start, end = _logits(features, 8, {(2, 4): (5.0, 5.0), (4, 4): (5.0, 5.0)})
    result = compute_predictions(examples, features, start, end, n_best_size=5,
                                 max_answer_length=30, do_lower_case=True,
                                 version_2_with_negative=True)
    assert result.predictions == {"q1": "f", "q2": "Zürich", "q3": ""}
    assert result.null_odds == {"q1": -10.0, "q2": -10.0, "q3": 0.0}
    paths = write_predictions(result, str(tmp_path))
    assert sorted(paths) == ["nbest_predictions", "null_odds", "predictions"]
    with open(paths["predictions"], encoding="utf-8") as f:
        assert json.load(f) == result.predictions
    assert "Zürich" in (tmp_path / "predictions.json").read_text(encoding="utf-8")
    with open(paths["nbest_predictions"], encoding="utf-8") as f:
        nbest = json.load(f)
    assert sorted(nbest["q1"][0]) == ["end_logit", "probability", "start_logit", "text"]
    assert (nbest["q1"][0]["text"], nbest["q1"][0]["start_logit"]) == ("f", 5.0)
    # Five spans, then the null answer that did not make the five.
    assert len(nbest["q1"]) == 6 and nbest["q1"][-1]["text"] == ""
    with pytest.raises(ValueError, match="5 features but 4 start and 5 end logit rows"):
        compute_predictions(examples, features, start[:4], end)
    v1 = compute_predictions(examples[:2], features, start, end, n_best_size=5)
    assert v1.null_odds is None and v1.predictions == {"q1": "f", "q2": "Zürich"}
    assert sorted(write_predictions(v1, str(tmp_path / "."))) == ["nbest_predictions",
                                                                  "predictions"]


def test_predictions_with_a_lone_surrogate_are_written_and_read_back(tmp_path):
    """Case 8: a "\\ud800" escape in the predict file reached predictions.json, whose UTF-8
    encoding failed after training and evaluation."""
    import json
    import types

    result = types.SimpleNamespace(
        predictions={"q1": "caf\u00e9 \ud800 end"}, nbest={"q1": [{"text": "\ud800",
                                                                    "probability": 1.0}]},
        null_odds=None)
    paths = write_predictions(result, str(tmp_path))
    text = (tmp_path / "predictions.json").read_text(encoding="utf-8")
    assert '"caf\u00e9 \\ud800 end"' in text  # readable UTF-8, the surrogate escaped
    with open(paths["predictions"], encoding="utf-8") as f:
        assert json.load(f) == result.predictions
    with open(paths["nbest_predictions"], encoding="utf-8") as f:
        assert json.load(f) == result.nbest


def test_bpe_answers_are_the_whole_context_words_of_the_span():
    """whole_words (byte-level BPE): a span inside a word answers the word; a span over
    several words answers them as the context writes them, punctuation included."""
    from bpe_fixtures import BPE_TOKENIZER_JSON

    from bert_tf.text import load_tokenizer

    tokenizer = load_tokenizer(BPE_TOKENIZER_JSON)
    examples, features = _windows(tokenizer, "Tesla (1895-1943). Denver Broncos, won", 64)
    (feature,) = features
    # [CLS] w [SEP] ("who" cut to one piece), then the context: "Tesla" is T es la,
    # "(1895-1943)." is Ġ( 1 8 9 5 - ...
    assert feature.tokens[:7] == ["[CLS]", "w", "[SEP]", "T", "es", "la", "Ġ("]
    year = feature.tokens.index("1")
    broncos_end = feature.tokens.index(",")
    # "T" (the WordPiece projection would answer "T"), 1 8 9 5 (the year alone), then from
    # the year to the "s" of "Broncos,".
    for (start, end), expected in [((3, 3), "Tesla"), ((year, year + 3), "(1895-1943)."),
                                   ((year, broncos_end - 1), "(1895-1943). Denver Broncos,")]:
        start_logits, end_logits = _logits(features, 64, {(0, start): (5.0, 0.0),
                                                          (0, end): (0.0, 5.0)})
        text, _, _ = _predict(examples[0], features, start_logits, end_logits,
                              do_lower_case=False, whole_words=True)
        assert text == expected


def test_padding_never_takes_a_candidates_place(tokenizer):
    """Logits past a window's tokens (zeros where a length-bucketed batch was cut short, or
    whatever the model gives padding) cannot crowd its spans out of the n-best: the answer
    is the same as with the window's tokens alone, however long the padding."""
    # One window: "[CLS] who [SEP] a b c d e f [SEP]" = 10 tokens.
    (example,), features = _windows(tokenizer, "a b c d e f", 32, doc_stride=16)
    assert len(features) == 1 and len(features[0].tokens) == 10
    # Every token's logit is negative (a confident model), the answer "c d" the least so.
    start, end = _logits(features, 10, {(0, 5): (-1.0, -7.0), (0, 6): (-7.0, -1.0)},
                         base=-8.0)
    alone = _predict(example, features, start, end, n_best_size=3)
    assert alone[0] == "c d"
    for length in (16, 32):
        padded = [np.pad(row, (0, length - 10)) for row in (start[0], end[0])]
        assert _predict(example, features, [padded[0]], [padded[1]], n_best_size=3) == alone
