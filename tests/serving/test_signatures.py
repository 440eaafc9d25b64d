"""Every signature of every exported model type, run in a process without bert_tf, against the
Keras model and the Python tokenizer (see conftest.py for how the exports are made and run)."""

import os

import numpy as np
import pytest

import serving_cases as cases
from serving_cases import KINDS, ids_inputs, text_inputs

pytestmark = pytest.mark.slow

ATOL = 1e-5


def _close(got, expected, what):
    np.testing.assert_allclose(got, expected, rtol=0, atol=ATOL, err_msg=what)


def test_fresh_process_loaded_no_bert_tf_and_exports_were_relocated(serving_run):
    assert serving_run.report["bert_tf_modules"] == []
    # Exports are traced without the training kernels' custom gradients, whose Python
    # functions a SavedModel cannot save (loading warned once per function).
    with open(os.path.join(serving_run.root, "client_stderr.txt"), encoding="utf-8") as f:
        assert "unsaved custom gradients" not in f.read()
    for kind in KINDS:
        export_dir = serving_run.export_dirs[kind]
        assert not os.path.exists(serving_run.moved_from[kind])
        # TF Serving's version directory layout, with the vocabulary as an asset.
        assert sorted(os.listdir(export_dir)) == ["assets", "assets.extra", "fingerprint.pb",
                                                  "saved_model.pb", "variables"]
        with open(os.path.join(export_dir, "assets", "vocab.txt"), encoding="utf-8") as f:
            assert f.read().splitlines() == cases.VOCAB
        signatures = serving_run.report["signatures"][export_dir]
        assert sorted(signatures) == ["serve_examples", "serve_text", "serving_default"]
        # Dense tensors with the batch dimension unknown, in and out.
        for spec in signatures.values():
            for tensor in list(spec["inputs"].values()) + list(spec["outputs"].values()):
                assert tensor["shape"][0] is None, (kind, spec)


@pytest.mark.parametrize("kind", KINDS)
def test_id_signature_matches_keras(serving_run, python_tok, kind):
    features = ids_inputs(python_tok, kind)
    expected = serving_run.model(kind)(features)
    if not isinstance(expected, dict):
        expected = {"logits": expected}
    if kind == "embedding":
        expected = {k: expected[k] for k in ("sequence_output", "pooled_output")}
    got = serving_run.output(kind, "ids")
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        _close(got[name], np.asarray(value), f"{kind} {name}")


@pytest.mark.parametrize("kind", KINDS)
def test_examples_and_batch_of_one_answer_as_the_text_batch(serving_run, kind):
    text = serving_run.output(kind, "text")
    examples = serving_run.output(kind, "examples")
    one = serving_run.output(kind, "text_one")
    assert sorted(examples) == sorted(text) == sorted(one)
    for name, value in text.items():
        if value.dtype.kind == "U":
            np.testing.assert_array_equal(examples[name], value)
        else:
            _close(examples[name], value, f"{kind} {name} (examples)")
        assert one[name].shape[0] == 1 and value.shape[0] == len(
            next(iter(text_inputs(kind).values())))
        # Alone, the first row is padded to its own length only.
        width = one[name].shape[1] if one[name].ndim > 1 else None
        first = value[:1, :width] if width is not None else value[:1]
        if value.dtype.kind == "U":
            np.testing.assert_array_equal(one[name], first)
        else:
            _close(one[name], first, f"{kind} {name} (batch of one)")


@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_batch_is_answered(serving_run, kind):
    empty = serving_run.output(kind, "text_empty")
    text = serving_run.output(kind, "text")
    assert sorted(empty) == sorted(text)
    for name, value in empty.items():
        assert value.shape[0] == 0 and value.ndim == text[name].ndim, (name, value.shape)


# The references below run the Keras model on inputs packed to the full SEQ_LENGTH. "text" is a
# batch with texts that fill it; "text_short" one whose packed inputs fit the first length
# bucket, which the signature ran the encoder at: the outputs must be the full-length ones.
CALLS = ("text", "text_short")


def _longest(features):
    return int(features["input_mask"].sum(axis=1).max())


@pytest.mark.parametrize("call", CALLS)
def test_classifier_text(serving_run, python_tok, call):
    tok = python_tok
    inputs = text_inputs("classifier", call)
    features = cases.pack_batch(tok, [tok.encode(t) for t in inputs["text"]],
                                [tok.encode(t) for t in inputs["text_pair"]])
    probabilities = cases.softmax(serving_run.model("classifier")(features).numpy())
    got = serving_run.output("classifier", call)
    _close(got["probabilities"], probabilities, "probabilities")
    np.testing.assert_array_equal(got["predicted_label"],
                                  np.array(cases.CLASS_LABELS)[probabilities.argmax(-1)])
    np.testing.assert_array_equal(got["label_names"],
                                  np.array([cases.CLASS_LABELS] * len(inputs["text"])))
    # Long texts were truncated to the sequence length, longest first; the short batch fits
    # the first bucket (16).
    assert _longest(features) == (cases.SEQ_LENGTH if call == "text" else 15)


