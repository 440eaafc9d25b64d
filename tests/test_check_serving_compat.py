"""tools/check_serving_compat.py: exports served by another interpreter, answers compared.

The committed result (benchmarks/results/*-serving-compat-tf220.json) comes from TensorFlow 2.20
(TF Serving's). docs/serving.md's example runs the tool end to end in tests/docs, with this
interpreter as the other side on one export; here: the comparison and the committed result.
"""

import glob
import importlib.util
import json
import os

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "check_serving_compat", os.path.join(REPO, "tools", "check_serving_compat.py"))
compat = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compat)


def test_comparison_names_every_difference():
    reference = {"a/serve_text/probabilities": np.array([[0.5, 0.5]], np.float32),
                 "a/serve_text/predicted_label": np.array([b"x"]),
                 "a/serving_default/logits": np.array([[1.0, 2.0]], np.float32),
                 "b/serve_text/ids": np.array([[1, 2]], np.int32)}
    target = {"a/serve_text/probabilities": np.array([[0.5, 0.5 + 2e-5]], np.float32),
              "a/serve_text/predicted_label": np.array([b"y"]),
              "a/serving_default/logits": np.array([[1.0, 2.0 + 1e-6]], np.float32)}
    result = compat._compare(reference, target, atol=1e-5)
    assert result["a/serving_default"]["equal"]
    assert result["a/serving_default"]["max_abs_diff"] == pytest.approx(1e-6, rel=0.2)
    problems = result["a/serve_text"]["problems"]
    assert not result["a/serve_text"]["equal"] and len(problems) == 2, problems
    assert any(p.startswith("probabilities: differs by 2") for p in problems), problems
    assert "predicted_label: values differ" in problems
    assert result["b/serve_text"]["problems"] == ["ids: only in the reference"]


def test_the_committed_result_covers_every_export_kind_on_tensorflow_2_20():
    paths = sorted(glob.glob(os.path.join(REPO, "benchmarks", "results",
                                          "*-serving-compat-tf220.json")))
    assert paths, "no committed result of tools/check_serving_compat.py"
    result = json.load(open(paths[-1], encoding="utf-8"))
    assert result["ok"] and result["sides"]["target"]["tensorflow"].startswith("2.20.")
    assert sorted(result["exports"]) == sorted(f"{t}/{k}" for t in compat.TOKENIZERS
                                               for k in compat.KINDS)
    for export in result["exports"].values():
        assert sorted(export["calls"]) == ["serve_examples", "serve_text", "serving_default"]
        assert all(call["equal"] for call in export["calls"].values())
