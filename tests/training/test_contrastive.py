"""The multiple-negatives ranking loss against NumPy, and the bucketed pair batches."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training.contrastive import (RetrievalSet, multiple_negatives_ranking_loss,
                                          pair_dataset)
from bert_tf.data.tasks.pairs import TextPairs


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _cross_entropy(logits):
    logits = logits - logits.max(1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    return -np.mean(np.diag(log_probs[:, :len(logits)]))


@pytest.mark.parametrize("negatives,symmetric", [(False, False), (True, False), (False, True)])
def test_loss_matches_numpy(negatives, symmetric):
    rng = np.random.default_rng(0)
    a, p, n = (rng.normal(size=(5, 8)).astype(np.float32) for _ in range(3))
    candidates = np.concatenate([_unit(p), _unit(n)]) if negatives else _unit(p)
    expected = _cross_entropy(20.0 * _unit(a) @ candidates.T)
    if symmetric:
        expected = (expected + _cross_entropy(20.0 * _unit(p) @ _unit(a).T)) / 2
    loss, correct = multiple_negatives_ranking_loss(a, p, n if negatives else None, scale=20.0,
                                                    symmetric=symmetric)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert float(correct) == np.sum(np.argmax(_unit(a) @ candidates.T, 1) == np.arange(5))


def test_loss_is_low_when_each_anchor_matches_its_positive():
    anchors = np.eye(4, dtype=np.float32)
    loss, correct = multiple_negatives_ranking_loss(anchors, anchors + 0.01)
    assert float(loss) < 1e-6 and float(correct) == 4.0


def test_pair_batches_pack_each_side_to_its_own_bucket():
    side_ids = {"anchor": [np.array([5, 6]), np.array([7]), np.array([8])],
                "positive": [np.arange(5, 25), np.array([7, 7]), np.arange(5, 14)]}
    dataset = pair_dataset(side_ids, 3, (4, 8, 16, 32), cls_id=2, sep_id=3, pad_id=0,
                           shuffle=False, repeat=False)
    (batch,) = list(dataset)
    assert batch["anchor_input_word_ids"].numpy().tolist() == [
        [2, 5, 6, 3], [2, 7, 3, 0], [2, 8, 3, 0]]
    assert batch["positive_input_word_ids"].shape == (3, 32)
    assert batch["positive_input_mask"].numpy().sum(1).tolist() == [22, 4, 11]
    assert tf.reduce_all(batch["positive_input_type_ids"] == 0)


def test_retrieval_set_from_pairs_shares_duplicate_texts():
    pairs = TextPairs("dev.tsv", ["q1", "q2", "q1"], ["d1", "d2", "d3"], ["d2", "d4", "d1"])
    data = RetrievalSet.from_pairs(pairs)
    assert data.queries == ["q1", "q2"]
    assert data.corpus == ["d1", "d2", "d3", "d4"]
    assert data.relevant == [{0, 2}, {1}]
