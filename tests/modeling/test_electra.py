"""Tests of ElectraPretrainer: the generator's size and shared embeddings, sampling without a
gradient, the discriminator's labels, the combined loss, fit and serialization."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import ModernBertConfig
from bert_tf.modeling import BertEncoder, ElectraPretrainer, build_encoder
from bert_tf.modeling.electra import electra_metrics, generator_config
from bert_tf.training import checkpointing


@pytest.fixture
def dropout_config(small_config):
    """The small config (H=32, 4 heads) with factorized embeddings E=16 and BERT's dropout."""
    return small_config.replace(embedding_size=16)


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_the_generator_is_a_quarter_wide_and_shares_the_embeddings(dropout_config):
    encoder = BertEncoder(dropout_config)
    model = ElectraPretrainer(encoder)
    generator = model.generator
    assert (generator.config.hidden_size, generator.config.num_attention_heads,
            generator.config.intermediate_size, generator.config.num_hidden_layers) == (8, 1, 16, 2)
    assert generator.embedding_layer is encoder.embedding_layer
    # The shared tables are E=16 wide; the generator projects them to its width 8.
    assert tuple(generator.get_layer("embedding_projection").kernel.shape) == (16, 8)
    ids = {id(v) for v in model.trainable_variables}
    assert len(ids) == len(model.trainable_variables)  # every variable once
    for table in (encoder.word_embeddings.embeddings,
                  encoder.embedding_layer.position_embeddings.embeddings,
                  encoder.embedding_layer.token_type_embeddings.embeddings):
        assert id(table) in ids
    # The generator's masked-LM head scores against the shared word table.
    assert model.generator_head.embedding_layer is encoder.word_embeddings
    # Neither pooler is read.
    poolers = {id(v) for e in (encoder, generator) for v in e.get_layer("pooler").weights}
    assert not poolers & ids and len(poolers) == 4


@pytest.mark.parametrize("width, expected", [(16, (16, 2, 32)), (24, (24, 3, 48)),
                                             (20, (20, 2, 40)), (32, (32, 4, 64))])
def test_generator_heads_and_intermediate_follow_its_width(small_config, width, expected):
    config = generator_config(small_config, width)
    assert (config.hidden_size, config.num_attention_heads, config.intermediate_size) == expected
    assert config.embedding_width == small_config.embedding_width


def test_a_generator_wider_than_the_discriminator_is_refused(small_config):
    with pytest.raises(ValueError) as error:
        ElectraPretrainer(BertEncoder(small_config), generator_hidden_size=64)
    assert str(error.value) == (
        "generator_hidden_size=64 is larger than hidden_size=32: ELECTRA's generator must be no "
        "larger than the discriminator (default hidden_size / 4)")
    with pytest.raises(TypeError, match="encoder must be a BertEncoder"):
        ElectraPretrainer(build_encoder(ModernBertConfig.from_preset("modernbert_tiny")))
    with pytest.raises(ValueError, match="discriminator_weight=0 must be a finite number > 0"):
        ElectraPretrainer(BertEncoder(small_config), discriminator_weight=0)


def test_outputs_with_dropout_on(dropout_config, features):
    model = ElectraPretrainer(BertEncoder(dropout_config), seed=3)
    out = model(features, training=True)
    shapes = {k: (tuple(v.shape), keras.backend.standardize_dtype(v.dtype))
              for k, v in out.items()}
    assert shapes == {"mlm_logits": ((4, 4, 100), "float32"),
                      "replacement_ids": ((4, 4), "int32"),
                      "corrupted_word_ids": ((4, 16), "int32"),
                      "is_replaced": ((4, 16), "float32"),
                      "discriminator_logits": ((4, 16), "float32")}
    # Dropout is on: two calls differ; without training they agree.
    again = model(features, training=True)
    assert np.abs(_numpy(out["mlm_logits"]) - _numpy(again["mlm_logits"])).max() > 1e-4
    np.testing.assert_allclose(_numpy(model.generate(features)), _numpy(model.generate(features)))
    parts = {k: float(v) for k, v in model.compute_pretraining_losses(features, out).items()}
    assert all(np.isfinite(v) for v in parts.values())
    assert parts["token_count"] == features["input_mask"].sum()
    assert parts["mlm_weight_sum"] == features["masked_lm_weights"].sum()
    assert parts["loss"] == pytest.approx(parts["mlm_loss"] + 50.0 * parts["disc_loss"],
                                          rel=1e-6)


def test_labels_are_exactly_where_the_sample_differs_from_the_original(small_config, features):
    model = ElectraPretrainer(BertEncoder(small_config), seed=5)
    out = model(features, training=True)
    replacements = _numpy(out["replacement_ids"])
    corrupted = _numpy(out["corrupted_word_ids"])
    original = features["input_word_ids"].copy()
    expected = features["input_word_ids"].copy()
    for b, p in zip(*np.nonzero(features["masked_lm_weights"])):
        position = features["masked_lm_positions"][b, p]
        original[b, position] = features["masked_lm_ids"][b, p]
        expected[b, position] = replacements[b, p]
    np.testing.assert_array_equal(corrupted, expected)
    labels = (corrupted != original) & (features["input_mask"] == 1)
    np.testing.assert_array_equal(_numpy(out["is_replaced"]), labels.astype("float32"))
    assert 0 < labels.sum() <= features["masked_lm_weights"].sum()

    # A replacement equal to the original token is no replacement; 0-weighted slots
    # (position 0, the [CLS]) replace nothing.
    fixed = np.where(np.arange(4)[None, :] % 2 == 0, features["masked_lm_ids"], 7)
    corrupted, is_replaced = model.replace_tokens(features, fixed)
    want = np.zeros_like(labels)
    for b, p in zip(*np.nonzero(features["masked_lm_weights"])):
        position = features["masked_lm_positions"][b, p]
        want[b, position] = fixed[b, p] != features["masked_lm_ids"][b, p]
    np.testing.assert_array_equal(_numpy(is_replaced), want.astype("float32"))
    assert _numpy(corrupted)[:, 0].tolist() == features["input_word_ids"][:, 0].tolist()


