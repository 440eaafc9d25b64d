"""Exports whose text signatures tokenize with byte-level BPE (a tokenizer.json)."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import serving
from bert_tf.modeling import BertClassifier, BertEncoder, BertTokenClassifier
from bert_tf.text import load_tokenizer

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
