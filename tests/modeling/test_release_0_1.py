""".keras files of bert_tf 0.1 load and give the outputs that release recorded.

The fixtures under fixtures/release_0_1 were saved by bert_tf 0.1: their task models name the
module bert_tf.modeling.models and every encoder, modern ones included, the class
bert_tf>BertEncoder; reference_outputs.npz holds what 0.1 computed on its inputs.
"""

import os

import keras
import numpy as np
import pytest

from bert_tf.config import ENCODER_INPUTS, BertConfig, ModernBertConfig
from bert_tf.modeling import BertEncoder, ModernBertEncoder
from bert_tf.modeling.release_0_1 import Release01ModernBertEncoder

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "release_0_1")


@pytest.fixture(scope="module")
def reference():
    return dict(np.load(os.path.join(FIXTURES, "reference_outputs.npz")))


def load(name):
    return keras.saving.load_model(os.path.join(FIXTURES, f"{name}.keras"))


def inputs(reference):
    return {name: reference[name] for name in ENCODER_INPUTS}


def test_bert_files_load_with_their_outputs(reference):
    pretrainer = load("bert_pretrainer")
    out = pretrainer(dict(inputs(reference), masked_lm_positions=reference["masked_lm_positions"]))
    np.testing.assert_allclose(out["mlm_logits"], reference["bert_pretrainer_mlm_logits"],
                               atol=1e-5)
    np.testing.assert_allclose(out["nsp_logits"], reference["bert_pretrainer_nsp_logits"],
                               atol=1e-5)
    encoder = load("bert_encoder")
    assert type(encoder) is BertEncoder and type(encoder.config) is BertConfig
    np.testing.assert_allclose(encoder(inputs(reference))["sequence_output"],
                               reference["bert_encoder_sequence_output"], atol=1e-5)
    np.testing.assert_allclose(load("albert_classifier")(inputs(reference)),
                               reference["albert_classifier_logits"], atol=1e-5)


def test_a_modern_encoder_saved_as_bert_encoder_loads_as_the_compatibility_class(reference,
                                                                                  tmp_path):
    labeler = load("modern_span_labeler")
    assert type(labeler.encoder) is Release01ModernBertEncoder
    assert isinstance(labeler.encoder, ModernBertEncoder)
    assert type(labeler.encoder.config) is ModernBertConfig
    out = labeler(inputs(reference))
    np.testing.assert_allclose(out["start_logits"], reference["modern_span_start_logits"],
                               atol=1e-5)
    np.testing.assert_allclose(out["end_logits"], reference["modern_span_end_logits"], atol=1e-5)
    np.testing.assert_allclose(labeler.encoder(inputs(reference))["pooled_output"],
                               reference["modern_encoder_pooled_output"], atol=1e-5)
    # Saved again, it keeps its weight paths and loads with the same outputs.
    path = str(tmp_path / "again.keras")
    labeler.save(path)
    again = keras.saving.load_model(path)
    assert type(again.encoder) is Release01ModernBertEncoder
    np.testing.assert_allclose(again(inputs(reference))["start_logits"], out["start_logits"],
                               atol=1e-6)


def test_an_old_style_modern_encoder_config_resolves_through_bert_encoder():
    config = ModernBertConfig.from_preset("modernbert_tiny", vocab_size=64)
    serialized = keras.saving.serialize_keras_object(ModernBertEncoder(config))
    # What bert_tf 0.1 wrote: the modern encoder under BertEncoder's registered name.
    serialized.update(module="bert_tf.modeling.encoder", class_name="BertEncoder",
                      registered_name="bert_tf>BertEncoder")
    encoder = keras.saving.deserialize_keras_object(serialized)
    assert type(encoder) is Release01ModernBertEncoder
    assert encoder.config == config
    # Saved again, it names its own registered name, which resolves to the same class.
    again = keras.saving.serialize_keras_object(encoder)
    assert again["registered_name"] == "bert_tf>Release01ModernBertEncoder"
    assert type(keras.saving.deserialize_keras_object(again)) is Release01ModernBertEncoder


def test_the_former_models_module_still_exports_the_task_models():
    import bert_tf.modeling
    import bert_tf.modeling.models as models
    from bert_tf.modeling.pretraining_metrics import pretraining_metrics

    for name in ("BertClassifier", "BertPretrainer", "BertSpanLabeler", "BertTokenClassifier"):
        assert getattr(models, name) is getattr(bert_tf.modeling, name)
    assert models.pretraining_metrics is pretraining_metrics
