"""Tests for bert_tf.text.tokenization: each rule of the original tokenizer, vocab files, casing."""

import os
import unicodedata

import pytest

from bert_tf.text import tokenization
from bert_tf.text.tokenization import (WordpieceTokenizer, basic_tokenize, load_vocab,
                                       validate_case_matches_checkpoint)

from text_samples import random_texts, vocab_for_texts

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


# -- A slow, literal reading of the original algorithm (word by word, char by char): the oracle.


def _oracle_basic(text, do_lower_case):
    kept = []
    for ch in text:
        cp = ord(ch)
        cat = unicodedata.category(ch)
        if cp == 0 or cp == 0xFFFD or (ch not in "\t\n\r" and cat in ("Cc", "Cf")):
            continue
        if ch in " \t\n\r" or cat == "Zs":
            kept.append(" ")
        elif tokenization.is_cjk_char(cp):
            kept.append(" " + ch + " ")
        else:
            kept.append(ch)
    out = []
    for word in "".join(kept).strip().split():
        if do_lower_case:
            word = unicodedata.normalize("NFD", word.lower())
            word = "".join(c for c in word if unicodedata.category(c) != "Mn")
        current = []
        for ch in word:
            cp = ord(ch)
            ascii_punct = 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
            if ascii_punct or unicodedata.category(ch).startswith("P"):
                if current:
                    out.append("".join(current))
                    current = []
                out.append(ch)
            else:
                current.append(ch)
        if current:
            out.append("".join(current))
    return " ".join(out).split()


def _oracle_wordpiece(words, vocab, max_chars=200):
    out = []
    for word in words:
        if len(word) > max_chars:
            out.append("[UNK]")
            continue
        pieces, start = [], 0
        while start < len(word):
            end, piece = len(word), None
            while start < end:
                sub = ("##" if start > 0 else "") + word[start:end]
                if sub in vocab:
                    piece = sub
                    break
                end -= 1
            if piece is None:
                pieces = ["[UNK]"]
                break
            pieces.append(piece)
            start = end
        out.extend(pieces)
    return out


# -- Basic tokenization rules.


def test_cleanup_drops_nul_replacement_char_and_control_chars():
    # NUL, U+FFFD, Cc (\x01, \x7f) and Cf (zero-width space, BOM, soft hyphen) vanish.
    assert basic_tokenize("a\x00b\ufffdc\x01d\x7fe\u200bf\ufeffg\u00adh") == ["abcdefgh"]


def test_cleanup_maps_whitespace_to_space_and_keeps_tab_newline_cr():
    assert basic_tokenize("a\tb\nc\rd\u00a0e\u3000f\u2003g") == list("abcdefg")


def test_line_and_paragraph_separators_split_words_like_str_split():
    # U+2028/U+2029 are neither control nor Zs, but the original's str.split() splits on them.
    assert basic_tokenize("a\u2028b\u2029c") == ["a", "b", "c"]


def test_cjk_ideographs_become_one_token_each():
    assert basic_tokenize("ab北京cd") == ["ab", "北", "京", "cd"]
    # Extension B and compatibility ideographs are in the original's ranges.
    assert basic_tokenize("x\U00020000\uf900y", do_lower_case=False) == [
        "x", "\U00020000", "\uf900", "y"]
    # Kana and Hangul are not CJK ideographs here: words stay whole.
    assert basic_tokenize("こんにちは 한국어", do_lower_case=False) == ["こんにちは", "한국어"]
    # Uncased: NFD turns Hangul syllables into their conjoining jamo, as in the original.
    assert basic_tokenize("한") == ["\u1112\u1161\u11ab"]


def test_lower_case_strips_accents_after_nfd():
    assert basic_tokenize("Héllo WÖRLD Ñandú") == ["hello", "world", "nandu"]
    # lower() then NFD: dotted capital I becomes plain "i"; the Kelvin sign becomes "k".
    assert basic_tokenize("İstanbul \u212a") == ["istanbul", "k"]
    # The compatibility ideograph U+F900 decomposes to U+8C48 under NFD.
    assert basic_tokenize("\uf900") == ["\u8c48"]


