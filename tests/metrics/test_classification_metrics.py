"""GLUE and entity metrics against hand-computed values and the known edge cases."""

import math

import numpy as np
import pytest

from bert_tf.metrics import (accuracy, best_multi_label_threshold, binary_f1,
                             classification_metrics, entity_scores, get_entities,
                             matthews_corrcoef, multi_label_metrics, pearson_corrcoef,
                             regression_metrics, spearman_corrcoef)
from bert_tf.metrics.classification import average_ranks, macro_f1


def test_accuracy_and_binary_f1_by_hand():
    assert accuracy([0, 1, 1, 0], [0, 1, 0, 0]) == 0.75
    # TP=2, predicted positives 3, true positives 3: P = R = F1 = 2/3.
    assert binary_f1([1, 1, 0, 0, 1], [1, 0, 1, 0, 1]) == pytest.approx(2 / 3)
    # No positive predicted (or none to find): scikit-learn's zero_division gives 0.
    assert binary_f1([1, 0, 1], [0, 0, 0]) == 0.0
    assert binary_f1([0, 0], [0, 0]) == 0.0
    # Per-class F1: class 0 = 2/3 (TP 1, 1 predicted, 2 true), class 1 = 2/3, class 2 = 1.
    assert macro_f1([0, 0, 1, 2], [0, 1, 1, 2]) == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)


