r"""Writes the SentencePiece fixtures of tests/text: a model and Hugging Face transformers' ids.

Runs in two steps, because the reference comes from transformers, which bert_tf and its CI do
not install (docs/design.md, "Parity with the peers"):

    python tools/make_sentencepiece_reference.py --output_dir=tests/text/fixtures
    "$BERT_TF_PEERS_PYTHON" tools/make_sentencepiece_reference.py \
        --output_dir=tests/text/fixtures --reference

The first (bert_tf's Python) learns `spiece.model` with bert_tf's learner
(`bert-tf-build-vocab --tokenizer=sentencepiece`: ALBERT's layout, 2,000 unigram pieces) from
text that ships with CPython (the pydoc topics, the CJK sample texts when the `test` package is
installed) and sentences full of numbers, and writes the texts to tokenize. The second (a
Python with transformers and sentencepiece) loads the model as a Hugging Face ALBERT tokenizer
directory (spiece.model and the tokenizer_config.json bert_tf writes beside it) with
`AutoTokenizer` and writes `sentencepiece_reference.json.gz`: its version and, per text,
`encode(text, add_special_tokens=False)`; and `albert_tokenizer.json.gz`, the HF `tokenizers`
pipeline that tokenizer runs (the peer of tools/bench_tokenizer.py's SentencePiece rows).
"""

import argparse
import gzip
import json
import os
import random
import shutil
import tempfile

# The BPE fixtures' corpus: CPython's pydoc topics and CJK sample texts (this folder).
from make_bpe_reference import corpus_lines

_VOCAB_SIZE = 2000
# What bert_tf writes beside a SentencePiece model in a Hugging Face directory
# (bert_tf.interop.huggingface.write_tokenizer_config; tests/finetuning checks it is this).
TOKENIZER_CONFIG = {"do_lower_case": True, "keep_accents": False, "remove_space": True,
                    "tokenizer_class": "AlbertTokenizer", "cls_token": "[CLS]",
                    "sep_token": "[SEP]", "pad_token": "<pad>", "mask_token": "[MASK]",
                    "unk_token": "<unk>"}
_EXTRA = ["The cat [MASK] on the[SEP]mat <unk>", "``Quoted'' and ''closed''", "ΟΔΟΣ ΣΑΣ ΣΑΣ.",
          "İstanbul, Ångström, Łódź", "Crème Brûlée naïve coöperate", "a\tb\u3000c\u00a0d  e",
          "x5, (1,000) 1990, 2,000,000 and 3,", "nai\u0308ve cafe\u0301 e\u0301", "¼ ½ ⅞ ﬁ ﬀ ™",
          "😀 👍🏽 🇩🇪 ❤️", "[MASK][MASK] [CLS]x[SEP]", "", "   ", "UPPER lower MiXeD"]


def number_lines(count, seed):
    rng = random.Random(seed)
    return [f"In {rng.randint(1900, 2030)}, about {rng.randint(1, 10**7):,} people paid "
            f"{rng.randint(1, 999)}, {rng.randint(1, 99)}, or {rng.randint(1, 9)}."
            for _ in range(count)]


def learn(output_dir):
    from bert_tf.text.sentencepiece_trainer import build_sentencepiece_model

    lines = corpus_lines()
    with tempfile.TemporaryDirectory() as scratch:
        corpus = os.path.join(scratch, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write("\n".join(lines + number_lines(600, seed=0)) + "\n")
        model = build_sentencepiece_model(corpus, _VOCAB_SIZE)
    with open(os.path.join(output_dir, "spiece.model"), "wb") as f:
        f.write(model)
    rng = random.Random(1)
    texts = rng.sample(lines, 1200) + number_lines(150, seed=2) + _EXTRA
    paragraphs = [" ".join(rng.sample(lines, 4)) for _ in range(60)]
    with open(os.path.join(output_dir, "sentencepiece_texts.json"), "w", encoding="utf-8") as f:
        json.dump(texts + paragraphs, f, ensure_ascii=False)


def reference(output_dir):
    import transformers

    from_dir = tempfile.mkdtemp()
    try:
        shutil.copy(os.path.join(output_dir, "spiece.model"), from_dir)
        with open(os.path.join(from_dir, "tokenizer_config.json"), "w") as f:
            json.dump(TOKENIZER_CONFIG, f)
        tokenizer = transformers.AutoTokenizer.from_pretrained(from_dir)
    finally:
        shutil.rmtree(from_dir)
    write_backend_tokenizer(tokenizer, output_dir)
    texts_file = os.path.join(output_dir, "sentencepiece_texts.json")
    with open(texts_file, encoding="utf-8") as f:
        texts = json.load(f)
    data = {"transformers": transformers.__version__, "tokenizer": type(tokenizer).__name__,
            "texts": texts,
            "ids": [tokenizer.encode(t, add_special_tokens=False) for t in texts]}
    with gzip.open(os.path.join(output_dir, "sentencepiece_reference.json.gz"), "wt",
                   encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    os.remove(texts_file)


def write_backend_tokenizer(tokenizer, output_dir):
    """albert_tokenizer.json.gz: the transformers tokenizer's `tokenizers.Tokenizer`."""
    with gzip.open(os.path.join(output_dir, "albert_tokenizer.json.gz"), "wt",
                   encoding="utf-8") as f:
        f.write(tokenizer.backend_tokenizer.to_str())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--reference", action="store_true",
                        help="the second step, in the peers' Python")
    args = parser.parse_args()
    (reference if args.reference else learn)(args.output_dir)


if __name__ == "__main__":
    main()
