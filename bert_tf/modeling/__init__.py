"""Keras layers and models of BERT: the encoder and the task models built on it."""

from bert_tf.modeling.encoder import BertEncoder
from bert_tf.modeling.models import (BertClassifier, BertPretrainer, BertSpanLabeler,
                                     BertTokenClassifier)
from bert_tf.modeling.positions import extend_position_embeddings

__all__ = ["BertClassifier", "BertEncoder", "BertPretrainer", "BertSpanLabeler",
           "BertTokenClassifier", "extend_position_embeddings"]