def test_samples_follow_the_generator_softmax_from_a_checkpointed_generator(small_config):
    model = ElectraPretrainer(BertEncoder(small_config), seed=11)
    # A peaked distribution gives its mode; a two-way one both tokens about equally.
    logits = np.full((2, 3000, 100), -30.0, "float32")
    logits[0, :, 7] = 30.0
    logits[1, :, [8, 9]] = 0.0
    state = _numpy(model.sampler.state).copy()
    drawn = _numpy(model.sample(logits))
    assert (drawn[0] == 7).all()
    assert set(drawn[1].tolist()) == {8, 9} and 0.45 < (drawn[1] == 8).mean() < 0.55
    # The sampler's state is the model's (checkpointed with dropout's) and resumes the draws.
    assert any(model.sampler.state is v for v in model.non_trainable_variables)
    assert checkpointing.random_state(model).generator_0 is model.sampler.state
    after = _numpy(model.sample(logits))
    model.sampler.state.assign(state)
    np.testing.assert_array_equal(_numpy(model.sample(logits)), drawn)
    assert (after[1] != drawn[1]).any()


def test_no_gradient_through_the_sample(small_config, features):
    """The discriminator loss reaches the shared embeddings but not the generator's own
    weights; the generator's loss reaches the generator and the embeddings."""
    model = ElectraPretrainer(BertEncoder(small_config), seed=2)
    variables = model.trainable_variables
    with tf.GradientTape(persistent=True) as tape:
        out = model(features, training=False)
        parts = model.compute_pretraining_losses(features, out)
    trained = {id(v) for v in variables}
    generator_only = ({id(v) for v in model.generator.weights + model.generator_head.weights}
                      & trained) - {id(v) for v in model.encoder.weights}
    shared = {id(v) for v in model.encoder.embedding_layer.trainable_variables}
    disc = dict(zip(map(id, variables), tape.gradient(parts["disc_loss"], variables)))
    gen = dict(zip(map(id, variables), tape.gradient(parts["mlm_loss"], variables)))
    for key, grad in disc.items():
        if key in generator_only:
            assert grad is None or not np.any(_numpy(grad))
        elif key in shared:
            assert np.any(_numpy(grad))
    assert all(np.any(_numpy(gen[key])) for key in generator_only | shared
               if gen[key] is not None)
    assert all(gen[key] is not None for key in generator_only)


def test_fit_trains_and_logs_the_metrics(small_config, features):
    """compile + fit (eagerly: two steps; learning is shown by the driver's runs)."""
    model = ElectraPretrainer(BertEncoder(small_config), seed=1)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), run_eagerly=True)
    before = _numpy(model.encoder.word_embeddings.embeddings).copy()
    history = model.fit(tf.data.Dataset.from_tensor_slices(features).batch(2), epochs=1,
                        shuffle=False, verbose=0).history
    assert set(history) == {"loss", "generator_loss", "generator_accuracy",
                            "discriminator_loss", "discriminator_accuracy",
                            "discriminator_precision", "discriminator_recall",
                            "replaced_fraction"}
    assert all(np.isfinite(values[-1]) for values in history.values())
    assert 0 < history["replaced_fraction"][-1] < 0.5
    assert np.abs(_numpy(model.encoder.word_embeddings.embeddings) - before).max() > 0


def test_metrics_are_ratios_of_sums(small_config, features):
    model = ElectraPretrainer(BertEncoder(small_config))
    parts = {k: float(v) for k, v in
             model.compute_pretraining_losses(features, model(features)).items()}
    doubled = electra_metrics({k: 2 * v for k, v in parts.items()}, 2)
    assert doubled["loss"] == pytest.approx(parts["loss"])
    assert doubled["replaced_fraction"] == pytest.approx(parts["replaced_count"]
                                                         / parts["token_count"])
    assert doubled["generator_accuracy"] == pytest.approx(parts["mlm_correct"]
                                                          / parts["mlm_weight_sum"])
    packed = electra_metrics(dict(parts, instances=6.0, rows=4.0), 1)
    assert packed["instances_per_row"] == 1.5


def test_keras_file_round_trip_keeps_the_sharing_and_the_outputs(dropout_config, features,
                                                                    tmp_path):
    model = ElectraPretrainer(BertEncoder(dropout_config), generator_hidden_size=16,
                              discriminator_weight=20.0)
    path = str(tmp_path / "pretrainer.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is ElectraPretrainer
    assert loaded.generator.embedding_layer is loaded.encoder.embedding_layer
    assert (loaded.generator.config.hidden_size, loaded.discriminator_weight) == (16, 20.0)
    assert [v.path for v in loaded.weights] == [v.path for v in model.weights]
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(_numpy(a), _numpy(b), err_msg=a.path)
    np.testing.assert_allclose(_numpy(loaded.discriminate(features)),
                               _numpy(model.discriminate(features)), atol=1e-6)
    # The discriminator alone is an ordinary encoder file.
    model.encoder.save(str(tmp_path / "encoder.keras"))
    encoder = keras.saving.load_model(str(tmp_path / "encoder.keras"))
    np.testing.assert_allclose(_numpy(encoder(features)["sequence_output"]),
                               _numpy(model.encoder(features)["sequence_output"]), atol=1e-6)
