"""Tests of BertPretrainer: heads, tied embeddings, the original losses, fit, serialization."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.modeling import BertEncoder, BertPretrainer
from bert_tf.modeling.pretraining_metrics import pretraining_metrics


def np_sparse_ce(logits, labels):
    logits = logits.astype("float64")
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]


def test_outputs_shapes_and_dtypes(small_config, features):
    model = BertPretrainer(BertEncoder(small_config))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # extra feature keys must not warn
        out = model(features)
    assert set(out) == {"mlm_logits", "nsp_logits"}
    assert tuple(out["mlm_logits"].shape) == (4, 4, 100) and out["mlm_logits"].dtype == "float32"
    assert tuple(out["nsp_logits"].shape) == (4, 2) and out["nsp_logits"].dtype == "float32"
    assert model.encoder.config == small_config


def test_missing_feature_is_named(small_config, features):
    model = BertPretrainer(BertEncoder(small_config))
    del features["masked_lm_positions"]
    with pytest.raises(KeyError, match="BertPretrainer: features lack masked_lm_positions; got "
                                       "input_mask, input_type_ids, input_word_ids, "
                                       "masked_lm_ids, masked_lm_weights, next_sentence_labels"):
        model(features)


def test_heads_match_numpy(small_config, features):
    model = BertPretrainer(BertEncoder(small_config))
    out = model(features)
    seq = model.encoder(features)["sequence_output"].numpy().astype("float64")
    pooled = model.encoder(features)["pooled_output"].numpy().astype("float64")
    head = model.masked_lm
    gathered = np.take_along_axis(seq, features["masked_lm_positions"][..., None], axis=1)
    x = gathered @ head.transform.kernel.numpy() + head.transform.bias.numpy()
    x = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
    x = x * head.transform_layer_norm.gamma.numpy() + head.transform_layer_norm.beta.numpy()
    expected = x @ model.encoder.word_embeddings.embeddings.numpy().T + head.output_bias.numpy()
    np.testing.assert_allclose(out["mlm_logits"], expected, rtol=1e-4, atol=1e-4)
    nsp = pooled @ model.next_sentence.kernel.numpy() + model.next_sentence.bias.numpy()
    np.testing.assert_allclose(out["nsp_logits"], nsp, rtol=1e-4, atol=1e-5)


def test_output_projection_is_tied_to_word_embeddings(small_config, features):
    model = BertPretrainer(BertEncoder(small_config))
    table = model.encoder.word_embeddings.embeddings
    assert model.masked_lm.embedding_layer.embeddings is table
    vocab_by_hidden = [v for v in model.trainable_weights if tuple(v.shape) == (100, 32)]
    assert len(vocab_by_hidden) == 1 and vocab_by_hidden[0] is table
    assert len({id(v) for v in model.trainable_weights}) == len(model.trainable_weights)

    used = np.zeros(100, bool)
    used[np.unique(features["input_word_ids"][features["input_mask"] == 1])] = True
    with tf.GradientTape(persistent=True) as tape:
        losses = model.compute_pretraining_losses(features, model(features))
    # NSP reaches the table only through the input lookup: the rows of the input ids.
    nsp_grad = tf.convert_to_tensor(tape.gradient(losses["nsp_loss"], table)).numpy()
    assert np.abs(nsp_grad[used]).sum(1).min() > 0
    assert not nsp_grad[~used].any()
    # Masked LM also reaches it through the output projection: every row, used or not.
    mlm_grad = tf.convert_to_tensor(tape.gradient(losses["mlm_loss"], table)).numpy()
    assert np.abs(mlm_grad).sum(1).min() > 0


def test_losses_match_numpy(small_config, features):
    model = BertPretrainer(BertEncoder(small_config))
    features["next_sentence_labels"] = features["next_sentence_labels"][:, None]  # [B, 1] too
    assert (features["masked_lm_weights"] == 0).sum() >= 2
    out = model(features)
    got = {k: float(v) for k, v in model.compute_pretraining_losses(features, out).items()}

    logits = out["mlm_logits"].numpy()
    weights = features["masked_lm_weights"].astype("float64")
    ce = np_sparse_ce(logits, features["masked_lm_ids"])
    mlm_loss = (weights * ce).sum() / (weights.sum() + 1e-5)
    labels = features["next_sentence_labels"][:, 0]
    nsp_loss = np_sparse_ce(out["nsp_logits"].numpy(), labels).mean()
    np.testing.assert_allclose(got["mlm_loss"], mlm_loss, rtol=1e-5)
    np.testing.assert_allclose(got["nsp_loss"], nsp_loss, rtol=1e-5)
    np.testing.assert_allclose(got["loss"], mlm_loss + nsp_loss, rtol=1e-5)
    assert got["mlm_weight_sum"] == weights.sum()
    hits = logits.argmax(-1) == features["masked_lm_ids"]
    assert got["mlm_correct"] == (weights * hits).sum()
    assert got["nsp_correct"] == (out["nsp_logits"].numpy().argmax(-1) == labels).sum()
    assert got["nsp_count"] == 4.0


def test_no_predictions_gives_zero_mlm_loss(small_config, features):
    model = BertPretrainer(BertEncoder(small_config))
    features["masked_lm_weights"] = np.zeros_like(features["masked_lm_weights"])
    losses = model.compute_pretraining_losses(features, model(features))
    assert float(losses["mlm_loss"]) == 0.0 and float(losses["mlm_weight_sum"]) == 0.0


def test_nsp_off(small_config, features):
    model = BertPretrainer(BertEncoder(small_config), use_next_sentence_label=False)
    out = model(features)
    assert set(out) == {"mlm_logits"}
    losses = model.compute_pretraining_losses(features, out)
    assert float(losses["nsp_loss"]) == 0.0 and float(losses["nsp_count"]) == 0.0
    assert float(losses["loss"]) == float(losses["mlm_loss"]) > 0
    assert not [v for v in model.weights if "next_sentence" in v.path]
    assert [m.name for m in model.metrics] == ["mlm_loss", "masked_lm_accuracy"]
    # The pooler feeds no loss, so it is not trained (and Keras does not warn about it).
    pooler = {id(v) for v in model.encoder.get_layer("pooler").weights}
    assert not pooler & {id(v) for v in model.trainable_weights}
    assert not pooler & {id(v) for v in model.trainable_variables}
    assert pooler <= {id(v) for v in model.non_trainable_weights}
    assert len(model.trainable_weights) + len(model.non_trainable_weights) == len(model.weights)


def overfit_dataset(make_batch):
    """8 fixed records, batch 8, every slot predicted, shifted targets so nothing is trivial."""
    records = make_batch(batch=8, seq_length=16, num_predictions=4, vocab_size=100, seed=5)
    records["masked_lm_weights"][:] = 1.0
    records["masked_lm_positions"] = np.tile(np.array([1, 3, 5, 6], "int32"), (8, 1))
    records["masked_lm_ids"] = (records["input_word_ids"][:, [1, 3, 5, 6]] + 11) % 100
    return records, tf.data.Dataset.from_tensors(records).repeat(25)


@pytest.mark.parametrize("use_nsp", [True, False])
def test_fit_overfits_eight_records(use_nsp, make_batch):
    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128,
                        max_position_embeddings=16, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    model = BertPretrainer(BertEncoder(config), use_next_sentence_label=use_nsp)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    records, dataset = overfit_dataset(make_batch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(dataset, epochs=4, verbose=0).history
    assert not [w for w in caught if "Gradients do not exist" in str(w.message)]
    expected_logs = {"loss", "mlm_loss", "masked_lm_accuracy"}
    if use_nsp:
        expected_logs |= {"nsp_loss", "next_sentence_accuracy"}
    assert set(history) == expected_logs
    assert history["loss"][-1] < history["loss"][0] / 20
    assert history["masked_lm_accuracy"][-1] >= 0.97
    if use_nsp:
        assert history["next_sentence_accuracy"][-1] == 1.0
        np.testing.assert_allclose(
            history["loss"][-1], history["mlm_loss"][-1] + history["nsp_loss"][-1], rtol=1e-4)
    else:
        np.testing.assert_allclose(history["loss"][-1], history["mlm_loss"][-1], rtol=1e-5)

    logs = model.evaluate(dataset.take(1), return_dict=True, verbose=0)
    parts = model.compute_pretraining_losses(records, model(records))
    np.testing.assert_allclose(logs["loss"], float(parts["loss"]), rtol=1e-4)
    np.testing.assert_allclose(logs["masked_lm_accuracy"],
                               float(parts["mlm_correct"] / parts["mlm_weight_sum"]), rtol=1e-6)


def test_get_config_round_trip(small_config):
    model = BertPretrainer(BertEncoder(small_config), use_next_sentence_label=False,
                           name="pt")
    config = model.get_config()
    clone = BertPretrainer.from_config(config)
    assert clone.name == "pt" and clone.use_next_sentence_label is False
    assert clone.encoder.config == small_config
    assert clone.get_config() == config
    assert [v.path for v in clone.weights] == [v.path for v in model.weights]
    assert clone.masked_lm.embedding_layer.embeddings is clone.encoder.word_embeddings.embeddings


@pytest.mark.parametrize("use_nsp", [True, False])
def test_keras_save_and_load_give_identical_outputs(use_nsp, small_config, features, tmp_path):
    model = BertPretrainer(BertEncoder(small_config), use_next_sentence_label=use_nsp)
    # Move the bias off its zero init so the test sees it restored.
    model.masked_lm.output_bias.assign(np.random.default_rng(0).normal(size=100))
    path = str(tmp_path / "pretrainer.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, BertPretrainer) and isinstance(loaded.encoder, BertEncoder)
    assert loaded.masked_lm.embedding_layer.embeddings is loaded.encoder.word_embeddings.embeddings
    a, b = model(features), loaded(features)
    assert set(a) == set(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_mixed_bfloat16_forward_and_train_step(small_config, features, float32_policy):
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = BertPretrainer(BertEncoder(small_config))
    out = model(features)
    assert out["mlm_logits"].dtype == "float32" and out["nsp_logits"].dtype == "float32"
    assert model.masked_lm.output_bias.dtype == "float32"
    losses = model.compute_pretraining_losses(features, out)
    assert all(v.dtype == tf.float32 for v in losses.values())
    assert np.isfinite(float(losses["loss"])) and float(losses["loss"]) > 0
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    logs = model.fit(tf.data.Dataset.from_tensors(features).repeat(3), verbose=0,
                     shuffle=False).history
    assert np.isfinite(logs["loss"]).all()
    assert all(v.dtype == "float32" for v in model.weights)


def test_keras_metrics_equal_pretraining_metrics_of_the_summed_parts(small_config, make_batch):
    """fit/evaluate logs and the custom loop's metrics (run_pretraining) share one definition:
    means over batches for losses, ratios of sums for accuracies."""
    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertEncoder(small_config))  # the config's dropout, off in evaluate
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    batches = [make_batch(batch=4, seed=seed) for seed in (1, 2, 3)]
    for batch, zeros in zip(batches, (0, 5, 9)):  # different weight sums per batch
        batch["masked_lm_weights"].reshape(-1)[:zeros] = 0.0
    dataset = tf.data.Dataset.from_tensor_slices(
        {k: np.stack([b[k] for b in batches]) for k in batches[0]})
    logs = model.evaluate(dataset, return_dict=True, verbose=0)

    sums = {}
    for batch in batches:
        parts = model.compute_pretraining_losses(batch, model(batch, training=False))
        for name, value in parts.items():
            sums[name] = sums.get(name, 0.0) + float(value)
    expected = pretraining_metrics(sums, len(batches))
    assert set(logs) == set(expected) == {"loss", "mlm_loss", "masked_lm_accuracy", "nsp_loss",
                                          "next_sentence_accuracy"}
    for name, value in expected.items():
        np.testing.assert_allclose(logs[name], value, rtol=1e-6, atol=1e-6, err_msg=name)
    # Batches of unequal weight, so a mean of per-batch accuracies would not be the ratio.
    assert [float(b["masked_lm_weights"].sum()) for b in batches] == [14.0, 9.0, 6.0]
