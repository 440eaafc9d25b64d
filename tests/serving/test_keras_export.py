"""Keras' own `model.export` on bert_tf models (the Keras 3 way to a SavedModel or a LiteRT
file): the graph a server runs, traced as bert_tf's exports trace it (TakesTokenIds.export).
On JAX it is refused: tests/backends/test_keras_export_refusal.py."""

import os
import subprocess

import numpy as np

import zygote
from bert_tf import BertConfig, BertEncoder, ModernBertConfig, build_encoder
from bert_tf.modeling import BertClassifier, BertTokenClassifier, kernels
from bert_tf.serving import litert

# A fresh process that loads each SavedModel and answers each batch as TF Serving would ask.
LOAD = """
import sys
import numpy as np
import tensorflow as tf

answers = {}
for export in sys.argv[1:]:
    serve = tf.saved_model.load(export).signatures["serving_default"]
    for name in ("batched", "few_rows"):
        out = serve(**{k: tf.constant(v) for k, v in np.load(name + ".npz").items()})
        answers.update({f"{export}:{name}:{k}": v.numpy() for k, v in out.items()})
np.savez("answers.npz", **answers)
"""

MODELS = {
    "bert_classifier": lambda: BertClassifier(BertEncoder(BertConfig(
        vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64)), num_classes=3),
    # A tagger on the modern encoder: local and global attention layers (every second global).
    "modern_tagger": lambda: BertTokenClassifier(build_encoder(ModernBertConfig(
        vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, local_attention_window=8,
        global_attn_every_n_layers=2)), num_classes=4),
}


def _features(rows, length, seed):
    """Token ids [rows, length], the second row padded after 15 tokens."""
    ids = np.random.default_rng(seed).integers(5, 60, size=(rows, length)).astype("int32")
    mask = np.ones_like(ids)
    mask[1:2, 15:] = 0
    return {"input_word_ids": ids * mask, "input_mask": mask,
            "input_type_ids": np.zeros_like(ids)}


def test_saved_models_load_in_a_fresh_process_without_warnings_and_answer_as_the_models(
        tmp_path):
    # 3 x 24 tokens run batched attention, 2 x 16 the few-row branch (up to 64) it keeps.
    batches = {"batched": _features(3, 24, 0), "few_rows": _features(2, 16, 1)}
    for name, features in batches.items():
        np.savez(tmp_path / f"{name}.npz", **features)
    expected = {}
    for export, build in MODELS.items():
        model = build()
        for name, features in batches.items():
            out = model.predict(features, verbose=0)
            expected[f"{export}:{name}:output_0"] = out
        model.export(str(tmp_path / export), verbose=False)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([zygote.shared_python(env), "-c", LOAD, *MODELS], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # A SavedModel cannot store custom gradients: with them, loading warns for each.
    assert "custom gradient" not in done.stderr, done.stderr[-3000:]
    answers = dict(np.load(tmp_path / "answers.npz"))
    assert sorted(answers) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(answers[key], value, atol=1e-5, err_msg=key)


def test_litert_file_has_only_builtins_and_no_branches_and_answers_as_the_model(tmp_path):
    import tensorflow as tf

    model = MODELS["bert_classifier"]()
    features = _features(3, 24, 0)
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
