"""Keras layers and models of BERT: the encoder and the task models built on it."""

from bert_tf.modeling.encoder import BertEncoder
from bert_tf.modeling.models import (BertClassifier, BertPretrainer, BertSpanLabeler,
                                     BertTokenClassifier)

__all__ = ["BertClassifier", "BertEncoder", "BertPretrainer", "BertSpanLabeler",
           "BertTokenClassifier"]
