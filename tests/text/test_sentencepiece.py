"""SentencePiece models as ALBERT tokenizes with them: bert_tf.text.sentencepiece (Python),
the learner behind `bert-tf-build-vocab --tokenizer=sentencepiece`, and how the tokenizer files
module tells a `.model` apart."""

import json
import pickle
import subprocess
import sys

import pydoc_data.topics
import pytest
import sentencepiece as spm

from bert_tf.text import load_tokenizer, tokenizer_files
from bert_tf.text.sentencepiece import SentencePieceTokenizer, prepare_text
from bert_tf.text.sentencepiece_trainer import build_sentencepiece_model

PROSE = [line for topic in sorted(pydoc_data.topics.topics)
         for line in pydoc_data.topics.topics[topic].splitlines() if line.strip()]
# Lists of numbers, so that the library learns pieces ending in a digit and a comma ("0,").
NUMBERS = [f"In {1900 + i}, pages {i % 10}, {i % 7}, and {i % 5}, were read (1,{i:03d})."
           for i in range(300)]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """A 1,000-piece model learnt by bert_tf's learner from CPython's reference prose."""
    directory = tmp_path_factory.mktemp("spm")
    corpus = directory / "corpus.txt"
    corpus.write_text("\n".join(PROSE + NUMBERS) + "\n", encoding="utf-8")
    path = directory / "spiece.model"
    path.write_bytes(build_sentencepiece_model(str(corpus), 1000))
    return str(path)


@pytest.fixture(scope="module")
def tokenizer(model_file):
    return load_tokenizer(model_file)


def test_learnt_model_has_albert_layout_and_roles(tokenizer, model_file):
    assert isinstance(tokenizer, SentencePieceTokenizer)
    assert (tokenizer.kind, tokenizer.vocab_size, tokenizer.do_lower_case) == (
        "SentencePiece", 1000, True)
    assert tokenizer.inv_vocab[:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id,
            tokenizer.mask_id) == (0, 1, 2, 3, 4)
    # Learnt from lower-cased text: no piece holds an upper-case letter.
    assert not any(p.lower() != p for p in tokenizer.inv_vocab[5:])
    assert tokenizer_files.vocab_size(model_file) == 1000
    # A directory holding the model (Hugging Face ALBERT's spiece.model) gives it.
    assert tokenizer_files.find_tokenizer_file(str(model_file)[:-len("/spiece.model")]) == (
        model_file)


def test_text_is_prepared_as_albert_prepares_it(tokenizer, model_file):
    assert prepare_text("  The\tCAFÉ  ``naïve''\u3000 Ω ", True) == 'the cafe "naive" ω'
    assert prepare_text("Crème  Brûlée", False) == "Creme Brulee"
    assert tokenizer.tokenize("The   Café\nNaïve") == tokenizer.tokenize("the cafe naive")
    cased = load_tokenizer(model_file, do_lower_case=False)
    assert cased.tokenize("Return") != tokenizer.tokenize("Return")
    assert cased.tokenize("return") == tokenizer.tokenize("Return")
    assert tokenizer.decode(tokenizer.encode("Crème Brûlée, in 1990, ``x''")) == (
        'creme brulee, in 1990, "x"')