def test_cased_keeps_case_and_accents():
    assert basic_tokenize("Héllo WÖRLD", do_lower_case=False) == ["Héllo", "WÖRLD"]
    assert basic_tokenize("e\u0301", do_lower_case=False) == ["e\u0301"]


def test_final_sigma_follows_python_lower():
    assert basic_tokenize("ΟΔΟΣ ΣΑ ΑΣ.Β ΑΣ.") == ["οδος", "σα", "ασ", ".", "β", "ας", "."]


def test_ascii_symbols_count_as_punctuation():
    assert basic_tokenize("a$b^c`d~e+f|g") == list("a$b^c`d~e+f|g")


def test_unicode_punctuation_splits_but_other_symbols_do_not():
    assert basic_tokenize("¿Qué?«sí»—ok") == ["¿", "que", "?", "«", "si", "»", "—", "ok"]
    # Currency signs and other symbols (category S*) outside ASCII stay inside words.
    assert basic_tokenize("5€ ©2024 a→b") == ["5€", "©2024", "a→b"]


def test_bytes_input_drops_invalid_utf8():
    assert basic_tokenize(b"ab\xffcd \xc3\xa9") == ["abcd", "e"]


def test_rejects_non_string_input():
    with pytest.raises(TypeError, match="Expected text as str or bytes, got int"):
        basic_tokenize(5)


# -- WordPiece rules.


@pytest.fixture
def piece_tokenizer():
    vocab = SPECIALS + ["un", "una", "##ffable", "##aff", "##able", "a", "##a", "hello", ",",
                        "!", "x"]
    return WordpieceTokenizer(vocab)


def test_greedy_longest_match_first(piece_tokenizer):
    # "una" is the longest matching prefix, so "un ##aff ##able" is never considered.
    assert piece_tokenizer.tokenize("unaffable") == ["una", "##ffable"]
    assert piece_tokenizer.tokenize("unable") == ["[UNK]"]  # "##ble" is not in the vocab


def test_word_with_unmatched_piece_becomes_single_unk(piece_tokenizer):
    assert piece_tokenizer.tokenize("Hello, unaffablex!") == ["hello", ",", "[UNK]", "!"]


def test_words_longer_than_limit_become_unk(piece_tokenizer):
    # The original FullTokenizer's limit is 200 characters.
    assert piece_tokenizer.max_input_chars_per_word == 200
    assert piece_tokenizer.tokenize("a" * 199) == ["a"] + ["##a"] * 198
    assert piece_tokenizer.tokenize("a" * 200) == ["a"] + ["##a"] * 199
    assert piece_tokenizer.tokenize("a" * 201 + " x") == ["[UNK]", "x"]
    short = WordpieceTokenizer(piece_tokenizer.inv_vocab, max_input_chars_per_word=3)
    assert short.tokenize("aaa aaaa") == ["a", "##a", "##a", "[UNK]"]


@pytest.mark.parametrize("char", ["é", "ж", "\U0001d49c"])
def test_word_limit_counts_characters_not_bytes(char):
    # 200 characters of up to 4 bytes each (800 bytes) are still split into pieces.
    tok = WordpieceTokenizer(SPECIALS + [char, "##" + char, "x"], do_lower_case=False)
    for n in (199, 200):
        assert tok.tokenize(char * n + " x") == [char] + ["##" + char] * (n - 1) + ["x"]
    assert tok.tokenize(char * 201 + " x") == ["[UNK]", "x"]
    # Uncased, "é" loses its accent: 200 "é" become 200 "e" pieces.
    uncased = WordpieceTokenizer(SPECIALS + ["e", "##e", "ж", "##ж", "\U0001d49c",
                                             "##\U0001d49c"])
    base = "e" if char == "é" else char
    assert uncased.tokenize(char.upper() * 200) == [base] + ["##" + base] * 199
    assert uncased.tokenize(char.upper() * 201) == ["[UNK]"]


