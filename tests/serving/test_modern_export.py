"""A modern-encoder (ModernBERT-class) classifier exported and served from a fresh process
that imports only TensorFlow: the id signature at lengths through both local-attention paths."""

import json
import os
import subprocess
import sys

import numpy as np

from bert_tf.config import ModernBertConfig
from bert_tf.modeling import BertClassifier, ModernBertEncoder
from bert_tf.serving import exporter

_SERVE = """
import json, sys
import numpy as np
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
serve = model.signatures["serving_default"]
out = {}
for length in (20, 100):
    ids = np.load(sys.argv[2])[:, :length]
    mask = np.ones_like(ids)
    mask[1, length // 2:] = 0
    result = serve(input_word_ids=tf.constant(ids), input_mask=tf.constant(mask),
                   input_type_ids=tf.zeros_like(tf.constant(ids)))
    out[length] = result["logits"].numpy().tolist()
print(json.dumps(out))
"""


def test_modern_classifier_serves_its_keras_outputs(tmp_path):
    config = ModernBertConfig.from_preset("modernbert_tiny")
    model = BertClassifier(ModernBertEncoder(config), num_classes=3)
    ids = np.random.default_rng(0).integers(5, config.vocab_size, (2, 100)).astype("int32")
    np.save(tmp_path / "ids.npy", ids)
    export_dir = exporter.export(model, str(tmp_path / "export" / "1"), signatures=("ids",))
    proc = subprocess.run([sys.executable, "-c", _SERVE, export_dir, str(tmp_path / "ids.npy")],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=""))
    assert proc.returncode == 0, proc.stderr[-2000:]
    served = json.loads(proc.stdout.strip().splitlines()[-1])
    for length in (20, 100):  # 100 > 3 half-windows: the blocked local path, chosen in-graph.
        mask = np.ones((2, length), "int32")
        mask[1, length // 2:] = 0
        expected = model({"input_word_ids": ids[:, :length], "input_mask": mask,
                          "input_type_ids": np.zeros_like(mask)}).numpy()
        np.testing.assert_allclose(served[str(length)], expected, atol=1e-5)


def test_modern_classifier_converts_to_litert_with_its_keras_outputs(tmp_path):
    """LiteRT has no tensor lists and runs conds as IF subgraphs: the modern encoder's
    attention is traced without either (portable_attention) and still equals Keras at a length
    Keras computes with the full local path and one it computes block by block."""
    from bert_tf.serving import litert_export
    from bert_tf.serving.litert_model import LiteRTModel

    config = ModernBertConfig.from_preset("modernbert_tiny")
    model = BertClassifier(ModernBertEncoder(config), num_classes=3)
    result = litert_export.export_litert(model, str(tmp_path / "litert"), signatures=("ids",),
                                         max_seq_length=128)
    assert result.census.flex == frozenset() and "IF" not in result.census.counts
    served = LiteRTModel(result.path)
    ids = np.random.default_rng(1).integers(5, config.vocab_size, (2, 100)).astype("int32")
    for length in (20, 100):
        mask = np.ones((2, length), "int32")
        mask[1, length // 2:] = 0
        features = {"input_word_ids": ids[:, :length], "input_mask": mask,
                    "input_type_ids": np.zeros_like(mask)}
        np.testing.assert_allclose(served.predict_ids(**features)["logits"],
                                   model(features).numpy(), atol=1e-5)
