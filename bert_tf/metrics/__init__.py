"""Task metrics in pure Python / NumPy: GLUE classification and regression, multi-label F1,
entity F1, SQuAD.

The SQuAD scores (exact match, F1, v2.0 thresholds) are in bert_tf.metrics.squad.
"""

from bert_tf.metrics.classification import (accuracy, best_multi_label_threshold, binary_f1,
                                            classification_metrics, matthews_corrcoef,
                                            multi_label_metrics, pearson_corrcoef,
                                            regression_metrics, spearman_corrcoef)
from bert_tf.metrics.tagging import entity_scores, get_entities

__all__ = ["accuracy", "best_multi_label_threshold", "binary_f1", "classification_metrics",
           "entity_scores", "get_entities", "matthews_corrcoef", "multi_label_metrics",
           "pearson_corrcoef", "regression_metrics", "spearman_corrcoef"]
