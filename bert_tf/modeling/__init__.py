"""Keras layers and models of BERT and the modern encoder, on the TensorFlow or JAX backend.

Importing this package registers every model and layer class with Keras, so `.keras` files
bert_tf writes load with keras.saving.load_model (bert_tf.load_model and every command import
it). It needs Keras and one backend: TensorFlow or JAX (bert_tf.keras_setup.SUPPORTED_BACKENDS);
another KERAS_BACKEND is refused before Keras is imported, in one line naming it.
"""

# First: a backend the models do not run on is refused before Keras loads.
from bert_tf.modeling import backend_check  # noqa: F401
from bert_tf.modeling.bert_encoder import BertEncoder
from bert_tf.modeling.classifier import BertClassifier
from bert_tf.modeling.electra import ElectraPretrainer
from bert_tf.modeling.encoder import build_encoder
from bert_tf.modeling.encoder_base import Encoder
from bert_tf.modeling.modern_encoder import ModernBertEncoder
from bert_tf.modeling.pooling import SentencePooling
from bert_tf.modeling.positions import extend_position_embeddings
from bert_tf.modeling.pretrainer import BertPretrainer
from bert_tf.modeling.sentence_embedder import BertSentenceEmbedder
from bert_tf.modeling.span_labeler import BertSpanLabeler
from bert_tf.modeling.token_classifier import BertTokenClassifier

__all__ = ["BertClassifier", "BertEncoder", "BertPretrainer", "BertSentenceEmbedder",
           "BertSpanLabeler", "BertTokenClassifier", "ElectraPretrainer", "Encoder",
           "ModernBertEncoder",
           "SentencePooling", "build_encoder", "extend_position_embeddings"]
