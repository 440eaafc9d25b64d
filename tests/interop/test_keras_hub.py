"""keras-hub BertBackbone / BertMaskedLM into bert_tf: output parity, presets, .keras files."""

import keras
import keras_hub
import numpy as np
import pytest

from bert_tf.interop import InteropError, from_keras_hub, load_keras_hub, warm_start
from bert_tf.interop.kerashub import config_from_backbone
from bert_tf.interop.weights import model_arrays
from bert_tf.modeling import BertClassifier, BertEncoder, BertPretrainer
from interop_reference import gelu_erf, gelu_tanh, make_inputs

VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [chr(c) for c in range(97, 123)]
         + ["the", "of", "and", "to", "in", "is", "it", "for", "on"])


@pytest.fixture(scope="module")
def masked_lm():
    """A keras-hub BertMaskedLM (with tokenizer) whose every weight is redrawn wide."""
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCAB), num_layers=2, num_heads=4, hidden_dim=32,
        intermediate_dim=64, max_sequence_length=16)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    preprocessor = keras_hub.models.BertMaskedLMPreprocessor(tokenizer, sequence_length=16)
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=preprocessor)
    rng = np.random.default_rng(5)
    for variable in model.weights:
        value = rng.normal(0.0, 0.3, variable.shape)
        if variable.path.endswith("gamma"):
            value = 1.0 + value / 3
        variable.assign(value.astype("float32"))
    return model


def _features():
    return make_inputs(seed=1, seq_length=12, vocab_size=len(VOCAB))


def _keras_hub_inputs(features):
    return {"token_ids": features["input_word_ids"], "segment_ids": features["input_type_ids"],
            "padding_mask": features["input_mask"]}


def test_encoder_outputs_match_backbone(masked_lm):
    encoder = from_keras_hub(masked_lm.backbone)
    assert type(encoder) is BertEncoder
    # keras-hub's backbone uses the tanh GELU, the original BERT's (bert_tf "gelu").
    assert encoder.config.hidden_act == "gelu" and encoder.config.layer_norm_eps == 1e-12
    features = _features()
    expected = masked_lm.backbone(_keras_hub_inputs(features))
    got = encoder(features)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(np.asarray(got[name]), np.asarray(expected[name]),
                                   rtol=1e-5, atol=1e-5, err_msg=name)
    # With the exact GELU the outputs would differ: the mapping of the activation matters.
    exact = BertEncoder(encoder.config.replace(hidden_act="gelu_exact"))
    exact.set_weights(encoder.get_weights())
    assert np.abs(np.asarray(exact(features)["sequence_output"])
                  - np.asarray(expected["sequence_output"])).max() > 1e-4


def _head_logits(arrays, sequence_output, positions, activation, eps):
    gathered = np.take_along_axis(np.asarray(sequence_output, np.float64),
                                  positions[:, :, None], axis=1)
    t = activation(gathered @ arrays["cls/predictions/transform/dense/kernel"]
                   + arrays["cls/predictions/transform/dense/bias"])
    mean, var = t.mean(-1, keepdims=True), t.var(-1, keepdims=True)
    t = ((t - mean) / np.sqrt(var + eps) * arrays["cls/predictions/transform/LayerNorm/gamma"]
         + arrays["cls/predictions/transform/LayerNorm/beta"])
    return t @ arrays["bert/embeddings/word_embeddings"].T + arrays["cls/predictions/output_bias"]


def test_masked_lm_head_maps_exactly(masked_lm):
    """Same head weights; keras-hub's head math (exact GELU, eps 1e-5) vs the original's."""
    model = from_keras_hub(masked_lm.backbone, masked_lm)
    assert isinstance(model, BertPretrainer) and model.next_sentence is None
    features = _features()
    arrays = {k: v.astype(np.float64) for k, v in model_arrays(model).items()}
    sequence = model.encoder(features)["sequence_output"]
    positions = features["masked_lm_positions"]
    keras_hub_logits = masked_lm(dict(_keras_hub_inputs(features), mask_positions=positions))
    np.testing.assert_allclose(
        np.asarray(keras_hub_logits),
        _head_logits(arrays, sequence, positions, gelu_erf, 1e-5), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(model(features)["mlm_logits"]),
        _head_logits(arrays, sequence, positions, gelu_tanh, 1e-12), rtol=1e-5, atol=1e-5)


def test_preset_directory_and_keras_file_warm_start(tmp_path, masked_lm):
    preset = str(tmp_path / "preset")
    masked_lm.save_to_preset(preset)
    backbone, loaded_lm, vocab_file, lowercase = load_keras_hub(preset)
    assert loaded_lm is not None and lowercase is True
    assert open(vocab_file).read().split() == VOCAB
    expected = model_arrays(from_keras_hub(masked_lm.backbone))

    keras_file = str(tmp_path / "masked_lm.keras")
    keras_hub.models.BertMaskedLM(masked_lm.backbone).save(keras_file)  # no tokenizer inside
    for path, source_format in ((preset, "keras_hub"), (keras_file, "keras_hub")):
        classifier = BertClassifier(BertEncoder(config_from_backbone(masked_lm.backbone)), 2)
        report = warm_start(path, classifier, do_lower_case=True)
        assert report.source_format == source_format
        assert report.newly_initialized == ["classifier/kernel", "classifier/bias"]
        assert sorted(report.unused) == sorted(v.path for v in
                                               loaded_lm.masked_lm_head.weights
                                               if "token_embedding" not in v.path)
        got = model_arrays(classifier.encoder)
        for name, value in expected.items():
            assert np.array_equal(got[name], value), (path, name)

    with pytest.raises(InteropError) as error:
        warm_start(preset, BertClassifier(BertEncoder(config_from_backbone(backbone)), 2),
                   do_lower_case=False)
    assert str(error.value) == (f"--do_lower_case=False contradicts --init_checkpoint={preset}: "
                                "its tokenizer.json lowercase is True, so pass "
                                "--do_lower_case=True to tokenize as the model was trained "
                                "(or leave it unset to use it)")


def test_not_a_keras_hub_bert():
    with pytest.raises(InteropError) as error:
        from_keras_hub(keras.Sequential([keras.layers.Dense(2)]))
    assert str(error.value) == ("from_keras_hub: expected a keras_hub.models.BertBackbone or "
                                "BertMaskedLM, got Sequential")
