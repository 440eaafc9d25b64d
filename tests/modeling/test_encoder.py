"""Tests of BertEncoder: outputs, padding, initialization, serialization, mixed precision."""

import keras
import numpy as np
import tensorflow as tf
import pytest

from bert_tf.config import BertConfig
from bert_tf.modeling import BertEncoder


def encoder_inputs(features):
    return {k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}


def test_output_shapes_and_dtypes(small_config, features):
    encoder = BertEncoder(small_config)
    out = encoder(encoder_inputs(features))
    assert set(out) == {"sequence_output", "pooled_output", "encoder_outputs"}
    assert tuple(out["sequence_output"].shape) == (4, 16, 32)
    assert tuple(out["pooled_output"].shape) == (4, 32)
    assert len(out["encoder_outputs"]) == 2
    for t in out["encoder_outputs"]:
        assert tuple(t.shape) == (4, 16, 32) and t.dtype == "float32"
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])
    # The pooler is tanh(dense(CLS)).
    pooler = encoder.get_layer("pooler")
    cls = out["sequence_output"].numpy()[:, 0]
    np.testing.assert_allclose(out["pooled_output"],
                               np.tanh(cls @ pooler.kernel.numpy() + pooler.bias.numpy()),
                               atol=1e-5)
    assert encoder.config == small_config
    assert tuple(encoder.word_embeddings.embeddings.shape) == (100, 32)


def test_variable_sequence_length_and_extra_feature_keys(small_config, features, recwarn):
    encoder = BertEncoder(small_config)
    short = {k: v[:, :7] for k, v in encoder_inputs(features).items()}
    assert tuple(encoder(short)["sequence_output"].shape) == (4, 7, 32)
    # The full pre-training dict is accepted; labels are ignored without a warning.
    full = encoder(features)
    np.testing.assert_array_equal(full["pooled_output"],
                                  encoder(encoder_inputs(features))["pooled_output"])
    assert not [w for w in recwarn if "structure" in str(w.message)]


def test_missing_input_is_named(small_config, features):
    encoder = BertEncoder(small_config)
    inputs = encoder_inputs(features)
    del inputs["input_type_ids"]
    with pytest.raises(ValueError, match='Missing data for input "input_type_ids"'):
        encoder(inputs)


def test_padding_does_not_change_real_tokens(small_config, features):
    encoder = BertEncoder(small_config)
    inputs = encoder_inputs(features)
    row = int(np.argmin(inputs["input_mask"].sum(1)))  # the row with the most padding
    length = int(inputs["input_mask"][row].sum())
    assert length < 16
    out = encoder(inputs)["sequence_output"].numpy()[row, :length]
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["input_word_ids"][row, length:] = 7
    out_changed = encoder(changed)["sequence_output"].numpy()[row, :length]
    np.testing.assert_allclose(out, out_changed, atol=1e-5)


def test_dropout_only_in_training(small_config, features):
    encoder = BertEncoder(small_config)
    inputs = encoder_inputs(features)
    a = encoder(inputs, training=False)["sequence_output"].numpy()
    b = encoder(inputs, training=False)["sequence_output"].numpy()
    c = encoder(inputs, training=True)["sequence_output"].numpy()
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 1e-3


def test_truncated_normal_initialization():
    config = BertConfig(vocab_size=400, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=256,
                        max_position_embeddings=64, initializer_range=0.05)
    encoder = BertEncoder(config)
    kernels = [v for v in encoder.weights if v.name in ("kernel", "embeddings")]
    # 3 embedding tables, 6 kernels per block, the pooler.
    assert len(kernels) == 3 + 6 * 2 + 1
    values = np.concatenate([v.numpy().ravel() for v in kernels])
    assert np.abs(values).max() <= 2 * 0.05 + 1e-6  # truncated at two stddevs
    # A normal truncated at +-2 sigma has std 0.8796 sigma.
    assert abs(values.std() - 0.8796 * 0.05) < 0.03 * 0.05
    assert abs(values.mean()) < 1e-3
    for v in encoder.weights:
        if v.name in ("bias", "beta"):
            assert not v.numpy().any(), v.path
        if v.name == "gamma":
            assert (v.numpy() == 1).all(), v.path


