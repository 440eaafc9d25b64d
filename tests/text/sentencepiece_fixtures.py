"""Small SentencePiece models trained here (no downloads), in ALBERT's layout, and text for them."""

import functools
import glob
import io
import os
import random

# ALBERT's layout: <pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4.
ALBERT_CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")


@functools.lru_cache(maxsize=1)
def python_doc_lines():
    """The non-blank lines of CPython's own documentation topics (pydoc_data): list of str."""
    import pydoc_data.topics

    return [line for text in pydoc_data.topics.topics.values() for line in text.splitlines()
            if line.strip()]


def number_lines(count, seed=0):
    """Sentences full of numbers before commas ("In 1990, about 2,000,000 people ..."), so a
    model learns pieces that end in a digit and a comma (ALBERT's tokenizer cuts those)."""
    rng = random.Random(seed)
    return [f"In {rng.randint(1900, 2030)}, about {rng.randint(1, 10**7):,} people paid "
            f"{rng.randint(1, 999)}, {rng.randint(1, 99)}, or {rng.randint(1, 9)}."
            for _ in range(count)]


def cjk_lines():
    """Chinese, Japanese and Korean lines: CPython's test/cjkencodings files where the test
    package is installed, and a few of our own."""
    lines = ["北京大学的中文字", "こんにちは、カタカナとひらがな。", "한국어 문장입니다.",
             "東京都 2,000,000 人"]
    try:
        import test
    except ImportError:
        return lines
    for path in sorted(glob.glob(os.path.join(os.path.dirname(test.__file__), "cjkencodings",
                                              "*-utf8.txt"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            lines += [line for line in f.read().splitlines() if line.strip()]
    return lines


@functools.lru_cache(maxsize=None)
def make_sentencepiece_model(model_type="unigram", control_symbols=ALBERT_CONTROL_SYMBOLS,
                             vocab_size=1000, remove_extra_whitespaces=True,
                             normalization_rule_name="nmt_nfkc", user_defined_symbols=()):
    """A SentencePiece model's bytes (about 0.5 s to train), trained on CPython's documentation
    and number_lines(500): <pad>=0, <unk>=1, then the control symbols (ALBERT's by default)."""
    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(python_doc_lines() + number_lines(500)), model_writer=buffer,
        vocab_size=vocab_size, model_type=model_type, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        control_symbols=list(control_symbols), input_sentence_size=20000,
        shuffle_input_sentence=True, remove_extra_whitespaces=remove_extra_whitespaces,
        normalization_rule_name=normalization_rule_name,
        user_defined_symbols=list(user_defined_symbols), minloglevel=2)
    return buffer.getvalue()


def sentencepiece_model_file(tmp_path_factory, **options):
    """make_sentencepiece_model(**options) written as spiece.model in a new folder of pytest's
    tmp_path_factory: its path (str)."""
    path = tmp_path_factory.mktemp("sentencepiece") / "spiece.model"
    path.write_bytes(make_sentencepiece_model(**options))
    return str(path)
