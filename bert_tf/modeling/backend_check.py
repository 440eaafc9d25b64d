"""Imported first by bert_tf.modeling: refuses a Keras backend the models do not run on, in one
line naming KERAS_BACKEND, before Keras is imported (bert_tf.keras_setup.check_backend)."""

from bert_tf.keras_setup import check_backend

check_backend()