def test_get_config_round_trip(small_config):
    encoder = BertEncoder(small_config.to_dict(), name="my_encoder")
    assert encoder.config == small_config
    config = encoder.get_config()
    clone = BertEncoder.from_config(config)
    assert clone.get_config() == config
    assert clone.name == "my_encoder"
    assert [v.path for v in clone.weights] == [v.path for v in encoder.weights]
    assert [tuple(v.shape) for v in clone.weights] == [tuple(v.shape) for v in encoder.weights]


def test_keras_save_and_load_give_identical_outputs(small_config, features, tmp_path):
    encoder = BertEncoder(small_config.replace(layer_norm_eps=1e-6))
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, BertEncoder)
    assert loaded.config.layer_norm_eps == 1e-6
    a, b = encoder(encoder_inputs(features)), loaded(encoder_inputs(features))
    np.testing.assert_array_equal(a["sequence_output"], b["sequence_output"])
    np.testing.assert_array_equal(a["pooled_output"], b["pooled_output"])


def test_rejects_bad_config():
    with pytest.raises(TypeError, match="config must be a BertConfig, a ModernBertConfig or a "
                                        "dict"):
        BertEncoder("bert_config.json")


def test_mixed_bfloat16(small_config, features, float32_policy):
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    encoder = BertEncoder(small_config)
    out = encoder(encoder_inputs(features))
    assert out["sequence_output"].dtype == "bfloat16"
    assert out["pooled_output"].dtype == "bfloat16"
    assert all(v.dtype == "float32" for v in encoder.weights)
    # LayerNorm statistics must be computed in float32: on activations with a large common
    # offset, bfloat16 mean/variance (8 bits of mantissa) would lose the differences entirely.
    norms = [layer for layer in encoder._flatten_layers()
             if isinstance(layer, keras.layers.LayerNormalization)]
    assert len(norms) == 1 + 2 * small_config.num_hidden_layers
    x = (50.0 + np.random.RandomState(0).randn(2, 3, small_config.hidden_size)).astype("float32")
    x_bf16 = tf.cast(x, tf.bfloat16)
    x32 = tf.cast(x_bf16, tf.float32).numpy()
    for layer in norms:
        gamma, beta = (w.numpy() for w in layer.weights)
        mean, var = x32.mean(-1, keepdims=True), x32.var(-1, keepdims=True)
        want = (x32 - mean) / np.sqrt(var + layer.epsilon) * gamma + beta
        got = tf.cast(layer(x_bf16), tf.float32).numpy()
        np.testing.assert_allclose(got, want, atol=0.02 * np.abs(want).max())
    keras.mixed_precision.set_global_policy("float32")
    reference = BertEncoder(small_config)
    reference.set_weights(encoder.get_weights())
    expected = reference(encoder_inputs(features))["sequence_output"].numpy()
    got = out["sequence_output"].numpy().astype("float32")
    assert np.isfinite(got).all()
    # bfloat16 keeps ~3 significant digits; LayerNorm outputs are O(1).
    assert np.abs(got - expected).max() < 0.15


def test_docstring_examples_run():
    import doctest

    import bert_tf.modeling.bert_encoder
    import bert_tf.modeling.classifier
    import bert_tf.modeling.modern_encoder
    import bert_tf.modeling.pooling
    import bert_tf.modeling.pretrainer
    import bert_tf.modeling.sentence_embedder

    for module in (bert_tf.modeling.bert_encoder, bert_tf.modeling.classifier,
                   bert_tf.modeling.modern_encoder, bert_tf.modeling.pooling,
                   bert_tf.modeling.pretrainer, bert_tf.modeling.sentence_embedder):
        result = doctest.testmod(module)
        assert result.attempted >= 2 and result.failed == 0, module.__name__