def test_digit_comma_pieces_are_cut_before_the_comma(tokenizer, model_file):
    processor = spm.SentencePieceProcessor(model_file=model_file)
    text = "sizes (1,000) and 2, 30, 1990, then x5, done"
    raw = processor.encode_as_pieces(prepare_text(text, True))
    cut = [p for p in raw if len(p) > 1 and p.endswith(",") and p[-2].isdigit()]
    # The library alone keeps digit-comma pieces whole, after a word start and inside a word.
    assert {p.startswith("\u2581") for p in cut} == {True, False}, raw
    pieces = tokenizer.tokenize(text)
    assert not [p for p in pieces if len(p) > 1 and p.endswith(",") and p[-2].isdigit()]
    # The digits read as they do before any other character, and the words still join.
    assert "".join(pieces).replace("\u2581", " ").strip() == prepare_text(text, True)
    # Each cut piece becomes its digits (segmented alone, without a word start where the
    # piece had none) and the comma.
    for piece in cut:
        digits = processor.encode_as_pieces(piece[:-1].replace("\u2581", ""))
        if not piece.startswith("\u2581") and digits[0].startswith("\u2581"):
            digits = [digits[0][1:]] + digits[1:] if len(digits[0]) > 1 else digits[1:]
        at = raw.index(piece)
        assert pieces[at:at + len(digits) + 1] == digits + [","]
        raw[at:at + 1] = digits + [","]
    assert pieces == raw


def test_special_tokens_written_in_the_text_keep_their_ids(tokenizer):
    ids = tokenizer.encode("The cat [MASK] on the[SEP]mat <unk>")
    assert ids.count(tokenizer.mask_id) == 1 and ids.count(tokenizer.sep_id) == 1
    assert ids[ids.index(tokenizer.mask_id) + 1:ids.index(tokenizer.mask_id) + 2] == (
        tokenizer.encode("on")[:1])
    assert tokenizer.unk_id == ids[-1]
    # Matched before lower-casing, as Hugging Face's special tokens: "[mask]" is text.
    assert tokenizer.mask_id not in tokenizer.encode("the [mask] sat")
    assert tokenizer.decode(ids) == "the cat [MASK] on the [SEP] mat <unk>"
    assert tokenizer.decode(ids, skip_special_tokens=True) == "the cat on the mat"


def test_words_encode_alike_anywhere_and_continuations_follow_a_word_start(tokenizer):
    continuation = tokenizer.continuation_ids()
    for line in PROSE[:300]:
        words = line.split()
        ids = [i for w in words for i in tokenizer.encode_word(w)]
        assert ids == tokenizer.encode(line) == tokenizer.encode_line(line)
        for word in words:
            pieces = tokenizer.encode_word(word)
            # A word's first piece starts it (U+2581); the rest continue it, unless the
            # library segments a character as the bare word start and the character after.
            assert pieces[0] not in continuation
    assert tokenizer.vocab["\u2581the"] not in continuation
    assert not {0, 1, 2, 3, 4} & continuation
    assert tokenizer.span_forms("The Cat,") == {" ".join(tokenizer.tokenize("the cat,"))}
    assert tokenizer.span_forms("  ") == set()


def test_digest_fingerprint_and_pickling(tokenizer, model_file):
    cased = load_tokenizer(model_file, do_lower_case=False)
    assert tokenizer.digest() == cased.digest()
    assert tokenizer.fingerprint() != cased.fingerprint()
    copy = pickle.loads(pickle.dumps(tokenizer))
    assert copy.encode(PROSE[7]) == tokenizer.encode(PROSE[7])
    assert copy.fingerprint() == tokenizer.fingerprint()


def test_bad_models_and_differences_are_named(tmp_path, model_file):
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(ValueError, match=rf"^tokenizer file '{bad}': not a SentencePiece "
                                         r"model \("):
        load_tokenizer(str(bad))
    with pytest.raises(ValueError, match=rf"^--vocab_file={bad}: tokenizer file "):
        tokenizer_files.vocab_size(str(bad), f"--vocab_file={bad}")
    other = tmp_path / "other.model"
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(PROSE[:3000]) + "\n", encoding="utf-8")
    other.write_bytes(build_sentencepiece_model(str(corpus), 600))
    assert tokenizer_files.tokenizer_difference(model_file, model_file) is None
    assert tokenizer_files.tokenizer_difference(model_file, str(other)) == (
        "another SentencePiece model (its bytes differ: pieces, scores or normaliser)")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n", encoding="utf-8")
    assert tokenizer_files.tokenizer_difference(model_file, str(vocab)) == (
        "it is a WordPiece tokenizer, the model's is a SentencePiece one")
    # A run directory keeps the model as spiece.model, byte for byte.
    out = tmp_path / "run"
    out.mkdir()
    written = tokenizer_files.write_tokenizer_file(str(out), None, model_file)
    assert written == str(out / "spiece.model")
    assert (out / "spiece.model").read_bytes() == open(model_file, "rb").read()
    assert tokenizer_files.model_tokenizer_file(str(out)) == written


