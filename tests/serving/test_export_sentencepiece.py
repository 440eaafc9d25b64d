"""Exports whose text signatures tokenize with a SentencePiece model (ALBERT's vocabulary)."""

import dataclasses
import json
import os

import numpy as np
import pytest

from bert_tf import serving
from bert_tf.modeling import BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler
from bert_tf.modeling import BertTokenClassifier
from bert_tf.text import load_tokenizer, tokenizer_layer

import serving_cases as cases
from sentencepiece_fixtures import sentencepiece_model_file
import whole_word_signatures as signatures

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
    checks such an export's ops)."""
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
    signatures.check_classifier(model, tokenizer, export_dir, TEXTS, PAIRS)


def test_litert_text_signature_packs_sentencepiece_ids_like_python(spm_model, tmp_path):
    """LiteRT's serve_text: TensorFlow Text's fast SentencePiece kernel on the prepared model
    (bert_tf.text.sentencepiece_prepared) and builtin ops give Python's ids, special pieces
    written in the text included, so the Keras model's answers."""
    from bert_tf.serving import export_litert, quantization
    from bert_tf.serving.litert_model import LiteRTModel

    model, tokenizer = spm_model
    result = export_litert(model, str(tmp_path / "lite"), tokenizer=tokenizer,
                           max_seq_length=cases.SEQ_LENGTH, text_pair=True,
                           labels=cases.CLASS_LABELS)
    assert result.census.flex == frozenset()
    assert result.census.custom == {"TFText>FastSentencepieceTokenize"}
    texts = TEXTS + ["``Quoted'' ﬁne ＦＵＬＬ width, 1990, 2,000,000 and (1,000)", "\u3000 ",
                     "x [SEP]y[CLS] <unk>", "[mask] x"]
    pairs = PAIRS + ["3,", "", "Ünï [MASK]", "[MASK] x"]
    lite = LiteRTModel(result.path)
    got = lite.predict(texts, pairs)
    features = cases.pack_batch(tokenizer, [tokenizer.encode(t) for t in texts],
                                [tokenizer.encode(t) for t in pairs])
    np.testing.assert_allclose(got["probabilities"], cases.softmax(model(features).numpy()),
                               rtol=0, atol=1e-5)
    assert lite.info["do_lower_case"] is True
    assert tokenizer.encode("[MASK] x") != tokenizer.encode("[mask] x")
    empty = lite.predict(["", "\u3000 "])["probabilities"]
    features = cases.pack_batch(tokenizer, [[], []])
    np.testing.assert_allclose(empty, cases.softmax(model(features).numpy()), rtol=0, atol=1e-5)
    # full_int8's calibration rows, tokenized in Python with the layer's model.
    layer = tokenizer_layer(tokenizer)
    assert [quantization.tokenizer_encode(layer, t) for t in texts] == [
        tokenizer.encode(t) for t in texts]


def test_litert_refuses_a_model_its_kernel_does_not_segment(tmp_path, tmp_path_factory):
    """A SentencePiece BPE model: the fast op (the one with a LiteRT kernel) does not segment
    as the library does, so serve_text is refused by name before any work."""
    from bert_tf.serving import export_litert
    from bert_tf.serving.litert import LiteRTUnsupportedError

    tokenizer = load_tokenizer(sentencepiece_model_file(tmp_path_factory, model_type="bpe"))
    config = dataclasses.replace(cases.tiny_config(), vocab_size=tokenizer.vocab_size)
    model = BertClassifier(BertEncoder(config), num_classes=3)
    with pytest.raises(LiteRTUnsupportedError) as refused:
        export_litert(model, str(tmp_path / "lite"), tokenizer=tokenizer,
                      max_seq_length=cases.SEQ_LENGTH)
    assert str(refused.value) == (
        "--format=litert: serve_text with a SentencePieceTokenizerLayer cannot be expressed in "
        "LiteRT (LiteRT's SentencePiece kernel takes only unigram models without byte pieces "
        "whose pieces start words with \u2581); export --signatures=ids for LiteRT, or "
        "--format=saved_model for serve_text.")
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
    words = signatures.check_tagging(tagger, tokenizer, export_dir, TAG_TEXTS, truncated=5)
    assert [w for w, _, _ in words[3]][-4:] == ["2024", ",", "1990", ","]


def test_squad_text_signature_answers_whole_words_like_python(spm_model, tmp_path):
    """Answers are cut from the context as written (case and accents kept), as whole words."""
    model, tokenizer = spm_model
    labeler = BertSpanLabeler(model.encoder)
    export_dir = serving.export(labeler, str(tmp_path / "1"), tokenizer=tokenizer,
                                max_seq_length=cases.SEQ_LENGTH, signatures=("text",),
                                max_query_length=cases.MAX_QUERY_LENGTH,
                                max_answer_length=cases.MAX_ANSWER_LENGTH,
                                doc_stride=cases.DOC_STRIDE)
    contexts = cases.CONTEXTS[:6] + ["Ünï  CAFÉ,done\u202fit's\t3.14 北京 in 1990, then"]
    questions = cases.QUESTIONS[:6] + ["What?"]
    answered, _ = signatures.check_squad(labeler, tokenizer, export_dir, questions, contexts)
    assert answered >= 5


def test_fill_mask_text_signature_finds_the_mask_token_like_python(spm_model, tmp_path):
    """[MASK] written in the text is the mask (split out before the text is lower-cased, as
    transformers' AlbertTokenizer does); top_k_tokens read "\u2581the" as " the"."""
    _, tokenizer = spm_model
    model = BertPretrainer(BertEncoder(spm_model[0].encoder.config))
    export_dir = serving.export(model, str(tmp_path / "1"), tokenizer=tokenizer,
                                max_seq_length=cases.SEQ_LENGTH, signatures=("text",), top_k=3)
    texts = ["The cat [MASK] on the mat.", "[MASK] [MASK]  here", "No [mask] at all.",
             "Ünïcödé [MASK]🙂 北京"]
    layer = tokenizer_layer(tokenizer)
    ids = signatures.check_fill_mask(model, tokenizer, layer, export_dir, texts)
    assert [row.count(tokenizer.mask_id) for row in ids] == [1, 2, 0, 1]
    texts_of = layer.token_texts()
    assert texts_of[tokenizer.vocab["\u2581the"]] == " the"
    assert texts_of[tokenizer.mask_id] == "[MASK]"
