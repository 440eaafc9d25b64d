"""Tokenization and input packing for BERT, in Python and inside TensorFlow graphs.

The Python tokenizers (`WordpieceTokenizer`, `BpeTokenizer` for a byte-level BPE
tokenizer.json, both from `load_tokenizer`) implement one interface, `Tokenizer`, and need no
TensorFlow; their in-graph layers (`tokenizer_layer`), the packing helpers and the
vocabulary builder import TensorFlow when first used.
"""

import importlib

from bert_tf.text.bpe import BpeTokenizer
from bert_tf.text.tokenizer_files import (Tokenizer, is_tokenizer_json, load_tokenizer,
                                          tokenizer_layer)
from bert_tf.text.tokenization import (
    SPECIAL_TOKENS,
    WordpieceTokenizer,
    basic_tokenize,
    load_vocab,
    validate_case_matches_checkpoint,
)

_LAZY = {
    "BertTokenizerLayer": "bert_tf.text.layers",
    "BpeTokenizerLayer": "bert_tf.text.bpe_layer",
    "valid_utf8": "bert_tf.text.layers",
    "BertPackInputs": "bert_tf.text.input_packing",
    "pack_inputs": "bert_tf.text.input_packing",
    "truncated_lengths": "bert_tf.text.input_packing",
    "build_vocab": "bert_tf.text.vocab_builder",
    "write_vocab": "bert_tf.text.vocab_builder",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bert_tf.text' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "SPECIAL_TOKENS",
    "BpeTokenizer",
    "Tokenizer",
    "is_tokenizer_json",
    "load_tokenizer",
    "tokenizer_layer",
    "WordpieceTokenizer",
    "basic_tokenize",
    "load_vocab",
    "validate_case_matches_checkpoint",
    *_LAZY,
]
