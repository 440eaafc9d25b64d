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


def write_tiny_byte_level_tokenizer(path):
    """A byte-level BPE tokenizer.json of 100 tokens, for models with a small vocab_size (the
    ModernBERT interop fixture's 128): [PAD] [CLS] [SEP] [MASK] [UNK] (ids 0-4, the ids
    ModernBERT's config.json gives pad/cls/sep), the 95 printable ASCII bytes, no merges."""
    from bert_tf.text.bpe import bytes_to_unicode

    specials = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"]
    byte_chars = bytes_to_unicode()
    vocab = {token: i for i, token in enumerate(specials)}
    vocab.update({byte_chars[b]: len(specials) + i for i, b in enumerate(range(32, 127))})
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(specials)]

    def special(token, type_id=0):
        return {"SpecialToken": {"id": token, "type_id": type_id}}

    def sequence(name, type_id=0):
        return {"Sequence": {"id": name, "type_id": type_id}}

    data = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("[CLS]"), sequence("A"), special("[SEP]")],
            "pair": [special("[CLS]"), sequence("A"), special("[SEP]"), sequence("B", 1),
                     special("[SEP]", 1)],
            "special_tokens": {t: {"id": t, "ids": [vocab[t]], "tokens": [t]}
                               for t in ("[CLS]", "[SEP]")}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": "[UNK]",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return path
