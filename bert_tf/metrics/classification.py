"""GLUE metrics: accuracy, F1, Matthews correlation, Pearson and Spearman correlation.

Each function matches the definition the GLUE benchmark scores with (scikit-learn's
accuracy_score, f1_score, matthews_corrcoef; SciPy's pearsonr, spearmanr), computed in float64
NumPy without either library. One convention differs on degenerate input: a correlation of a
constant series is undefined (SciPy returns NaN), and is reported here as 0.0, the value
scikit-learn's matthews_corrcoef gives in the same case: a NaN compares false with every score,
so a run whose first evaluation predicts one class could never pick a best checkpoint.

`classification_metrics` and `regression_metrics` bundle them per task, with a `score`: the
task's GLUE score (the mean of its official metrics) for the GLUE tasks. `multi_label_metrics`
scores examples with any number of labels as scikit-learn's f1_score(average="micro" / "macro",
zero_division=0), accuracy_score (exact match) and 1 - hamming_loss do;
`best_multi_label_threshold` finds the probability threshold at which they score best.
"""

import numpy as np

# Official metrics of each GLUE task, as the leaderboard reports them; a task's GLUE score is
# their mean.
GLUE_TASK_METRICS = {
    "cola": ("matthews_corrcoef",),
    "sst-2": ("accuracy",),
    "mrpc": ("f1", "accuracy"),
    "sts-b": ("pearson", "spearman"),
    "qqp": ("f1", "accuracy"),
    "mnli": ("accuracy",),
    "mnli-mm": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
}


def _paired(labels, predictions, dtype):
    labels = np.asarray(labels, dtype=dtype).reshape(-1)
    predictions = np.asarray(predictions, dtype=dtype).reshape(-1)
    if labels.shape != predictions.shape:
        raise ValueError(f"labels and predictions differ in length: {labels.size} vs "
                         f"{predictions.size}")
    if not labels.size:
        raise ValueError("metrics need at least one example; got none")
    return labels, predictions


def accuracy(labels, predictions):
    """Fraction of predictions equal to the label (ints)."""
    labels, predictions = _paired(labels, predictions, np.int64)
    return float(np.mean(labels == predictions))


def _f1(true_positives, num_predicted, num_true):
    # scikit-learn's zero_division default: an undefined precision, recall or F1 counts as 0.
    if true_positives == 0:
        return 0.0
    precision = true_positives / num_predicted
    recall = true_positives / num_true
    return 2 * precision * recall / (precision + recall)


def binary_f1(labels, predictions, positive=1):
    """F1 of class `positive` (the GLUE F1 of MRPC and QQP, where 1 = paraphrase/duplicate)."""
    labels, predictions = _paired(labels, predictions, np.int64)
    true_positives = int(np.sum((predictions == positive) & (labels == positive)))
    return _f1(true_positives, int(np.sum(predictions == positive)),
               int(np.sum(labels == positive)))


def macro_f1(labels, predictions):
    """Unweighted mean of the per-class F1 over the classes in labels or predictions."""
    labels, predictions = _paired(labels, predictions, np.int64)
    scores = [binary_f1(labels, predictions, positive=c)
              for c in np.union1d(labels, predictions)]
    return float(np.mean(scores))


def matthews_corrcoef(labels, predictions):
    """Matthews correlation (the multi-class form, R_K); 0.0 when it is undefined.

    With the confusion matrix C (rows: true class), t = row sums, p = column sums, c = trace and
    n = total: (c*n - t.p) / sqrt((n^2 - p.p) * (n^2 - t.t)). For two classes this is the
    familiar (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)).
    """
    labels, predictions = _paired(labels, predictions, np.int64)
    classes, encoded = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    k, n = len(classes), labels.size
    confusion = np.zeros((k, k), np.float64)
    np.add.at(confusion, (encoded[:n], encoded[n:]), 1.0)
    t_sum, p_sum = confusion.sum(axis=1), confusion.sum(axis=0)
    covariance = np.trace(confusion) * n - t_sum @ p_sum
    variance_p = n * n - p_sum @ p_sum
    variance_t = n * n - t_sum @ t_sum
    if variance_p == 0 or variance_t == 0:
        return 0.0
    return float(covariance / np.sqrt(variance_t * variance_p))


def _finite_pair(x, y):
    x, y = _paired(x, y, np.float64)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("correlation inputs must be finite numbers")
    return x, y


def _pearson(x, y):
    dx, dy = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.sum(dx * dx) * np.sum(dy * dy))
    if denominator == 0:
        return 0.0
    return float(np.clip(np.sum(dx * dy) / denominator, -1.0, 1.0))


def pearson_corrcoef(x, y):
    """Pearson's r of two equally long series; 0.0 when either is constant."""
    return _pearson(*_finite_pair(x, y))


def average_ranks(values):
    """1-based ranks of `values`, ties sharing the mean of their ranks (SciPy's rankdata)."""
    values = np.asarray(values, np.float64).reshape(-1)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts_run = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    run_of = np.cumsum(starts_run) - 1
    run_starts = np.flatnonzero(starts_run)
    run_ends = np.append(run_starts[1:], values.size)
    # Positions start..end-1 (0-based) share the mean rank (start + end - 1) / 2 + 1.
    mean_rank = (run_starts + run_ends - 1) / 2.0 + 1.0
    ranks = np.empty(values.size, np.float64)
    ranks[order] = mean_rank[run_of]
    return ranks


