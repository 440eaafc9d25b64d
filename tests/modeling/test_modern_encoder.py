"""The modern encoder (ModernBertEncoder, architecture "modernbert"), the pre-trainer
and the task models: shapes, packing, serialization, training, errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import ModernBertConfig
from bert_tf.modeling import (BertClassifier, BertPretrainer, BertSpanLabeler,
                              BertTokenClassifier, ModernBertEncoder)


def tiny(**overrides):
    """modernbert_tiny: 3 layers (global, local, local), window 16, vocabulary 512."""
    return ModernBertConfig.from_preset("modernbert_tiny", **overrides)


def features(batch, length, seed=0, real=None):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 512, size=(batch, length)).astype("int32")
    mask = np.ones_like(ids)
    if real is not None:
        mask[-1, real:] = 0
        ids[-1, real:] = 0
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def test_outputs_and_layer_kinds():
    encoder = ModernBertEncoder(tiny())
    out = encoder(features(2, 40, real=30))
    assert tuple(out["sequence_output"].shape) == (2, 40, 64)
    assert tuple(out["pooled_output"].shape) == (2, 64)
    assert len(out["encoder_outputs"]) == 3
    windows = [encoder.get_layer(f"transformer_layer_{i}").local_window for i in range(3)]
    assert windows == [0, 16, 16]
    thetas = [encoder.get_layer(f"transformer_layer_{i}").rope_theta for i in range(3)]
    assert thetas == [160000.0, 10000.0, 10000.0]
    assert encoder.get_layer("transformer_layer_0").attention_layer_norm is None
    assert not any("bias" in v.path or "beta" in v.path for v in encoder.weights)


def test_padding_does_not_change_real_tokens():
    encoder = ModernBertEncoder(tiny(classifier_pooling="mean"))
    padded = features(1, 60, seed=1, real=45)
    alone = {k: v[:, :45] for k, v in padded.items()}
    out_padded, out_alone = encoder(padded), encoder(alone)
    np.testing.assert_allclose(out_padded["sequence_output"][:, :45],
                               out_alone["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(out_padded["pooled_output"], out_alone["pooled_output"],
                               atol=1e-5)


def test_packed_instances_match_them_alone():
    """Per-instance rotary positions and windows: each instance of a packed row gets the
    outputs it gets alone (lengths above 3 half-windows take the blocked path)."""
    encoder = ModernBertEncoder(tiny())
    lengths = (37, 20, 30)
    rows = [features(1, n, seed=n) for n in lengths]
    total = 96
    packed = {k: np.zeros((1, total), "int32") for k in
              ("input_word_ids", "input_mask", "input_type_ids", "input_instance_ids")}
    offset = 0
    for i, row in enumerate(rows):
        n = lengths[i]
        packed["input_word_ids"][0, offset:offset + n] = row["input_word_ids"][0]
        packed["input_mask"][0, offset:offset + n] = 1
        packed["input_instance_ids"][0, offset:offset + n] = i + 1
        offset += n
    out = encoder(packed)["sequence_output"].numpy()
    offset = 0
    for n, row in zip(lengths, rows):
        np.testing.assert_allclose(out[0, offset:offset + n],
                                   encoder(row)["sequence_output"][0], atol=1e-5)
        offset += n


def test_dynamic_shapes_under_tf_function():
    encoder = ModernBertEncoder(tiny())
    spec = tf.TensorSpec([None, None], tf.int32)
    fn = tf.function(lambda x: encoder(x)["sequence_output"], input_signature=[
        {"input_word_ids": spec, "input_mask": spec, "input_type_ids": spec}])
    for length in (12, 70):
        x = features(2, length, seed=length)
        np.testing.assert_allclose(fn(x), encoder(x)["sequence_output"], atol=1e-5)


def test_keras_file_round_trip(tmp_path):
    model = BertPretrainer(ModernBertEncoder(tiny()), use_next_sentence_label=False)
    x = dict(features(2, 50), masked_lm_positions=np.array([[1, 7], [3, 40]], "int32"))
    expected = model(x)["mlm_logits"].numpy()
    path = str(tmp_path / "pretrainer.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.encoder.config == model.encoder.config
    np.testing.assert_allclose(loaded(x)["mlm_logits"], expected, atol=1e-6)
    assert not any("bias" in v.path for v in model.masked_lm.transform.weights)


def test_pretrainer_mlm_only_learns():
    """MLM without NSP memorizes one batch: the loss falls well below its start."""
    keras.utils.set_random_seed(0)
    model = BertPretrainer(ModernBertEncoder(tiny(vocab_size=64)), use_next_sentence_label=False)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 64, size=(4, 32)).astype("int32")
    positions = np.stack([rng.choice(32, 6, replace=False) for _ in range(4)]).astype("int32")
    data = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids), "masked_lm_positions": positions,
            "masked_lm_ids": np.take_along_axis(ids, positions, axis=1),
            "masked_lm_weights": np.ones((4, 6), "float32")}
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = model.fit(tf.data.Dataset.from_tensors(data).repeat(30), epochs=1, shuffle=False,
                        verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses[-1]) and losses[-1] < 0.5 * np.log(64)


@pytest.mark.parametrize("cls, args, shape", [
    (BertClassifier, (3,), (2, 3)), (BertTokenClassifier, (4,), (2, 30, 4))])
def test_task_models(cls, args, shape):
    model = cls(ModernBertEncoder(tiny()), *args)
    assert tuple(model(features(2, 30)).shape) == shape


def test_span_labeler():
    out = BertSpanLabeler(ModernBertEncoder(tiny()))(features(2, 30))
    assert tuple(out["start_logits"].shape) == (2, 30)


def test_longer_than_max_position_embeddings_is_an_error():
    encoder = ModernBertEncoder(tiny(max_position_embeddings=32))
    for x in ({k: keras.Input((40,), dtype="int32", name=k) for k in features(1, 40)},
              features(1, 40)):
        with pytest.raises(ValueError, match="input length 40 exceeds max_position_embeddings"
                                             "=32"):
            encoder(x)


def test_post_norm_dense_variant_with_learned_positions():
    """The options combine: BERT's post-norm dense blocks with local attention and rotary."""
    config = ModernBertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=2, intermediate_size=64,
                              position_embedding_type="rotary", local_attention_window=8,
                              global_attn_every_n_layers=2)
    encoder = ModernBertEncoder(config)
    x = features(2, 20)
    x["input_word_ids"] %= 100
    assert tuple(encoder(x)["sequence_output"].shape) == (2, 20, 32)
    assert encoder.get_layer("transformer_layer_0").attention_layer_norm is not None
