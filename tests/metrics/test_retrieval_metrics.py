"""Retrieval metrics and Spearman correlation against hand-computed values."""

import math

import numpy as np
import pytest

from bert_tf.metrics.retrieval import retrieval_metrics, spearman


def test_recall_mrr_ndcg_by_hand():
    # Query 0: relevant {1, 3}, ranking 1, 0, 3, 2 -> hits at ranks 1 and 3.
    # Query 1: relevant {2}, ranking 0, 1, 3, 2 -> hit at rank 4.
    scores = np.array([[0.5, 0.9, 0.1, 0.4], [0.9, 0.8, 0.1, 0.2]])
    m = retrieval_metrics(scores, [{1, 3}, {2}], ks=(1, 3), mrr_k=10, ndcg_k=10)
    assert m["recall@1"] == pytest.approx((0.5 + 0.0) / 2)
    assert m["recall@3"] == pytest.approx((1.0 + 0.0) / 2)
    assert m["mrr@10"] == pytest.approx((1.0 + 0.25) / 2)
    ndcg0 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    ndcg1 = (1 / math.log2(5)) / 1.0
    assert m["ndcg@10"] == pytest.approx((ndcg0 + ndcg1) / 2)


def test_cut_offs_and_ties():
    # Equal scores rank the lower index first; a hit past the cut-off counts 0.
    m = retrieval_metrics(np.zeros((1, 5)), [{4}], ks=(1,), mrr_k=3, ndcg_k=3)
    assert (m["recall@1"], m["mrr@3"], m["ndcg@3"]) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="non-empty set of relevant"):
        retrieval_metrics(np.zeros((1, 2)), [set()])


def test_spearman_with_ties_matches_the_pearson_of_average_ranks():
    x = [1.0, 2.0, 2.0, 3.0, 5.0]
    y = [2.0, 1.0, 4.0, 3.0, 5.0]
    rx = np.array([1, 2.5, 2.5, 4, 5])
    ry = np.array([2, 1, 4, 3, 5])
    assert spearman(x, y) == pytest.approx(np.corrcoef(rx, ry)[0, 1])
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0
