r"""Writes the byte-level BPE fixtures of tests/text: a tokenizer.json and `tokenizers`' ids.

Runs with Hugging Face `tokenizers`, which bert_tf and its CI do not install; use a separate
venv (`pip install tokenizers`) whose python BERT_TF_PEERS_PYTHON names (docs/design.md):

    "$BERT_TF_PEERS_PYTHON" tools/make_bpe_reference.py --output_dir=tests/text/fixtures

Trains (with `tokenizers`' BpeTrainer: vocab_size 3,300, min_frequency 2, the byte alphabet) a
ByteLevel BPE of ~3,300 tokens on text that ships with CPython (the pydoc topics and,
when the `test` package is installed, Lib/test/cjkencodings/*-utf8.txt), laid out like
ModernBERT's tokenizer.json: NFC normalizer, ByteLevel pre-tokenizer without prefix space,
runs of 2 to 24 spaces as (normalized, non-special) added tokens, "|||IP_ADDRESS|||",
<|padding|>, <|endoftext|>, [UNK] [CLS] [SEP] [PAD] and [MASK] (lstrip, as ModernBERT's),
and the TemplateProcessing "[CLS] $A [SEP]" / "[CLS] $A [SEP] $B [SEP]".

Writes `<output_dir>/bpe_tokenizer.json` and `<output_dir>/bpe_reference.json.gz`: texts (real
lines and paragraphs of that text, the same with odd whitespace, emoji, accents in NFC and NFD,
contractions, digits and added tokens put in, plus random multilingual strings) with
`tokenizers`' ids for each (`encode(text).ids`, with [CLS]/[SEP]) and for some pairs.
"""

import argparse
import glob
import gzip
import json
import os
import random
import sys
import unicodedata

import pydoc_data.topics

_VOCAB_SIZE = 3300
_EMOJI = ["😀", "👍🏽", "👨\u200d👩\u200d👧", "🇩🇪", "❤️", "✨", "🙂", "🚀", "🤖", "🎉", "😂🤣"]
_ACCENTED = ["café", "naïve", "résumé", "Zürich", "São Paulo", "façade", "Ærøskøbing",
             "Škoda", "Łódź", "Ελληνικά", "Москва", "Đà Nẵng", "piñata", "crème brûlée",
             "Straße", "İstanbul", "Ångström", "coöperate", "Dvořák", "Þórr"]
_ODD_SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\u00a0", "\u3000", " \t ", "\r\n",
               "\u2003", "      ", "\u202f", " \n "]
_INSERTS = ["[MASK]", " [MASK]", "  [MASK]", "[MASK] ", "<|endoftext|>", "|||IP_ADDRESS|||",
            "[CLS]", "[SEP]", "it's", "don't", "we're", "I've", "I'm", "we'll", "he'd",
            "'s", "'S", "2024", "3.14159", "1,000,000", "0x1F", "¼", "٣٤", "№42"]


def corpus_lines():
    """Lines of real text: the pydoc topics and the CJK sample texts (in UTF-8)."""
    lines = []
    for text in pydoc_data.topics.topics.values():
        lines.extend(text.split("\n"))
    try:
        import test

        pattern = os.path.join(os.path.dirname(test.__file__), "cjkencodings", "*-utf8.txt")
        for path in sorted(glob.glob(pattern)):
            with open(path, encoding="utf-8", errors="replace") as f:
                lines.extend(f.read().split("\n"))
    except ImportError:
        print("no test package: CJK sample texts left out", file=sys.stderr)
    return [line for line in lines if line.strip()]


def train(lines):
    # Imported here: tests import corpus_lines() (tests/text/test_bpe_trainer.py learns the same
    # merges with bert_tf's trainer) where `tokenizers` is not installed.
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=_VOCAB_SIZE, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(lines, trainer=trainer)
    tokenizer.add_tokens([AddedToken(" " * n, normalized=True, special=False)
                          for n in range(24, 1, -1)]
                         + [AddedToken("|||IP_ADDRESS|||", normalized=True, special=False)])
    tokenizer.add_special_tokens(
        [AddedToken(t, normalized=False, special=True)
         for t in ("<|padding|>", "<|endoftext|>", "[UNK]", "[CLS]", "[SEP]", "[PAD]")]
        + [AddedToken("[MASK]", lstrip=True, normalized=False, special=True)])
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return tokenizer


