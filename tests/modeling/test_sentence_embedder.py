"""Tests of BertSentenceEmbedder and SentencePooling: the pooling modes, normalisation, .keras."""

import keras
import numpy as np
import pytest

from bert_tf.modeling import BertEncoder, BertSentenceEmbedder, SentencePooling

INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def _expected(sequence, mask, mode):
    """NumPy reference of one pooling mode over [B, S, H] with mask [B, S]."""
    m = mask[:, :, None].astype(np.float32)
    if mode == "cls":
        return sequence[:, 0]
    if mode == "max":
        return np.where(m > 0, sequence, -1e9).max(axis=1)
    total = (sequence * m).sum(axis=1)
    count = m.sum(axis=1)
    return total / (count if mode == "mean" else np.sqrt(count))


@pytest.mark.parametrize("modes", ["mean", "cls", "max", ("mean", "cls", "max")])
def test_pooling_matches_numpy_and_ignores_padding(modes, small_config, features):
    model = BertSentenceEmbedder(BertEncoder(small_config), pooling=modes, normalize=False)
    inputs = {k: features[k] for k in INPUTS}
    vectors = model(inputs).numpy()
    sequence = model.encoder(inputs)["sequence_output"].numpy()
    order = [modes] if isinstance(modes, str) else list(modes)
    expected = np.concatenate([_expected(sequence, features["input_mask"], m) for m in order], -1)
    assert vectors.shape == (4, 32 * len(order)) == (4, model.embedding_dim)
    np.testing.assert_allclose(vectors, expected, rtol=1e-5, atol=1e-5)
    # Changing the ids under the padding changes nothing.
    padded = dict(inputs, input_word_ids=np.where(features["input_mask"] > 0,
                                                  features["input_word_ids"], 7))
    np.testing.assert_allclose(model(padded).numpy(), vectors, rtol=1e-5, atol=1e-5)


def test_normalized_vectors_have_unit_length_and_keep_direction(small_config, features):
    encoder = BertEncoder(small_config)
    inputs = {k: features[k] for k in INPUTS}
    raw = BertSentenceEmbedder(encoder, normalize=False)(inputs).numpy()
    unit = BertSentenceEmbedder(encoder, normalize=True)(inputs).numpy()
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-6)


def test_save_load_keras_file(tmp_path, small_config, features):
    model = BertSentenceEmbedder(BertEncoder(small_config), pooling=("mean", "max"))
    inputs = {k: features[k] for k in INPUTS}
    path = str(tmp_path / "embedder.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded) is BertSentenceEmbedder
    assert loaded.pooling == ("mean", "max") and loaded.normalize
    np.testing.assert_allclose(loaded(inputs), model(inputs), rtol=1e-6, atol=1e-6)
    # The tanh pooler gets no gradient, so it is not trained.
    assert not any("pooler" in v.path for v in loaded.trainable_variables)


def test_unknown_pooling_mode_is_named():
    with pytest.raises(ValueError, match=r"SentencePooling: pooling modes \['weighted'\]; "
                                         r"expected one or more distinct of cls, max, mean"):
        SentencePooling("weighted")
