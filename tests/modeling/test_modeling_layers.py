"""Tests of the modeling layers: numpy parity of a transformer block and of the heads."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import tf_kernels
from bert_tf.modeling.activations import get_activation
from bert_tf.modeling.embeddings import BertEmbeddings
from bert_tf.modeling.heads import MaskedLMHead
from bert_tf.modeling.transformer_block import AttentionBias, TransformerBlock


def np_layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_transformer_block(x_bsh, mask_bs, w, num_heads, eps):
    """The original BERT block written out in numpy (float64), weights from a dict of arrays."""
    b, s, h = x_bsh.shape
    d = h // num_heads

    def heads(t):  # [B, S, H] -> [B, A, S, d]
        return t.reshape(b, s, num_heads, d).transpose(0, 2, 1, 3)

    q = heads(x_bsh @ w["query/kernel"] + w["query/bias"])
    k = heads(x_bsh @ w["key/kernel"] + w["key/bias"])
    v = heads(x_bsh @ w["value/kernel"] + w["value/bias"])
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    scores = scores + (1.0 - mask_bs[:, None, None, :]) * -10000.0
    context = (np_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
    attn = context @ w["attention_output/kernel"] + w["attention_output/bias"]
    attn = np_layer_norm(attn + x_bsh, w["attention_layer_norm/gamma"],
                         w["attention_layer_norm/beta"], eps)
    inter = np_gelu_tanh(attn @ w["intermediate/kernel"] + w["intermediate/bias"])
    out = inter @ w["output/kernel"] + w["output/bias"]
    return np_layer_norm(out + attn, w["output_layer_norm/gamma"], w["output_layer_norm/beta"],
                         eps)


def randomize(layer, rng, scale=0.3):
    """Gives every weight (biases, gammas, betas too) random values so parity checks all."""
    for v in layer.weights:
        v.assign(rng.normal(0.0, scale, v.shape).astype("float32")
                 + (1.0 if v.name == "gamma" else 0.0))


def weights_by_path(layer):
    prefix = layer.name + "/"
    return {v.path[len(prefix):]: v.numpy().astype("float64") for v in layer.weights}


def test_transformer_block_matches_numpy_reference():
    rng = np.random.default_rng(0)
    block = TransformerBlock(hidden_size=12, num_attention_heads=3, intermediate_size=20,
                                    hidden_act="gelu", layer_norm_eps=1e-12,
                                    name="transformer_layer_0")
    block.build((None, None, 12))
    randomize(block, rng)
    x = rng.normal(size=(2, 5, 12)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32")
    bias = AttentionBias()(mask)

    got = block(x, bias, training=False).numpy()
    expected = np_transformer_block(x.astype("float64"), mask.astype("float64"),
                                    weights_by_path(block), num_heads=3, eps=1e-12)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    # Weight paths are the converter's contract.
    assert sorted(weights_by_path(block)) == sorted([
        "query/kernel", "query/bias", "key/kernel", "key/bias", "value/kernel", "value/bias",
        "attention_output/kernel", "attention_output/bias", "attention_layer_norm/gamma",
        "attention_layer_norm/beta", "intermediate/kernel", "intermediate/bias",
        "output/kernel", "output/bias", "output_layer_norm/gamma", "output_layer_norm/beta"])


def test_inference_attention_paths_match_numpy_and_each_other_with_gradients(monkeypatch):
    """Up to SMALL_ATTENTION_ROWS rows inference attention runs on TensorFlow's own kernels,
    above on oneDNN's batched matmuls; chosen in Python for static shapes, by tf.cond for
    dynamic ones. Both give the numpy block's outputs, and the same gradients under a tape at
    training=False."""
    rng = np.random.default_rng(2)
    block = TransformerBlock(hidden_size=12, num_attention_heads=3, intermediate_size=20,
                                    name="transformer_layer_0")  # Dropout 0.1: off at inference.
    block.build((None, None, 12))
    randomize(block, rng)
    dynamic = tf.function(lambda x, b: block(x, b, training=False), input_signature=[
        tf.TensorSpec([None, None, 12]), tf.TensorSpec([None, 1, 1, None])])
    for batch, length in ((1, 7), (3, 24)):  # 7 rows: small path; 72: batched matmuls.
        x = rng.normal(size=(batch, length, 12)).astype("float32")
        mask = np.ones((batch, length), "int32")
        mask[-1, length - 2:] = 0
        bias = AttentionBias()(mask)
        expected = np_transformer_block(x.astype("float64"), mask.astype("float64"),
                                        weights_by_path(block), num_heads=3, eps=1e-12)
        np.testing.assert_allclose(block(x, bias, training=False), expected, atol=1e-4)
        np.testing.assert_allclose(dynamic(x, bias), expected, atol=1e-4)

    x = tf.constant(rng.normal(size=(1, 7, 12)).astype("float32"))
    bias = AttentionBias()(np.array([[1, 1, 1, 1, 1, 0, 0]], "int32"))

    def gradient():
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.sin(dynamic(x, bias)))
        return tape.gradient(loss, [x] + block.trainable_weights)

    small = gradient()
    monkeypatch.setattr(tf_kernels, "SMALL_ATTENTION_ROWS", 0)
    dynamic = tf.function(lambda x, b: block(x, b, training=False))  # Retraced: oneDNN path.
    for got, want in zip(small, gradient()):
        assert got is not None
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_padding_keys_do_not_change_real_positions():
    rng = np.random.default_rng(1)
    block = TransformerBlock(hidden_size=8, num_attention_heads=2, intermediate_size=16)
    block.build((None, None, 8))
    x = rng.normal(size=(1, 6, 8)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 0, 0]], "int32")
    bias = AttentionBias()(mask)
    out = block(x, bias, training=False).numpy()
    x_changed = x.copy()
    x_changed[:, 4:] = rng.normal(size=(1, 2, 8)) * 10
    out_changed = block(x_changed, bias, training=False).numpy()
    np.testing.assert_allclose(out[:, :4], out_changed[:, :4], atol=1e-5)
    assert np.abs(out[:, 4:] - out_changed[:, 4:]).max() > 0.1


@pytest.mark.parametrize("name, expected", [
    ("gelu", lambda x: np_gelu_tanh(x)),
    ("gelu_new", lambda x: np_gelu_tanh(x)),
    ("gelu_exact", lambda x: 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))),
    ("relu", lambda x: np.maximum(x, 0.0)),
    ("tanh", np.tanh),
    ("swish", lambda x: x / (1.0 + np.exp(-x))),
    ("silu", lambda x: x / (1.0 + np.exp(-x))),
])
def test_activations(name, expected):
    x = np.linspace(-4.0, 4.0, 41)
    got = get_activation(name)(tf.constant(x, tf.float64)).numpy()
    np.testing.assert_allclose(got, expected(x), rtol=1e-6, atol=1e-6)


def test_gelu_variants_differ():
    x = tf.constant([1.5], tf.float64)
    gap = abs(float(get_activation("gelu")(x)[0]
                    - get_activation("gelu_exact")(x)[0]))
    assert gap > 1e-5


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_kernel_forward_and_gradient_match_tf_nn_gelu(approximate):
    # The fused XLA forward and gradient (training graphs on TensorFlow) against tf.nn.gelu
    # and its autodiff, in float32 and, for bfloat16 inputs, within bfloat16's rounding.
    from bert_tf.modeling import kernels

    x = tf.constant(np.linspace(-6, 6, 301).reshape(7, 43), tf.float32)
    for dtype, tolerance in ((tf.float32, 1e-5), (tf.bfloat16, 1e-2)):
        inputs = tf.cast(x, dtype)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(inputs)
            ours = kernels.gelu(inputs, approximate)
            reference = tf.nn.gelu(tf.cast(inputs, tf.float32), approximate=approximate)
        assert ours.dtype == dtype
        np.testing.assert_allclose(tf.cast(ours, tf.float32), reference, atol=tolerance,
                                   rtol=tolerance)
        np.testing.assert_allclose(tf.cast(tape.gradient(ours, inputs), tf.float32),
                                   tf.cast(tape.gradient(reference, inputs), tf.float32),
                                   atol=tolerance, rtol=tolerance)


def test_fused_kernels_train_eagerly_on_many_shapes_without_retracing_warnings():
    # An eager training loop over changing lengths (dynamic padding) calls the fused XLA
    # kernels with a new shape each batch: each is traced once for its dtypes (no shapes), so
    # TensorFlow has no retracing to warn about. The layer norm's fused gradient holds on
    # inputs of any rank.
    import logging

    from bert_tf.modeling import kernels
    from bert_tf.modeling.dropout import FusedDropout

    warnings = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())
    tf.get_logger().addHandler(handler)
    rng = np.random.default_rng(2)
    gamma = tf.Variable(rng.normal(1.0, 0.2, size=8).astype("float32"))
    beta = tf.Variable(rng.normal(0.0, 0.2, size=8).astype("float32"))
    dropout = FusedDropout(0.1, seed=5)
    fused = (tf_kernels._layer_norm_grad, tf_kernels._gelu_tanh_forward,
             tf_kernels._gelu_tanh_grad, tf_kernels._gelu_erf_forward,
             tf_kernels._gelu_erf_grad, tf_kernels._apply_dropout)
    traces_before = {f.__name__: sum(t.experimental_get_tracing_count()
                                     for t in f.traced.values()) for f in fused}
    try:
        for shape in [(2, 5, 8), (2, 7, 8), (3, 9, 8), (1, 11, 8), (4, 13, 8), (2, 17, 8),
                      (6, 8), (5, 8), (2, 3, 4, 8)]:
            x = tf.constant(rng.normal(size=shape).astype("float32"))
            upstream = tf.constant(rng.normal(size=shape).astype("float32"))
            with tf.GradientTape(persistent=True) as tape:
                tape.watch(x)
                normed = kernels.layer_norm(x, gamma, beta, 1e-12, tf.float32)
                mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
                reference = (x - mean) * tf.math.rsqrt(variance + 1e-12) * gamma + beta
                ours = tf.reduce_sum(upstream * normed)
                theirs = tf.reduce_sum(upstream * reference)
                activations = [kernels.gelu(x, approximate) for approximate in (True, False)]
                dropped = dropout(x, training=True)
            np.testing.assert_allclose(normed, reference, atol=1e-5)
            for got, want in zip(tape.gradient(ours, [x, gamma, beta]),
                                 tape.gradient(theirs, [x, gamma, beta])):
                np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
            for approximate, activation in zip((True, False), activations):
                with tf.GradientTape() as reference_tape:
                    reference_tape.watch(x)
                    expected = tf.nn.gelu(x, approximate=approximate)
                np.testing.assert_allclose(activation, expected, atol=1e-5)
                np.testing.assert_allclose(
                    tape.gradient(activation, x, output_gradients=upstream),
                    reference_tape.gradient(expected, x, output_gradients=upstream),
                    atol=1e-5)
            kept = dropped.numpy() != 0
            np.testing.assert_allclose(tape.gradient(dropped, x, output_gradients=upstream),
                                       np.where(kept, upstream.numpy() / 0.9, 0.0), rtol=1e-6)
    finally:
        tf.get_logger().removeHandler(handler)
    assert not [w for w in warnings if "retracing" in w], warnings
    # At most one trace each for these float32 arguments, whatever the shape.
    for f in fused:
        added = sum(t.experimental_get_tracing_count() for t in f.traced.values())
        assert added - traces_before[f.__name__] <= 1, f.__name__


def test_fused_kernels_keep_static_shapes_in_graphs():
    # The kernels are traced without shapes; a graph built on them keeps its static shapes
    # (what Keras' shape checks and later ops read), for the outputs and every gradient.
    from bert_tf.modeling import kernels
    from bert_tf.modeling.dropout import FusedDropout

    gamma, beta = tf.Variable(tf.ones([8])), tf.Variable(tf.zeros([8]))
    dropout = FusedDropout(0.1, seed=5)
    shapes = {}

    @tf.function(input_signature=[tf.TensorSpec([None, None, 8], tf.float32)])
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = dropout(kernels.gelu(kernels.layer_norm(x, gamma, beta, 1e-12, tf.float32),
                                     False), training=True)
        shapes["y"] = y.shape
        grads = tape.gradient(y, [x, gamma, beta])
        shapes.update(dx=grads[0].shape, dgamma=grads[1].shape, dbeta=grads[2].shape)
        return y

    assert step(tf.ones([2, 3, 8])).shape == (2, 3, 8)
    assert shapes == {"y": tf.TensorShape([None, None, 8]),
                      "dx": tf.TensorShape([None, None, 8]),
                      "dgamma": tf.TensorShape([8]), "dbeta": tf.TensorShape([8])}, shapes


def test_fused_dropout_keeps_its_rate_and_one_mask_forward_and_backward():
    from bert_tf.modeling.dropout import FusedDropout

    layer = FusedDropout(0.1, seed=3)
    x = tf.ones([64, 301], tf.float32)  # an odd size: two draws per 32-bit word, one left over
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
        upstream = tf.random.stateless_normal(y.shape, [1, 2])
        loss = tf.reduce_sum(y * upstream)
    dropped = (y.numpy() == 0)
    assert 0.08 < dropped.mean() < 0.12
    np.testing.assert_allclose(y.numpy()[~dropped], 1 / 0.9, rtol=1e-6)
    # The gradient is upstream * mask / (1 - rate): the forward's mask, recomputed from its bits.
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(),
                               np.where(dropped, 0.0, upstream.numpy() / 0.9), rtol=1e-6)
    assert not np.array_equal(layer(x, training=True).numpy() == 0, dropped)  # a new draw
    assert layer(x, training=False) is x
    # The same seed draws the same masks; bfloat16 inputs keep their dtype.
    again = FusedDropout(0.1, seed=3)
    np.testing.assert_array_equal(again(x, training=True).numpy(), y.numpy())
    assert FusedDropout(0.5, dtype="bfloat16")(tf.ones([4, 4], tf.bfloat16),
                                               training=True).dtype == tf.bfloat16
    # Rates whose threshold does not fit 16 bits take TensorFlow's float dropout; 1 drops all.
    assert not FusedDropout(1.0)(x, training=True).numpy().any()
    kept = FusedDropout(0.99999, seed=3)(tf.ones([1000, 1000]), training=True).numpy()
    assert 0 < (kept > 0).sum() < 100 and np.allclose(kept[kept > 0], 1e5, rtol=1e-2)


def test_unknown_activation_names_the_field():
    with pytest.raises(ValueError, match=r"^hidden_act='gelu2' is not one of gelu, gelu_new, "
                                         r"gelu_exact, relu, tanh, swish, silu$"):
        get_activation("gelu2")


def test_embeddings_match_numpy_and_reject_long_inputs():
    rng = np.random.default_rng(2)
    emb = BertEmbeddings(vocab_size=20, type_vocab_size=2, max_position_embeddings=8,
                                hidden_size=6, layer_norm_eps=1e-12, dropout=0.1)
    emb.build()
    randomize(emb, rng)
    ids = rng.integers(0, 20, size=(2, 5)).astype("int32")
    types = np.array([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1]], "int32")
    got = emb(ids, types, training=False).numpy()
    w = {v.path.split("/", 1)[1]: v.numpy().astype("float64") for v in emb.weights}
    total = (w["word_embeddings/embeddings"][ids] + w["token_type_embeddings/embeddings"][types]
             + w["position_embeddings/embeddings"][:5][None])
    expected = np_layer_norm(total, w["layer_norm/gamma"], w["layer_norm/beta"], 1e-12)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)

    with pytest.raises(ValueError, match="input length 9 exceeds max_position_embeddings=8"):
        emb(np.zeros((1, 9), "int32"), np.zeros((1, 9), "int32"))


def test_masked_lm_head_matches_numpy_and_uses_the_embedding_variable():
    rng = np.random.default_rng(3)
    table = keras.layers.Embedding(30, 8)
    table.build((None, None))
    head = MaskedLMHead(table, hidden_act="gelu", layer_norm_eps=1e-12)
    head.build()
    randomize(head, rng)
    seq = rng.normal(size=(2, 6, 8)).astype("float32")
    positions = np.array([[1, 4, 0], [5, 2, 3]], "int32")
    got = head(seq, positions).numpy()
    assert got.shape == (2, 3, 30) and got.dtype == np.float32

    gathered = np.take_along_axis(seq.astype("float64"), positions[:, :, None], axis=1)
    h = np_gelu_tanh(gathered @ head.transform.kernel.numpy() + head.transform.bias.numpy())
    h = np_layer_norm(h, head.transform_layer_norm.gamma.numpy(),
                      head.transform_layer_norm.beta.numpy(), 1e-12)
    expected = h @ table.embeddings.numpy().T + head.output_bias.numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
