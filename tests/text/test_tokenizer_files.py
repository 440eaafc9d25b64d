"""Tests for bert_tf.text.tokenizer_files: vocab.txt or tokenizer.json, packed the same way."""

import json
import shutil

import pytest

from bert_tf.data.tasks.classifier_data import InputExample, classifier_features
from bert_tf.text import (BpeTokenizer, WordpieceTokenizer, casing_to_load, load_tokenizer,
                          tokenizer_layer)
from bert_tf.text.input_packing import pack_inputs

from bpe_fixtures import BPE_TOKENIZER_JSON, bpe_reference

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture
def bpe_dir(tmp_path):
    shutil.copy(BPE_TOKENIZER_JSON, tmp_path / "tokenizer.json")
    return tmp_path


def test_directory_file_and_vocab_txt(bpe_dir, tmp_path_factory, write_vocab_file):
    from_dir = load_tokenizer(str(bpe_dir))
    from_file = load_tokenizer(str(bpe_dir / "tokenizer.json"))
    assert isinstance(from_dir, BpeTokenizer) and isinstance(from_file, BpeTokenizer)
    assert from_dir.encode("Hello  world") == from_file.encode("Hello  world")
    vocab = write_vocab_file(SPECIALS + ["hello", "world"])
    wordpiece = load_tokenizer(vocab, do_lower_case=True)
    assert isinstance(wordpiece, WordpieceTokenizer)
    assert wordpiece.encode("Hello world") == [5, 6]
    words_dir = tmp_path_factory.mktemp("wordpiece")
    shutil.copy(vocab, words_dir / "vocab.txt")
    assert load_tokenizer(str(words_dir)).encode("Hello world") == [5, 6]


def test_missing_files_and_contradicting_case_are_clear_errors(bpe_dir, tmp_path_factory):
    empty = tmp_path_factory.mktemp("empty")
    with pytest.raises(FileNotFoundError, match=r"tokenizer directory '.*' holds none of "
                                                r"vocab.txt, tokenizer.json or spiece.model\.$"):
        load_tokenizer(str(empty))
    with pytest.raises(FileNotFoundError, match=r"tokenizer file '.*nope.json' does not exist"):
        load_tokenizer(str(empty / "nope.json"))
    with pytest.raises(ValueError, match=r"do_lower_case=True contradicts tokenizer file "
                                         r"'.*tokenizer.json', which keeps case"):
        load_tokenizer(str(bpe_dir), do_lower_case=True)
    assert isinstance(load_tokenizer(str(bpe_dir), do_lower_case=False), BpeTokenizer)


def test_casing_to_load_asks_a_vocab_txt_only(bpe_dir):
    json_file, vocab_txt = str(bpe_dir / "tokenizer.json"), str(bpe_dir / "vocab.txt")
    asked = []

    def recorded():
        asked.append(True)
        return False

    # A tokenizer.json records its casing: nothing asked takes the file's, nothing looked up.
    assert casing_to_load(json_file, None, recorded) is None and asked == []
    assert casing_to_load(json_file, 1) is True
    # A vocab.txt: the casing asked for, else the one looked up (or given), else the default.
    assert casing_to_load(vocab_txt, 0, recorded) is False and asked == []
    assert casing_to_load(vocab_txt, None, recorded) is False and asked == [True]
    assert casing_to_load(vocab_txt, None, True) is True
    assert casing_to_load(vocab_txt) is None


def test_a_files_size_casing_and_name_whatever_its_kind(bpe_dir, write_vocab_file):
    from bert_tf.text import tokenizer_files

    json_file = str(bpe_dir / "tokenizer.json")
    vocab = write_vocab_file(SPECIALS + ["hello", "world"])
    bpe = load_tokenizer(json_file)
    assert tokenizer_files.vocab_size(json_file) == bpe.vocab_size > 7
    assert tokenizer_files.vocab_size(vocab) == 7
    # A tokenizer.json records its casing (checked against one asked for); a vocab.txt none.
    assert tokenizer_files.records_casing(json_file) and not tokenizer_files.records_casing(vocab)
    assert tokenizer_files.file_casing(json_file) is bpe.do_lower_case is False
    assert tokenizer_files.file_casing(vocab, True) is None
    with pytest.raises(tokenizer_files.CasingMismatch) as error:
        tokenizer_files.file_casing(json_file, True, "--vocab_file=t.json")
    assert str(error.value) == (f"--vocab_file=t.json: do_lower_case=True contradicts tokenizer "
                                f"file '{json_file}', which keeps case; leave do_lower_case "
                                "unset to use the file's.")
    assert error.value.file_casing is False
    missing = str(bpe_dir / "missing.txt")
    with pytest.raises(ValueError) as error:
        tokenizer_files.vocab_size(missing, f"--vocab_file={missing}")
    assert str(error.value) == f"--vocab_file={missing}: no such file"
    with pytest.raises(ValueError, match=r"^--v=x.json: tokenizer file '.*x.json' does not "):
        tokenizer_files.vocab_size(str(bpe_dir / "x.json"), "--v=x.json")
    # What a vocabulary learner writes is told apart by its name.
    assert tokenizer_files.output_name_problem("out/tokenizer.json", "bpe") is None
    assert tokenizer_files.output_name_problem("out/vocab.txt", "wordpiece") is None
    assert tokenizer_files.output_name_problem("out/spiece.model", "sentencepiece") is None
    assert tokenizer_files.output_name_problem("out/vocab.txt", "bpe") == (
        "writes a tokenizer.json; expected a .json name (e.g. tokenizer.json)")
    assert tokenizer_files.output_name_problem("out/t.json", "wordpiece") == (
        "writes a vocab.txt; expected a name ending neither in .json nor in .model")
    assert tokenizer_files.output_name_problem("out/t.model", "bpe") == (
        "writes a tokenizer.json; expected a .json name (e.g. tokenizer.json)")
    assert tokenizer_files.output_name_problem("out/vocab.txt", "sentencepiece") == (
        "writes a SentencePiece model; expected a .model name (e.g. spiece.model)")


