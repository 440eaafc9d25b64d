"""Official SQuAD EM/F1: hand-computed values and the official scripts' edge cases."""

import pytest

from bert_tf.metrics.squad import (
    evaluate,
    evaluate_v1,
    evaluate_v2,
    exact_match,
    f1_score,
    normalize_answer,
)


def _data(*qas):
    return [{"title": "t", "paragraphs": [{"context": "unused", "qas": list(qas)}]}]


def _qa(qid, *golds):
    return {"id": qid, "question": "?",
            "answers": [{"text": g, "answer_start": 0} for g in golds]}


@pytest.mark.parametrize("text, expected", [
    ("The Cat's  hat!", "cats hat"),
    ("an apple a day", "apple day"),
    # Articles go only as whole words; "theory" and "Anatole" keep their letters.
    ("theory of Anatole", "theory of anatole"),
    ("A.B. the-end", "ab theend"),
    # Only ASCII punctuation is removed; other text is only lower-cased.
    ("«Paris» – ÜBER", "«paris» – über"),
    ("\tSpaced\n out ", "spaced out"),
    ("The.", ""),
])
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_and_f1_by_hand():
    assert exact_match("the Eiffel Tower", "Eiffel tower.") == 1
    assert exact_match("Eiffel", "Eiffel Tower") == 0
    # pred {cat, sat, on, mat} vs gold {cat, on, mat}: P = 3/4, R = 1.
    assert f1_score("the cat sat on the mat", "cat on mat") == pytest.approx(6 / 7)
    # Repeated tokens count as often as both sides have them: x:1 + y:1 shared of 3 and 3.
    assert f1_score("x x y", "x y y") == pytest.approx(2 / 3)
    assert f1_score("Broncos", "Denver Broncos!") == pytest.approx(2 / 3)
    assert f1_score("Denver", "Carolina") == 0


def test_empty_answers_differ_between_versions():
    # v1.1: no shared token is 0 even when both are empty; v2.0: agreeing empties score 1.
    assert f1_score("", "") == 0
    assert f1_score("", "", version_2=True) == 1
    assert f1_score("The.", "", version_2=True) == 1  # normalises to empty
    assert f1_score("", "Paris", version_2=True) == 0
    assert f1_score("Paris", "", version_2=True) == 0
    assert exact_match("", "") == 1


def test_evaluate_v1_max_over_golds_and_missing_predictions():
    data = _data(_qa("q1", "Denver Broncos", "Denver Broncos!"), _qa("q2", "Santa Clara"),
                 _qa("q3", "February 7"))
    # q1: EM 0, F1 2/3 (best gold); q2: EM 1 (case, punctuation); q3 missing: 0 and counted.
    results = evaluate_v1(data, {"q1": "Broncos", "q2": "santa clara."})
    assert results == pytest.approx({"exact_match": 100 / 3, "f1": 100 * (2 / 3 + 1) / 3})
    assert set(results) == {"exact_match", "f1"}


def test_evaluate_v2_thresholds_breakdown_and_best_threshold():
    data = _data(
        _qa("q1", "Paris", "paris."),  # answered
        _qa("q2"),                     # unanswerable, predicted ""
        _qa("q3"),                     # unanswerable, predicted "London"
        _qa("q4", "the"),              # has an answer that normalises to "": gold is [""]
    )
    predictions = {"q1": "Paris", "q2": "", "q3": "London", "q4": ""}
    plain = evaluate_v2(data, predictions)
    # Raw scores 1, 1, 0, 1.
    assert plain == pytest.approx({
        "exact": 75.0, "f1": 75.0, "total": 4,
        "HasAns_exact": 100.0, "HasAns_f1": 100.0, "HasAns_total": 2,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})

    odds = {"q1": -2.0, "q2": 3.0, "q3": 0.5, "q4": 2.0}
    results = evaluate_v2(data, predictions, na_probs=odds)
    # Odds > 1.0 count as a no-answer prediction: q2 scores 1, q4 (has an answer) scores 0.
    # Best threshold: start at 2 (the no-answer questions), walk q1 (+1 -> 3, thresh -2),
    # q3 (answers "London": -1), q4 (+1), q2 (0): best 3 of 4 at -2.
    assert results == pytest.approx({
        "exact": 50.0, "f1": 50.0, "total": 4,
        "HasAns_exact": 50.0, "HasAns_f1": 50.0, "HasAns_total": 2,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2,
        "best_exact": 75.0, "best_exact_thresh": -2.0,
        "best_f1": 75.0, "best_f1_thresh": -2.0})
    assert evaluate(data, predictions, True, odds) == results


def test_evaluate_v2_partial_f1_and_only_answerable():
    data = _data(_qa("q1", "Denver Broncos", "Broncos of Denver"))
    results = evaluate_v2(data, {"q1": "the Broncos"})
    assert results == pytest.approx({"exact": 0.0, "f1": 100 * 2 / 3, "total": 1,
                                     "HasAns_exact": 0.0, "HasAns_f1": 100 * 2 / 3,
                                     "HasAns_total": 1})


def test_evaluate_v2_refuses_missing_predictions_and_odds():
    data = _data(_qa("q1", "x"), _qa("q2"))
    with pytest.raises(ValueError, match="no prediction for question id 'q2'"):
        evaluate_v2(data, {"q1": "x"})
    with pytest.raises(ValueError, match="no no-answer odds for question id 'q2'"):
        evaluate_v2(data, {"q1": "x", "q2": ""}, na_probs={"q1": 0.0})
