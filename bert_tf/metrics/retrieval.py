"""Retrieval and similarity metrics in NumPy: recall@k, MRR@k, nDCG@k, Spearman correlation.

Retrieval: Q queries, a corpus of C documents, `scores` [Q, C] (e.g. cosine similarities) and
for each query the set of relevant document indices (binary relevance). Ties in the scores
are broken by document index, so results are deterministic.
"""

import numpy as np


def _ranking(scores_qc, k):
    """Indices [Q, min(k, C)] of the top-k documents per query, best first."""
    scores_qc = np.asarray(scores_qc, np.float64)
    k = min(k, scores_qc.shape[1])
    # A stable sort on -score keeps the lower index first among equal scores.
    return np.argsort(-scores_qc, axis=1, kind="stable")[:, :k]


def retrieval_metrics(scores_qc, relevant, ks=(1, 10), mrr_k=10, ndcg_k=10):
    """Mean recall@k (for each k in ks), MRR@mrr_k and nDCG@ndcg_k over the queries.

    Args:
      scores_qc: float [Q, C], higher is more similar.
      relevant: Q sets (or lists) of relevant document indices, each non-empty.
      ks: the k of recall@k.
      mrr_k, ndcg_k: cut-offs of MRR and nDCG.

    Returns:
      dict: "recall@k" for k in ks, "mrr@10", "ndcg@10" (with the given cut-offs), floats in
      [0, 1]. recall@k = |relevant in top k| / |relevant|; nDCG with gains 1 and log2 discounts,
      normalised by the ideal ranking.

    Examples:

    >>> m = retrieval_metrics([[0.9, 0.1, 0.5], [0.2, 0.3, 0.1]], [{0}, {2}], ks=(1,))
    >>> m["recall@1"], m["mrr@10"], round(m["ndcg@10"], 4)
    (0.5, 0.6666666666666666, 0.75)
    """
    relevant = [set(r) for r in relevant]
    if len(relevant) != len(scores_qc) or not all(relevant):
        raise ValueError("retrieval_metrics: every query needs a non-empty set of relevant "
                         "documents")
    top = _ranking(scores_qc, max(max(ks), mrr_k, ndcg_k))
    hits = np.array([[doc in rel for doc in row] for row, rel in zip(top, relevant)], np.float64)
    counts = np.array([len(r) for r in relevant], np.float64)
    metrics = {f"recall@{k}": float(np.mean(hits[:, :k].sum(1) / counts)) for k in ks}
    first = np.where(hits[:, :mrr_k].any(1), hits[:, :mrr_k].argmax(1) + 1, np.inf)
    metrics[f"mrr@{mrr_k}"] = float(np.mean(1.0 / first))
    discounts = 1.0 / np.log2(np.arange(2, hits.shape[1] + 2))
    dcg = (hits[:, :ndcg_k] * discounts[:ndcg_k]).sum(1)
    ideal = np.array([discounts[:min(int(c), ndcg_k)].sum() for c in counts])
    metrics[f"ndcg@{ndcg_k}"] = float(np.mean(dcg / ideal))
    return metrics


def _average_ranks(values):
    """Ranks 1..N of `values`, ties given their average rank (as scipy.stats.rankdata)."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(x, y):
    """Spearman's rank correlation of two equal-length sequences (ties averaged); 0 when one
    of them is constant.

    >>> spearman([1, 2, 3, 4], [10, 20, 30, 40]), spearman([1, 2, 3], [3, 2, 1])
    (1.0, -1.0)
    """
    rx, ry = _average_ranks(x), _average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denominator = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return float((rx * ry).sum() / denominator) if denominator > 0 else 0.0