def test_build_vocab_command_learns_a_model_and_refuses_other_names(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(PROSE[:4000]) + "\n", encoding="utf-8")
    out = tmp_path / "30k-clean.model"

    def build(*argv):
        return subprocess.run([sys.executable, "-m", "bert_tf.cli.build_vocab",
                               f"--input_file={corpus}", *argv], capture_output=True, text=True,
                              timeout=120)

    done = build("--tokenizer=sentencepiece", "--vocab_size=700", f"--output_file={out}",
                 "--reserved_tokens=[unused0]")
    assert done.returncode == 0, done.stderr
    learnt = load_tokenizer(str(out))
    assert learnt.vocab_size == 700
    assert learnt.inv_vocab[:6] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "[unused0]"]
    assert learnt.encode("[unused0]") == [5]
    # A whole sentence of the corpus needs no unknown piece.
    assert learnt.unk_id not in learnt.encode(PROSE[100])
    refused = build("--tokenizer=sentencepiece", "--vocab_size=700",
                    f"--output_file={tmp_path / 'vocab.txt'}")
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1] == (
        f"build_vocab: error: --output_file={tmp_path / 'vocab.txt'}: --tokenizer=sentencepiece "
        "writes a SentencePiece model; expected a .model name (e.g. spiece.model), which is "
        "how the other commands tell them apart.")
    refused = build("--tokenizer=sentencepiece", "--vocab_size=700", "--max_unique_chars=50",
                    f"--output_file={tmp_path / 'x.model'}")
    assert refused.stderr.strip().splitlines()[-1] == (
        "build_vocab: error: --max_unique_chars only applies to --tokenizer=wordpiece, not "
        "--tokenizer=sentencepiece.")
    assert not (tmp_path / "x.model").exists()
    blank = tmp_path / "blank.txt"
    blank.write_text(" \n\t\n\u3000\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^The input files hold no text: {blank}\.$"):
        build_sentencepiece_model(str(blank), 700)


def test_ids_equal_transformers_albert_tokenizer_but_for_albert_own_rules():
    """tests/text/fixtures: a 2,000-piece model bert_tf learnt and the ids transformers'
    AlbertTokenizer (5.25, built on `tokenizers`) gives for 1,424 texts
    (tools/make_sentencepiece_reference.py). Its normaliser does what bert_tf's preparation
    does; it leaves out ALBERT's digit-comma cut, which ALBERT's own tokenizer (and
    transformers' earlier SentencePiece-based one) applies. Beyond that cut the ids agree but
    for Hangul syllables, which its NFKD leaves decomposed where SentencePiece's own
    normaliser composes them again, and ties between segmentations of equal score."""
    import gzip
    import os

    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    with gzip.open(os.path.join(fixtures, "sentencepiece_reference.json.gz"), "rt",
                   encoding="utf-8") as f:
        reference = json.load(f)
    tokenizer = load_tokenizer(os.path.join(fixtures, "spiece.model"))
    assert tokenizer.vocab_size == 2000
    same = cut_only = 0
    for text, theirs in zip(reference["texts"], reference["ids"]):
        ours = tokenizer.encode(text)
        if ours == theirs:
            same += 1
            continue
        pieces = tokenizer.convert_ids_to_tokens(theirs)
        if tokenizer.convert_tokens_to_ids(tokenizer.cut_digit_commas(pieces)) == ours:
            cut_only += 1
        elif not any("\uac00" <= c <= "\ud7a3" for c in text):
            # A tie: the same characters cut elsewhere.
            assert "".join(tokenizer.convert_ids_to_tokens(ours)) == "".join(pieces), text
    assert (same, cut_only) == (1251, 165)
    # The layer gives the Python tokenizer's ids on the same texts.
    from bert_tf.text import tokenizer_layer

    layer = tokenizer_layer(tokenizer)
    texts = reference["texts"][::5] + reference["texts"][-80:]  # the hand-picked, paragraphs
    assert layer(texts).to_list() == [tokenizer.encode(t) for t in texts]


