"""Tests for bert_tf.text.bpe: byte-level BPE from tokenizer.json, equal to `tokenizers`."""

import importlib.util
import json
import os
import unicodedata

import pytest

from bert_tf.text import bpe
from bert_tf.text.tokenization import WordpieceTokenizer

from bpe_fixtures import BPE_TOKENIZER_JSON, FIXTURES, bpe_reference, without_specials


@pytest.fixture(scope="module")
def tokenizer():
    return bpe.load_tokenizer_json(BPE_TOKENIZER_JSON)


@pytest.fixture(scope="module")
def spec_dict():
    with open(BPE_TOKENIZER_JSON, encoding="utf-8") as f:
        return json.load(f)


def test_ids_equal_tokenizers_on_every_reference_text(tokenizer):
    reference = bpe_reference()
    assert len(reference["texts"]) > 3000
    mismatches = [text for text, ids in zip(reference["texts"], reference["ids"])
                  if tokenizer.with_special_tokens(tokenizer.encode(text)) != ids]
    assert mismatches == []


def test_pair_ids_equal_tokenizers(tokenizer):
    reference = bpe_reference()
    got = [tokenizer.with_special_tokens(tokenizer.encode(a), tokenizer.encode(b))
           for a, b in reference["pairs"]]
    assert got == reference["pair_ids"]


def test_special_ids_are_read_from_the_file(tokenizer, spec_dict):
    ids = {t["content"]: t["id"] for t in spec_dict["added_tokens"]}
    assert (tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id, tokenizer.mask_id) == (
        ids["[CLS]"], ids["[SEP]"], ids["[PAD]"], ids["[MASK]"])
    assert tokenizer.vocab_size == max(ids.values()) + 1


def test_added_tokens_whitespace_runs_and_mask_lstrip(tokenizer):
    ids = tokenizer.encode("a    [MASK] b")
    # [MASK] takes the spaces on its left (lstrip); " b" is one word.
    assert tokenizer.convert_ids_to_tokens(ids) == ["a", "[MASK]", "Ġb"]
    # A run of spaces inside text is one added token, and the next word has no "Ġ".
    tokens = tokenizer.tokenize("x   y")
    assert tokens == ["x", "   ", "y"]


def test_decode_inverts_encode_up_to_nfc(tokenizer):
    texts = [t for t in bpe_reference()["texts"][:800] if "[MASK]" not in t]
    for text in texts:
        assert tokenizer.decode(tokenizer.encode(text)) == unicodedata.normalize("NFC", text)
    ids = tokenizer.with_special_tokens(tokenizer.encode("héllo"))
    assert tokenizer.decode(ids, skip_special_tokens=True) == "héllo"


def test_merges_as_strings_give_the_same_ids(tokenizer, spec_dict):
    spec_dict = json.loads(json.dumps(spec_dict))
    spec_dict["model"]["merges"] = [" ".join(m) for m in spec_dict["model"]["merges"]]
    as_strings = bpe.BpeTokenizer(spec_dict)
    for text in bpe_reference()["texts"][:300]:
        assert as_strings.encode(text) == tokenizer.encode(text)


def test_other_model_type_is_a_clear_error(tmp_path, spec_dict):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}))
    with pytest.raises(ValueError, match=r"tokenizer file '.*tokenizer.json': model type "
                                         r"'Unigram' is not supported; expected byte-level "
                                         r"BPE or WordPiece \(for a SentencePiece "
                                         r"tokenizer pass its \.model file, e\.g\. "
                                         r"spiece\.model\)\.$"):
        bpe.load_tokenizer_json(str(path))
    spec_dict = dict(spec_dict, pre_tokenizer={"type": "Metaspace"})
    path.write_text(json.dumps(spec_dict))
    with pytest.raises(ValueError, match="pre_tokenizer type 'Metaspace' is not supported"):
        bpe.load_tokenizer_json(str(path))
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a JSON tokenizer file"):
        bpe.load_tokenizer_json(str(path))


def test_merge_of_unknown_token_is_a_clear_error(spec_dict):
    spec_dict = json.loads(json.dumps(spec_dict))
    spec_dict["model"]["merges"].append(["Ġ", "zzzz"])
    with pytest.raises(ValueError, match="uses 'zzzz', which is not in the vocabulary"):
        bpe.BpeTokenizer(spec_dict)


