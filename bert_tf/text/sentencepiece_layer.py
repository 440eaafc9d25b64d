"""In-graph SentencePiece: strings -> the ids `SentencePieceTokenizer` gives (ALBERT's recipe).

The four steps of `bert_tf.text.sentencepiece`, with stock TensorFlow ops, a tensorflow_text
SentencePiece op on the model's bytes, and constants read off Python's own Unicode data and the
model's pieces, so the graph agrees with the Python tokenizer whatever Unicode version the ICU
inside TensorFlow has:

1. Special pieces (the control pieces and the unknown piece) written in the text: an alternation
   of their literal text, longest first (RE2's leftmost-first choice is then Python's), cuts the
   text; a match is its own piece.
2. Preparation of the text between them: whitespace (`str.isspace`) runs become one space and
   the ends go; `` and '' become '"'; NFKD (tensorflow_text's ICU) with the marks of nonzero
   `unicodedata.combining` deleted; then lower case, when asked, from a table of `str.lower`
   per code point, after a pattern read off `str.lower` has found the capital sigmas it makes
   final. ICU is not asked to lower-case: TensorFlow's ICU is older than Python's Unicode data
   (it leaves the 40 capitals new in Unicode 14, such as U+2C2F, as they are). NFKD leaves
   alone the code points Python's unicodedata does not know (newer ICU data decomposes some).
3. SentencePiece segments each prepared text into ids. A unigram model without byte pieces
   whose word start goes before a word (ALBERT's, Hugging Face's spiece.model) runs through
   `tensorflow_text.FastSentencepieceTokenizer`; other models through the
   `SentencepieceTokenizer` op, which the fast op does not match on them.
4. A piece that ends in a digit and a comma ("\u25811990,") is cut before the comma and its
   digits re-segmented; which pieces, and what their digits and first piece become, are tables
   over the vocabulary made with the Python tokenizer's own rule.

Known differences from the Python tokenizer:

- Segmentations of equal score (a run such as "lll" as "l" "ll" or "ll" "l") may come out in
  another order: the `SentencepieceTokenizer` op carries an older SentencePiece than the Python
  package. On CPython's documentation and generated text, with a 3000-piece unigram model,
  35 of 23k prepared texts came out differently from it, and 1 from the fast op; hence the
  fast op where it fits.
- Step 4 sees ids, so an unknown piece (the unknown id) is never cut, while Python sees its
  text. An unknown piece ends in a comma only where the model has no "," piece.

The layer holds no lookup table. The fast op's model is a constant; the `SentencepieceTokenizer`
op's is a resource that tensorflow_text saves into SavedModels. A fresh process loads them with
tensorflow and tensorflow_text imported. Invalid UTF-8 input is replaced by U+FFFD per bad
byte before tokenizing.
"""

import base64
import binascii
import functools
import unicodedata

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import quiet_logs
from bert_tf.file_names import SENTENCEPIECE_FILE
from bert_tf.text import sentencepiece_prepared, unicode_data, word_offsets
from bert_tf.text.bpe_layer import re2_literal, regex_pieces
from bert_tf.text.layers import (PYTHON_WHITESPACE, batch_of_strings, strip_whitespace,
                                 valid_utf8)
from bert_tf.text.sentencepiece import WORD_START, SentencePieceTokenizer, ends_in_digit_comma
from bert_tf.text.tokenization import ranges_to_regex_class

_CAPITAL_SIGMA, _FINAL_SIGMA = "\u03a3", "\u03c2"


@functools.lru_cache(maxsize=1)
def _unicode_tables():
    """`compute_unicode_tables()`, read from the package's unicode_data.npz when it is of this
    Python's Unicode version."""
    return unicode_data.sentencepiece_tables() or compute_unicode_tables()


