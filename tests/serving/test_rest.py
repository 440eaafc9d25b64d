"""The README's TF Serving REST examples, fed through the exported signatures.

serving_client.py turns each row-format request into the signature's inputs as the model server
does, and the outputs into the {"predictions": [...]} response; these tests hold the responses
to the shapes and keys the README shows.
"""

import json

import numpy as np
import pytest

import serving_cases as cases

pytestmark = pytest.mark.slow

H = cases.tiny_config().hidden_size


def _predictions(serving_run, key):
    response = serving_run.report["rest"][key]
    # Valid JSON as the server writes it: no NaN or infinities anywhere.
    json.dumps(response, allow_nan=False)
    assert sorted(response) == ["predictions"]
    request = cases.REST_REQUESTS[key][1]
    assert len(response["predictions"]) == len(request["instances"])
    return response["predictions"], request["instances"]


def test_id_request(serving_run):
    predictions, _ = _predictions(serving_run, "classifier_ids")
    # One output (logits): each prediction is the bare value.
    assert np.shape(predictions) == (1, len(cases.CLASS_LABELS))


def test_classifier_text_request(serving_run):
    predictions, _ = _predictions(serving_run, "classifier")
    for p in predictions:
        assert sorted(p) == ["label_names", "predicted_label", "probabilities"]
        assert p["label_names"] == cases.CLASS_LABELS
        assert len(p["probabilities"]) == 3 and abs(sum(p["probabilities"]) - 1) < 1e-5
        assert p["predicted_label"] == cases.CLASS_LABELS[int(np.argmax(p["probabilities"]))]


def test_squad_request(serving_run):
    predictions, instances = _predictions(serving_run, "squad")
    for p, instance in zip(predictions, instances):
        assert sorted(p) == ["answer_end", "answer_start", "answer_text", "score"]
        assert instance["context"][p["answer_start"]:p["answer_end"]] == p["answer_text"]
        assert p["answer_text"] and isinstance(p["score"], float)


def test_tagging_request(serving_run):
    predictions, _ = _predictions(serving_run, "tagging")
    (p,) = predictions
    assert sorted(p) == ["end_offsets", "labels", "num_tokens", "scores", "start_offsets",
                         "tokens"]
    assert p["tokens"] == ["Marie", "Curie", "was", "born", "in", "Warsaw", "."]
    assert p["num_tokens"] == 7
    assert p["start_offsets"] == [0, 6, 12, 16, 21, 24, 30]
    assert p["end_offsets"] == [5, 11, 15, 20, 23, 30, 31]
    assert set(p["labels"]) <= set(cases.TAGS) and len(p["scores"]) == 7


def test_fill_mask_request(serving_run):
    predictions, _ = _predictions(serving_run, "fill_mask")
    (p,) = predictions
    assert sorted(p) == ["mask_positions", "top_k_ids", "top_k_probabilities", "top_k_tokens"]
    assert p["mask_positions"] == [4]  # [CLS] paris is the [MASK]
    assert np.shape(p["top_k_tokens"]) == np.shape(p["top_k_ids"]) == (1, cases.TOP_K)
    assert p["top_k_tokens"][0] == [cases.VOCAB[i] for i in p["top_k_ids"][0]]
    assert p["top_k_probabilities"][0] == sorted(p["top_k_probabilities"][0], reverse=True)


def test_embedding_request_with_bare_instances(serving_run):
    predictions, _ = _predictions(serving_run, "embedding")
    for p in predictions:
        assert sorted(p) == ["mean_pooled_output", "pooled_output"]
        assert np.shape(p["pooled_output"]) == np.shape(p["mean_pooled_output"]) == (H,)
