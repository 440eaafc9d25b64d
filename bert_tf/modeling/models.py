"""The former home of the task models and pre-training metrics, kept so that imports of
`bert_tf.modeling.models` written before the split keep working.

The models now live one family per module: pretrainer (BertPretrainer), classifier
(BertClassifier), span_labeler (BertSpanLabeler), token_classifier (BertTokenClassifier); the
pre-training metrics in pretraining_metrics. Import them from there or from bert_tf.modeling.
(.keras files that name this module load through the classes' registered names.)
"""

from bert_tf.modeling.classifier import BertClassifier
from bert_tf.modeling.pretrainer import BertPretrainer
from bert_tf.modeling.pretraining_metrics import (pair_metric_names, pretraining_metric_terms,
                                                  pretraining_metrics)
from bert_tf.modeling.span_labeler import BertSpanLabeler
from bert_tf.modeling.token_classifier import BertTokenClassifier

__all__ = ["BertClassifier", "BertPretrainer", "BertSpanLabeler", "BertTokenClassifier",
           "pair_metric_names", "pretraining_metric_terms", "pretraining_metrics"]
