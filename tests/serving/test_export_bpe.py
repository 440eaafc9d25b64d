"""Exports whose text signatures tokenize with byte-level BPE (a tokenizer.json)."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import serving
from bert_tf.modeling import BertClassifier, BertEncoder, BertPretrainer, BertTokenClassifier
from bert_tf.serving import tasks as serving_tasks
from bert_tf.text import load_tokenizer, tokenizer_layer

import serving_cases as cases
from bpe_fixtures import BPE_TOKENIZER_JSON

TEXTS = ["The cat sat on the mat.", "", "Ünïcödé café  in Paris — 北京 \u00a0 🙂",
         "It's [MASK]   here\tand\nthere ", cases.LONG_TEXT]
PAIRS = ["Where does the Seine flow?", "x", "", "北京", "small"]


@pytest.fixture(scope="module")
def bpe_model():
    tokenizer = load_tokenizer(BPE_TOKENIZER_JSON)
    config = dataclasses.replace(cases.tiny_config(), vocab_size=tokenizer.vocab_size)
    return BertClassifier(BertEncoder(config), num_classes=3), tokenizer


def test_classifier_text_signature_packs_bpe_ids_like_python(bpe_model, tmp_path):
    model, tokenizer = bpe_model
    export_dir = serving.export(model, str(tmp_path / "1"), tokenizer=tokenizer,
                                max_seq_length=cases.SEQ_LENGTH, signatures=("text",),
                                text_pair=True, labels=cases.CLASS_LABELS)
    with open(os.path.join(export_dir, "assets", "tokenizer.json"), encoding="utf-8") as f:
        assert json.load(f)["model"]["type"] == "BPE"
    with open(os.path.join(export_dir, "assets.extra", "bert_tf_export.json")) as f:
        assert json.load(f)["tokenizer"] == "byte-level BPE (assets/tokenizer.json)"
    served = tf.saved_model.load(export_dir).signatures["serve_text"]
    got = served(text=tf.constant(TEXTS), text_pair=tf.constant(PAIRS))
    features = cases.pack_batch(tokenizer, [tokenizer.encode(t) for t in TEXTS],
                                [tokenizer.encode(t) for t in PAIRS])
    assert (features["input_word_ids"][:, 0] == tokenizer.cls_id).all()
    np.testing.assert_allclose(got["probabilities"].numpy(),
                               cases.softmax(model(features).numpy()), rtol=0, atol=1e-5)


def test_tasks_that_need_word_offsets_are_refused(bpe_model, tmp_path):
    model, tokenizer = bpe_model
    with pytest.raises(ValueError) as raised:
        serving.export(BertTokenClassifier(model.encoder, num_classes=2), str(tmp_path / "1"),
                       tokenizer=tokenizer, max_seq_length=cases.SEQ_LENGTH, labels=["O", "X"])
    assert str(raised.value) == (
        "export: the text signatures of a tagging model need word offsets and WordPiece "
        "tokens, which a byte-level BPE tokenizer does not give; export signatures=('ids',) "
        "instead.")


def test_fill_mask_text_signature_finds_the_mask_token_like_python(bpe_model, tmp_path):
    """The mask is the tokenizer.json's added token ([MASK], taking the space before it, as
    ModernBERT's): the served positions and top-k are those of the Python tokenizer's ids;
    top_k_tokens are the tokens' text (" on", not "Ġon")."""
    _, tokenizer = bpe_model
    model = BertPretrainer(BertEncoder(bpe_model[0].encoder.config))
    export_dir = serving.export(model, str(tmp_path / "1"), tokenizer=tokenizer,
                                max_seq_length=cases.SEQ_LENGTH, signatures=("text",), top_k=3)
    texts = ["The cat [MASK] on the mat.", "[MASK] [MASK]  here", "No mask at all.",
             "Ünïcödé [MASK]🙂 北京"]
    got = tf.saved_model.load(export_dir).signatures["serve_text"](text=tf.constant(texts))
    ids = [tokenizer.encode(t) for t in texts]
    tokens = tokenizer.convert_ids_to_tokens(ids[0])  # [..., "Ġc", "at", "[MASK]", "Ġon", ...]
    at = tokens.index("[MASK]")
    assert tokens[at - 1:at + 2] == ["at", "[MASK]", "Ġon"]  # no "Ġ" of its own before it
    features = cases.pack_batch(tokenizer, ids)
    positions = [[i for i, t in enumerate(row) if t == tokenizer.mask_id] for row in
                 features["input_word_ids"]]
    padded = np.array([p + [-1] * (2 - len(p)) for p in positions], np.int32)
    np.testing.assert_array_equal(got["mask_positions"].numpy(), padded)
    logits = model(dict(features, masked_lm_positions=np.maximum(padded, 0)),
                   training=False)["mlm_logits"].numpy()[:, :, :tokenizer.vocab_size]
    top = np.argsort(-logits, axis=-1)[:, :, :3]
    top = np.where(padded[:, :, None] >= 0, top, -1)
    np.testing.assert_array_equal(got["top_k_ids"].numpy(), top)
    texts_of = serving_tasks.token_texts(tokenizer_layer(tokenizer))
    assert texts_of[tokenizer.vocab["Ġon"]] == " on" and texts_of[tokenizer.mask_id] == "[MASK]"
    assert [[t.decode("utf-8") for t in row] for row in got["top_k_tokens"].numpy()[0]] == [
        [texts_of[i] if i >= 0 else "" for i in row] for row in top[0]]