def test_wordpiece_tokenizer_json_maps_to_wordpiece(tmp_path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", ",",
              "hello"]
    for lowercase in (True, False):
        data = {"normalizer": {"type": "BertNormalizer", "clean_text": True,
                               "handle_chinese_chars": True, "strip_accents": None,
                               "lowercase": lowercase},
                "pre_tokenizer": {"type": "BertPreTokenizer"},
                "model": {"type": "WordPiece", "unk_token": "[UNK]",
                          "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                          "vocab": {t: i for i, t in enumerate(tokens)}}}
        path = tmp_path / "tokenizer.json"
        path.write_text(json.dumps(data))
        tok = bpe.load_tokenizer_json(str(path))
        assert isinstance(tok, WordpieceTokenizer)
        expected = WordpieceTokenizer(tokens, do_lower_case=lowercase,
                                      max_input_chars_per_word=100)
        assert tok.encode("Hello, unaffable!") == expected.encode("Hello, unaffable!")
        assert tok.do_lower_case == lowercase


def _wordpiece_vocabulary():
    """The vocabulary transformers' BertTokenizer wrote the WordPiece fixtures from
    (tools/make_wordpiece_reference.py, which imports transformers only when it runs)."""
    path = os.path.join(os.path.dirname(FIXTURES), "..", "..", "tools",
                        "make_wordpiece_reference.py")
    spec = importlib.util.spec_from_file_location("make_wordpiece_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.VOCABULARY


@pytest.mark.parametrize("casing, lowercase", [("uncased", True), ("cased", False)])
def test_a_wordpiece_tokenizer_json_is_written_as_transformers_writes_it(casing, lowercase,
                                                                        tmp_path):
    # max_input_chars_per_word 100 is transformers' default; bert_tf writes the tokenizer's own
    # (200, the original BERT's, by default), so the file tokenizes as bert_tf does.
    tokenizer = WordpieceTokenizer(_wordpiece_vocabulary(), do_lower_case=lowercase,
                                   max_input_chars_per_word=100)
    written = bpe.wordpiece_tokenizer_json(tokenizer)
    with open(os.path.join(FIXTURES, f"wordpiece_{casing}_tokenizer.json"),
              encoding="utf-8") as f:
        assert written == json.load(f)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(written, ensure_ascii=False), encoding="utf-8")
    read = bpe.load_tokenizer_json(str(path))
    text = "The cats sat on Paris' mat, unable to go! Café 東京"
    assert read.do_lower_case == lowercase
    assert read.encode(text) == tokenizer.encode(text)
    assert (read.max_input_chars_per_word, read.fingerprint()) == (
        100, tokenizer.fingerprint())


def test_live_tokenizers_when_installed(tokenizer):
    tokenizers = pytest.importorskip(
        "tokenizers", reason="Hugging Face tokenizers is not installed (the committed "
                             "reference ids cover the same check)")
    live = tokenizers.Tokenizer.from_file(BPE_TOKENIZER_JSON)
    for text in bpe_reference()["texts"][::7]:
        assert tokenizer.encode(text) == live.encode(text, add_special_tokens=False).ids


def test_reference_ids_hold_the_specials(tokenizer):
    reference = bpe_reference()
    ids = reference["ids"][5]
    assert ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id
    assert tokenizer.encode(reference["texts"][5]) == without_specials(ids)


def test_single_word_and_strip_flags_like_tokenizers(spec_dict):
    spec_dict = json.loads(json.dumps(spec_dict))
    spec_dict["added_tokens"] += [
        {"id": 1066, "content": "def", "single_word": True, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False},
        {"id": 3331, "content": "<x>", "single_word": False, "lstrip": True, "rstrip": True,
         "normalized": False, "special": False}]
    tokenizer = bpe.BpeTokenizer(spec_dict)
    texts = ["def f(): undefined def", "a <x>  b\t<x>\nc", "xdef_ def_ déf def2 (def)"]
    # The ids tokenizers 0.23.3 gives with these two tokens added (tokenizer.add_tokens).
    assert [tokenizer.encode(t) for t in texts] == [
        [1066, 286, 2468, 3146, 220, 1066], [64, 3331, 65, 3331, 66],
        [87, 1066, 62, 378, 62, 449, 127, 102, 69, 378, 17, 343, 1066, 8]]
