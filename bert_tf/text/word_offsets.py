"""Word-by-word tokenization with whole-word offsets, for the in-graph tokenizers whose pieces map
back only to their word (byte-level BPE, SentencePiece).

Tagging and SQuAD data read a text as words and tokenize each word on its own; this module finds
those words in raw text, tokenizes them with the layer, and gives every piece the span of its
whole word in the input. `BpeTokenizerLayer` and `SentencePieceTokenizerLayer` expose it as
their `tokenize_with_offsets`, and share what follows from it (`WholeWordLayer`).
"""

import re

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text import bpe
from bert_tf.text.layers import valid_utf8

# SQuAD's word separators (bert_tf.data.tasks.squad.is_whitespace), for context words.
SQUAD_WHITESPACE = "[ \\t\\r\\n\\x{202f}]+"


def _split_words(text, words):
    """Words of tf.string [B] (valid UTF-8).

    Returns:
      (found, begin): tf.string RaggedTensor [B, (W)] of the words, and int64 [N], the byte
      offset of each (N = all words of the batch).
    """
    if words == "pieces":
        letters, numbers, space = bpe.character_classes()
        # Marks join their letters: an NFD word ("nai\u0308ve") is one word, as it is after a
        # normalizer composes or drops the marks (words are split before normalizing, so the
        # offsets are the input's).
        letters += bpe.mark_class()
        pattern = "|".join([re.escape(c) for c in bpe.CONTRACTIONS] + [
            f"[{letters}]+", f"[{numbers}]+", f"[^{space}{letters}{numbers}]+"])
        found, begin, _ = tf_text.regex_split_with_offsets(text, pattern, pattern)
        # Between the words lies whitespace, which comes back as pieces of its own.
        keep = ~tf.strings.regex_full_match(found.flat_values, f"[{space}]+")
    elif words == "whitespace":
        found, begin, _ = tf_text.regex_split_with_offsets(text, SQUAD_WHITESPACE)
        keep = tf.ones_like(found.flat_values, dtype=tf.bool)
    else:
        raise ValueError(f"words={words!r}: expected 'pieces' or 'whitespace'.")
    row = tf.boolean_mask(found.value_rowids(), keep)  # [N]
    flat = tf.boolean_mask(found.flat_values, keep)  # [N]
    found = tf.RaggedTensor.from_value_rowids(flat, row, nrows=tf.size(text, out_type=tf.int64),
                                              validate=False)
    return found, tf.boolean_mask(begin.flat_values, keep)


