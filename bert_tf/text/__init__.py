"""Tokenization and input packing for BERT, in Python and inside TensorFlow graphs.

The Python tokenizers (`WordpieceTokenizer`, `BpeTokenizer` for a byte-level BPE
tokenizer.json, `SentencePieceTokenizer` for a SentencePiece model as ALBERT uses it, all from
`load_tokenizer`) implement one interface, `Tokenizer`, and need no TensorFlow; their in-graph
layers (`tokenizer_layer`), the packing helpers and the vocabulary builder import TensorFlow
when first used.
"""

from bert_tf import lazy_names

from bert_tf.text.bpe import BpeTokenizer
from bert_tf.text.sentencepiece import SentencePieceTokenizer
from bert_tf.text.tokenizer_files import (Tokenizer, casing_to_load, is_sentencepiece_model,
                                          is_tokenizer_json, load_tokenizer, tokenizer_layer)
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
    "SentencePieceTokenizerLayer": "bert_tf.text.sentencepiece_layer",
    "valid_utf8": "bert_tf.text.layers",
    "BertPackInputs": "bert_tf.text.input_packing",
    "pack_inputs": "bert_tf.text.input_packing",
    "truncated_lengths": "bert_tf.text.input_packing",
    "build_vocab": "bert_tf.text.vocab_builder",
    "write_vocab": "bert_tf.text.vocab_builder",
}


__getattr__ = lazy_names.module_getattr(__name__, _LAZY)


__all__ = [
    "SPECIAL_TOKENS",
    "BpeTokenizer",
    "SentencePieceTokenizer",
    "is_sentencepiece_model",
    "Tokenizer",
    "casing_to_load",
    "is_tokenizer_json",
    "load_tokenizer",
    "tokenizer_layer",
    "WordpieceTokenizer",
    "basic_tokenize",
    "load_vocab",
    "validate_case_matches_checkpoint",
    *_LAZY,
]
