"""BERT-family options of the model: ALBERT embeddings and sharing, sinusoidal and extended
positions, SOP naming and SpanBERT's span-boundary head; each saves, loads and fine-tunes."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.modeling import (BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler,
                              extend_position_embeddings)
from bert_tf.modeling.positions import extend_position_table
from bert_tf.modeling.transformer_block import TransformerBlock


def count(model):
    return sum(int(np.prod(v.shape)) for v in model.weights)


def tiny(**overrides):
    values = dict(vocab_size=100, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=16)
    values.update(overrides)
    return BertConfig(**values)


def with_spans(features):
    """Adds span boundaries: each prediction is a one-token span between its neighbours."""
    features = dict(features)
    features["span_left_boundaries"] = np.maximum(features["masked_lm_positions"] - 1, 0)
    features["span_right_boundaries"] = np.minimum(features["masked_lm_positions"] + 1, 15)
    return features


def overfit(model, features, part, steps=10):
    """Trains `model` on one batch for `steps` eager steps (tracing a train step costs more
    than these); returns ([parts[part] of each step], the last step's parts)."""
    features = {k: tf.constant(v) for k, v in features.items()}
    optimizer = keras.optimizers.Adam(2e-2)
    values = []
    for _ in range(steps):
        with tf.GradientTape() as tape:
            parts = model.compute_pretraining_losses(features, model(features, training=True))
        grads = tape.gradient(parts["loss"], model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        values.append(float(parts[part]))
    return values, parts


def test_parameter_counts_match_the_published_formulas():
    # BERT-base, H=768, L=12, V=30522: unchanged, 110M.
    bert = BertEncoder(BertConfig.from_preset("bert_base"))
    assert count(bert) == 109_482_240
    assert not [v.path for v in bert.weights if "projection" in v.path]
    assert len(bert.weights) == 5 + 12 * 16 + 2
    # ALBERT-base: V=30000, E=128, H=768, one shared block; the paper's "12M".
    albert = BertEncoder(BertConfig(vocab_size=30000, embedding_size=128,
                                    share_parameters="all"))
    v, e, h, f = 30000, 128, 768, 3072
    embeddings = (v + 512 + 2) * e + 2 * e
    projection = e * h + h
    block = 4 * (h * h + h) + 2 * (h * f) + f + h + 2 * 2 * h
    pooler = h * h + h
    assert count(albert) == embeddings + projection + block + pooler == 11_683_584
    # As in ALBERT, E == H needs no projection: the model is BERT's.
    same_width = BertEncoder(tiny(embedding_size=32))
    assert [v.path for v in same_width.weights] == [v.path for v in BertEncoder(tiny()).weights]


def test_albert_all_sharing_applies_one_block_l_times(features):
    config = tiny(embedding_size=16, share_parameters="all")
    encoder = BertEncoder(config)
    block_names = [l.name for l in encoder.layers if isinstance(l, TransformerBlock)]
    assert block_names == ["transformer_layer_0"]
    assert tuple(encoder.word_embeddings.embeddings.shape) == (100, 16)
    assert tuple(encoder.get_layer("embedding_projection").kernel.shape) == (16, 32)
    inputs = {k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    out = encoder(inputs)
    # By hand: embeddings -> projection -> the same block three times.
    x = encoder.embedding_layer(inputs["input_word_ids"], inputs["input_type_ids"])
    x = encoder.get_layer("embedding_projection")(x)
    bias = encoder.get_layer("attention_bias")(inputs["input_mask"])
    block = encoder.get_layer("transformer_layer_0")
    for i in range(3):
        x = block(x, bias)
        np.testing.assert_allclose(out["encoder_outputs"][i], x, atol=1e-5)


@pytest.mark.parametrize("share, shared, own", [
    ("attention", ("query", "key", "value", "attention_output", "attention_layer_norm"),
     ("intermediate", "output_dense", "output_layer_norm")),
    ("ffn", ("intermediate", "output_dense", "output_layer_norm"),
     ("query", "key", "value", "attention_output", "attention_layer_norm")),
])
def test_partial_sharing_shares_only_that_half(share, shared, own):
    encoder = BertEncoder(tiny(share_parameters=share))
    blocks = [encoder.get_layer(f"transformer_layer_{i}") for i in range(3)]
    for name in shared:
        assert getattr(blocks[1], name) is getattr(blocks[0], name)
        assert getattr(blocks[2], name) is getattr(blocks[0], name)
    for name in own:
        assert getattr(blocks[1], name) is not getattr(blocks[0], name)
    unshared = count(BertEncoder(tiny()))
    h, f = 32, 64
    saved = 2 * (4 * (h * h + h) + 2 * h if share == "attention" else 2 * h * f + f + 3 * h)
    assert count(encoder) == unshared - saved
    # Gradients of a shared variable add up over the layers that use it: one variable each.
    paths = [v.path for v in encoder.trainable_weights]
    assert len(paths) == len(set(paths))


def test_sinusoidal_embeddings_equal_the_closed_form_and_take_any_length():
    config = tiny(position_embedding_type="sinusoidal", hidden_size=36, num_attention_heads=4)
    encoder = BertEncoder(config)
    assert not [v.path for v in encoder.weights if "position" in v.path]
    table = encoder.embedding_layer.position_embeddings(np.zeros((1, 40), "int32")).numpy()
    expected = np.zeros((40, 36))
    for p in range(40):
        for i in range(18):
            angle = p / 10000 ** (2 * i / 36)
            expected[p, 2 * i], expected[p, 2 * i + 1] = math.sin(angle), math.cos(angle)
    np.testing.assert_allclose(table, expected, atol=2e-5)
    ids = np.ones((2, 40), "int32")  # longer than max_position_embeddings=16
    out = encoder({"input_word_ids": ids, "input_mask": ids, "input_type_ids": 0 * ids})
    assert tuple(out["sequence_output"].shape) == (2, 40, 36)
    assert config.to_dict()["position_embedding_type"] == "sinusoidal"


@pytest.mark.parametrize("method", ["copy", "interpolate"])
def test_extended_position_table_keeps_the_learned_rows(method):
    table = np.random.default_rng(0).normal(size=(512, 8)).astype("float32")
    extended = extend_position_table(table, 1280, method)
    assert extended.shape == (1280, 8) and extended.dtype == np.float32
    np.testing.assert_array_equal(extended[:512], table)
    if method == "copy":
        np.testing.assert_array_equal(extended[512:1024], table)
        np.testing.assert_array_equal(extended[1024:], table[:256])
    else:
        # 768 new rows: the table resampled from its first row to its last.
        np.testing.assert_allclose(extended[512], table[0])
        np.testing.assert_allclose(extended[-1], table[-1])
        middle = 511 * 100 / 767
        below = int(middle)
        np.testing.assert_allclose(
            extended[612], table[below] + (middle - below) * (table[below + 1] - table[below]),
            rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(extend_position_table(table, 1024, "interpolate"),
                                  extend_position_table(table, 1024, "copy"))
    with pytest.raises(ValueError, match="new length 512 must exceed the table's 512 rows"):
        extend_position_table(table, 512, method)


def test_extend_position_embeddings_of_a_model(make_batch):
    model = BertClassifier(BertEncoder(tiny()), num_classes=3)
    longer = extend_position_embeddings(model, 40, "interpolate")
    assert type(longer) is BertClassifier and longer.encoder.config.max_position_embeddings == 40
    old_table = model.encoder.embedding_layer.position_embeddings.embeddings.numpy()
    new_table = longer.encoder.embedding_layer.position_embeddings.embeddings.numpy()
    np.testing.assert_array_equal(new_table[:16], old_table)
    features = make_batch()
    inputs = {k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    # Inputs within the old length give the same outputs; longer ones now run.
    np.testing.assert_allclose(longer(inputs), model(inputs), atol=1e-6)
    long_inputs = {k: np.tile(v, (1, 2)) for k, v in inputs.items()}
    assert tuple(longer(long_inputs).shape) == (4, 3)
    with pytest.raises(ValueError, match="has no learned table to extend"):
        extend_position_embeddings(BertEncoder(tiny(position_embedding_type="sinusoidal")), 40)
    with pytest.raises(ValueError, match="new length 16 must exceed max_position_embeddings=16"):
        extend_position_embeddings(model, 16)


def test_factorized_embeddings_mlm_head_scores_against_the_narrow_table(features):
    model = BertPretrainer(BertEncoder(tiny(embedding_size=16)))
    assert tuple(model.masked_lm.transform.kernel.shape) == (32, 16)
    out = model(features)
    assert tuple(out["mlm_logits"].shape) == (4, 4, 100)
    vocab_by_width = [v for v in model.trainable_weights if tuple(v.shape) == (100, 16)]
    assert vocab_by_width == [model.encoder.word_embeddings.embeddings]


def test_sentence_order_prediction_names_its_metrics(features):
    model = BertPretrainer(BertEncoder(tiny(share_parameters="all", embedding_size=16)),
                           sentence_order_prediction=True)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), run_eagerly=True)
    history = model.fit(tf.data.Dataset.from_tensors(features).repeat(2), shuffle=False, verbose=0)
    assert set(history.history) == {"loss", "mlm_loss", "masked_lm_accuracy", "sop_loss",
                                    "sentence_order_accuracy"}
    with pytest.raises(ValueError, match="sentence_order_prediction=True needs "
                                         "use_next_sentence_label=True"):
        BertPretrainer(BertEncoder(tiny()), use_next_sentence_label=False,
                       sentence_order_prediction=True)


def test_span_boundary_head_matches_numpy_and_is_added_to_the_loss(features):
    model = BertPretrainer(BertEncoder(tiny()), use_next_sentence_label=False,
                           span_boundary_objective=True, max_span_pieces=4)
    features = with_spans(features)
    features["span_left_boundaries"][0, :] = 0  # pieces far into a span: clipped offsets
    out = model(features)
    seq = model.encoder(features)["sequence_output"].numpy().astype("float64")
    head = model.span_boundary

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

    def norm(x, layer):
        x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
        return x * layer.gamma.numpy() + layer.beta.numpy()

    def dense(x, layer):
        return gelu(x @ layer.kernel.numpy() + layer.bias.numpy())

    left = np.take_along_axis(seq, features["span_left_boundaries"][..., None], axis=1)
    right = np.take_along_axis(seq, features["span_right_boundaries"][..., None], axis=1)
    offset = np.clip(features["masked_lm_positions"] - features["span_left_boundaries"] - 1, 0, 3)
    assert offset.max() == 3
    x = np.concatenate([left, right, head.relative_position_embeddings.embeddings.numpy()[offset]],
                       axis=-1)
    x = norm(dense(x, head.transform_1), head.transform_1_layer_norm)
    x = norm(dense(x, head.transform_2), head.transform_2_layer_norm)
    expected = x @ model.encoder.word_embeddings.embeddings.numpy().T + head.output_bias.numpy()
    np.testing.assert_allclose(out["sbo_logits"], expected, rtol=1e-4, atol=1e-4)
    parts = model.compute_pretraining_losses(features, out)
    np.testing.assert_allclose(parts["loss"], parts["mlm_loss"] + parts["sbo_loss"], rtol=1e-6)
    # Inference without spans (fill-mask) uses the masked-LM head alone; the loss needs them.
    del features["span_right_boundaries"]
    out = model(features)
    assert set(out) == {"mlm_logits"}
    with pytest.raises(KeyError, match="the span-boundary objective needs span_right_boundaries"):
        model.compute_pretraining_losses(features, out)


def test_sbo_loss_decreases_on_a_tiny_overfit(make_batch):
    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertEncoder(tiny(num_hidden_layers=1, hidden_dropout_prob=0.0,
                                            attention_probs_dropout_prob=0.0)),
                           use_next_sentence_label=False, span_boundary_objective=True)
    sbo_losses, parts = overfit(model, with_spans(make_batch(batch=8, seed=3)), "sbo_loss")
    assert sbo_losses[0] > 4.0  # about log(100) at the start
    assert sbo_losses[-1] < 0.3 * sbo_losses[0], sbo_losses
    assert float(parts["sbo_correct"]) / float(parts["mlm_weight_sum"]) > 0.8


def test_cls_bag_of_words_matches_numpy_and_is_added_to_the_loss(features):
    model = BertPretrainer(BertEncoder(tiny()), use_next_sentence_label=False,
                           bag_of_words_weight=0.5)
    features = dict(features)
    features["input_mask"] = features["input_mask"].copy()
    features["input_mask"][1, 9:] = 0  # a shorter row: its padding is not a word
    out = model(features)
    assert set(out) == {"mlm_logits", "bow_logits"}
    assert tuple(out["bow_logits"].shape) == (4, 1, 100)
    # The masked-LM head read at [CLS]: the same logits as a masked prediction at position 0.
    seq = model.encoder(features)["sequence_output"]
    np.testing.assert_allclose(out["bow_logits"],
                               model.masked_lm(seq, np.zeros((4, 1), "int32")), atol=1e-6)
    # The words are the rows before masking: the masked slots' original ids put back.
    words = features["input_word_ids"].copy()
    for b in range(4):
        for position, word, weight in zip(features["masked_lm_positions"][b],
                                          features["masked_lm_ids"][b],
                                          features["masked_lm_weights"][b]):
            if weight:
                words[b, position] = word
    assert (words != features["input_word_ids"]).any()
    logits = out["bow_logits"].numpy()[:, 0].astype("float64")
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    real = features["input_mask"].astype("float64")
    real[:, 0] = 0  # not [CLS] itself
    expected = np.mean([-(real[b] * log_probs[b, words[b]]).sum() / real[b].sum()
                        for b in range(4)])
    parts = model.compute_pretraining_losses(features, out)
    np.testing.assert_allclose(parts["bow_loss"], expected, rtol=1e-5)
    np.testing.assert_allclose(parts["loss"], parts["mlm_loss"] + 0.5 * parts["bow_loss"],
                               rtol=1e-6)
    # Fill-mask (no masked_lm_ids) reads the masked-LM head alone.
    inference = {k: v for k, v in features.items() if k != "masked_lm_ids"}
    assert set(model(inference)) == {"mlm_logits"}
    # No new weights: a bag-of-words pretrainer's checkpoints are the masked LM's.
    plain = BertPretrainer(BertEncoder(tiny()), use_next_sentence_label=False)
    assert [v.path for v in model.weights] == [v.path for v in plain.weights]
    assert model.get_config()["bag_of_words_weight"] == 0.5
    assert "bag_of_words_weight" not in plain.get_config()
    assert BertPretrainer.from_config(model.get_config()).bag_of_words_weight == 0.5


def test_cls_bag_of_words_trains_the_cls_vector_and_is_refused_where_it_cannot(make_batch):
    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertEncoder(tiny(num_hidden_layers=1, hidden_dropout_prob=0.0,
                                            attention_probs_dropout_prob=0.0)),
                           use_next_sentence_label=False, bag_of_words_weight=1.0)
    bow_losses, _ = overfit(model, make_batch(batch=8, seed=3), "bow_loss")
    assert bow_losses[0] > 4.0  # about log(100) at the start
    # A uniform-ish row of 15 distinct-ish words can only be fit down to its entropy.
    assert bow_losses[-1] < 0.8 * bow_losses[0], bow_losses
    model.compile(optimizer=keras.optimizers.Adam(1e-3), run_eagerly=True)
    history = model.fit(tf.data.Dataset.from_tensors(make_batch()).repeat(2), shuffle=False,
                        verbose=0)
    assert set(history.history) == {"loss", "mlm_loss", "masked_lm_accuracy", "bow_loss"}

    with pytest.raises(ValueError, match="bag_of_words_weight must be >= 0, got -1"):
        BertPretrainer(BertEncoder(tiny()), bag_of_words_weight=-1)
    packed = dict(make_batch(), input_instance_ids=np.ones((4, 16), "int32"))
    with pytest.raises(ValueError, match=r"the \[CLS\] bag-of-words objective reads one row "
                                         r"per \[CLS\]; packed rows \(input_instance_ids\)"):
        model(packed)


@pytest.mark.parametrize("overrides", [
    dict(embedding_size=16, share_parameters="all"),
    dict(share_parameters="attention", position_embedding_type="sinusoidal"),
    dict(share_parameters="ffn"),
])
def test_variants_round_trip_through_keras_files(overrides, features, tmp_path):
    model = BertPretrainer(BertEncoder(tiny(**overrides)), sentence_order_prediction=True,
                           span_boundary_objective=True)
    features = with_spans(features)
    out = model(features)
    path = str(tmp_path / "pretrainer.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.encoder.config == model.encoder.config
    assert (loaded.sentence_order_prediction, loaded.span_boundary_objective) == (True, True)
    assert [v.path for v in loaded.weights] == [v.path for v in model.weights]
    for name, value in loaded(features).items():
        np.testing.assert_allclose(value, out[name], atol=1e-6)


def test_task_models_fine_tune_on_a_family_encoder(make_batch, tmp_path):
    encoder = BertEncoder(tiny(embedding_size=16, share_parameters="all",
                               position_embedding_type="sinusoidal"))
    features = make_batch(batch=8)
    inputs = {k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    classifier = BertClassifier(encoder, num_classes=2)
    classifier.compile(optimizer=keras.optimizers.Adam(1e-3), run_eagerly=True)
    labels = features["next_sentence_labels"]
    history = classifier.fit(inputs, labels, batch_size=8, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    classifier.save(str(tmp_path / "classifier.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "classifier.keras"))
    np.testing.assert_allclose(loaded(inputs), classifier(inputs), atol=1e-6)
    span = BertSpanLabeler(BertEncoder(tiny(share_parameters="ffn")))
    logits = span(inputs)
    assert tuple(logits["start_logits"].shape) == tuple(logits["end_logits"].shape) == (8, 16)


def test_family_pretrainer_exports_for_serving(features, tmp_path):
    from bert_tf.serving import export

    model = BertPretrainer(BertEncoder(tiny(embedding_size=16, share_parameters="all",
                                            position_embedding_type="sinusoidal")),
                           sentence_order_prediction=True, span_boundary_objective=True)
    export(model, str(tmp_path / "export" / "1"), signatures=("ids",))
    served = tf.saved_model.load(str(tmp_path / "export" / "1")).signatures["serving_default"]
    names = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")
    out = served(**{k: tf.constant(features[k]) for k in names})
    np.testing.assert_allclose(out["mlm_logits"], model(features)["mlm_logits"], atol=1e-5)
