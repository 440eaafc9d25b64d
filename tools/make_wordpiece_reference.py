r"""Writes the WordPiece tokenizer.json fixtures of tests/text: the tokenizer.json of
transformers' BERT tokenizer, uncased and cased, over a small vocabulary.

Runs with Hugging Face transformers (and `tokenizers`), which bert_tf and its CI do not
install; use a separate venv whose python BERT_TF_PEERS_PYTHON names (docs/design.md):

    "$BERT_TF_PEERS_PYTHON" tools/make_wordpiece_reference.py --output_dir=tests/text/fixtures

Writes `<output_dir>/wordpiece_uncased_tokenizer.json` and `wordpiece_cased_tokenizer.json`:
`transformers.BertTokenizer.from_pretrained` of a directory holding VOCABULARY as vocab.txt
(BERT's normalizer and pre-tokenizer, the WordPiece model, "[CLS] $A [SEP]" /
"[CLS] $A [SEP] $B:1 [SEP]:1", the WordPiece decoder), its backend serialized by `to_str()`.
bert_tf.text.bpe.wordpiece_tokenizer_json writes the same (tests/text/test_tokenizer_files.py).
"""

import argparse
import json
import os
import sys
import tempfile

# [PAD] [UNK] [CLS] [SEP] [MASK] at BERT's ids 0-4, then words and continuations.
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
              "hello", "world", "##s", "##ing", "run", "cafe", "café", "Paris", "paris", ",",
              ".", "!", "?", "'", "un", "##able", "to", "go", "東", "京"]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True)
    args = parser.parse_args(argv)
    from transformers import BertTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(VOCABULARY) + "\n")
        for name, lowercase in (("uncased", True), ("cased", False)):
            tokenizer = BertTokenizer.from_pretrained(tmp, do_lower_case=lowercase)
            path = os.path.join(args.output_dir, f"wordpiece_{name}_tokenizer.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(json.loads(tokenizer.backend_tokenizer.to_str()), f,
                          ensure_ascii=False, indent=2)
                f.write("\n")
            print(f"Wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
