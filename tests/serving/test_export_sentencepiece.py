"""Exports whose text signatures tokenize with a SentencePiece model (ALBERT's vocabulary)."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import serving
from bert_tf.modeling import BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler
from bert_tf.modeling import BertTokenClassifier
from bert_tf.text import load_tokenizer, tokenizer_layer

import serving_cases as cases
from sentencepiece_fixtures import sentencepiece_model_file
from test_export_bpe import _pieces_pattern, _word_ids, _words

TEXTS = ["The cat sat on the mat.", "", "Ünïcödé CAFÉ  in Paris, 1990, — 北京 \u00a0 🙂",
         "It's [MASK]   here\tand\nthere ", cases.LONG_TEXT]
PAIRS = ["Where does the Seine flow?", "x", "", "北京", "small (1,000)"]


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    tokenizer = load_tokenizer(sentencepiece_model_file(tmp_path_factory))
    config = dataclasses.replace(cases.tiny_config(), vocab_size=tokenizer.vocab_size)
    return BertClassifier(BertEncoder(config), num_classes=3), tokenizer


def test_classifier_text_signature_packs_sentencepiece_ids_like_python(spm_model, tmp_path):
    """`vocab_file=` a SentencePiece model builds its layer (tests/serving/test_op_check.py
    checks such an export's ops); LiteRT refuses the text signature by name, before any
    work."""
    from bert_tf.serving import export_litert
    from bert_tf.serving.litert import LiteRTUnsupportedError

    model, tokenizer = spm_model
    model_file = str(tmp_path / "spiece.model")
    with open(model_file, "wb") as f:
        f.write(tokenizer.model_proto)
    export_dir = serving.export(model, str(tmp_path / "1"), vocab_file=model_file,
                                max_seq_length=cases.SEQ_LENGTH, signatures=("text",),
                                text_pair=True, labels=cases.CLASS_LABELS)
    with open(os.path.join(export_dir, "assets", "spiece.model"), "rb") as f:
        assert f.read() == tokenizer.model_proto
    with open(os.path.join(export_dir, "assets.extra", "bert_tf_export.json")) as f:
        assert json.load(f)["tokenizer"] == "SentencePiece (assets/spiece.model)"
    served = tf.saved_model.load(export_dir).signatures["serve_text"]
    got = served(text=tf.constant(TEXTS), text_pair=tf.constant(PAIRS))
    features = cases.pack_batch(tokenizer, [tokenizer.encode(t) for t in TEXTS],
                                [tokenizer.encode(t) for t in PAIRS])
    assert (features["input_word_ids"][:, 0] == tokenizer.cls_id).all()
    np.testing.assert_allclose(got["probabilities"].numpy(),
                               cases.softmax(model(features).numpy()), rtol=0, atol=1e-5)
    with pytest.raises(LiteRTUnsupportedError) as refused:
        export_litert(model, str(tmp_path / "lite"), vocab_file=model_file,
                      max_seq_length=cases.SEQ_LENGTH)
    assert str(refused.value) == (
        "--format=litert: serve_text with a SentencePieceTokenizerLayer cannot be expressed in "
        "LiteRT (its in-graph tokenizer's ops have no LiteRT kernels); export --signatures=ids "
        "for LiteRT, or --format=saved_model for serve_text.")
    assert not os.path.exists(tmp_path / "lite")


TAG_TEXTS = ["John lives in New York.", "", "  Ünï  café,done it's 3.14 北京\t🙂x ",
             "Paris, (France) — \u00a0 'tis 2024, 1990,", "nai\u0308ve cafe\u0301s",
             cases.LONG_TEXT]


def test_tagging_text_signature_labels_words_like_python(spm_model, tmp_path):
    """Words as with byte-level BPE (punctuation apart), each encoded as bert-tf-tag encodes a
    CoNLL word; labels at each word's first piece; offsets of whole words."""
    model, tokenizer = spm_model
    tagger = BertTokenClassifier(model.encoder, num_classes=len(cases.TAGS))
    export_dir = serving.export(tagger, str(tmp_path / "1"), tokenizer=tokenizer,
                                max_seq_length=cases.SEQ_LENGTH, signatures=("text",),
                                labels=cases.TAGS)
    got = tf.saved_model.load(export_dir).signatures["serve_text"](text=tf.constant(TAG_TEXTS))
    words = [_words(t, _pieces_pattern()) for t in TAG_TEXTS]
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
        assert [label.decode() for label in got["labels"][b, :n].numpy()] == [
            cases.TAGS[i] for i in p.argmax(-1)]
        np.testing.assert_allclose(got["scores"][b, :n].numpy(), p.max(-1), atol=1e-5)
        assert got["start_offsets"][b, :n].numpy().tolist() == [text_words[w][1] for w in kept]
        assert got["end_offsets"][b, :n].numpy().tolist() == [text_words[w][2] for w in kept]


def test_squad_text_signature_answers_whole_words_like_python(spm_model, tmp_path):
    model, tokenizer = spm_model
    labeler = BertSpanLabeler(model.encoder)
    export_dir = serving.export(labeler, str(tmp_path / "1"), tokenizer=tokenizer,
                                max_seq_length=cases.SEQ_LENGTH, signatures=("text",),
                                max_query_length=cases.MAX_QUERY_LENGTH,
                                max_answer_length=cases.MAX_ANSWER_LENGTH,
                                doc_stride=cases.DOC_STRIDE)
    contexts = cases.CONTEXTS[:6] + ["Ünï  CAFÉ,done\u202fit's\t3.14 北京 in 1990, then"]
    questions = cases.QUESTIONS[:6] + ["What?"]
    got = tf.saved_model.load(export_dir).signatures["serve_text"](
        question=tf.constant(questions), context=tf.constant(contexts))
    q_ids = [tokenizer.encode(q)[:cases.MAX_QUERY_LENGTH] for q in questions]
    words = [_words(c, "[^ \t\r\n\u202f]+") for c in contexts]
    encoded = [_word_ids(tokenizer, w) for w in words]
    best, _, _ = cases.best_spans(tokenizer, labeler, q_ids, [ids for ids, _ in encoded])
    answered = 0
    for b, found in enumerate(best):
        if found is None:
            assert got["answer_text"][b].numpy() == b"" and got["score"][b] == 0
            continue
        answered += 1
        score, _, i, j = found
        owner = encoded[b][1]
        answer_start = words[b][owner[i]][1]
        answer_end = words[b][owner[j]][2]
        assert (int(got["answer_start"][b]), int(got["answer_end"][b])) == (answer_start,
                                                                            answer_end)
        # The answer is cut from the context as written (case and accents kept).
        assert got["answer_text"][b].numpy().decode() == contexts[b][answer_start:answer_end]
        np.testing.assert_allclose(got["score"][b].numpy(), score, atol=1e-4)
    assert answered >= 5


def test_fill_mask_text_signature_finds_the_mask_token_like_python(spm_model, tmp_path):
    """[MASK] written in the text is the mask (split out before the text is lower-cased, as
    Hugging Face's AlbertTokenizer does); top_k_tokens read "\u2581the" as " the"."""
    _, tokenizer = spm_model
    model = BertPretrainer(BertEncoder(spm_model[0].encoder.config))
    export_dir = serving.export(model, str(tmp_path / "1"), tokenizer=tokenizer,
                                max_seq_length=cases.SEQ_LENGTH, signatures=("text",), top_k=3)
    texts = ["The cat [MASK] on the mat.", "[MASK] [MASK]  here", "No [mask] at all.",
             "Ünïcödé [MASK]🙂 北京"]
    got = tf.saved_model.load(export_dir).signatures["serve_text"](text=tf.constant(texts))
    ids = [tokenizer.encode(t) for t in texts]
    assert [row.count(tokenizer.mask_id) for row in ids] == [1, 2, 0, 1]
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
    assert texts_of[tokenizer.vocab["\u2581the"]] == " the"
    assert texts_of[tokenizer.mask_id] == "[MASK]"
    assert [[t.decode("utf-8") for t in row] for row in got["top_k_tokens"].numpy()[0]] == [
        [texts_of[i] if i >= 0 else "" for i in row] for row in top[0]]