@pytest.mark.parametrize("call", CALLS)
def test_squad_text(serving_run, python_tok, call):
    inputs = text_inputs("squad", call)
    expected = cases.squad_reference(python_tok, serving_run.model("squad"), inputs["question"],
                                     inputs["context"])
    got = serving_run.output("squad", call)
    np.testing.assert_array_equal(got["answer_text"], expected["answer_text"])
    np.testing.assert_array_equal(got["answer_start"], expected["answer_start"])
    np.testing.assert_array_equal(got["answer_end"], expected["answer_end"])
    _close(got["score"], expected["score"], "score")
    for context, text, start, end in zip(inputs["context"], got["answer_text"],
                                         got["answer_start"], got["answer_end"]):
        assert context[start:end] == text
    if call == "text_short":
        assert _longest(expected["features"]) == 15 and all(got["answer_text"])
        return
    # An empty (or all-space) context answers "" at 0; the others answer something.
    assert [bool(t) for t in got["answer_text"]] == [True, True, True, False, True, True, False]
    # The long context is read in overlapping windows; its answer is past the first one.
    assert expected["window_of_answer"][4] > 0
    # Non-ASCII context: offsets are character (not byte) offsets.
    assert cases.CONTEXTS[5][got["answer_start"][5]:got["answer_end"][5]] == \
        got["answer_text"][5]


@pytest.mark.parametrize("call", CALLS)
def test_tagging_text(serving_run, python_tok, call):
    texts = text_inputs("tagging", call)["text"]
    expected = cases.tagging_reference(python_tok, serving_run.model("tagging"), texts)
    got = serving_run.output("tagging", call)
    width = max(1, max(len(rows) for rows in expected))
    assert got["tokens"].shape == (len(texts), width)
    np.testing.assert_array_equal(got["num_tokens"], [len(rows) for rows in expected])
    for b, rows in enumerate(expected):
        n = len(rows)
        assert got["tokens"][b, :n].tolist() == [r[0] for r in rows]
        assert got["labels"][b, :n].tolist() == [r[1] for r in rows]
        _close(got["scores"][b, :n], [r[2] for r in rows], f"scores of text {b}")
        assert got["start_offsets"][b, :n].tolist() == [r[3] for r in rows]
        assert got["end_offsets"][b, :n].tolist() == [r[4] for r in rows]
        # Padding.
        assert set(got["labels"][b, n:]) <= {""} and set(got["start_offsets"][b, n:]) <= {-1}
    if call == "text_short":  # 9 packed tokens: the export's bucket 12 of (8, 12, 16, 24, 32).
        assert got["tokens"][0].tolist() == ["Marie", "Curie", "was", "born", "in", "Warsaw",
                                             "."]
        assert got["num_tokens"].tolist() == [7, 7, 0]
        return
    assert got["tokens"][0, :3].tolist() == ["The", "cat", "sat"]
    assert got["tokens"][3, :3].tolist() == ["Ünïcödé", "café", "in"]
    assert got["num_tokens"][1] == got["num_tokens"][5] == 0  # Empty and all-space texts.
    assert got["num_tokens"][4] == cases.SEQ_LENGTH - 2  # Truncated: one piece per word.
    assert got["tokens"][6, 0] == "x" * 250  # Over 200 characters: one [UNK] word.


@pytest.mark.parametrize("call", CALLS)
def test_fill_mask_text(serving_run, python_tok, call):
    tok = python_tok
    ids = [cases.fill_mask_ids(tok, t) for t in text_inputs("fill_mask", call)["text"]]
    features = cases.pack_batch(tok, ids)
    positions = [[i for i, x in enumerate(row) if x == tok.mask_id]
                 for row in features["input_word_ids"]]
    width = max(1, max(len(p) for p in positions))
    padded = np.array([p + [-1] * (width - len(p)) for p in positions], np.int32)
    model = serving_run.model("fill_mask")
    logits = model(dict(features, masked_lm_positions=np.maximum(padded, 0)))["mlm_logits"]
    probabilities = cases.softmax(logits.numpy())
    got = serving_run.output("fill_mask", call)
    np.testing.assert_array_equal(got["mask_positions"], padded)
    # The long text's mask is cut; the short batch (9 tokens) runs at the tool's bucket 16.
    assert [len(p) for p in positions] == (
        [2, 1, 0, 0, 0, 3, 1] if call == "text" else [2, 1])
    assert _longest(features) == (cases.SEQ_LENGTH if call == "text" else 9)
    for b, row in enumerate(positions):
        for k in range(width):
            if k >= len(row):
                assert got["top_k_ids"][b, k].tolist() == [-1] * cases.TOP_K
                assert got["top_k_tokens"][b, k].tolist() == [""] * cases.TOP_K
                continue
            order = np.argsort(-probabilities[b, k])[:cases.TOP_K]
            assert got["top_k_ids"][b, k].tolist() == order.tolist()
            assert got["top_k_tokens"][b, k].tolist() == [cases.VOCAB[i] for i in order]
            _close(got["top_k_probabilities"][b, k], probabilities[b, k, order], "top-k")


@pytest.mark.parametrize("call", CALLS)
def test_embedding_text(serving_run, python_tok, call):
    tok = python_tok
    features = cases.pack_batch(tok, [tok.encode(t) for t in text_inputs("embedding", call)[
        "text"]])
    outputs = serving_run.model("embedding")(features)
    mask = features["input_mask"][:, :, None].astype(np.float32)
    mean = (outputs["sequence_output"].numpy() * mask).sum(1) / mask.sum(1)
    got = serving_run.output("embedding", call)
    assert sorted(got) == ["mean_pooled_output", "pooled_output"]
    _close(got["pooled_output"], outputs["pooled_output"].numpy(), "pooled_output")
    _close(got["mean_pooled_output"], mean, "mean_pooled_output")


@pytest.mark.parametrize("key", sorted(cases.BAD_CALLS))
def test_bad_requests_fail_naming_the_input(serving_run, key):
    *_, message = cases.BAD_CALLS[key]
    error = serving_run.report["errors"][key]
    assert error is not None, f"{key} was answered"
    assert error["type"] == "InvalidArgumentError"
    assert message in error["message"], error["message"]