def test_whole_words_follow_albert_rule_for_sentencepiece():
    """Whole-word and n-gram masks group pieces as ALBERT's create_pretraining_data does: a
    piece continues the word before it only when it has no word start, is not a lone
    punctuation mark and holds only the letters a-z and punctuation; digits, other scripts and
    an apostrophe begin words of their own."""
    import os

    tokenizer = load_tokenizer(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "fixtures", "spiece.model"))
    continuation = tokenizer.continuation_ids()
    words = []
    for index, piece in zip(tokenizer.encode("In 1990, 2,000 hashable (x) 北京 hello's world"),
                            tokenizer.tokenize("In 1990, 2,000 hashable (x) 北京 hello's world")):
        if index in continuation and words:
            words[-1].append(piece)
        else:
            words.append([piece])
    assert words == [["▁in"], ["▁"], ["1990"], [","], ["▁2"], [","], ["000"],
                     ["▁", "hashable"], ["▁"], ["(", "x"], [")"], ["▁"], ["北京"],
                     ["▁", "he", "ll", "o"], ["'", "s"], ["▁", "w", "or", "l", "d"]]
    assert not {tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id,
                tokenizer.unk_id} & continuation


def test_digit_comma_cut_on_the_fixture_model_by_hand():
    """ALBERT's cut worked by hand on the committed model: the library gives "5,", "1," and
    "9,", each inside a word (after "x", the user-defined "(" and a bare word start); "5"
    segmented alone is "▁5", whose word start goes (the piece continued a word): "5" ","."""
    import os

    tokenizer = load_tokenizer(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "fixtures", "spiece.model"))
    text = "x5, (1,000) 1990, about 9,122"
    assert tokenizer.processor.encode_as_pieces(prepare_text(text, True)) == [
        "▁", "x", "5,", "▁", "(", "1,", "000", ")", "▁", "1990", ",", "▁about", "▁", "9,", "1",
        "22"]
    assert tokenizer.processor.encode_as_pieces("5") == ["▁5"]
    assert tokenizer.tokenize(text) == [
        "▁", "x", "5", ",", "▁", "(", "1", ",", "000", ")", "▁", "1990", ",", "▁about", "▁",
        "9", ",", "1", "22"]


def test_directories_give_one_tokenizer_file_whoever_asks(tmp_path, model_file):
    """find_tokenizer_file (a directory named as the tokenizer) and model_tokenizer_file (the
    directory of a model) agree: a SentencePiece model without a vocab.txt beside it is the
    tokenizer, also over a Unigram tokenizer.json (Hugging Face ALBERT); a vocab.txt wins."""
    import shutil

    hf_albert = tmp_path / "hf_albert"
    hf_albert.mkdir()
    shutil.copy(model_file, hf_albert / "spiece.model")
    (hf_albert / "tokenizer.json").write_text(json.dumps({"model": {"type": "Unigram"}}))
    both = tmp_path / "both"
    both.mkdir()
    shutil.copy(model_file, both / "spiece.model")
    (both / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    for directory, expected in ((hf_albert, "spiece.model"), (both, "vocab.txt")):
        assert tokenizer_files.find_tokenizer_file(str(directory)) == str(directory / expected)
        assert tokenizer_files.model_tokenizer_file(str(directory)) == str(directory / expected)
    assert load_tokenizer(str(hf_albert)).kind == "SentencePiece"