def test_vocabulary_pieces_of_any_length_match():
    # Longest match first over pieces up to the word limit, as the original.
    tok = WordpieceTokenizer(SPECIALS + ["ж", "##ж", "ж" * 150, "##" + "ж" * 130, "ж" * 201])
    assert tok.tokenize("ж" * 200) == ["ж" * 150] + ["##ж"] * 50
    assert tok.tokenize("ж" * 131) == ["ж", "##" + "ж" * 130]
    assert tok.tokenize("ж" * 201) == ["[UNK]"]


def test_cased_vocabulary():
    tok = WordpieceTokenizer(SPECIALS + ["Hello", "hello", "É", "##t", "##é"],
                             do_lower_case=False)
    assert tok.tokenize("Hello hello Été") == ["Hello", "hello", "É", "##t", "##é"]
    assert WordpieceTokenizer(tok.inv_vocab).tokenize("Hello") == ["hello"]


def test_encode_decode_and_conversions(piece_tokenizer):
    ids = piece_tokenizer.encode("Hello, unaffable!")
    assert ids == [12, 13, 6, 7, 14]
    assert piece_tokenizer.convert_ids_to_tokens(ids) == ["hello", ",", "una", "##ffable", "!"]
    assert piece_tokenizer.convert_tokens_to_ids(["una", "nope"]) == [6, 1]
    assert piece_tokenizer.decode(ids) == "hello , unaffable !"
    assert piece_tokenizer.decode([2] + ids + [3, 0], skip_special_tokens=True) == (
        "hello , unaffable !")
    assert piece_tokenizer.tokenize_words("Hello unaffable") == [["hello"], ["una", "##ffable"]]
    with pytest.raises(ValueError, match=r"Token id 99 is outside the vocabulary \[0, 16\)\."):
        piece_tokenizer.convert_ids_to_tokens([99])


def test_special_ids_are_looked_up_not_assumed(write_vocab_file):
    # Google's layout: [PAD]=0, [unused0..98], [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103.
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]",
                                                                  "[MASK]", "the"]
    tok = WordpieceTokenizer(write_vocab_file(tokens))
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 100, 101, 102, 103)
    assert tok.vocab_size == 105
    assert tok.encode("the cat") == [104, 100]


def test_matches_reference_algorithm_on_generated_text():
    texts = random_texts(seed=1, count=1500)
    for do_lower_case in (True, False):
        tokens = vocab_for_texts(texts, do_lower_case, seed=2)
        tok = WordpieceTokenizer(tokens, do_lower_case=do_lower_case)
        vocab = set(tokens)
        num_unk = 0
        for text in texts:
            expected = _oracle_wordpiece(_oracle_basic(text, do_lower_case), vocab)
            assert tok.tokenize(text) == expected, repr(text)
            num_unk += expected.count("[UNK]")
        assert num_unk > 20  # The generated vocabulary exercises the [UNK] paths.


# -- Vocabulary files.


