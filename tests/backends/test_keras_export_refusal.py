"""Keras' `model.export` on the backend this process runs: on TensorFlow it writes the
SavedModel (tests/serving/test_keras_export.py checks what it answers); on JAX, whose export
gives each input its own symbolic length, it is refused in one line before anything is
written."""

import keras
import pytest

from bert_tf.config import BertConfig
from bert_tf.modeling import BertClassifier, build_encoder


def test_export_writes_on_tensorflow_and_is_refused_in_one_line_on_jax(tmp_path):
    model = BertClassifier(build_encoder(BertConfig(
        vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32)), num_classes=2)
    target = tmp_path / "export"
    if keras.backend.backend() == "jax":
        with pytest.raises(ValueError) as raised:
            model.export(str(target))
        assert str(raised.value) == (
            "BertClassifier.export needs KERAS_BACKEND=tensorflow: Keras' JAX export traces "
            "each input with its own symbolic length; load the .keras file under TensorFlow "
            "and export there (or run bert-tf-export --model_dir=RUN_DIR)")
        assert not target.exists()
    else:
        model.export(str(target), verbose=False)
        assert (target / "saved_model.pb").is_file()
