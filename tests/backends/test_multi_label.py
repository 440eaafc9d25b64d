"""A multi-label BertClassifier on the backend this process runs on (the backend matrix: the
suite runs it on TensorFlow, `.ci/run` again under KERAS_BACKEND=jax): the run controller's loss
(training.losses.classification_loss_fn) against NumPy, and Keras' fit with the model's own
default loss learning two labels that may come together."""

import keras
import numpy as np

from bert_tf.config import BertConfig
from bert_tf.modeling import BertClassifier, BertEncoder
from bert_tf.training.losses import classification_loss_fn, training_metrics

# Token 5 in a row: label 0 applies; token 6: label 1 (both, one or none).
KEYS = (5, 6)


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    # Four heads: with two, one label is often learned first and saturates the tanh pooler,
    # leaving the other at chance (measured on TensorFlow: 0.76 label accuracy for 2 of 3
    # seeds); with four, 1.0 for each of seeds 0-2.
    config = BertConfig(vocab_size=16, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=16,
                        initializer_range=0.1)
    return BertClassifier(BertEncoder(config), 2, multi_label=True)


def _data(count, seed):
    """Rows of 8 tokens ([CLS], 6 from 7..15 with the keys placed at random, [SEP])."""
    rng = np.random.default_rng(seed)
    ids = np.zeros([count, 8], np.int32)
    labels = rng.integers(0, 2, [count, 2]).astype(np.float32)
    for i in range(count):
        row = rng.integers(7, 16, 6)
        for key, on in zip(KEYS, labels[i]):
            if on:
                row[rng.integers(0, 6)] = key
        labels[i] = [float(key in row) for key in KEYS]  # a key may overwrite the other
        ids[i] = [2, *row, 3]
    features = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
                "input_type_ids": np.zeros_like(ids)}
    return features, labels


def test_the_loss_is_the_mean_binary_cross_entropy_of_the_real_rows():
    model = _model()
    features, labels = _data(4, seed=1)
    weights = np.array([1, 1, 1, 0], np.float32)  # the last row pads the batch
    parts = classification_loss_fn(model, dict(features, label_ids=labels,
                                                example_weights=weights), False)
    logits = np.asarray(model(features, training=False), np.float64)
    per_label = np.logaddexp(0.0, logits) - logits * labels  # -log sigmoid, on logits
    np.testing.assert_allclose(float(parts["loss"]), per_label[:3].mean(), rtol=1e-5)
    hits = ((logits > 0) == (labels > 0)).mean(axis=1)
    np.testing.assert_allclose(float(parts["correct"]), hits[:3].sum(), rtol=1e-6)
    assert float(parts["count"]) == 3.0
    metrics = training_metrics({k: float(v) for k, v in parts.items()}, 1)
    np.testing.assert_allclose(metrics["accuracy"], hits[:3].mean(), rtol=1e-6)


def test_fit_with_the_default_loss_learns_both_labels():
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    features, labels = _data(128, seed=2)
    dev_features, dev_labels = _data(64, seed=3)
    assert {tuple(row) for row in dev_labels} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    model.fit(features, labels, batch_size=16, epochs=12, verbose=0)
    loss, accuracy = model.evaluate(dev_features, dev_labels, verbose=0)
    predicted = np.asarray(model.predict(dev_features, verbose=0)) > 0
    # Chance: 0.5 per label; every label set of the dev rows predicted exactly.
    assert accuracy > 0.95 and loss < 0.2, (accuracy, loss)
    assert np.mean(np.all(predicted == (dev_labels > 0), axis=1)) > 0.9
    restored = BertClassifier.from_config(model.get_config())
    assert restored.multi_label and restored.num_classes == 2
