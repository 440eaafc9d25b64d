"""The byte-level BPE fixture (tools/make_bpe_reference.py) and its `tokenizers` reference ids."""

import functools
import gzip
import json
import os

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
BPE_TOKENIZER_JSON = os.path.join(FIXTURES, "bpe_tokenizer.json")


@functools.lru_cache(maxsize=1)
def bpe_reference():
    """dict: texts, ids ([CLS] A [SEP] per text), pairs and pair_ids, as `tokenizers` gave them."""
    with gzip.open(os.path.join(FIXTURES, "bpe_reference.json.gz"), "rt", encoding="utf-8") as f:
        return json.load(f)


def without_specials(ids):
    """Reference ids of one text without the post-processor's [CLS] and [SEP]."""
    return ids[1:-1]
