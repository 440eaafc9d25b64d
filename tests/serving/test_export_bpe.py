"""Exports whose text signatures tokenize with byte-level BPE (a tokenizer.json)."""

import dataclasses
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import serving
from bert_tf.data.tasks import squad
from bert_tf.modeling import (BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler,
                              BertTokenClassifier)
from bert_tf.text import bpe, load_tokenizer, tokenizer_layer

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


def _words(text, pattern):
    """(word, start, end) of the words `pattern` finds (Python `re`)."""
    return [(m.group(), m.start(), m.end()) for m in re.finditer(pattern, text)]


def _pieces_pattern():
    letters, numbers, space = (bpe._python_class(c) for c in bpe.character_classes())
    letters += bpe._python_class(bpe.mark_class())
    return "|".join([re.escape(c) for c in bpe.CONTRACTIONS] + [
        f"[{letters}]+", f"[{numbers}]+", f"[^{space}{letters}{numbers}]+"])


def _word_ids(tokenizer, words):
    """Ids of each word as bert-tf-tag and bert-tf-squad encode them, and each id's word."""
    ids, owner = [], []
    for w, (word, _, _) in enumerate(words):
        pieces = tokenizer.encode_word(word, first=w == 0)
        ids += pieces
        owner += [w] * len(pieces)
    return ids, owner


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
    got = tf.saved_model.load(export_dir).signatures["serve_text"](text=tf.constant(TAG_TEXTS))
    words = [_words(t, _pieces_pattern()) for t in TAG_TEXTS]
    assert [w for w, _, _ in words[0]] == ["John", "lives", "in", "New", "York", "."]
    assert [w for w, _, _ in words[4]] == ["nai\u0308ve", "cafe\u0301s"]  # NFD words: whole
    encoded = [_word_ids(tokenizer, w) for w in words]
    features = cases.pack_batch(tokenizer, [ids for ids, _ in encoded])
    probabilities = cases.softmax(tagger(features).numpy())
    for b, (text_words, (ids, owner)) in enumerate(zip(words, encoded)):
        first = {w: owner.index(w) for w in range(len(text_words))}
        kept = [w for w in range(len(text_words)) if first[w] < cases.SEQ_LENGTH - 2]
        n = int(got["num_tokens"][b])
        assert n == len(kept) and (n < len(text_words)) == (b == 5)
        p = probabilities[b, [first[w] + 1 for w in kept]]
        assert [t.decode("utf-8") for t in got["tokens"][b, :n].numpy()] == [
            text_words[w][0] for w in kept]
        assert [l.decode() for l in got["labels"][b, :n].numpy()] == [
            cases.TAGS[i] for i in p.argmax(-1)]
        np.testing.assert_allclose(got["scores"][b, :n].numpy(), p.max(-1), atol=1e-5)
        assert got["start_offsets"][b, :n].numpy().tolist() == [text_words[w][1] for w in kept]
        assert got["end_offsets"][b, :n].numpy().tolist() == [text_words[w][2] for w in kept]


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
    got = tf.saved_model.load(export_dir).signatures["serve_text"](
        question=tf.constant(questions), context=tf.constant(contexts))
    q_ids = [tokenizer.encode(q)[:cases.MAX_QUERY_LENGTH] for q in questions]
    words = [_words(c, "[^ \t\r\n\u202f]+") for c in contexts]
    encoded = [_word_ids(tokenizer, w) for w in words]
    # Overlapping windows (stride 8 of 21 or more pieces): the max-context rule decides.
    best, _, _ = cases.best_spans(tokenizer, labeler, q_ids, [ids for ids, _ in encoded])
    # The long context is read in many windows.
    assert len(squad.doc_windows(len(encoded[4][0]), cases.SEQ_LENGTH - 3 - len(q_ids[4]),
                                 cases.DOC_STRIDE)) > 10
    for b, found in enumerate(best):
        if found is None:
            assert got["answer_text"][b].numpy() == b"" and got["score"][b] == 0
            continue
        score, _, i, j = found
        owner = encoded[b][1]
        answer_start = words[b][owner[i]][1]
        answer_end = words[b][owner[j]][2]
        assert (int(got["answer_start"][b]), int(got["answer_end"][b])) == (answer_start,
                                                                            answer_end)
        assert got["answer_text"][b].numpy().decode() == contexts[b][answer_start:answer_end]
        np.testing.assert_allclose(got["score"][b].numpy(), score, atol=1e-4)


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
    texts_of = tokenizer_layer(tokenizer).token_texts()
    assert texts_of[tokenizer.vocab["Ġon"]] == " on" and texts_of[tokenizer.mask_id] == "[MASK]"
    assert [[t.decode("utf-8") for t in row] for row in got["top_k_tokens"].numpy()[0]] == [
        [texts_of[i] if i >= 0 else "" for i in row] for row in top[0]]
