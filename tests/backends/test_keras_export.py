"""Keras' own `model.export` on bert_tf's task models, on the backend this process runs
(tests/backends runs in both backends' matrix): the SavedModel TF Serving loads, traced as
bert_tf's exports trace it (TakesTokenIds.export). On TensorFlow the model's graph; on JAX
jax2tf's, with one [batch, length] shape for every input. LiteRT files come from TensorFlow
only."""

import os
import subprocess

import keras
import numpy as np
import pytest

import zygote
from bert_tf import BertConfig, BertEncoder, ModernBertConfig, build_encoder
from bert_tf.modeling import BertClassifier, BertPretrainer, BertTokenClassifier, kernels

BACKEND = keras.backend.backend()

# A fresh process that loads each SavedModel and answers each batch as TF Serving would ask
# (or records that the call refused it).
LOAD = """
import sys
import numpy as np
import tensorflow as tf

from bert_tf.serving import op_check

# The model server's ops, read before anything loads more (see op_check).
server_ops = op_check.server_op_allowlist(in_this_process=True)
answers = {}
for export in sys.argv[2:]:
    answers[f"{export}:missing_ops"] = np.array(
        sorted(op_check.check_ops(export, server_ops).missing), dtype=str)
    serve = tf.saved_model.load(export).signatures["serving_default"]
    for name in sys.argv[1].split(","):
        try:
            out = serve(**{k: tf.constant(v) for k, v in np.load(name + ".npz").items()})
        except tf.errors.InvalidArgumentError:
            answers[f"{export}:{name}:refused"] = np.array(True)
            continue
        answers.update({f"{export}:{name}:{k}": v.numpy() for k, v in out.items()})
    library = serve.graph.as_graph_def().library.function
    answers[f"{export}:platforms"] = np.array(sorted(
        p.decode() for f in library for n in f.node_def if n.op == "XlaCallModule"
        for p in n.attr["platforms"].list.s) or ["TensorFlow graph"])
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
    # Sinusoidal positions have no table: inputs longer than max_position_embeddings work.
    "sinusoidal_classifier": lambda: BertClassifier(BertEncoder(BertConfig(
        vocab_size=60, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64,
        position_embedding_type="sinusoidal")), num_classes=2),
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
    # 3 x 24 tokens run batched attention on TensorFlow, 2 x 16 the few-row branch (up to 64)
    # it keeps; 64 tokens is the longest input a position table of 64 rows takes (JAX's shape
    # constraint), so 65 tokens fail at the call, as Keras refuses them (not so sinusoidal).
    batches = {"batched": _features(3, 24, 0), "few_rows": _features(2, 16, 1),
               "longest": _features(2, 64, 2), "too_long": _features(2, 65, 3)}
    for name, features in batches.items():
        np.savez(tmp_path / f"{name}.npz", **features)
    expected = {}
    for export, build in MODELS.items():
        model = build()
        for name, features in batches.items():
            try:
                out = keras.ops.convert_to_numpy(model(features))
            except ValueError as e:
                assert "input length 65 exceeds max_position_embeddings=64" in str(e), e
                expected[f"{export}:{name}:refused"] = (np.array(True), None)
                continue
            expected[f"{export}:{name}:output_0"] = (out, features["input_mask"])
        # A jax2tf_kwargs entry of the caller's replaces bert_tf's (the platforms, here).
        options = ({"jax2tf_kwargs": {"native_serialization_platforms": ("cpu",)}}
                   if BACKEND == "jax" and export == "sinusoidal_classifier" else {})
        model.export(str(tmp_path / export), verbose=False, **options)
    assert sorted(k for k in expected if k.endswith("refused")) == [
        "bert_classifier:too_long:refused", "modern_tagger:too_long:refused"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")
    done = subprocess.run([zygote.shared_python(env), "-c", LOAD, ",".join(batches), *MODELS],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # A SavedModel cannot store custom gradients: with them, loading warns for each.
    assert "custom gradient" not in done.stderr, done.stderr[-3000:]
    answers = dict(np.load(tmp_path / "answers.npz"))
    for export in MODELS:
        # Every op is one the TF Serving model server links (JAX's: XlaCallModule).
        assert list(answers.pop(f"{export}:missing_ops")) == [], export
    # jax2tf's module carries XLA code for the platforms it was lowered for.
    platforms = {export: list(answers.pop(f"{export}:platforms")) for export in MODELS}
    assert platforms == ({"bert_classifier": ["CPU", "CUDA"], "modern_tagger": ["CPU", "CUDA"],
                          "sinusoidal_classifier": ["CPU"]} if BACKEND == "jax" else
                         dict.fromkeys(MODELS, ["TensorFlow graph"]))
    assert sorted(answers) == sorted(expected)
    for key, (value, mask) in expected.items():
        if BACKEND == "jax" and value.ndim == 3:
            # JAX's export runs the local layers' full masked band at every length, Keras'
            # call the blocked path beyond 3 windows: the same at real tokens; at padding,
            # which no head reads, each path's own placeholder.
            answers[key], value = answers[key][mask == 1], value[mask == 1]
        np.testing.assert_allclose(answers[key], value, atol=1e-5, err_msg=key)


def test_litert_file_has_only_builtins_and_no_branches_or_is_refused_on_jax(tmp_path):
    """TensorFlow writes the LiteRT file; JAX refuses it, and a subclassed model without an
    input signature, in one line before anything is written."""
    model = MODELS["bert_classifier"]()
    features = _features(3, 24, 0)
    path = tmp_path / "model.tflite"
    if BACKEND == "jax":
        with pytest.raises(ValueError) as raised:
            model.export(str(path), format="litert")
        assert str(raised.value) == (
            "BertClassifier.export(format='litert') needs KERAS_BACKEND=tensorflow (on JAX, "
            "bert_tf exports format='tf_saved_model'); load the .keras file under TensorFlow "
            "and export there")
        assert not path.exists()
        # A subclassed model's inputs come from its calls: JAX's export needs them given.
        pretrainer = BertPretrainer(BertEncoder(BertConfig(
            vocab_size=60, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=32)))
        with pytest.raises(ValueError) as raised:
            pretrainer.export(str(tmp_path / "pretrainer"))
        assert str(raised.value) == ("BertPretrainer.export on JAX needs input_signature=: its "
                                     "inputs are known only from its calls")
        assert not (tmp_path / "pretrainer").exists()
        return
    from bert_tf.serving import litert

    expected = model.predict(features, verbose=0)
    model.export(str(path), format="litert", verbose=False)
    census = litert.op_census(str(path))
    assert census.flex == frozenset() and not census.custom, census.format()
    # Attention without the few-row branch, as bert-tf-export --format=litert traces it.
    assert "IF" not in census.counts and census.counts["SOFTMAX"] == 2, census.format()
    interpreter = litert.interpreter(str(path))
    (answer,) = interpreter.get_signature_runner()(**features).values()
    np.testing.assert_allclose(answer, expected, atol=1e-5)
    assert not kernels.portable()  # the contexts end with the export