def test_matthews_corrcoef_binary_multiclass_and_degenerate():
    # TP=2 TN=1 FP=1 FN=1: (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6.
    assert matthews_corrcoef([1, 1, 0, 0, 1], [1, 0, 1, 0, 1]) == pytest.approx(1 / 6)
    assert matthews_corrcoef([0, 1, 0, 1], [0, 1, 0, 1]) == pytest.approx(1.0)
    assert matthews_corrcoef([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    # Constant predictions (a model that always says "acceptable"): undefined, reported 0.
    assert matthews_corrcoef([0, 1, 1, 0], [1, 1, 1, 1]) == 0.0
    # Three classes: t = (2, 2, 2), p = (3, 1, 2), trace 3, n = 6:
    # (3*6 - 12) / sqrt((36 - 14) * (36 - 12)).
    assert matthews_corrcoef([0, 1, 2, 0, 1, 2], [0, 2, 1, 0, 0, 2]) == pytest.approx(
        6 / math.sqrt(22 * 24))


def test_pearson_and_spearman_by_hand_with_ties_and_constants():
    # dx = dy sums: sum(dx*dy) = 4, sum(dx^2) = sum(dy^2) = 5.
    assert pearson_corrcoef([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert spearman_corrcoef([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # Ties share their mean rank: ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4).
    np.testing.assert_array_equal(average_ranks([10, 20, 20, 30]), [1, 2.5, 2.5, 4])
    np.testing.assert_array_equal(average_ranks([3, 1, 3, 3]), [3, 1, 3, 3])
    assert spearman_corrcoef([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(22.5))
    # Monotonic but not linear.
    assert spearman_corrcoef([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0)
    assert pearson_corrcoef([1, 2, 3, 4], [1, 4, 9, 16]) < 0.99
    # A constant series has no correlation to measure: 0, not NaN.
    assert pearson_corrcoef([2.5, 2.5, 2.5], [1, 2, 3]) == 0.0
    assert spearman_corrcoef([1, 2, 3], [0, 0, 0]) == 0.0
    with pytest.raises(ValueError, match="finite"):
        pearson_corrcoef([1, float("nan")], [1, 2])


def test_bad_metric_inputs_are_named():
    with pytest.raises(ValueError, match="labels and predictions differ in length: 3 vs 2"):
        accuracy([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="at least one example"):
        matthews_corrcoef([], [])


def test_task_bundles_and_glue_scores():
    labels, predictions = [1, 1, 0, 0, 1], [1, 0, 1, 0, 1]
    mrpc = classification_metrics(labels, predictions, "mrpc")
    assert mrpc["accuracy"] == 0.6 and mrpc["f1"] == pytest.approx(2 / 3)
    assert mrpc["score"] == pytest.approx((0.6 + 2 / 3) / 2)
    cola = classification_metrics(labels, predictions, "cola")
    assert cola["score"] == cola["matthews_corrcoef"] == pytest.approx(1 / 6)
    assert classification_metrics(labels, predictions, "rte")["score"] == 0.6
    own = classification_metrics([0, 1, 2, 2], [0, 1, 2, 1])
    assert own["score"] == own["accuracy"] == 0.75 and "macro_f1" in own
    sts = regression_metrics([1, 2, 3, 4], [1, 3, 2, 4])
    assert sts["pearson"] == pytest.approx(0.8) and sts["spearman"] == pytest.approx(0.8)
    assert sts["mse"] == pytest.approx(0.5) and sts["score"] == pytest.approx(0.8)


def test_entities_iob2_iob1_iobes():
    assert get_entities(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
    # IOB1: I- opens a chunk after O, B- only separates two adjacent chunks of one type.
    assert get_entities(["I-PER", "I-PER", "B-PER", "O", "I-LOC"]) == [
        ("PER", 0, 1), ("PER", 2, 2), ("LOC", 4, 4)]
    assert get_entities(["S-PER", "B-LOC", "E-LOC", "O", "B-ORG", "I-ORG", "E-ORG"]) == [
        ("PER", 0, 0), ("LOC", 1, 2), ("ORG", 4, 6)]
    # A type change splits; a tag after E- opens a new chunk.
    assert get_entities(["B-PER", "I-LOC"]) == [("PER", 0, 0), ("LOC", 1, 1)]
    assert get_entities(["B-PER", "E-PER", "I-PER"]) == [("PER", 0, 1), ("PER", 2, 2)]
    # Sentences never merge across their boundary.
    assert get_entities([["B-PER"], ["I-PER"]]) == [("PER", 0, 0), ("PER", 2, 2)]


def test_entity_scores_as_seqeval():
    # seqeval's README example: the predicted MISC spans tokens 2-5 where the gold one spans
    # 3-5, so only PER matches: 1 of 2 chunks on each side.
    gold = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    pred = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    scores = entity_scores(gold, pred)
    assert scores["precision"] == scores["recall"] == scores["f1"] == 0.5
    assert scores["accuracy"] == pytest.approx(8 / 10)
    assert scores["per_type"] == {
        "MISC": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
        "PER": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}}
    # A type seen only in predictions has support 0; nothing predicted: precision 0.
    scores = entity_scores([["B-PER", "O"]], [["B-ORG", "O"]])
    assert scores["per_type"]["ORG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                         "support": 0}
    assert entity_scores([["O"]], [["O"]])["f1"] == 0.0
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
        entity_scores([["O", "O"]], [["O"]])


def test_multi_label_metrics_by_hand():
    labels = [[1, 0, 1], [0, 1, 0], [0, 0, 0], [1, 1, 0]]
    predictions = [[1, 0, 0], [0, 1, 1], [0, 0, 0], [1, 1, 0]]
    metrics = multi_label_metrics(labels, predictions)
    # Summed over labels: TP 4, predicted 5, true 5: micro F1 = 8 / 10.
    assert metrics["micro_f1"] == pytest.approx(0.8)
    # Per label: 0: TP 2 of 2 and 2 -> 1; 1: TP 2 of 2 and 2 -> 1; 2: TP 0, 1 predicted,
    # 1 true -> 0.
    assert metrics["macro_f1"] == pytest.approx(2 / 3)
    # Rows 2 and 3 exactly right (an empty set predicted empty counts); 10 of 12 decisions.
    assert metrics["exact_match"] == 0.5
    assert metrics["label_accuracy"] == pytest.approx(10 / 12)
    assert metrics["score"] == metrics["micro_f1"]
    # A label neither present nor predicted scores 0, as scikit-learn's zero_division=0.
    assert multi_label_metrics([[1, 0]], [[1, 0]])["macro_f1"] == 0.5
    with pytest.raises(ValueError, match=r"must both be \[N, C\]"):
        multi_label_metrics([[1, 0]], [[1, 0, 0]])


def test_best_multi_label_threshold_by_hand():
    """A model whose right labels sit at 0.3-0.4 and wrong ones at 0.2 or below predicts
    nothing at 0.5 (micro F1 0); every threshold in [0.20, 0.29] separates them exactly, and
    the one closest to 0.5 is reported."""
    labels = [[1, 0, 1], [0, 1, 0], [0, 0, 0]]
    probabilities = [[0.4, 0.1, 0.3], [0.2, 0.35, 0.05], [0.15, 0.2, 0.01]]
    predicted_at_half = np.asarray(probabilities) > 0.5
    assert multi_label_metrics(labels, predicted_at_half)["micro_f1"] == 0.0
    assert best_multi_label_threshold(labels, probabilities) == (0.29, 1.0)
    # One wrong label at 0.45 above the right one at 0.3: at 0.29 TP 3, predicted 4 (F1 6/7);
    # at 0.30-0.34 TP 2, predicted 3 (F1 4/6); at 0.45-0.99 nothing right is left.
    probabilities[2][0] = 0.45
    threshold, f1 = best_multi_label_threshold(labels, probabilities)
    assert (threshold, f1) == (0.29, pytest.approx(6 / 7))
    assert f1 == multi_label_metrics(labels, np.asarray(probabilities) > threshold)["micro_f1"]
    with pytest.raises(ValueError, match=r"must both be \[N, C\]"):
        best_multi_label_threshold([[1, 0]], [[0.5, 0.5, 0.5]])