def compute_unicode_tables():
    """What the graph needs of Python's Unicode data, from one pass over the code points
    (half a second; tools/make_unicode_data.py ships the result).

    Returns:
      dict: RE2 classes "combining" (unicodedata.combining != 0) and "unassigned" (category
      Cn); "final_sigma", an RE2 pattern whose groups 1-4 surround each capital sigma
      `str.lower` makes final (rewrite: "\\1\\2ς\\3\\4"); and
      "lower_from", "lower_to": sorted int32 code points and the one code point `str.lower`
      maps each to (those it changes).
    """
    combining, unassigned, cased, ignorable = [], [], [], []
    lower_from, lower_to = [], []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:  # Surrogates never come out of UTF-8 decoding.
            continue
        char = chr(cp)
        if unicodedata.category(char) == "Cn":  # No properties: kept, never lowered.
            unassigned.append(cp)
            continue
        if unicodedata.combining(char):
            combining.append(cp)
        lower = char.lower()
        # Only U+0130 lowers to two code points, and NFKD has taken it apart before lowering.
        if lower != char and len(lower) == 1:
            lower_from.append(cp)
            lower_to.append(ord(lower))
        # The sigma's context as str.lower reads it: a cased character before it (skipping
        # case-ignorable ones), and none after it.
        if (char + _CAPITAL_SIGMA).lower()[-1] == _FINAL_SIGMA:
            cased.append(cp)
        elif ("A" + char + _CAPITAL_SIGMA).lower()[-1] == _FINAL_SIGMA:
            ignorable.append(cp)
    cased_class, ignorable_class = (ranges_to_regex_class(cased),
                                    ranges_to_regex_class(ignorable))
    other_class = ranges_to_regex_class(sorted(cased + ignorable), negate=True)
    return {
        "combining": ranges_to_regex_class(combining),
        "unassigned": ranges_to_regex_class(unassigned),
        "final_sigma": "(%s)(%s*)\\x{3a3}(%s*)(%s|$)" % (cased_class, ignorable_class,
                                                        ignorable_class, other_class),
        "lower_from": np.array(lower_from, dtype=np.int32),
        "lower_to": np.array(lower_to, dtype=np.int32),
    }


def _nfkd(text, unassigned):
    """NFKD of tf.string [N] that leaves the code points of the class `unassigned` alone:
    Python keeps them, and as starters without a decomposition they are cut points NFKD never
    reorders across. Their runs are marked with 0xFF (never in valid UTF-8), so the pieces
    alternate text, run, text, ..."""
    parts = tf.strings.split(tf.strings.regex_replace(text, f"({unassigned}+)", b"\xff\\1\xff"),
                             sep=b"\xff")  # [N, (2k + 1)]
    is_run = tf.equal(tf.ragged.range(parts.row_lengths()) % 2, 1).flat_values
    flat = parts.flat_values
    flat = tf.where(is_run, flat, tf_text.normalize_utf8(flat, "NFKD"))
    return tf.strings.reduce_join(parts.with_flat_values(flat), axis=1)


def _lower(text, tables):
    """`str.lower` of tf.string [N] after NFKD (which takes apart U+0130, the one character
    that lowers to two)."""
    text = tf.strings.regex_replace(text, tables["final_sigma"], f"\\1\\2{_FINAL_SIGMA}\\3\\4")
    cps = tf.strings.unicode_decode(text, "UTF-8")  # [N, (C)]
    flat = cps.flat_values
    keys = tf.constant(tables["lower_from"])
    index = tf.minimum(tf.searchsorted(keys, flat), tf.size(keys) - 1)
    lowered = tf.where(tf.equal(tf.gather(keys, index), flat),
                       tf.gather(tf.constant(tables["lower_to"]), index), flat)
    return tf.strings.unicode_encode(cps.with_flat_values(lowered), "UTF-8")


def _fast_op_fits(processor):
    """Whether tensorflow_text's FastSentencepieceTokenizer segments as the SentencePiece
    package does with a model: a unigram model (the only kind with n-best segmentations)
    without byte pieces, whose word start goes before a word (it gets the others wrong)."""
    try:
        processor.nbest_encode_as_ids("a", 1)
    except RuntimeError:
        return False
    if any(processor.is_byte(i) for i in range(processor.get_piece_size())):
        return False
    pieces = processor.encode_as_pieces("a")
    return bool(pieces) and pieces[0].startswith(WORD_START)


