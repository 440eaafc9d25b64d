"""Keras' own `model.export` on bert_tf models (the Keras 3 way to a SavedModel or a LiteRT
file): the graph a server runs, as bert_tf's exports trace it (TakesTokenIds.export)."""

import os
import subprocess

import numpy as np

import zygote
from bert_tf import BertConfig, BertEncoder
from bert_tf.modeling import BertClassifier, kernels
from bert_tf.serving import litert

# A fresh process that loads the SavedModel and answers the features as TF Serving would ask.
LOAD = """
import sys
import numpy as np
import tensorflow as tf

loaded = tf.saved_model.load(sys.argv[1])
features = dict(np.load(sys.argv[2]))
out = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in features.items()})
np.savez(sys.argv[3], **{k: v.numpy() for k, v in out.items()})
"""


def _classifier_and_features():
    config = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    model = BertClassifier(BertEncoder(config), num_classes=3)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 60, size=(3, 24)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 15:] = 0  # a padded row
    features = {"input_word_ids": ids * mask, "input_mask": mask,
                "input_type_ids": np.zeros_like(ids)}
    return model, features


def test_saved_model_loads_in_a_fresh_process_without_warnings_and_answers_as_the_model(
        tmp_path):
    model, features = _classifier_and_features()
    expected = model.predict(features, verbose=0)
    model.export(str(tmp_path / "export"), verbose=False)
    np.savez(tmp_path / "features.npz", **features)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([zygote.shared_python(env), "-c", LOAD, str(tmp_path / "export"),
                           str(tmp_path / "features.npz"), str(tmp_path / "out.npz")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # Traced with the training kernels' custom gradients, loading warned once per LayerNorm
    # and GELU ("Importing a function ... with ops with unsaved custom gradients").
    assert "custom gradient" not in done.stderr, done.stderr[-3000:]
    (answer,) = np.load(tmp_path / "out.npz").values()
    np.testing.assert_allclose(answer, expected, atol=1e-5)


def test_litert_file_has_only_builtins_and_no_branches_and_answers_as_the_model(tmp_path):
    import tensorflow as tf

    model, features = _classifier_and_features()
    expected = model.predict(features, verbose=0)
    path = str(tmp_path / "model.tflite")
    model.export(path, format="litert", verbose=False)
    census = litert.op_census(path)
    assert census.flex == frozenset() and not census.custom, census.format()
    # Attention without the few-row branch, as bert-tf-export --format=litert traces it.
    assert "IF" not in census.counts and census.counts["SOFTMAX"] == 2, census.format()
    interpreter = tf.lite.Interpreter(path)
    (answer,) = interpreter.get_signature_runner()(**features).values()
    np.testing.assert_allclose(answer, expected, atol=1e-5)
    assert not kernels.portable()  # the contexts end with the export