def spearman_corrcoef(x, y):
    """Spearman's rho: Pearson's r of the tie-averaged ranks; 0.0 when either is constant."""
    x, y = _finite_pair(x, y)
    return _pearson(average_ranks(x), average_ranks(y))


def classification_metrics(labels, predictions, task_name=None):
    """Metrics of class predictions (int indices), with the task's `score`.

    Args:
      labels, predictions: int class indices [N].
      task_name: a GLUE task (its official metrics; positive class 1 for F1); other names or
        None give accuracy, macro F1 and Matthews correlation.

    Returns:
      dict of floats: the metrics, plus `score` (the GLUE score of a GLUE task, else accuracy).
    """
    metrics = {"accuracy": accuracy(labels, predictions)}
    official = GLUE_TASK_METRICS.get(task_name)
    if official is None:
        metrics["macro_f1"] = macro_f1(labels, predictions)
        metrics["matthews_corrcoef"] = matthews_corrcoef(labels, predictions)
        metrics["score"] = metrics["accuracy"]
        return metrics
    if "f1" in official:
        metrics["f1"] = binary_f1(labels, predictions)
    if "matthews_corrcoef" in official:
        metrics["matthews_corrcoef"] = matthews_corrcoef(labels, predictions)
    metrics["score"] = float(np.mean([metrics[name] for name in official]))
    return metrics


def regression_metrics(labels, predictions):
    """Pearson, Spearman (STS-B's official pair), mean squared error; score = their mean r."""
    labels, predictions = _finite_pair(labels, predictions)
    metrics = {"pearson": _pearson(labels, predictions),
               "spearman": _pearson(average_ranks(labels), average_ranks(predictions)),
               "mse": float(np.mean((labels - predictions) ** 2))}
    metrics["score"] = (metrics["pearson"] + metrics["spearman"]) / 2.0
    return metrics


def _f1(true_positives, predicted, actual):
    """F1 = 2 TP / (predicted + actual), 0 where both are 0 (scikit-learn's zero_division=0)."""
    total = predicted + actual
    return np.where(total > 0, 2.0 * true_positives / np.maximum(total, 1), 0.0)


def multi_label_metrics(labels, predictions):
    """Metrics of multi-label predictions; score = micro-averaged F1.

    Args:
      labels, predictions: 0/1 (or bool) [N, C], 1 where label c applies to example n.

    Returns:
      dict of floats: micro_f1 (TP, FP and FN summed over every label), macro_f1 (the mean of
      the C labels' F1), exact_match (examples whose label set is predicted exactly),
      label_accuracy (the fraction of the N x C yes/no decisions that are right) and score.
    """
    labels = np.asarray(labels, bool)
    predictions = np.asarray(predictions, bool)
    if labels.shape != predictions.shape or labels.ndim != 2:
        raise ValueError(f"multi_label_metrics: labels {labels.shape} and predictions "
                         f"{predictions.shape} must both be [N, C]")
    hits_c = np.sum(labels & predictions, axis=0).astype(np.float64)
    predicted_c = np.sum(predictions, axis=0).astype(np.float64)
    actual_c = np.sum(labels, axis=0).astype(np.float64)
    metrics = {
        "micro_f1": float(_f1(hits_c.sum(), predicted_c.sum(), actual_c.sum())),
        "macro_f1": float(np.mean(_f1(hits_c, predicted_c, actual_c))),
        "exact_match": float(np.mean(np.all(labels == predictions, axis=1))),
        "label_accuracy": float(np.mean(labels == predictions)),
    }
    metrics["score"] = metrics["micro_f1"]
    return metrics


# The thresholds best_multi_label_threshold tries: round numbers a flag takes as they are.
THRESHOLD_GRID = tuple(round(0.01 * i, 2) for i in range(1, 100))


def best_multi_label_threshold(labels, probabilities):
    """The probability threshold (of 0.01, 0.02, ..., 0.99) at which multi-label predictions
    score the highest micro-averaged F1; of equal ones, the closest to 0.5.

    Args:
      labels: 0/1 (or bool) [N, C]; probabilities: each label's probability [N, C].

    Returns:
      (threshold, micro_f1): a label is predicted where its probability is above threshold.

    >>> best_multi_label_threshold([[1, 0], [0, 1]], [[0.4, 0.1], [0.2, 0.3]])
    (0.29, 1.0)
    """
    labels = np.asarray(labels, bool)
    probabilities = np.asarray(probabilities, np.float64)
    if labels.shape != probabilities.shape or labels.ndim != 2:
        raise ValueError(f"best_multi_label_threshold: labels {labels.shape} and probabilities "
                         f"{probabilities.shape} must both be [N, C]")
    actual = float(labels.sum())
    best = (-1.0, 0.0, 0.5)
    for threshold in THRESHOLD_GRID:
        predicted = probabilities > threshold
        hits = float(np.sum(predicted & labels))
        # Micro F1 = 2 TP / (predicted + actual); 0 without a true positive.
        f1 = 2 * hits / (float(predicted.sum()) + actual) if hits else 0.0
        candidate = (f1, -abs(threshold - 0.5), threshold)
        if candidate > best:
            best = candidate
    return best[2], best[0]
