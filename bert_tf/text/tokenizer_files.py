"""One entry point for a model's tokenizer file: vocab.txt (WordPiece) or tokenizer.json.

`load_tokenizer` gives a Python tokenizer with the interface input building uses (`encode`,
`cls_id`, `sep_id`, `pad_id`, `mask_id`, `vocab_size`); `tokenizer_layer` gives the matching
in-graph layer for tf.data and SavedModel text signatures.
"""

import os

from bert_tf import fileio
from bert_tf.text import bpe, tokenization

VOCAB_TXT = "vocab.txt"


def find_tokenizer_file(path):
    """The tokenizer file `path` names: itself, or the tokenizer.json / vocab.txt inside it.

    A directory holding both (Hugging Face BERT directories do) gives tokenizer.json, which
    also records the casing.

    Raises:
      FileNotFoundError: naming `path` and what was looked for.
    """
    path = str(path)
    if fileio.isdir(path):
        for name in (bpe.TOKENIZER_JSON, VOCAB_TXT):
            candidate = os.path.join(path, name)
            if fileio.isfile(candidate):
                return candidate
        raise FileNotFoundError(f"tokenizer directory '{path}' holds neither "
                                f"{bpe.TOKENIZER_JSON} nor {VOCAB_TXT}.")
    if not fileio.isfile(path):
        raise FileNotFoundError(f"tokenizer file '{path}' does not exist (expected a vocab.txt, "
                                f"a {bpe.TOKENIZER_JSON} or a directory holding one).")
    return path


def load_tokenizer(path, do_lower_case=None):
    """The tokenizer of a vocab.txt, a tokenizer.json, or a directory holding one.

    Args:
      path: a WordPiece vocab.txt; a Hugging Face tokenizer.json (byte-level BPE as GPT-2,
        RoBERTa and ModernBERT use, or WordPiece as BERT's); or a directory with either.
      do_lower_case: for a vocab.txt, the casing (default True, as --do_lower_case). For a
        tokenizer.json, which records its own casing, a value that contradicts the file is an
        error; None accepts the file's.

    Returns:
      a `WordpieceTokenizer` or a `BpeTokenizer`.

    Raises:
      FileNotFoundError: nothing at `path`.
      ValueError: a bad file (naming it and the field), or a contradicting do_lower_case.
    """
    path = find_tokenizer_file(path)
    if not path.endswith(".json"):
        return tokenization.WordpieceTokenizer(
            path, do_lower_case=True if do_lower_case is None else do_lower_case)
    tokenizer = bpe.load_tokenizer_json(path)
    if do_lower_case is None:
        return tokenizer
    if isinstance(tokenizer, tokenization.WordpieceTokenizer):
        file_lowercase = tokenizer.do_lower_case
    else:
        file_lowercase = "Lowercase" in tokenizer.spec.normalizer
    if bool(do_lower_case) != file_lowercase:
        raise ValueError(f"do_lower_case={bool(do_lower_case)} contradicts tokenizer file "
                         f"'{path}', which {'lower-cases' if file_lowercase else 'keeps case'}"
                         "; leave do_lower_case unset to use the file's.")
    return tokenizer


def tokenizer_layer(tokenizer):
    """The in-graph layer equal to a Python tokenizer from `load_tokenizer`.

    Returns:
      a `BertTokenizerLayer` for a `WordpieceTokenizer`, a `BpeTokenizerLayer` for a
      `BpeTokenizer`; both map tf.string [B] to int32 RaggedTensor [B, (tokens)] and carry
      cls_id, sep_id, pad_id and mask_id.
    """
    if isinstance(tokenizer, bpe.BpeTokenizer):
        from bert_tf.text.bpe_layer import BpeTokenizerLayer

        return BpeTokenizerLayer(tokenizer)
    if isinstance(tokenizer, tokenization.WordpieceTokenizer):
        from bert_tf.text.layers import BertTokenizerLayer

        return BertTokenizerLayer(
            tokenizer.inv_vocab, do_lower_case=tokenizer.do_lower_case,
            max_input_chars_per_word=tokenizer.max_input_chars_per_word,
            unk_token=tokenizer.unk_token)
    raise TypeError(f"tokenizer_layer: expected a WordpieceTokenizer or BpeTokenizer, got "
                    f"{type(tokenizer).__name__}.")
