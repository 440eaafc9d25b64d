"""WarmupLinearDecay, WarmupStableDecay, AdamWeightDecay, Lamb and StableAdamW against numpy
versions of their rules."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training.optimization import (AdamWeightDecay, Lamb, WarmupLinearDecay,
                                           WarmupStableDecay, create_optimizer)


def _small_model():
    ids = keras.Input((3,), dtype="int32")
    x = keras.layers.Embedding(7, 4, name="word_embeddings")(ids)
    x = keras.layers.LayerNormalization(name="embeddings_layer_norm")(x)
    x = keras.layers.Dense(5, name="intermediate")(x)
    return keras.Model(ids, x)


def _grads(model, seed, scale=1.0):
    rng = np.random.RandomState(seed)
    return [(scale * rng.randn(*v.shape)).astype("float32") for v in model.trainable_variables]


def _clip(grads, clip_norm):
    norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads))
    return [g * clip_norm / max(norm, clip_norm) for g in grads]


def _numpy_adamw(params, grads_per_step, lrs, decays, wd=0.01, b1=0.9, b2=0.999, eps=1e-6,
                 clip_norm=1.0, bias_correction=False):
    """The original AdamWeightDecayOptimizer: no bias correction, decay inside the update.
    bias_correction: the step times sqrt(1 - b2^t) / (1 - b1^t), as Keras' Adam."""
    params = [p.astype(np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        correction = np.sqrt(1 - b2 ** t) / (1 - b1 ** t) if bias_correction else 1.0
        for i, g in enumerate(_clip(grads, clip_norm) if clip_norm else grads):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            update = correction * m[i] / (np.sqrt(v[i]) + eps)
            if decays[i]:
                update += wd * params[i]
            params[i] = params[i] - lr * update
    return params


def _numpy_lamb(params, grads_per_step, lrs, decays, wd=0.01, b1=0.9, b2=0.999, eps=1e-6,
                clip_norm=1.0):
    params = [p.astype(np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        for i, g in enumerate(_clip(grads, clip_norm)):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            update = (m[i] / (1 - b1 ** t)) / (np.sqrt(v[i] / (1 - b2 ** t)) + eps)
            ratio = 1.0
            if decays[i]:
                update += wd * params[i]
                w_norm, u_norm = np.linalg.norm(params[i]), np.linalg.norm(update)
                ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            params[i] = params[i] - lr * ratio * update
    return params


def _numpy_stable_adamw(params, grads_per_step, lrs, decays, wd=0.01, b1=0.9, b2=0.98,
                        eps=1e-6, clip_norm=1.0):
    """StableAdamW (Wortsman et al., 2023, Algorithm 2): bias-corrected Adam whose learning rate
    is divided per tensor by max(1, RMS(g^2 / v_hat)); decoupled decay. Also returns the
    divisors of each step."""
    params = [p.astype(np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    divisors = []
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        step = []
        for i, g in enumerate(_clip(grads, clip_norm) if clip_norm else grads):
            g = g.astype(np.float64)
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat, v_hat = m[i] / (1 - b1 ** t), v[i] / (1 - b2 ** t)
            divisor = max(1.0, np.sqrt(np.mean(g * g / np.maximum(v_hat, eps * eps))))
            step.append(divisor)
            lr_t = lr / divisor
            if decays[i]:
                params[i] = params[i] * (1 - lr_t * wd)
            params[i] = params[i] - lr_t * m_hat / (np.sqrt(v_hat) + eps)
        divisors.append(step)
    return params, divisors


def test_schedule_values_at_key_steps():
    schedule = WarmupLinearDecay(1e-4, num_train_steps=1000, num_warmup_steps=100)
    got = [float(schedule(s)) for s in (0, 1, 50, 99, 100, 500, 999, 1000, 2000)]
    want = [0.0, 1e-6, 5e-5, 9.9e-5, 9e-5, 5e-5, 1e-7, 0.0, 0.0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12)
    no_warmup = WarmupLinearDecay(2e-5, num_train_steps=10, num_warmup_steps=0)
    np.testing.assert_allclose(float(no_warmup(0)), 2e-5, rtol=1e-6)


def test_warmup_stable_decay_values_at_key_steps():
    schedule = WarmupStableDecay(1e-3, num_train_steps=1000, num_warmup_steps=100,
                                 num_decay_steps=200)
    got = [float(schedule(s)) for s in (0, 50, 100, 500, 799, 800, 850, 980, 1000, 1500)]
    want = [0.0, 5e-4, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3 * (1 - 0.5), 1e-3 * (1 - np.sqrt(0.9)),
            0.0, 0.0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12)
    # create_optimizer: the last decay_proportion of the steps, at least one.
    optimizer = create_optimizer(1e-3, 1000, 100, lr_schedule="wsd", decay_proportion=0.2)
    assert optimizer.get_config()["learning_rate"]["config"] == schedule.get_config()
    with pytest.raises(ValueError, match=r"num_decay_steps=950 must be in \[1, num_train_steps "
                                         r"- num_warmup_steps = 900\]"):
        WarmupStableDecay(1e-3, 1000, 100, 950)
    with pytest.raises(ValueError, match=r"decay_proportion=0 must be in \(0, 1\]"):
        create_optimizer(1e-3, 1000, 100, lr_schedule="wsd", decay_proportion=0)


@pytest.mark.parametrize("schedule", [
    WarmupLinearDecay(3e-4, num_train_steps=500, num_warmup_steps=50),
    WarmupStableDecay(3e-4, num_train_steps=500, num_warmup_steps=50, num_decay_steps=40)])
def test_schedule_round_trips_through_keras_serialization(schedule):
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert type(restored) is type(schedule)
    assert restored.get_config() == schedule.get_config()


def test_schedule_rejects_warmup_longer_than_training():
    with pytest.raises(ValueError,
                       match=r"num_warmup_steps=20 must be in \[0, num_train_steps=10\]"):
        WarmupLinearDecay(1e-4, num_train_steps=10, num_warmup_steps=20)


def test_decay_applies_to_kernels_and_embeddings_only():
    model = _small_model()
    optimizer = create_optimizer(1e-3, 10, 1)
    decays = {v.path: optimizer.decays(v) for v in model.trainable_variables}
    assert decays == {
        "word_embeddings/embeddings": True,
        "embeddings_layer_norm/gamma": False,
        "embeddings_layer_norm/beta": False,
        "intermediate/kernel": True,
        "intermediate/bias": False,
    }


def test_decay_exclusion_by_original_path_pattern():
    model = _small_model()
    optimizer = AdamWeightDecay(1e-3, exclude_from_weight_decay=["layer_norm", "bias",
                                                                 "word_embeddings"])
    decays = {v.path: optimizer.decays(v) for v in model.trainable_variables}
    assert decays["word_embeddings/embeddings"] is False
    assert decays["intermediate/kernel"] is True


@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb", "stable_adamw"])
def test_two_steps_match_numpy_reference(optimizer_type):
    keras.utils.set_random_seed(1)
    model = _small_model()
    # LayerNorm gamma starts at ones and beta at zeros; perturb so decay/ratio effects show.
    for v in model.trainable_variables:
        v.assign(v + 0.3 * np.random.RandomState(2).randn(*v.shape).astype("float32"))
    initial = [v.numpy() for v in model.trainable_variables]
    optimizer = create_optimizer(0.05, num_train_steps=10, num_warmup_steps=2,
                                 optimizer_type=optimizer_type, weight_decay_rate=0.1)
    # Step 1's gradients have a global norm far above 1.0 (clipped); step 2's below it.
    grads_per_step = [_grads(model, 3, scale=2.0), _grads(model, 4, scale=0.05)]
    lrs = [float(optimizer.learning_rate)]
    optimizer.apply([tf.constant(g) for g in grads_per_step[0]], model.trainable_variables)
    lrs.append(float(optimizer.learning_rate))
    optimizer.apply([tf.constant(g) for g in grads_per_step[1]], model.trainable_variables)
    # Warmup: step 0 -> lr 0, step 1 -> lr 0.025; lr 0 for step 0 is the original's too.
    np.testing.assert_allclose(lrs, [0.0, 0.025], atol=1e-9)
    decays = [optimizer.decays(v) for v in model.trainable_variables]
    if optimizer_type == "stable_adamw":
        reference, _ = _numpy_stable_adamw(initial, grads_per_step, lrs, decays, wd=0.1)
    else:
        reference = (_numpy_adamw if optimizer_type == "adamw" else _numpy_lamb)(
            initial, grads_per_step, lrs, decays, wd=0.1)
    for v, want, before in zip(model.trainable_variables, reference, initial):
        assert not np.allclose(v.numpy(), before), v.path  # the step changed every variable
        np.testing.assert_allclose(v.numpy(), want, rtol=1e-5, atol=1e-6, err_msg=v.path)


def test_stable_adamw_shrinks_the_step_of_a_gradient_spike():
    """A gradient 30x the one before: the tensors' RMS(g^2 / v_hat) is above 1 and their step
    is divided by it (AdamW would take a full-size step)."""
    model = _small_model()
    initial = [v.numpy() for v in model.trainable_variables]
    optimizer = create_optimizer(0.01, num_train_steps=10, num_warmup_steps=0,
                                 optimizer_type="stable_adamw", clip_norm=None)
    grads_per_step = [_grads(model, 5, scale=0.01), _grads(model, 6, scale=0.3)]
    for grads in grads_per_step:
        optimizer.apply([tf.constant(g) for g in grads], model.trainable_variables)
    lrs = [float(WarmupLinearDecay(0.01, 10)(s)) for s in (0, 1)]
    decays = [optimizer.decays(v) for v in model.trainable_variables]
    reference, divisors = _numpy_stable_adamw(initial, grads_per_step, lrs, decays,
                                              clip_norm=None)
    assert divisors[0] == [1.0] * len(initial)  # step 1: v_hat = g^2 exactly
    assert min(divisors[1]) > 1.2  # the spike is clipped in every tensor
    for v, want in zip(model.trainable_variables, reference):
        np.testing.assert_allclose(v.numpy(), want, rtol=1e-5, atol=1e-6, err_msg=v.path)


def test_adamw_has_no_bias_correction():
    # With one step of gradient g (|g| < clip) and lr 1, Adam with bias correction moves a
    # non-decaying variable by ~sign(g); the original's rule moves it by 0.1 / sqrt(0.001) * ...
    var = keras.Variable(np.zeros(1, "float32"), name="bias")
    optimizer = AdamWeightDecay(1.0, clip_norm=None)
    optimizer.apply([tf.constant([0.5])], [var])
    expected = -(0.1 * 0.5) / (np.sqrt(0.001 * 0.25) + 1e-6)
    np.testing.assert_allclose(var.numpy(), [expected], rtol=1e-5)


@pytest.mark.parametrize("bias_correction", [False, True])
def test_adamw_steps_match_the_formula_with_and_without_bias_correction(bias_correction):
    # Three steps from warmup into decay, decaying and excluded variables, the clip acting on
    # the first step only: w after each step as _numpy_adamw's formula gives it.
    model = _small_model()
    initial = [v.numpy() for v in model.trainable_variables]
    optimizer = create_optimizer(0.05, num_train_steps=10, num_warmup_steps=1,
                                 weight_decay_rate=0.1, bias_correction=bias_correction)
    grads_per_step = [_grads(model, 7, scale=2.0), _grads(model, 8, scale=0.05),
                      _grads(model, 9, scale=0.05)]
    lrs = [float(WarmupLinearDecay(0.05, 10, 1)(s)) for s in range(3)]
    for grads in grads_per_step:
        optimizer.apply([tf.constant(g) for g in grads], model.trainable_variables)
    decays = [optimizer.decays(v) for v in model.trainable_variables]
    reference = _numpy_adamw(initial, grads_per_step, lrs, decays, wd=0.1,
                             bias_correction=bias_correction)
    for v, want in zip(model.trainable_variables, reference):
        np.testing.assert_allclose(v.numpy(), want, rtol=1e-5, atol=1e-6, err_msg=v.path)
    other = _numpy_adamw(initial, grads_per_step, lrs, decays, wd=0.1,
                         bias_correction=not bias_correction)
    assert not np.allclose(model.trainable_variables[-1].numpy(), other[-1], atol=1e-4)


def test_adamw_with_bias_correction_is_keras_adam_without_decay():
    # No decay and no clip: the same weights as keras.optimizers.Adam (bias-corrected, epsilon
    # added to sqrt(v)) after 5 steps, while the original's rule moved further.
    var_ours = keras.Variable(np.linspace(-1, 1, 6).astype("float32"), name="kernel")
    var_keras = keras.Variable(var_ours.numpy(), name="kernel")
    var_original = keras.Variable(var_ours.numpy(), name="kernel")
    ours = AdamWeightDecay(1e-2, weight_decay_rate=0.0, clip_norm=None, bias_correction=True)
    reference = keras.optimizers.Adam(1e-2, epsilon=1e-6)
    original = AdamWeightDecay(1e-2, weight_decay_rate=0.0, clip_norm=None)
    rng = np.random.RandomState(0)
    for _ in range(5):
        # One sign throughout, so each rule's steps add up.
        grad = tf.constant(0.1 * np.abs(rng.randn(6)).astype("float32") + 0.01)
        ours.apply([grad], [var_ours])
        reference.apply([grad], [var_keras])
        original.apply([grad], [var_original])
    start = np.linspace(-1, 1, 6)
    np.testing.assert_allclose(var_ours.numpy(), var_keras.numpy(), rtol=1e-5, atol=1e-7)
    moved, moved_original = np.abs(var_ours.numpy() - start), np.abs(var_original.numpy() - start)
    assert np.all(moved_original > 2.5 * moved), (moved_original, moved)


def test_lamb_trust_ratio_scales_decaying_update_to_weight_norm():
    kernel = keras.Variable(np.full((2, 2), 3.0, "float32"), name="kernel")
    optimizer = Lamb(0.1, weight_decay_rate=0.0, clip_norm=None)
    optimizer.apply([tf.constant(np.full((2, 2), 1e-3, "float32"))], [kernel])
    # weight_decay_rate=0 disables decay and the ratio: a plain bias-corrected Adam step of ~lr.
    np.testing.assert_allclose(kernel.numpy(), np.full((2, 2), 2.9), rtol=1e-4)
    kernel2 = keras.Variable(np.full((2, 2), 3.0, "float32"), name="kernel")
    optimizer2 = Lamb(0.1, weight_decay_rate=1e-9, clip_norm=None)
    optimizer2.apply([tf.constant(np.full((2, 2), 1e-3, "float32"))], [kernel2])
    # ratio = ||w|| / ||update|| = 6 / ~2: each entry moves by lr * 3 = 0.3.
    np.testing.assert_allclose(kernel2.numpy(), np.full((2, 2), 2.7), rtol=1e-4)


def test_create_optimizer_rejects_unknown_type():
    with pytest.raises(ValueError, match="optimizer_type='sgd'; expected one of adamw, lamb"):
        create_optimizer(1e-4, 10, 1, optimizer_type="sgd")


def test_optimizer_config_round_trip():
    optimizer = create_optimizer(1e-4, 100, 10, optimizer_type="lamb", weight_decay_rate=0.02)
    config = keras.optimizers.serialize(optimizer)
    restored = keras.optimizers.deserialize(config)
    assert isinstance(restored, Lamb)
    assert restored.weight_decay_rate == 0.02
    assert restored.get_config()["learning_rate"]["config"] == {
        "peak_learning_rate": 1e-4, "num_train_steps": 100, "num_warmup_steps": 10}
    adamw = keras.optimizers.deserialize(keras.optimizers.serialize(
        create_optimizer(1e-4, 100, 10, bias_correction=True)))
    assert isinstance(adamw, AdamWeightDecay) and adamw.bias_correction


def test_decay_set_on_real_bert_pretrainer_matches_original():
    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertEncoder, BertPretrainer
    encoder = BertEncoder(BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32))
    model = BertPretrainer(encoder)
    optimizer = create_optimizer(1e-4, 10, 1)
    decaying = {v.path for v in model.trainable_variables if optimizer.decays(v)}
    kept = {v.path for v in model.trainable_variables if not optimizer.decays(v)}
    # The original decays every weight matrix and embedding table, never a bias or LayerNorm.
    assert all(p.endswith(("/kernel", "/embeddings")) for p in decaying), decaying
    assert all(p.endswith(("bias", "/gamma", "/beta")) for p in kept), kept
    assert "masked_lm/output_bias" in kept  # cls/predictions/output_bias in the original
    assert {"embeddings/word_embeddings/embeddings", "embeddings/position_embeddings/embeddings",
            "next_sentence/kernel", "masked_lm/transform/kernel"} <= decaying
    assert len(decaying) + len(kept) == len(model.trainable_variables)
    assert len(kept) == 18  # 9 Dense biases + output_bias + 4 LayerNorms x (gamma, beta)