def test_roles_from_tokenizer_config(bpe_dir):
    (bpe_dir / "tokenizer_config.json").write_text(json.dumps(
        {"pad_token": "<|padding|>", "mask_token": {"content": "[MASK]"}}))
    tokenizer = load_tokenizer(str(bpe_dir))
    assert tokenizer.pad_id == tokenizer.vocab["<|padding|>"]
    assert tokenizer.mask_id == tokenizer.vocab["[MASK]"]
    assert tokenizer.pad_id != load_tokenizer(BPE_TOKENIZER_JSON).pad_id  # [PAD] by default.


def test_classifier_features_pack_bpe_ids_like_tokenizers(bpe_dir):
    tokenizer = load_tokenizer(str(bpe_dir))
    reference = bpe_reference()
    examples = [InputExample(guid=str(i), text_a=a, text_b=b, label="x")
                for i, (a, b) in enumerate(reference["pairs"][:50])]
    features = list(classifier_features(examples, tokenizer, 512, ["x"], {}))
    for feature, ids in zip(features, reference["pair_ids"]):
        real = sum(feature["input_mask"])
        assert feature["input_word_ids"][:real] == ids
        assert set(feature["input_word_ids"][real:]) <= {tokenizer.pad_id}
        first_sep = ids.index(tokenizer.sep_id)
        assert feature["input_type_ids"][:real] == [0] * (first_sep + 1) + [1] * (
            real - first_sep - 1)
    # Truncation keeps [CLS] A [SEP] B [SEP] at the length asked for.
    short = pack_inputs(tokenizer.encode(reference["texts"][20]), [7, 8, 9], max_seq_length=8,
                        cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                        pad_id=tokenizer.pad_id)
    words = short["input_word_ids"]
    assert words[0] == tokenizer.cls_id and words.count(tokenizer.sep_id) == 2
    assert words[-1] == tokenizer.sep_id and len(words) == 8


def test_cache_key_tells_tokenizers_apart(bpe_dir):
    tokenizer = load_tokenizer(str(bpe_dir))
    wordpiece = WordpieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])
    cased = WordpieceTokenizer(wordpiece.inv_vocab, do_lower_case=False)
    assert wordpiece.fingerprint() != cased.fingerprint()
    assert wordpiece.digest() == cased.digest()  # the vocabulary; casing is checked apart
    assert tokenizer.digest() == tokenizer.fingerprint()
    data = json.loads((bpe_dir / "tokenizer.json").read_text(encoding="utf-8"))
    data["model"]["merges"] = data["model"]["merges"][:-1]
    assert BpeTokenizer(data).fingerprint() != tokenizer.fingerprint()


def test_tokenizer_layer_matches_the_python_tokenizer(bpe_dir):
    import tensorflow as tf

    from bert_tf.text import BpeTokenizerLayer

    tokenizer = load_tokenizer(str(bpe_dir))
    layer = tokenizer_layer(tokenizer)
    assert isinstance(layer, BpeTokenizerLayer) and tokenizer_layer(layer) is layer
    assert layer(tf.constant(["It's  [MASK] 北京"])).to_list() == [
        tokenizer.encode("It's  [MASK] 北京")]
    assert (layer.kind, layer.do_lower_case) == (tokenizer.kind, tokenizer.do_lower_case)
    with pytest.raises(TypeError, match="expected a WordpieceTokenizer, BpeTokenizer or "
                                        "SentencePieceTokenizer"):
        tokenizer_layer(object())