def _perturb(line, rng):
    words = line.split(" ")
    out = []
    for word in words:
        roll = rng.random()
        if roll < 0.05:
            word = rng.choice(_EMOJI) + word
        elif roll < 0.10:
            word = rng.choice(_ACCENTED)
        elif roll < 0.13:
            word = rng.choice(_INSERTS)
        out.append(word)
        out.append(rng.choice(_ODD_SPACES) if rng.random() < 0.3 else " ")
    text = "".join(out[:-1])
    if rng.random() < 0.2:
        text = unicodedata.normalize("NFD", text)
    if rng.random() < 0.3:
        text += rng.choice(_ODD_SPACES)
    if rng.random() < 0.2:
        text = rng.choice(_ODD_SPACES) + text
    return text


def _random_text(rng):
    """A random string of assigned characters (Python's Unicode version) of many scripts."""
    pools = ["abcdefghij KLMNOP 0123456789", ".,;:!?'\"()[]{}<>-_/\\@#$%^&*",
             "".join(_ODD_SPACES), "".join(_ACCENTED), "北京大学中文字こんにちはカタカナ한국어",
             "".join(_EMOJI), "\u0301\u0308\u0327\u200b\u200d\ufeff\x00\x07\u00ad"]
    chars = []
    for _ in range(rng.randint(1, 60)):
        if rng.random() < 0.1:
            while True:
                char = chr(rng.randint(0x80, 0x2FFFF))
                if unicodedata.category(char) not in ("Cn", "Cs"):
                    break
            chars.append(char)
        else:
            chars.append(rng.choice(rng.choice(pools)))
    return "".join(chars)


def make_texts(lines, seed=0):
    rng = random.Random(seed)
    texts = ["", " ", "  ", "\n", "[MASK]", "a  [MASK] b", "[MASK][MASK]", " \u00a0 x  ",
             "I can't believe it's 2024!", "Hello   world\t\ttab\u3000ideographic",
             "<|endoftext|>Next|||IP_ADDRESS|||", "x" * 300, "北京大学" * 40]
    real = list(dict.fromkeys(lines))
    rng.shuffle(real)
    texts += real[:1500]
    paragraphs = [t for t in pydoc_data.topics.topics.values()]
    texts += [p[:rng.randint(50, 1200)] for p in rng.sample(paragraphs, 60)]
    texts += [_perturb(line, rng) for line in real[1500:3000]]
    texts += [_random_text(rng) for _ in range(400)]
    return texts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", required=True)
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    lines = corpus_lines()
    tokenizer = train(lines)
    tokenizer_path = os.path.join(args.output_dir, "bpe_tokenizer.json")
    tokenizer.save(tokenizer_path)
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_path)  # Reference ids from the file as written.
    texts = make_texts(lines)
    ids = [tokenizer.encode(t).ids for t in texts]
    rng = random.Random(1)
    pairs = [(rng.choice(texts), rng.choice(texts)) for _ in range(200)]
    pair_ids = [tokenizer.encode(a, b).ids for a, b in pairs]
    reference = {"tokenizers_version": __import__("tokenizers").__version__,
                 "texts": texts, "ids": ids,
                 "pairs": [list(p) for p in pairs], "pair_ids": pair_ids}
    with gzip.open(os.path.join(args.output_dir, "bpe_reference.json.gz"), "wt",
                   encoding="utf-8") as f:
        json.dump(reference, f, ensure_ascii=False, separators=(",", ":"))
    print(f"{len(texts)} texts, {sum(map(len, ids))} ids, {len(pairs)} pairs, vocabulary "
          f"{tokenizer.get_vocab_size()}")


if __name__ == "__main__":
    main()