def test_load_vocab_ids_are_line_numbers_and_whitespace_is_stripped(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\n[UNK] \n[CLS]\r\n[SEP]\t\n[MASK]\nhe\xc3\xa9\n\n")
    assert load_vocab(str(path)) == {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3,
                                     "[MASK]": 4, "heé": 5}


def test_load_vocab_missing_file(tmp_path):
    """A missing file, a directory and a symbolic link loop are each told as what they are
    (a loop was reported as a missing file, and by some commands as no --vocab_file given)."""
    path = str(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError) as e:
        load_vocab(path)
    assert str(e.value) == f"vocab_file '{path}': no such file"
    with pytest.raises(FileNotFoundError) as e:
        load_vocab(str(tmp_path))
    assert str(e.value) == f"vocab_file '{tmp_path}' is a directory; expected a file"
    os.symlink("loop.txt", tmp_path / "loop.txt")
    with pytest.raises(FileNotFoundError) as e:
        load_vocab(str(tmp_path / "loop.txt"))
    assert str(e.value) == (f"vocab_file '{tmp_path / 'loop.txt'}' is a symbolic link that "
                            "loops (it leads back to itself)")


def test_load_vocab_empty_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n")
    with pytest.raises(ValueError) as e:
        load_vocab(str(path))
    assert str(e.value) == f"vocab_file '{path}' is empty; expected one token per line."


def test_load_vocab_duplicate_token_names_lines(write_vocab_file):
    path = write_vocab_file(SPECIALS + ["a", "b", "a"])
    with pytest.raises(ValueError) as e:
        load_vocab(path)
    assert str(e.value) == f"vocab_file '{path}': duplicate token 'a' on lines 6 and 8."


def test_load_vocab_blank_line_inside(write_vocab_file):
    path = write_vocab_file(SPECIALS[:2] + [""] + SPECIALS[2:])
    with pytest.raises(ValueError) as e:
        load_vocab(path)
    assert str(e.value) == (f"vocab_file '{path}': line 3 is empty; expected one token per "
                            "line.")


def test_load_vocab_missing_special_tokens(write_vocab_file):
    path = write_vocab_file(["[PAD]", "[UNK]", "[SEP]", "a"])
    with pytest.raises(ValueError) as e:
        load_vocab(path)
    assert str(e.value) == (f"vocab_file '{path}' lacks the special token(s) [CLS], [MASK]; a "
                            "BERT vocabulary must contain [PAD], [UNK], [CLS], [SEP], [MASK].")


def test_load_vocab_not_utf8(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\n[UNK]\n\xff\xfe\n")
    with pytest.raises(ValueError) as e:
        load_vocab(str(path))
    assert str(e.value) == f"vocab_file '{path}' is not UTF-8: undecodable byte on line 3."


def test_tokenizer_rejects_unknown_unk_token():
    with pytest.raises(ValueError, match=r"unk_token '<unk>' is not in the vocabulary\."):
        WordpieceTokenizer(SPECIALS, unk_token="<unk>")


# -- Checkpoint casing check.


@pytest.mark.parametrize("path", [
    "/models/uncased_L-12_H-768_A-12/bert_model.ckpt",
    "gs://b/multilingual_L-12_H-768_A-12/bert_model.ckpt",
    "chinese_L-12_H-768_A-12/bert_model.ckpt",
])
def test_case_check_rejects_cased_flag_for_uncased_model(path):
    name = path.split("/")[-2]
    with pytest.raises(ValueError) as e:
        validate_case_matches_checkpoint(False, path)
    assert str(e.value) == (
        f"--do_lower_case=False contradicts --init_checkpoint={path}: '{name}' is a "
        "lower-cased (uncased) model, so pass --do_lower_case=True to tokenize as it was "
        "pre-trained.")
    validate_case_matches_checkpoint(True, path)


def test_case_check_rejects_uncased_flag_for_cased_model():
    path = "/m/multi_cased_L-12_H-768_A-12/bert_model.ckpt"
    with pytest.raises(ValueError) as e:
        validate_case_matches_checkpoint(True, path)
    assert str(e.value) == (
        f"--do_lower_case=True contradicts --init_checkpoint={path}: "
        "'multi_cased_L-12_H-768_A-12' is a cased model, so pass --do_lower_case=False to "
        "tokenize as it was pre-trained.")
    validate_case_matches_checkpoint(False, path)


@pytest.mark.parametrize("path", [None, "", "/m/my_model/bert_model.ckpt", "/m/ckpt-100",
                                  "/m/uncased_L-12_H-768_A-12/model.ckpt"])
def test_case_check_ignores_unknown_names(path):
    validate_case_matches_checkpoint(False, path)
    validate_case_matches_checkpoint(True, path)


def test_a_vocabulary_with_a_byte_order_mark_or_crlf_is_the_same_vocabulary(tmp_path):
    """POOR: a UTF-8 BOM made the first token "\\ufeff[PAD]" ("missing [PAD]")."""
    import hashlib

    from bert_tf.text.tokenization import load_vocab, vocab_digest

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cat"]
    plain = tmp_path / "vocab.txt"
    plain.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes().replace(b"\n", b"\r\n"))
    assert load_vocab(str(bom)) == load_vocab(str(plain)) == {t: i for i, t in enumerate(tokens)}
    assert vocab_digest(str(bom)) == vocab_digest(str(plain)) == hashlib.sha256(
        plain.read_bytes()).hexdigest()