@keras.saving.register_keras_serializable(package="bert_tf")
class SentencePieceTokenizerLayer(word_offsets.WholeWordLayer, keras.layers.Layer):
    """Tokenizes strings into SentencePiece ids inside the TensorFlow graph, as ALBERT does.

    Output equals `SentencePieceTokenizer(model_proto, do_lower_case).encode(text)` (no
    [CLS]/[SEP]; pack with `BertPackInputs(cls_id=layer.cls_id, sep_id=layer.sep_id,
    pad_id=layer.pad_id)`); see the module docstring for where it may not.

    Args:
      model_proto: the SentencePiece model file's bytes (`SentencePieceTokenizer.model_proto`),
        or their base64 text (what `get_config` stores, so saved models do not depend on the
        file).
      do_lower_case: lower-case the text before segmenting (ALBERT's released models: True).

    Call args:
      inputs: tf.string tensor [B] (or a scalar), UTF-8 text.

    Returns:
      int32 RaggedTensor [B, (tokens)] of ids with int64 row splits (or [tokens] for a scalar
      input).

    Raises:
      ValueError: model_proto is not a SentencePiece model (or a str that is not base64).

    Examples:

    >>> with open("30k-clean.model", "rb") as f:  # doctest: +SKIP
    ...     layer = SentencePieceTokenizerLayer(f.read())
    >>> layer(tf.constant(["Hello world"])).to_list()  # doctest: +SKIP
    [[10975, 126]]
    """

    # The in-graph side of the bert_tf.text.Tokenizer interface.
    kind = "SentencePiece"
    # Whether LiteRT can tokenize as the layer does (bert_tf.serving.litert: the fast
    # SentencePiece op on sentencepiece_prepared's model), and if not why; set per model.
    litert_kernels = False
    litert_problem = None

    def __init__(self, model_proto, do_lower_case=True, **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        if isinstance(model_proto, str):
            try:
                model_proto = base64.b64decode(model_proto, validate=True)
            except binascii.Error:
                raise ValueError("model_proto: expected a SentencePiece model's bytes or their "
                                 "base64 text (as get_config stores it), got a str that is "
                                 "not base64.") from None
        tokenizer = SentencePieceTokenizer(bytes(model_proto), do_lower_case)
        self.model_proto = tokenizer.model_proto
        self.do_lower_case = tokenizer.do_lower_case
        self._take_roles(tokenizer)
        self._pieces = tuple(tokenizer.inv_vocab)
        self._special_ids = tokenizer.special_token_ids

        # Step 1: the special pieces' text, longest first, as the Python tokenizer finds them.
        specials = sorted(self._special_ids, key=lambda i: (-len(self._pieces[i]),
                                                            self._pieces[i]))
        self._special_pattern = "|".join(re2_literal(self._pieces[i]) for i in specials)
        self._special_texts = np.array([self._pieces[i].encode("utf-8") for i in specials],
                                       dtype=object)
        self._special_id_array = np.array(specials, dtype=np.int32)
        # Step 2.
        self._unicode = _unicode_tables()
        # Step 3.
        if _fast_op_fits(tokenizer.processor):
            self._sentencepiece = tf_text.FastSentencepieceTokenizer(self.model_proto)
            if not sentencepiece_prepared.removes_extra_whitespace(self.model_proto):
                self.litert_problem = sentencepiece_prepared.KEEPS_WHITESPACE
        else:
            self._sentencepiece = tf_text.SentencepieceTokenizer(model=self.model_proto,
                                                                 out_type=tf.int32)
            self.litert_problem = ("LiteRT's SentencePiece kernel takes only unigram "
                                   "models without byte pieces whose pieces start words "
                                   "with \u2581")
        self.litert_kernels = self.litert_problem is None
        # Step 4, per id: whether its piece is cut, the text its digits are re-segmented from,
        # whether it continues a word, and what a first digit piece becomes there (-1: none).
        self._cut = np.array([i not in self._special_ids and ends_in_digit_comma(p)
                              for i, p in enumerate(self._pieces)], dtype=bool)
        self._digit_text = np.array(
            [p[:-1].replace(WORD_START, "").encode("utf-8") if self._cut[i] else b""
             for i, p in enumerate(self._pieces)], dtype=object)
        self._continues = np.array([not p.startswith(WORD_START) for p in self._pieces],
                                   dtype=bool)
        self._unprefixed = np.array(
            [-1 if p == WORD_START else
             tokenizer.vocab.get(p[len(WORD_START):], self.unk_id)
             if p.startswith(WORD_START) else i for i, p in enumerate(self._pieces)],
            dtype=np.int32)
        self._comma_id = tokenizer.convert_tokens_to_ids([","])[0]
        # Strings and ragged tensors must reach `call` as TensorFlow tensors, unconverted.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    def _segment(self, text):
        """Step 3: tf.string [N] -> int32 RaggedTensor [N, (P)] with int64 row splits."""
        return self._sentencepiece.tokenize(text).with_row_splits_dtype(tf.int64)

    # -- step 2: preparation ----------------------------------------------------------------

    def _prepare(self, text):
        """`sentencepiece.prepare_text` on tf.string [N]."""
        text = tf.strings.regex_replace(strip_whitespace(text), f"{PYTHON_WHITESPACE}+", " ")
        text = tf.strings.regex_replace(text, "``", '"')
        text = tf.strings.regex_replace(text, "''", '"')
        text = _nfkd(text, self._unicode["unassigned"])
        text = tf.strings.regex_replace(text, self._unicode["combining"], "")
        return _lower(text, self._unicode) if self.do_lower_case else text

    # -- step 4: digits before a comma ------------------------------------------------------

    def _split_digit_commas(self, ids):
        """Re-segments the pieces that end in a digit and a comma ("\u25811990,").

        Args:
          ids: int32 [Q].

        Returns:
          (ids, source): int32 [Q'], the ids with each such piece replaced by its digits'
          pieces and ","; int64 [Q'], the index in `ids` of the piece each comes from.
        """
        num = tf.size(ids)
        cut = tf.gather(tf.constant(self._cut), ids)  # [Q]
        which = tf.boolean_mask(ids, cut)  # [M]
        digits = self._segment(tf.gather(tf.constant(self._digit_text), which))  # [M, (D)]
        # Segmented alone, the digits start a word; where the piece continued one, their first
        # piece loses the word start (and goes if that was all of it).
        values, value_row = digits.flat_values, digits.value_rowids()  # [D]
        first = tf.equal(tf.range(tf.size(values, out_type=tf.int64)),
                         tf.gather(digits.row_starts(), value_row))
        fix = first & tf.gather(tf.gather(tf.constant(self._continues), which), value_row)
        values = tf.where(fix, tf.gather(tf.constant(self._unprefixed), values), values)
        digits = tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(values, values >= 0), tf.boolean_mask(value_row, values >= 0),
            nrows=tf.size(which, out_type=tf.int64), validate=False)
        comma = tf.RaggedTensor.from_tensor(tf.fill([tf.size(which), 1], self._comma_id))
        replaced = tf.concat([digits, comma], axis=1)  # [M, (D' + 1)]
        # Row q of the result: piece q itself, or its replacement (after the Q single pieces).
        table = tf.concat([tf.RaggedTensor.from_tensor(ids[:, tf.newaxis]), replaced],
                          axis=0)  # [Q + M, (.)]
        rank = tf.cumsum(tf.cast(cut, tf.int32), exclusive=True)
        spliced = tf.gather(table, tf.where(cut, num + rank, tf.range(num)))  # [Q, (.)]
        return spliced.flat_values, spliced.value_rowids()

    # -- the layer --------------------------------------------------------------------------

    def call(self, inputs):
        # The ragged splicing's int64 transposes would print oneDNN's one-time type notice.
        quiet_logs.absorb_onednn_type_notice()
        text, scalar = batch_of_strings(inputs, "SentencePieceTokenizerLayer")
        text = valid_utf8(text)
        # Step 1: chunks of text and special pieces, in order, and the input of each.
        chunks, row = regex_pieces(text, self._special_pattern)  # [K], [K]
        match = tf.equal(chunks[:, tf.newaxis],
                         tf.constant(self._special_texts)[tf.newaxis, :])  # [K, S]
        special = tf.reduce_any(match, axis=1)  # [K]
        special_id = tf.gather(tf.constant(self._special_id_array),
                               tf.argmax(tf.cast(match, tf.int32), axis=1))  # [K]
        pieces = self._segment(self._prepare(tf.where(special, "", chunks)))  # [K, (P)]
        # A special chunk is its own (only) piece.
        pieces = tf.concat([pieces, tf.ragged.boolean_mask(special_id[:, tf.newaxis],
                                                           special[:, tf.newaxis])], axis=1)
        ids, source = self._split_digit_commas(pieces.flat_values)  # [Q'], [Q']
        piece_row = tf.gather(tf.cast(row, tf.int64), tf.gather(pieces.value_rowids(), source))
        # int64 row splits, as every other ragged tensor of bert_tf.text.
        ids = tf.RaggedTensor.from_value_rowids(
            ids, piece_row, nrows=tf.size(text, out_type=tf.int64), validate=False)
        return ids[0] if scalar else ids

    # No autograph: the code has no Python control flow on tensors, and converting it took
    # seconds at each trace.
    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, inputs, words="pieces", texts=None):
        """Words of the text, each tokenized on its own, with their spans: the raw-text face of
        data read word by word (CoNLL tagging words, SQuAD context words).

        Args:
          inputs: tf.string [B].
          words: "pieces" (the GPT-2 pattern's words, as CoNLL files give words) or
            "whitespace" (SQuAD's words): see `bert_tf.text.word_offsets.tokenize_with_offsets`.
          texts: optional tf.string [T] tokenized whole in the same call (a SQuAD question:
            one call keeps one copy of the model in a graph).

        Returns:
          (ids, starts, ends): RaggedTensors [B, (W), (P)]: int32 ids, each word encoded as
          `SentencePieceTokenizer.encode_word(word)` (a word preparation deletes, such as a
          lone combining mark, is [unk_id], as the tagging data give it); int64 code-point
          offsets into `valid_utf8(inputs)` of the whole word, for each of its pieces
          (`text[start:end]` is the word: answers and tags cover whole words). With `texts`,
          a fourth: their ids, int32 RaggedTensor [T, (tokens)], as `call` gives them.
        """
        # Every word starts with the word start whether a space precedes it or not.
        return word_offsets.tokenize_with_offsets(
            self, inputs, words, texts, space_before=False, may_leave_words_empty=True)

    def corpus_lines(self, lines):
        """tf.string [L] -> the lines as pre-training tokenizes them
        (SentencePieceTokenizer.encode_line): stripped of whitespace (`str.isspace`), so a
        line of whitespace only is "" (a document break); preparation does the rest."""
        return strip_whitespace(lines)

    def check_masks_in_text(self):
        """A mask written in the text ("[MASK]", "<mask>") is found when it is one of the
        model's control pieces (step 1 splits those out).

        Raises:
          ValueError: the model has no mask piece among its control pieces.
        """
        if self.mask_id is None or self.mask_id not in self._special_ids:
            raise ValueError("export: the SentencePiece model has no mask piece ([MASK] or "
                             "<mask>) among its control pieces, so a mask written in the text "
                             "could not be found; a fill-mask export needs one.")

    def tokenize_with_masks(self, inputs):
        """tf.string [B] -> int32 RaggedTensor [B, (T)] with mask_id at each mask piece written
        in the text (a control piece: see check_masks_in_text)."""
        return tf.cast(self(inputs), tf.int32)

    def token_texts(self):
        """What each id stands for, id = index: the piece with its word start as a space
        (" the" for "\u2581the"), special pieces ("[MASK]", "<unk>") as they are."""
        return [piece if i in self._special_ids else piece.replace(WORD_START, " ")
                for i, piece in enumerate(self._pieces)]

    def asset(self):
        """(file name, bytes) of the SentencePiece model an export carries in its assets/."""
        return SENTENCEPIECE_FILE, self.model_proto

    def export_info(self):
        """What bert_tf_export.json records of this tokenizer."""
        return {"tokenizer": f"SentencePiece (assets/{SENTENCEPIECE_FILE})"}

    def get_config(self):
        config = super().get_config()
        config.update({"model_proto": base64.b64encode(self.model_proto).decode("ascii"),
                       "do_lower_case": self.do_lower_case})
        return config