def tokenize_with_offsets(layer, inputs, words="pieces", texts=None, *, space_before,
                          may_leave_words_empty):
    """Words of the text, each tokenized on its own by `layer`, with their spans: the raw-text
    face of data read word by word (CoNLL tagging words, SQuAD context words).

    Args:
      layer: the tokenizer layer: called on tf.string [N], gives int32 RaggedTensor
        [N, (P)]; its `unk_id` (or None) is what a word without pieces gets.
      inputs: tf.string [B].
      words: "pieces": the GPT-2 pattern's words without their leading space, whitespace
        left out (so "York." is "York" and ".", "it's" is "it" and "'s"; as CoNLL files
        give words); "whitespace": runs of characters other than SQuAD's whitespace
        (space, tab, CR, LF, U+202F), as `squad.whitespace_split` finds them.
      texts: optional tf.string [T] tokenized whole in the same call (a SQuAD question:
        one call keeps one copy of the tables in a graph).
      space_before: tokenize every word but a text's first with a space in front, as it
        reads inside the text (byte-level BPE, where " York" and "York" differ).
      may_leave_words_empty: the layer can give a word no piece (a vocabulary without every
        byte; a word SentencePiece's preparation deletes); such a word then gets [unk_id], or
        without an unknown id it is left out (the tagging data give it [UNK]).

    Returns:
      (ids, starts, ends): RaggedTensors [B, (W), (P)]: int32 ids of each word; int64
      code-point offsets into `valid_utf8(inputs)` of the whole word, for each of its pieces
      (`text[start:end]` is the word: answers and tags cover whole words). With `texts`, a
      fourth: their ids, int32 RaggedTensor [T, (tokens)], as the layer gives them.
    """
    text = tf.convert_to_tensor(inputs, dtype=tf.string)
    if text.shape.rank != 1:
        raise ValueError(f"{type(layer).__name__}.tokenize_with_offsets expects a tf.string "
                         f"tensor of shape [batch], got shape {text.shape}.")
    text = valid_utf8(text)
    word_rows, begin = _split_words(text, words)  # [B, (W)], [N]
    row, flat = word_rows.value_rowids(), word_rows.flat_values  # [N]
    nrows = tf.size(text, out_type=tf.int64)
    strings = flat
    if space_before:
        first = tf.equal(tf.range(tf.size(flat, out_type=tf.int64)),
                         tf.gather(word_rows.row_starts(), row))
        strings = tf.where(first, flat, tf.strings.join([" ", flat]))  # [N]
    if texts is not None:
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        both = layer(tf.concat([texts, strings], axis=0))
        text_ids, pieces = both[:tf.size(texts)], both[tf.size(texts):]  # [T, (.)], [N, (P)]
    else:
        pieces = layer(strings)  # [N, (P)]
    if may_leave_words_empty:
        empty = tf.equal(pieces.row_lengths(), 0)
        if layer.unk_id is not None:
            # Each row gets an [UNK] after its pieces; only an empty row keeps it.
            lengths = pieces.row_lengths()
            unk = tf.fill([tf.size(lengths), 1], tf.constant(layer.unk_id, pieces.dtype))
            padded = tf.concat([pieces, tf.RaggedTensor.from_tensor(unk)], axis=1)
            pieces = tf.ragged.boolean_mask(
                padded, tf.ragged.range(lengths + 1) < tf.maximum(lengths, 1)[:, None])
        else:
            row, flat, begin, pieces = (tf.boolean_mask(row, ~empty),
                                        tf.boolean_mask(flat, ~empty),
                                        tf.boolean_mask(begin, ~empty),
                                        tf.ragged.boolean_mask(pieces, ~empty))
            word_rows = tf.RaggedTensor.from_value_rowids(flat, row, nrows=nrows,
                                                          validate=False)
    # Byte offsets -> code points: the characters before the word, and in it.
    start = tf.cast(tf.strings.length(tf.strings.substr(tf.gather(text, row),
                                                        tf.zeros_like(begin), begin),
                                      unit="UTF8_CHAR"), tf.int64)
    stop = start + tf.cast(tf.strings.length(flat, unit="UTF8_CHAR"), tf.int64)
    per_piece = pieces.row_lengths()
    outputs = (pieces, pieces.with_flat_values(tf.repeat(start, per_piece)),
               pieces.with_flat_values(tf.repeat(stop, per_piece)))
    outputs = tuple(tf.RaggedTensor.from_row_splits(o, word_rows.row_splits, validate=False)
                    for o in outputs)
    return outputs if texts is None else outputs + (text_ids,)


class WholeWordLayer:
    """What the in-graph tokenizers whose pieces map back only to their word share (mixed into
    `BpeTokenizerLayer` and `SentencePieceTokenizerLayer`, which define
    `tokenize_with_offsets`)."""

    def _take_roles(self, tokenizer):
        """The special roles' ids and the vocabulary size of the Python `tokenizer`."""
        self.cls_id, self.sep_id = tokenizer.cls_id, tokenizer.sep_id
        self.pad_id, self.mask_id = tokenizer.pad_id, tokenizer.mask_id
        self.unk_id = tokenizer.unk_id
        self.vocab_size = tokenizer.vocab_size

    def tokenize_with_word_spans(self, inputs):
        """The words a tagger labels (`tokenize_with_offsets`' "pieces" words), each with its
        ids and its span: (ids int32 [B, (W), (P)], starts and ends int64 [B, (W)]). Every
        piece spans its whole word already; every word has a piece."""
        ids, starts, ends = self.tokenize_with_offsets(inputs)
        first = starts.values.row_starts()  # [N]
        return (ids, starts.with_values(tf.gather(starts.flat_values, first)),
                ends.with_values(tf.gather(ends.flat_values, first)))

    def tokenize_question_and_context(self, questions, contexts):
        """SQuAD's raw text as bert_tf.data.tasks.squad tokenizes it: the questions whole, each
        context word (SQuAD's whitespace) as `tokenize_with_offsets` tokenizes words. Answers
        are whole words: every piece spans its word.

        Args:
          questions, contexts: tf.string [B].

        Returns:
          (question_ids int32 [B, (Q')], and the contexts' ids, starts, ends [B, (W), (P)] of
          `tokenize_with_offsets(contexts, words="whitespace")`), from one tokenizer call.
        """
        ids, starts, ends, question = self.tokenize_with_offsets(
            contexts, words="whitespace", texts=questions)
        return question, ids, starts, ends
