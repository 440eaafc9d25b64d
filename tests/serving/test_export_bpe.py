"""Exports whose text signatures tokenize with byte-level BPE (a tokenizer.json)."""

import dataclasses
import json
import os

import pytest

from bert_tf import serving
from bert_tf.data.tasks import squad
from bert_tf.modeling import (BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler,
                              BertTokenClassifier)
from bert_tf.text import load_tokenizer, tokenizer_layer

import serving_cases as cases
import whole_word_signatures as signatures
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
    signatures.check_classifier(model, tokenizer, export_dir, TEXTS, PAIRS)


TAG_TEXTS = ["John lives in New York.", "", "  Ünï  café,done it's 3.14 北京\t🙂x ",
             "Paris, (France) — \u00a0 'tis 2024!", "nai\u0308ve cafe\u0301s", cases.LONG_TEXT]


def test_tagging_text_signature_labels_words_like_python(bpe_model, tmp_path):
    """Words are the GPT-2 pattern's words without their space (punctuation apart), each
    encoded as bert-tf-tag encodes CoNLL words; labels at each word's first piece."""
    model, tokenizer = bpe_model
    tagger = BertTokenClassifier(model.encoder, num_classes=len(cases.TAGS))
    export_dir = serving.export(tagger, str(tmp_path / "1"), tokenizer=tokenizer,
                                max_seq_length=cases.SEQ_LENGTH, signatures=("text",),
                                labels=cases.TAGS)
    words = signatures.check_tagging(tagger, tokenizer, export_dir, TAG_TEXTS, truncated=5)
    assert [w for w, _, _ in words[0]] == ["John", "lives", "in", "New", "York", "."]
    assert [w for w, _, _ in words[4]] == ["nai\u0308ve", "cafe\u0301s"]  # NFD words: whole


def test_squad_text_signature_answers_whole_words_like_python(bpe_model, tmp_path):
    """The question encoded as a text, the context's SQuAD-whitespace words as bert-tf-squad
    encodes them; the best span over context pieces, widened to whole words."""
    model, tokenizer = bpe_model
    labeler = BertSpanLabeler(model.encoder)
    export_dir = serving.export(labeler, str(tmp_path / "1"), tokenizer=tokenizer,
                                max_seq_length=cases.SEQ_LENGTH, signatures=("text",),
                                max_query_length=cases.MAX_QUERY_LENGTH,
                                max_answer_length=cases.MAX_ANSWER_LENGTH,
                                doc_stride=cases.DOC_STRIDE)
    contexts = cases.CONTEXTS[:6] + ["Ünï  café,done\u202fit's\t3.14 北京"]
    questions = cases.QUESTIONS[:6] + ["What?"]
    answered, encoded = signatures.check_squad(labeler, tokenizer, export_dir, questions,
                                               contexts)
    assert answered >= 5
    # The long context is read in many windows (stride 8 of 21 or more pieces).
    query = len(tokenizer.encode(questions[4])[:cases.MAX_QUERY_LENGTH])
    assert len(squad.doc_windows(len(encoded[4][0]), cases.SEQ_LENGTH - 3 - query,
                                 cases.DOC_STRIDE)) > 10


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
    layer = tokenizer_layer(tokenizer)
    ids = signatures.check_fill_mask(model, tokenizer, layer, export_dir, texts)
    tokens = tokenizer.convert_ids_to_tokens(ids[0])  # [..., "Ġc", "at", "[MASK]", "Ġon", ...]
    at = tokens.index("[MASK]")
    assert tokens[at - 1:at + 2] == ["at", "[MASK]", "Ġon"]  # no "Ġ" of its own before it
    texts_of = layer.token_texts()
    assert texts_of[tokenizer.vocab["Ġon"]] == " on" and texts_of[tokenizer.mask_id] == "[MASK]"
