"""bert_tf.serving.export's arguments: what it refuses (naming why), overwriting, SQuAD 2.0."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import serving
from bert_tf.modeling import BertClassifier, BertEncoder, BertSpanLabeler
from bert_tf.serving.task_signatures import (ClassificationSignatures, RegressionSignatures,
                                              SpanSignatures, check_length_buckets)
from bert_tf.text.input_packing import bucket_lengths
from bert_tf.text.layers import BertTokenizerLayer

import serving_cases as cases


@pytest.fixture(scope="module")
def encoder():
    return BertEncoder(cases.tiny_config())


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(signatures=("ids", "json")), ValueError,
     "export: signatures=['ids', 'json']; choose from ids, text, examples."),
    (dict(), ValueError, "export: the text and examples signatures need vocab_file (or "
                         "tokenizer); pass signatures=('ids',) to export without one."),
    (dict(vocab_file=cases.VOCAB, max_seq_length=65), ValueError,
     "export: max_seq_length=65 must be in [3, max_position_embeddings=64]."),
    (dict(vocab_file=cases.VOCAB + ["extra"]), ValueError,
     f"export: the vocabulary has {len(cases.VOCAB) + 1} tokens but the model's vocab_size is "
     f"only {len(cases.VOCAB)}."),
    (dict(vocab_file=cases.VOCAB, labels=["a", "b"]), ValueError,
     "export: 2 labels for a BertClassifier with num_classes=3; pass one name per class."),
    (dict(vocab_file=cases.VOCAB, labels=["a", "a", "b"]), ValueError,
     "export: labels must be distinct non-empty names, got ['a', 'a', 'b']."),
    (dict(vocab_file=cases.VOCAB, tokenizer=BertTokenizerLayer(cases.VOCAB)), ValueError,
     "export: pass tokenizer or vocab_file, not both."),
    (dict(tokenizer=cases.VOCAB), TypeError,
     "export: tokenizer must be a bert_tf.text tokenizer (WordPiece, byte-level BPE or "
     "SentencePiece) or its layer, got list."),
    # The rule of --length_buckets (bert_tf.data.tasks.length_buckets.parse_buckets).
    (dict(vocab_file=cases.VOCAB, length_buckets=(16, 8)), ValueError,
     "length_buckets=16,8 is not strictly increasing (8 after 16)"),
    (dict(vocab_file=cases.VOCAB, length_buckets=(0, 8)), ValueError,
     "length_buckets=0,8: lengths must be >= 1, got 0"),
    (dict(vocab_file=cases.VOCAB, length_buckets=(16, 128)), ValueError,
     "length_buckets=16,128: bucket 128 exceeds max_position_embeddings=64"),
    (dict(vocab_file=cases.VOCAB, length_buckets=(8.5,)), ValueError,
     "length_buckets=8.5: 8.5 is not a length; expected auto, off or increasing integers like "
     "16,32,64,128"),
    (dict(vocab_file=cases.VOCAB, length_buckets=(True,)), ValueError,
     "length_buckets=True: True is not a length; expected auto, off or increasing integers "
     "like 16,32,64,128"),
])
def test_classifier_arguments_are_checked(encoder, tmp_path, kwargs, error, message):
    model = BertClassifier(encoder, num_classes=3)
    with pytest.raises(error) as raised:
        serving.export(model, str(tmp_path / "1"), **dict(dict(max_seq_length=32), **kwargs))
    assert str(raised.value) == message
    assert not os.path.exists(tmp_path / "1")


def test_other_models_and_arguments_are_refused(encoder, tmp_path):
    with pytest.raises(TypeError) as raised:
        serving.export(keras.Sequential([keras.layers.Dense(2)]), str(tmp_path / "1"),
                       signatures=("ids",))
    assert str(raised.value) == (
        "Cannot export a Sequential: expected one of BertClassifier, BertSpanLabeler, "
        "BertTokenClassifier, BertPretrainer, BertEncoder, ModernBertEncoder, "
        "BertSentenceEmbedder.")
    span = BertSpanLabeler(encoder)
    with pytest.raises(ValueError) as raised:
        serving.export(span, str(tmp_path / "1"), vocab_file=cases.VOCAB, max_seq_length=32,
                       labels=["x"])
    assert str(raised.value) == "export: a squad model has no labels, got ['x']."
    with pytest.raises(ValueError) as raised:
        serving.export(span, str(tmp_path / "1"), vocab_file=cases.VOCAB, max_seq_length=16,
                       max_query_length=14)
    assert str(raised.value) == ("export: max_query_length=14 must be in [1, max_seq_length - 4 "
                                 "= 12].")
    with pytest.raises(ValueError) as raised:
        serving.export(span, str(tmp_path / "1"), vocab_file=cases.VOCAB, max_seq_length=16,
                       max_query_length=8, doc_stride=6)
    assert str(raised.value) == (
        "export: doc_stride=6 must be in [1, 5]: a window holds 5 context tokens "
        "(max_seq_length=16 minus max_query_length=8 minus 3), and a larger stride would skip "
        "context between windows.")


def test_text_is_packed_to_the_smallest_bucket_that_holds_the_batch(encoder):
    assert bucket_lengths(128) == (4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128)
    assert bucket_lengths(100) == (4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 100)
    assert bucket_lengths(4) == (4,) and bucket_lengths(3) == (3,)
    assert check_length_buckets(None, 48, 64) == (4, 8, 12, 16, 24, 32, 40, 48)
    assert check_length_buckets([8, 16], 32, 64) == (8, 16, 32)
    assert check_length_buckets([8, 32], 32, 64) == (8, 32)
    # Lengths above max_seq_length are left out, as --length_buckets' are for fine-tuning.
    assert check_length_buckets([8, 64], 32, 64) == (8, 32)
    assert check_length_buckets((), 32, 64) == (32,)  # Off: always max_seq_length.
    assert check_length_buckets("off", 32, 64) == (32,)
    task = ClassificationSignatures(BertClassifier(encoder, num_classes=3),
                              BertTokenizerLayer(cases.VOCAB), 32, ["a", "b", "c"],
                              text_pair=False)
    task.length_buckets = (8, 16, 32)

    def packed(texts):
        return task._encode([tf.constant(texts, tf.string)])

    short = packed(["the cat", "cat"])  # 4 and 3 packed tokens
    assert short["input_word_ids"].numpy().tolist() == [[2, 5, 6, 3, 0, 0, 0, 0],
                                                        [2, 6, 3, 0, 0, 0, 0, 0]]
    assert {k: v.shape for k, v in short.items()} == {
        k: (2, 8) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    assert packed(["cat", "the cat sat on the mat ."])["input_mask"].shape == (2, 16)  # 9
    assert packed(["the cat sat on the mat . ! ?"])["input_mask"].shape == (1, 16)  # 11
    assert packed([cases.LONG_TEXT, "cat"])["input_mask"].shape == (2, 32)  # Truncated.
    assert packed(tf.zeros([0], tf.string))["input_mask"].shape == (0, 8)


def test_existing_export_is_kept_unless_overwrite(encoder, tmp_path):
    export_dir = tmp_path / "EXPORT" / "1"
    export_dir.mkdir(parents=True)
    (export_dir / "old.txt").write_text("old")
    with pytest.raises(FileExistsError) as raised:
        serving.export(encoder, str(export_dir), signatures=("ids",))
    assert str(raised.value) == (
        f"export: {export_dir} exists and is not empty; pass overwrite=True (--overwrite) or "
        "choose a new version number.")
    # overwrite replaces an export only: old.txt is not one.
    with pytest.raises(FileExistsError) as raised:
        serving.export(encoder, str(export_dir), signatures=("ids",), overwrite=True)
    assert str(raised.value) == (
        f"export: {export_dir} is not a SavedModel export (it holds old.txt); overwrite "
        "replaces only an export: choose a new directory.")
    assert os.listdir(export_dir) == ["old.txt"]
    os.remove(export_dir / "old.txt")
    serving.export(encoder, str(export_dir), signatures=("ids",))
    assert serving.export(encoder, str(export_dir), signatures=("ids",), overwrite=True) == \
        str(export_dir)
    assert sorted(os.listdir(export_dir)) == ["assets", "assets.extra", "fingerprint.pb",
                                              "saved_model.pb", "variables"]
    assert os.listdir(export_dir / "assets") == []  # No vocabulary without text signatures.
    assert os.listdir(tmp_path / "EXPORT") == ["1"]  # No staging or replaced copy is left.
    loaded = tf.saved_model.load(str(export_dir))
    assert list(loaded.signatures) == ["serving_default"]


def test_squad_version_2_answers_nothing_when_the_null_span_wins(serving_run, python_tok):
    model = serving_run.model("squad")
    layer = BertTokenizerLayer(cases.VOCAB)
    inputs = {"question": tf.constant(cases.QUESTIONS), "context": tf.constant(cases.CONTEXTS)}
    args = (model, layer, cases.SEQ_LENGTH, cases.MAX_QUERY_LENGTH, cases.MAX_ANSWER_LENGTH,
            cases.DOC_STRIDE)
    plain = {k: v.numpy() for k, v in SpanSignatures(*args).text(inputs).items()}
    # The smallest [CLS] score of each question's windows.
    null = cases.squad_reference(python_tok, model, cases.QUESTIONS,
                                 cases.CONTEXTS)["null_score"]
    has_context = plain["answer_text"] != b""
    difference = null - plain["score"]
    # A threshold between the rows' differences: some rows answer, some do not.
    threshold = float(np.median(difference[has_context]))
    got = {k: v.numpy() for k, v in SpanSignatures(
        *args, version_2_with_negative=True,
        null_score_diff_threshold=threshold).text(inputs).items()}
    no_answer = has_context & (difference > threshold)
    assert 0 < no_answer.sum() < has_context.sum()
    np.testing.assert_array_equal(got["answer_text"],
                                  np.where(no_answer, b"", plain["answer_text"]))
    np.testing.assert_array_equal(got["answer_start"], np.where(no_answer, 0,
                                                                plain["answer_start"]))
    np.testing.assert_allclose(got["score"], np.where(no_answer, null, plain["score"]),
                               rtol=0, atol=1e-5)


def test_squad_export_records_its_answer_settings(serving_run, tmp_path):
    export_dir = serving.export(
        serving_run.model("squad"), str(tmp_path / "1"), vocab_file=cases.VOCAB,
        max_seq_length=cases.SEQ_LENGTH, signatures=("text",), max_query_length=6,
        version_2_with_negative=True, null_score_diff_threshold=1.5)
    info = json.loads(open(os.path.join(export_dir, "assets.extra",
                                        "bert_tf_export.json")).read())
    # The default stride: a window's 32 - 3 - 6 = 23 tokens (less than 128).
    assert {k: info[k] for k in ("max_query_length", "max_answer_length", "doc_stride",
                                 "version_2_with_negative", "null_score_diff_threshold")} == {
        "max_query_length": 6, "max_answer_length": 30, "doc_stride": 23,
        "version_2_with_negative": True, "null_score_diff_threshold": 1.5}


def test_squad_windows_that_tie_on_context_give_the_start_to_the_first(python_tok):
    """S=256, a 39-token question, a 314-token context, stride 200: windows (0, 214) and
    (200, 114). Context token 207 has min(207, 6) + 2.14 = 8.14 in the first and
    min(7, 106) + 1.14 = 8.14 in the second: the first window scores it (Python's float64
    rule; in float32 the second won). Logits from the ids, so which window scores which start
    decides the answer: "paris" (token 207) in the first window beats "france" (token 220, only
    in the second) by its position bonus there."""
    paris, france = cases.VOCAB.index("paris"), cases.VOCAB.index("france")

    def logits_of_ids(features, training=False):
        ids = tf.convert_to_tensor(features["input_word_ids"])
        position = tf.cast(tf.range(tf.shape(ids)[1]), tf.float32)[tf.newaxis]
        is_paris = tf.cast(ids == paris, tf.float32)
        is_france = tf.cast(ids == france, tf.float32)
        return {"start_logits": 5.0 * is_paris + 5.1 * is_france + 0.001 * position,
                "end_logits": 5.0 * (is_paris + is_france)}

    words = ["the"] * 314
    words[207], words[220] = "paris", "france"
    context, question = " ".join(words), " ".join(["the"] * 39)
    task = SpanSignatures(logits_of_ids, BertTokenizerLayer(cases.VOCAB), 256, 64, 30, 200)
    got = task.text({"question": tf.constant([question]), "context": tf.constant([context])})
    expected = cases.squad_reference(python_tok, logits_of_ids, [question], [context],
                                     seq_length=256, max_query_length=64, max_answer_length=30,
                                     doc_stride=200)
    assert got["answer_text"].numpy().tolist() == [b"paris"] == [
        a.encode() for a in expected["answer_text"]]
    assert got["answer_start"].numpy().tolist() == [207 * 4] == expected["answer_start"].tolist()
    assert expected["window_of_answer"].tolist() == [0]
    np.testing.assert_allclose(got["score"].numpy(), [10.0 + 0.001 * (41 + 207)], atol=1e-5)


def test_regression_outputs_the_score(encoder, python_tok, tmp_path):
    model = BertClassifier(encoder, num_classes=1)
    task = RegressionSignatures(model, BertTokenizerLayer(cases.VOCAB), cases.SEQ_LENGTH,
                          text_pair=True)
    got = task.text({"text": tf.constant(cases.TEXTS), "text_pair": tf.constant(cases.PAIRS)})
    features = cases.pack_batch(python_tok, [python_tok.encode(t) for t in cases.TEXTS],
                                [python_tok.encode(t) for t in cases.PAIRS])
    assert sorted(got) == ["score"]
    np.testing.assert_allclose(got["score"].numpy(), model(features).numpy()[:, 0], rtol=0,
                               atol=1e-5)
    info_path = os.path.join(serving.export(model, str(tmp_path / "1"), signatures=("ids",)),
                             "assets.extra", "bert_tf_export.json")
    with open(info_path) as f:
        assert json.load(f) == {"model": "BertClassifier", "task": "regression",
                                "signatures": {"serving_default": [
                                    "input_mask", "input_type_ids", "input_word_ids"]}}


def test_padded_vocab_size_exports_and_fill_mask_ranks_real_tokens_only(tmp_path):
    """vocab_size above the vocabulary (as demo_tiny.json pads 3.4k tokens to 4096) exports;
    fill-mask never answers with an id past the vocabulary."""
    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertPretrainer
    keras.utils.set_random_seed(3)
    config = BertConfig.from_dict(dict(cases.tiny_config().to_dict(),
                                       vocab_size=len(cases.VOCAB) + 40))
    model = BertPretrainer(BertEncoder(config))
    # Make the padded rows the most likely predictions: an unguarded top-k would return them.
    for variable in model.weights:
        if variable.path.endswith("output_bias"):
            values = np.zeros(variable.shape, "float32")
            values[len(cases.VOCAB):] = 100.0
            variable.assign(values)
            break
    else:
        raise AssertionError("no output_bias variable in the pretrainer")
    export_dir = serving.export(model, str(tmp_path / "1"), vocab_file=cases.VOCAB,
                                max_seq_length=16, top_k=3)
    loaded = tf.saved_model.load(export_dir)
    out = loaded.signatures["serve_text"](text=tf.constant(["the [MASK] sat"]))
    ids = out["top_k_ids"].numpy()
    assert ids.shape == (1, 1, 3)
    assert (ids >= 0).all() and (ids < len(cases.VOCAB)).all(), ids
    assert [t.decode() for t in out["top_k_tokens"].numpy()[0, 0]] == [
        cases.VOCAB[i] for i in ids[0, 0]]
    probabilities = out["top_k_probabilities"].numpy()[0, 0]
    assert (probabilities > 0).all() and (np.diff(probabilities) <= 0).all(), probabilities
