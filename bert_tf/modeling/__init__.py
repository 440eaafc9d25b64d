"""Keras layers and models of BERT: the encoder and the task models built on it."""

from bert_tf.modeling.encoder import BertEncoder
from bert_tf.modeling.models import (BertClassifier, BertPretrainer, BertSpanLabeler,
                                     BertTokenClassifier)
from bert_tf.modeling.pooling import SentencePooling
from bert_tf.modeling.positions import extend_position_embeddings
from bert_tf.modeling.sentence_embedder import BertSentenceEmbedder

__all__ = ["BertClassifier", "BertEncoder", "BertPretrainer", "BertSentenceEmbedder",
           "BertSpanLabeler", "BertTokenClassifier", "SentencePooling",
           "extend_position_embeddings"]
