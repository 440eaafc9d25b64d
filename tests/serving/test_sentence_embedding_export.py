"""The sentence-embedding SavedModel: raw text in, the Keras model's vectors out, in a process
that imports only TensorFlow and tensorflow-text."""

import json
import os
import subprocess
import sys

import numpy as np

from embedding_helpers import make_st_dir

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serving_client.py")


def test_text_and_id_signatures_match_the_keras_model(tmp_path):
    from bert_tf import serving
    from bert_tf.interop import load_sentence_transformers
    from bert_tf.training.bulk_embedder import BulkEmbedder

    make_st_dir(tmp_path / "st")
    st = load_sentence_transformers(str(tmp_path / "st"))
    export_dir = str(tmp_path / "export" / "1")
    serving.export(st.model, export_dir, vocab_file=st.vocab_file, do_lower_case=True,
                   max_seq_length=32, signatures=("ids", "text"))
    info = json.load(open(os.path.join(export_dir, "assets.extra", "bert_tf_export.json")))
    assert (info["task"], info["model"]) == ("sentence_embedding", "BertSentenceEmbedder")

    long_text = " ".join(["alice went to paris and rome with bob"] * 8)  # truncated at 32
    texts = ["Alice was in Paris.", "the new film", "", long_text]
    embedder = BulkEmbedder(st.model, st.vocab_file, True, 32)
    expected = embedder.embed(texts)
    ids = embedder.pack(embedder.token_ids(texts))
    calls = [{"key": "text", "export_dir": export_dir, "signature": "serve_text",
              "inputs": {"text": {"dtype": "string", "value": texts}}},
             {"key": "short", "export_dir": export_dir, "signature": "serve_text",
              "inputs": {"text": {"dtype": "string", "value": texts[:1]}}},
             {"key": "ids", "export_dir": export_dir, "signature": "serving_default",
              "inputs": {k: {"dtype": "int32", "value": v.tolist()} for k, v in ids.items()}}]
    (tmp_path / "calls.json").write_text(json.dumps({"calls": calls, "rest": []}))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, CLIENT, str(tmp_path / "calls.json"),
                             str(tmp_path / "out")], capture_output=True, text=True, env=env,
                            cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.load(open(tmp_path / "out.json"))
    assert report["bert_tf_modules"] == []
    outputs = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(outputs["text/embedding"], expected, atol=1e-5)
    np.testing.assert_allclose(outputs["ids/embedding"], expected, atol=1e-5)
    # A lone short text runs at a short bucket and gets the vector it gets beside a long one.
    np.testing.assert_allclose(outputs["short/embedding"], expected[:1], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(outputs["text/embedding"], axis=1), 1.0,
                               rtol=1e-5)
    signature = report["signatures"][export_dir]["serve_text"]
    assert signature["outputs"] == {"embedding": {"dtype": "float32", "shape": [None, 32]}}
