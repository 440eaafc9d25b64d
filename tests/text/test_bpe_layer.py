"""Tests for bert_tf.text.bpe_layer.BpeTokenizerLayer: `tokenizers` parity in-graph, export."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text import bpe
from bert_tf.text.bpe_layer import BpeTokenizerLayer
from bert_tf.text.input_packing import BertPackInputs, pack_inputs

from bpe_fixtures import BPE_TOKENIZER_JSON, bpe_reference, without_specials
from text_samples import ids_in_a_fresh_process, random_texts, save_ids_module


@pytest.fixture(scope="module")
def layer():
    return BpeTokenizerLayer(BPE_TOKENIZER_JSON)


@pytest.fixture(scope="module")
def tokenize(layer):
    return tf.function(layer.call, input_signature=[tf.TensorSpec([None], tf.string)])


def test_ids_equal_tokenizers_on_every_reference_text(tokenize):
    reference = bpe_reference()
    texts = reference["texts"]
    got = []
    for start in range(0, len(texts), 1024):
        got += tokenize(tf.constant(texts[start:start + 1024])).to_list()
    expected = [without_specials(ids) for ids in reference["ids"]]
    mismatches = [t for t, g, e in zip(texts, got, expected) if g != e]
    assert len(got) == len(texts) > 3000
    assert mismatches == []


def test_random_strings_equal_the_python_tokenizer(tokenize):
    # Controls, unassigned code points, marks, long words: the Python tokenizer equals
    # tokenizers (tests/text/test_bpe.py) except for code points newer than Python's Unicode.
    texts = random_texts(seed=11, count=1000)
    tokenizer = bpe.load_tokenizer_json(BPE_TOKENIZER_JSON)
    got = tokenize(tf.constant(texts)).to_list()
    assert [t for t, g in zip(texts, got) if g != tokenizer.encode(t)] == []


def test_packed_pairs_equal_tokenizers(layer, tokenize):
    reference = bpe_reference()
    pack = BertPackInputs(seq_length=512, cls_id=layer.cls_id, sep_id=layer.sep_id,
                          pad_id=layer.pad_id)
    first, second = zip(*reference["pairs"])
    out = pack([tokenize(tf.constant(first)), tokenize(tf.constant(second))])
    for row, mask, ids in zip(out["input_word_ids"].numpy(), out["input_mask"].numpy(),
                              reference["pair_ids"]):
        assert len(ids) <= 512
        assert row[mask == 1].tolist() == ids
        assert (row[mask == 0] == layer.pad_id).all()


def test_special_ids_pack_like_python(layer, tokenize):
    tokenizer = bpe.load_tokenizer_json(BPE_TOKENIZER_JSON)
    assert (layer.cls_id, layer.sep_id, layer.pad_id, layer.mask_id) == (
        tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id, tokenizer.mask_id)
    text = "The [MASK] sat on the mat."
    pack = BertPackInputs(seq_length=16, cls_id=layer.cls_id, sep_id=layer.sep_id,
                          pad_id=layer.pad_id)
    in_graph = pack(tokenize(tf.constant([text])))
    in_python = pack_inputs(tokenizer.encode(text), max_seq_length=16, cls_id=tokenizer.cls_id,
                            sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id)
    for name, values in in_python.items():
        assert in_graph[name].numpy()[0].tolist() == values
    assert tokenizer.mask_id in in_python["input_word_ids"]


def test_invalid_utf8_is_replaced_like_python(tokenize):
    tokenizer = bpe.load_tokenizer_json(BPE_TOKENIZER_JSON)
    raw = b"ab\xffcd \xfe x\x00y"
    assert tokenize(tf.constant([raw])).to_list()[0] == tokenizer.encode(raw)


def test_scalars_in_tf_data_map(layer):
    tokenizer = bpe.load_tokenizer_json(BPE_TOKENIZER_JSON)
    texts = ["def f(x):", "", "  return x"]
    ds = tf.data.Dataset.from_tensor_slices(texts).map(layer)
    assert [r.numpy().tolist() for r in ds] == [tokenizer.encode(t) for t in texts]


def test_get_config_rebuilds_the_same_tables(layer):
    clone = BpeTokenizerLayer.from_config(json.loads(json.dumps(layer.get_config())))
    for name in ("_merge_keys", "_merge_ranks", "_merge_ids", "_byte_ids"):
        np.testing.assert_array_equal(getattr(clone, name), getattr(layer, name))
    for key in ("hashes", "words", "ids"):
        np.testing.assert_array_equal(clone._whole_words[key], layer._whole_words[key])
    assert [s["pattern"] for s in clone._stages] == [s["pattern"] for s in layer._stages]
    assert keras.saving.get_registered_object("bert_tf>BpeTokenizerLayer") is BpeTokenizerLayer


def test_unsupported_in_graph_options_are_clear_errors():
    with open(BPE_TOKENIZER_JSON, encoding="utf-8") as f:
        data = json.load(f)
    data["added_tokens"][-1]["single_word"] = True
    with pytest.raises(ValueError, match="added token '.*' is single_word, which the in-graph "
                                         "tokenizer does not support"):
        BpeTokenizerLayer(data)
    bpe.BpeTokenizer(data)  # The Python tokenizer takes it.


def test_lowercase_normalizer_in_graph_equals_python_and_tokenizers():
    """A Lowercase step (bert-tf-build-vocab --tokenizer=bpe --do_lower_case): each character's
    own lower-case mapping, so a word-final capital sigma becomes "σ", not "ς"."""
    with open(BPE_TOKENIZER_JSON, encoding="utf-8") as f:
        data = json.load(f)
    data["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"},
                                                             {"type": "Lowercase"}]}
    python = bpe.BpeTokenizer(data)
    texts = (bpe_reference()["texts"][::3] + random_texts(seed=5, count=300)
             + ["ΟΔΟΣ ΟΔΟΣ.", "İSTANBUL Σ", "ǅemal ẞ ΣΑΣ", "CAFÉ Straße"])
    got = BpeTokenizerLayer(data)(tf.constant(texts)).to_list()
    assert [t for t, g in zip(texts, got) if g != python.encode(t)] == []
    assert python.encode("ΟΔΟΣ") == python.encode("οδοσ") != python.encode("οδος")
    tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is not "
                                                          "installed")
    live = tokenizers.Tokenizer.from_str(json.dumps(data))
    assert [t for t in texts if python.encode(t) != live.encode(
        t, add_special_tokens=False).ids] == []


def test_saved_model_round_trip_in_a_fresh_process(layer, tmp_path):
    export_dir = save_ids_module(layer, str(tmp_path / "bpe_tokenizer"))
    reference = bpe_reference()
    picks = [6, 8, 9, 10, 1600, 3100, 3400]  # Whitespace, added tokens, CJK, fuzz.
    texts = [reference["texts"][i] for i in picks]
    expected = [without_specials(reference["ids"][i]) for i in picks]
    assert ids_in_a_fresh_process(export_dir, texts, tmp_path) == expected
