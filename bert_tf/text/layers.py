"""In-graph BERT tokenizer: strings -> WordPiece ids, identical to `WordpieceTokenizer`.

The basic tokenization rules of the original are per-character (keep, drop, surround with
spaces, or replace by a string), except one: `str.lower` turns a capital sigma at the end of a
word into a final sigma. The layer therefore runs

1. `regex_replace` with `final_sigma_pattern()` (uncased only), which rewrites exactly the
   capital sigmas Python would lower-case to U+03C2;
2. a per-code-point lookup in a two-level table built from the Python rules
   (`char_normalization_table`) that expands every code point into its replacement, then a
   whitespace split into words;
3. tensorflow_text's `FastWordpieceTokenizer` on the words (no pre-tokenization of its own);
   words longer than `max_input_chars_per_word` characters (200, as in the original) become
   the unknown token first. The limit counts characters, so a word of 200 four-byte
   characters (800 bytes) is still split into pieces.

`FastWordpieceTokenizer` refuses vocabulary pieces of more than 256 UTF-8 bytes (not counting
"##"), while the original matches pieces of any length. Such pieces (e.g. 129 or more Cyrillic
letters) never occur in real BERT vocabularies, nor in those `build_vocab` learns (at most 50
characters), but when a vocabulary has them, every word longer than 256 bytes is tokenized by
a slower exact path instead (`_long_word_pieces`): all its substrings are looked up by
fingerprint in a sorted constant array, checked against the token text, and the greedy
longest-match-first walk is run over the resulting table.

`tokenize_with_offsets` also says where each piece came from: the expansion in step 2 keeps,
for every normalized code point, the input character it came from, and the pieces of a word
cover it in order, each as many code points as its token has. `tokenize_with_word_spans` gives
a tagger's words instead (TokenTagger's, the tagging export's): whitespace-split words with
punctuation and CJK apart, found by a per-code-point class table of their own, each spanning
all its characters.

Everything is constants plus stock TensorFlow and tensorflow_text ops (no lookup-table
resources), so the layer runs in `tf.data`, in `tf.function` and in exported SavedModels.

Known difference from the Python tokenizer (uncased only): NFD re-orders combining marks by
their canonical combining class across a whole word, while the table decomposes each character
on its own. Non-spacing marks (category Mn) are dropped afterwards, so the order matters only
among the 25 spacing marks (category Mc) that have a non-zero combining class, such as the
musical stems U+1D165..U+1D172, U+302E/U+302F or U+1B44. When two of them stand in
non-canonical order in one combining sequence (e.g. U+1D16D then U+1D165), Python swaps them
and this layer keeps the written order, so the resulting word (and maybe its pieces) differ.
"""

import functools

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.file_names import VOCAB_FILE
from bert_tf.text import tokenization, unicode_data

_BLOCK_SIZE = 256
# FastWordpieceTokenizer rejects vocabulary pieces longer than this (after "##").
_MAX_PIECE_BYTES = 256
# Fingerprints used by the exact path for vocabularies with longer pieces: all of int64.
_HASH_BUCKETS = 2**63 - 1


def _code_templates(replacements):
    """Code-point templates of the table codes: -1 stands for the input character itself.

    Returns:
      (values, starts, lengths) int32 arrays: the template of code k is
      values[starts[k]:starts[k] + lengths[k]].
    """
    templates = [[-1], [ord(" "), -1, ord(" ")]]  # KEEP_CODE, SPACED_CODE
    templates += [[ord(c) for c in r] for r in replacements]
    lengths = np.array([len(t) for t in templates], dtype=np.int32)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
    values = np.array([v for t in templates for v in t] or [0], dtype=np.int32)
    return values, starts, lengths


def _two_level_table(codes):
    """Splits a [0x110000] code array into (block_index [4352], blocks [num_unique, 256])."""
    blocks = codes.reshape([-1, _BLOCK_SIZE])
    unique_blocks, block_index = np.unique(blocks, axis=0, return_inverse=True)
    return block_index.reshape([-1]).astype(np.int32), unique_blocks.astype(np.int32)


def compute_normalization_arrays(do_lower_case):
    """(block_index, blocks, values, starts, lengths) int32 arrays from the Python rules (what
    bert_tf/text/unicode_data.npz ships for Python's Unicode version)."""
    codes, replacements = tokenization.char_normalization_table(do_lower_case)
    block_index, blocks = _two_level_table(codes)
    return (block_index, blocks.reshape([-1]), *_code_templates(replacements))


@functools.lru_cache(maxsize=2)
def _normalization_arrays(do_lower_case):
    """The normalization table of one casing as the layer reads it, built once per process.

    Read from the package's unicode_data.npz (computing them takes about 1.3 s of CPU); the
    arrays are shared, so read-only.

    Returns:
      (block_index [4352], blocks [num_unique * 256], (values, starts, lengths)) int32 arrays.
    """
    arrays = unicode_data.normalization_arrays(do_lower_case) or compute_normalization_arrays(
        do_lower_case)
    for array in arrays:
        array.setflags(write=False)
    return arrays[0], arrays[1], arrays[2:]


# What a code point is to a tagger's words (`bert_tf.tasks.token_tagger.split_words`).
_IN_WORD, _BETWEEN_WORDS, _WORD_ALONE = 0, 1, 2


@functools.lru_cache(maxsize=1)
def _tagger_classes():
    """Each code point's class to a tagger's words: _IN_WORD, _BETWEEN_WORDS (whitespace) or
    _WORD_ALONE (punctuation, CJK), read off the cased table in milliseconds (it neither
    lower-cases nor decomposes, so its spaced characters are the words alone and its spaces
    the whitespace, but for U+2028 and U+2029: str.split() splits there, the tagger does not).

    Returns:
      (block_index int32 [4352], blocks int8 [num_unique * 256]), read-only.
    """
    block_index, blocks, (values, starts, lengths) = _normalization_arrays(False)
    space = np.array([values[s:s + n].tolist() == [ord(" ")] for s, n in zip(starts, lengths)])
    blocks = np.where(blocks == tokenization.SPACED_CODE, _WORD_ALONE,
                      np.where(space[blocks], _BETWEEN_WORDS, _IN_WORD)).astype(np.int8)
    classes = blocks.reshape([-1, _BLOCK_SIZE])[block_index].reshape([-1])  # [0x110000]
    classes[ord(" ")] = _BETWEEN_WORDS  # Kept as it is: code 0.
    for cp in np.flatnonzero(classes == _BETWEEN_WORDS):
        if not tokenization.is_whitespace_char(chr(cp)):
            classes[cp] = _IN_WORD
    # The two levels again, by the blocks' bytes (np.unique over rows took 0.25 s).
    rows = classes.reshape([-1, _BLOCK_SIZE])
    found = {}
    block_index = np.array([found.setdefault(row.tobytes(), len(found)) for row in rows],
                           dtype=np.int32)
    blocks = rows[np.unique(block_index, return_index=True)[1]].reshape([-1])
    for array in (block_index, blocks):
        array.setflags(write=False)
    return block_index, blocks


def _lookup(block_index, blocks, flat_cps):
    """int32 [N] code points -> their [N] values in a two-level table (of blocks' dtype)."""
    block = tf.gather(tf.constant(block_index), flat_cps // _BLOCK_SIZE)
    return tf.gather(tf.constant(blocks), block * _BLOCK_SIZE + flat_cps % _BLOCK_SIZE)


def valid_utf8(text):
    """The text as the tokenizer reads it: tf.string with invalid UTF-8 replaced by U+FFFD.

    The replacement characters are then deleted by the cleanup rules, as the original drops
    undecodable bytes. Offsets from `BertTokenizerLayer.tokenize_with_offsets` count code
    points of this string (for valid UTF-8 it is the input itself).
    """
    return tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)


def batch_of_strings(inputs, layer_name):
    """A tokenizer layer's `inputs` as tf.string [B], and whether they were a scalar.

    Raises:
      ValueError: inputs of another rank, naming `layer_name`.
    """
    text = tf.convert_to_tensor(inputs, dtype=tf.string)
    scalar = text.shape.rank == 0
    if scalar:
        text = text[tf.newaxis]
    if text.shape.rank != 1:
        raise ValueError(f"{layer_name} expects a tf.string tensor of shape [batch] or a "
                         f"scalar, got shape {text.shape}.")
    return text, scalar


# Python's str.isspace() characters, as an RE2 class (tests/data/test_bpe_pretraining_data.py
# checks it against Python): create_pretraining_data strips corpus lines with str.strip() and
# splits them with str.split(), so the in-graph tokenizers' corpus_lines use this class, not
# tf.strings.strip (ASCII only).
PYTHON_WHITESPACE = ("[\\x{9}-\\x{d}\\x{1c}-\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}"
                     "\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]")


def strip_whitespace(lines):
    """tf.string [L] -> the lines stripped as Python's str.strip() strips them, of every
    `str.isspace` character: the one rule of a blank corpus line (a document break), so a line
    of only U+00A0 or U+3000 is "" as it is for create_pretraining_data."""
    return tf.strings.regex_replace(lines, f"^{PYTHON_WHITESPACE}+|{PYTHON_WHITESPACE}+$", "")


# A mask written in the text of a fill-mask request.
MASK_TOKEN = "[MASK]"


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenizerLayer(keras.layers.Layer):
    """Tokenizes strings into BERT WordPiece ids inside the TensorFlow graph.

    Output equals `WordpieceTokenizer(vocab, do_lower_case).encode(text)` for every input (see
    the module docstring for the one documented exception).

    Args:
      vocab_file: path of a vocab.txt, or a list of tokens (id = index). The token list is what
        `get_config` stores, so saved models do not depend on the original file.
      do_lower_case: lower-case and strip accents (uncased models).
      max_input_chars_per_word: words with more characters than this become `unk_token`;
        200 as in the original `FullTokenizer`. Counts characters, not bytes.
      unk_token: the token for words WordPiece cannot cover.

    Call args:
      inputs: tf.string tensor [B] (or a scalar), UTF-8 text. Invalid UTF-8 bytes are dropped.

    Returns:
      int32 RaggedTensor [B, (tokens)] of WordPiece ids (or [tokens] for a scalar input).
      `tokenize_words` returns [B, (words), (pieces)] instead, and `tokenize_with_offsets`
      adds each piece's character span in the input.

    Examples:

    >>> layer = BertTokenizerLayer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un",
    ...                             "##aff", "##able", ",", "hello"])
    >>> layer(tf.constant(["Hello, unaffable!"])).to_list()
    [[9, 8, 5, 6, 7, 1]]
    """

    # The in-graph side of the bert_tf.text.Tokenizer interface.
    kind = "WordPiece"
    # TensorFlow Text ships LiteRT kernels for the fast WordPiece tokenizer and normaliser.
    litert_kernels = True

    def __init__(self, vocab_file, do_lower_case=True, max_input_chars_per_word=200,
                 unk_token="[UNK]", **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        if isinstance(vocab_file, (list, tuple)):
            tokens = list(vocab_file)
            vocab = tokenization.vocab_from_tokens(tokens)
        else:
            tokens = tokenization.read_vocab_tokens(vocab_file)
            vocab = tokenization.vocab_from_tokens(tokens, source=f"vocab_file '{vocab_file}'")
        if unk_token not in vocab:
            raise ValueError(f"unk_token '{unk_token}' is not in the vocabulary.")
        if max_input_chars_per_word < 1:
            raise ValueError(
                f"max_input_chars_per_word must be >= 1, got {max_input_chars_per_word}.")
        self.vocabulary = tokens
        self.do_lower_case = bool(do_lower_case)
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        self.unk_token = unk_token
        self.unk_id = vocab[unk_token]
        self.pad_id = vocab["[PAD]"]
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]
        self.mask_id = vocab["[MASK]"]

        # Numpy arrays, turned into graph constants at trace time (nothing to track or save).
        self._block_index, self._blocks, templates = _normalization_arrays(self.do_lower_case)
        self._template_values, self._template_starts, self._template_lengths = templates
        self._sigma_pattern = ((unicode_data.final_sigma_pattern()
                                or tokenization.final_sigma_pattern())
                               if self.do_lower_case else None)
        fast_vocab, has_long_pieces = self.fast_wordpiece_vocab(tokens)
        # A word of at most N characters has at most 4N UTF-8 bytes; the character limit itself is
        # applied before FastWordpieceTokenizer, which only knows bytes.
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=fast_vocab, suffix_indicator="##",
            max_bytes_per_word=4 * self.max_input_chars_per_word,
            token_out_type=tf.int32, unknown_token=unk_token, no_pretokenization=True,
            support_detokenization=False)
        self._long_lookup = self._long_piece_lookup(vocab) if has_long_pieces else None
        # Code points each token covers in a word (for offsets); [UNK] is handled apart.
        self._piece_chars = np.array(
            [len(t) - 2 if t.startswith("##") and len(t) > 2 else len(t) for t in tokens],
            dtype=np.int64)
        # Strings and ragged tensors must reach `call` as TensorFlow tensors, unconverted.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    def fast_wordpiece_vocab(self, tokens):
        """The vocabulary as given to FastWordpieceTokenizer, which caps pieces at 256 bytes.

        A piece longer than `max_input_chars_per_word` characters can never match (such words
        are [UNK] first), and one longer than 256 bytes is left to the exact path; both are
        replaced by a placeholder that no word can match (words never contain brackets),
        keeping every other id in place.

        Returns:
          (list of str tokens, whether any reachable piece is longer than 256 bytes).
        """
        out = []
        has_long_pieces = False
        for index, token in enumerate(tokens):
            piece = token[2:] if token.startswith("##") else token
            if token != self.unk_token and (
                    len(piece) > self.max_input_chars_per_word
                    or len(piece.encode("utf-8")) > _MAX_PIECE_BYTES):
                if len(piece) <= self.max_input_chars_per_word:
                    has_long_pieces = True
                token = f"[unreachable {index}]"
            out.append(token)
        return out, has_long_pieces

    def _long_piece_lookup(self, vocab):
        """Resource-free exact lookup for the long-piece path: arrays sorted by fingerprint.

        Returns:
          dict with numpy arrays [V'] "hashes" (int64, sorted), "tokens" (str) and "ids"
          (int32) of the reachable tokens, and the int "max_chars", their longest piece in
          characters (no longer substring needs a look-up).
        """
        tokens = [t for t in vocab
                  if len(t[2:] if t.startswith("##") else t) <= self.max_input_chars_per_word]
        with tf.init_scope():  # The fingerprints must be concrete even if built inside a graph.
            hashes = tf.strings.to_hash_bucket_fast(tokens, _HASH_BUCKETS).numpy()
        order = np.argsort(hashes, kind="stable")
        hashes = hashes[order]
        if np.any(hashes[1:] == hashes[:-1]):
            # Two tokens with one 63-bit fingerprint: the sorted search would see only one.
            raise ValueError("Two vocabulary tokens share a fingerprint; the in-graph tokenizer "
                             "cannot handle this vocabulary's pieces of over "
                             f"{_MAX_PIECE_BYTES} bytes.")
        return {
            "hashes": hashes.astype(np.int64),
            "tokens": np.array([tokens[i] for i in order], dtype=object),
            "ids": np.array([vocab[tokens[i]] for i in order], dtype=np.int32),
            "max_chars": max(len(t[2:] if t.startswith("##") else t) for t in tokens),
        }

    def _long_word_pieces(self, words):
        """Exact greedy longest-match-first WordPiece for a few words, any piece length.

        Every substring of every word is looked up (fingerprint, then text equality), giving
        for each start position the longest matching piece; the greedy walk then follows
        those from position 0. Costs O(chars^2) substrings per word, so it only sees words
        over 256 bytes, and only for vocabularies that hold pieces over 256 bytes.

        Args:
          words: tf.string [K], basic-tokenized words of at most `max_input_chars_per_word`
            characters.

        Returns:
          int32 RaggedTensor [K, (pieces)] of ids; a word with an unmatched piece is [unk_id].
        """
        lookup = self._long_lookup
        num_words = tf.size(words)
        chars = tf.strings.length(words, unit="UTF8_CHAR")  # [K]
        max_chars = tf.reduce_max(tf.concat([chars, [1]], axis=0))  # L (>= 1)
        positions = tf.range(max_chars)
        # Candidate (word k, start s, length n): the flat index k * L + s names (k, s).
        k, s, n = tf.meshgrid(tf.range(num_words), positions, positions + 1, indexing="ij")
        valid = (s + n <= tf.gather(chars, k)) & (n <= lookup["max_chars"])  # [K, L, L]
        k, s, n = (tf.boolean_mask(x, valid) for x in (k, s, n))
        substrings = tf.strings.substr(tf.gather(words, k), s, n, unit="UTF8_CHAR")
        candidates = tf.strings.join([tf.where(s > 0, "##", ""), substrings])
        hashes = tf.strings.to_hash_bucket_fast(candidates, _HASH_BUCKETS)
        table_hashes = tf.constant(lookup["hashes"])
        index = tf.minimum(tf.searchsorted(table_hashes, hashes),
                           tf.size(table_hashes) - 1)
        found = ((tf.gather(table_hashes, index) == hashes)
                 & (tf.gather(tf.constant(lookup["tokens"], tf.string), index) == candidates))
        # For each (k, s): the longest matching length (0: none) and its id.
        segment = k * max_chars + s
        num_segments = num_words * max_chars
        best_len = tf.math.unsorted_segment_max(tf.where(found, n, 0), segment, num_segments)
        best_len = tf.maximum(best_len, 0)  # Segments without candidates give INT_MIN.
        is_best = found & (n == tf.gather(best_len, segment))
        best_id = tf.math.unsorted_segment_max(
            tf.where(is_best, tf.gather(tf.constant(lookup["ids"]), index), -1),
            segment, num_segments)
        best_len = tf.reshape(best_len, [num_words, max_chars])
        best_id = tf.reshape(best_id, [num_words, max_chars])

        def walk(pos, failed, on_path):
            active = (pos < chars) & ~failed
            safe_pos = tf.minimum(pos, max_chars - 1)
            step = tf.gather(best_len, safe_pos, batch_dims=1)
            failed |= active & (step == 0)
            take = active & (step > 0)
            here = tf.one_hot(safe_pos, max_chars, on_value=True, off_value=False)
            on_path |= here & take[:, None]
            return tf.where(take, pos + step, pos), failed, on_path

        _, failed, on_path = tf.while_loop(
            lambda pos, failed, _: tf.reduce_any((pos < chars) & ~failed), walk,
            (tf.zeros([num_words], tf.int32), tf.zeros([num_words], tf.bool),
             tf.zeros([num_words, max_chars], tf.bool)))
        # A word with an unmatched piece is one [UNK], kept at position 0.
        first = tf.equal(positions, 0)[None, :]
        on_path = tf.where(failed[:, None], first, on_path)
        ids = tf.where(failed[:, None], self.unk_id, best_id)
        return tf.ragged.boolean_mask(ids, on_path)

    @property
    def vocab_size(self):
        return len(self.vocabulary)

    def _normalize(self, text):
        """The per-character rules on tf.string [B], keeping track of where each output came from.

        Returns:
          (cps, normalized, source): the decoded input, int32 RaggedTensor [B, (C)] of code
          points of `valid_utf8(text)`; the normalized text, int32 RaggedTensor [B, (M)] of code
          points; and int32 [M], for each normalized code point the index in `cps.flat_values`
          of the input code point it comes from.
        """
        text = valid_utf8(text)
        if self._sigma_pattern is not None:
            # Same length in code points: Σ and ς are one code point each.
            text = tf.strings.regex_replace(text, self._sigma_pattern,
                                            tokenization.FINAL_SIGMA_REWRITE)
        cps = tf.strings.unicode_decode(text, "UTF-8")  # [B, (C)] int32 code points
        flat_cps = cps.flat_values  # [N]
        codes = _lookup(self._block_index, self._blocks, flat_cps)  # [N]
        # Character i becomes template[codes[i]], a code-point sequence in which -1 stands for
        # the character itself. Expand all templates at once: output position j comes from
        # character source[j], at offset[j] within its template.
        lengths = tf.gather(tf.constant(self._template_lengths), codes)  # [N]
        source = tf.repeat(tf.range(tf.size(flat_cps)), lengths)  # [M]
        offset = tf.range(tf.size(source)) - tf.gather(tf.cumsum(lengths, exclusive=True), source)
        values = tf.gather(
            tf.constant(self._template_values),
            tf.gather(tf.gather(tf.constant(self._template_starts), codes), source) + offset)
        out_cps = tf.where(values < 0, tf.gather(flat_cps, source), values)  # [M]
        row_lengths = tf.math.unsorted_segment_sum(lengths, cps.value_rowids(), cps.nrows())
        normalized = tf.RaggedTensor.from_row_lengths(out_cps, tf.cast(row_lengths, tf.int64))
        return cps, normalized, source

    def split_words(self, inputs):
        """Basic tokenization: tf.string [B] -> tf.string RaggedTensor [B, (words)]."""
        text = tf.convert_to_tensor(inputs, dtype=tf.string)
        if text.shape.rank != 1:
            raise ValueError(f"BertTokenizerLayer expects a tf.string tensor of shape [batch] or "
                             f"a scalar, got shape {text.shape}.")
        _, normalized, _ = self._normalize(text)
        return tf.strings.split(tf.strings.unicode_encode(normalized, "UTF-8"))

    def _word_pieces(self, flat_words):
        """WordPiece of basic-tokenized words: tf.string [N] -> int32 RaggedTensor [N, (pieces)]."""
        too_long = tf.strings.length(flat_words, unit="UTF8_CHAR") > self.max_input_chars_per_word
        # The unknown token is itself a vocabulary entry, so WordPiece maps it to unk_id.
        flat_words = tf.where(too_long, self.unk_token, flat_words)
        flat_pieces = self._wordpiece.tokenize(flat_words)  # [N, (pieces)]
        if self._long_lookup is None:
            return flat_pieces
        # Only words over 256 bytes can hold a piece FastWordpieceTokenizer lacks.
        is_long = tf.strings.length(flat_words) > _MAX_PIECE_BYTES  # [N]
        long_pieces = self._long_word_pieces(tf.boolean_mask(flat_words, is_long))
        num = tf.size(flat_words)
        rank_among_long = tf.cumsum(tf.cast(is_long, tf.int32), exclusive=True)
        # Row n of the result: row n of flat_pieces, or the long word's exact row.
        rows = tf.where(is_long, num + rank_among_long, tf.range(num))
        return tf.gather(
            tf.concat([flat_pieces, long_pieces.with_row_splits_dtype(
                flat_pieces.row_splits.dtype)], axis=0), rows)

    def tokenize_words(self, inputs):
        """tf.string [B] (or scalar) -> int32 RaggedTensor [B, (words), (pieces)] of ids."""
        text, scalar = batch_of_strings(inputs, "BertTokenizerLayer")
        words = self.split_words(text)
        pieces = words.with_flat_values(self._word_pieces(words.flat_values))
        return pieces[0] if scalar else pieces

    def tokenize_with_offsets(self, inputs):
        """Like `tokenize_words`, plus the span of the input each piece comes from.

        Offsets count code points of `valid_utf8(inputs)`, which for valid UTF-8 input are the
        Python `str` indices of the text: piece k is `text[starts[k]:ends[k]]` before
        normalization (e.g. "Unaff" for the pieces "un" + "##aff" of "Unaffable" spans [0, 2)
        and [2, 5)). A word that becomes [UNK] spans the whole word. Characters the rules
        delete (controls, accents of uncased models) inside a word lie within the word's
        span, inside or between its pieces' spans; at its edges they lie outside (a tagger's
        words take them: `tokenize_with_word_spans`). When one character expands into several
        code points that WordPiece splits (an uncased Hangul syllable decomposes into jamo),
        both pieces cover that character.

        Args:
          inputs: tf.string [B] (or a scalar).

        Returns:
          (ids, starts, ends): RaggedTensors [B, (W), (P)] (or [(W), (P)] for a scalar):
          int32 ids, identical to `tokenize_words`, and int64 code-point offsets.
        """
        text, scalar = batch_of_strings(inputs, "BertTokenizerLayer")
        words, starts, ends, _, _ = self._pieces_with_offsets(text)
        outputs = (words, words.with_flat_values(starts), words.with_flat_values(ends))
        return tuple(o[0] for o in outputs) if scalar else outputs

    def _pieces_with_offsets(self, text):
        """`tokenize_with_offsets` of tf.string [B], and where its words come from.

        Returns:
          (words, starts, ends, cps, word_source): int32 ids [B, (W), (P)]; int64 [Q], the
          offsets of its flat pieces; the decoded input, int32 RaggedTensor [B, (C)] of code
          points; and int32 [N], for each word the index in `cps.flat_values` of the input
          character its first code point comes from.
        """
        cps, normalized, source = self._normalize(text)
        out_cps = normalized.flat_values  # [M]
        out_rows = normalized.value_rowids()  # [M]
        # Input position of each normalized code point, counted within its own text.
        out_chars = (tf.cast(source, tf.int64)
                     - tf.gather(cps.row_starts(), out_rows))  # [M]
        # Words are the runs of non-space code points within a text, as `split_words` finds
        # them: after the rules, " " is the only whitespace left.
        is_char = tf.not_equal(out_cps, ord(" "))
        continues = tf.concat([[False], is_char[:-1] & tf.equal(out_rows[1:], out_rows[:-1])],
                              axis=0)
        starts_word = is_char & ~continues  # [M]
        word_cps = tf.boolean_mask(out_cps, is_char)  # [K]
        word_chars = tf.boolean_mask(out_chars, is_char)  # [K]
        word_of_cp = tf.cumsum(tf.cast(tf.boolean_mask(starts_word, is_char), tf.int64)) - 1
        num_words = tf.reduce_sum(tf.cast(starts_word, tf.int64))
        words_per_row = tf.math.unsorted_segment_sum(
            tf.cast(starts_word, tf.int64), out_rows, normalized.nrows())  # [B]
        # Partitions built here are valid by construction: no run-time checks in the graph.
        word_cps = tf.RaggedTensor.from_value_rowids(word_cps, word_of_cp, nrows=num_words,
                                                     validate=False)  # [N, (chars)]
        pieces = self._word_pieces(tf.strings.unicode_encode(word_cps, "UTF-8"))  # [N, (P)]

        # Pieces of a word cover it in order, each as many code points as its token has
        # (without "##"); an [UNK] piece is the whole word.
        piece_ids = pieces.flat_values  # [Q]
        piece_word = pieces.value_rowids()  # [Q]
        piece_len = tf.where(tf.equal(piece_ids, self.unk_id),
                             tf.gather(word_cps.row_lengths(), piece_word),
                             tf.gather(tf.constant(self._piece_chars), piece_ids))  # [Q]
        before = tf.cumsum(piece_len, exclusive=True)
        start_in_word = before - tf.gather(before, tf.gather(pieces.row_starts(), piece_word))
        first = tf.gather(word_cps.row_starts(), piece_word) + start_in_word  # [Q] into [K]
        starts = tf.gather(word_chars, first)
        ends = tf.gather(word_chars, first + piece_len - 1) + 1

        words = tf.RaggedTensor.from_row_lengths(pieces, words_per_row,
                                                 validate=False)  # [B, (W), (P)]
        return words, starts, ends, cps, tf.boolean_mask(source, starts_word)

    def tokenize_with_word_spans(self, inputs):
        """The words a tagger labels, each with its ids and its span in the input: the words
        of `bert_tf.tasks.token_tagger.split_words` (whitespace apart, each punctuation and CJK
        character a word), as bert-tf-tag reads CoNLL words and the tagging export answers.

        A word's ids are `WordpieceTokenizer.encode_word(word)`'s, `[unk_id]` for a word
        without pieces, as the tagging data give it (`tagging_data.make_windows`): a word of
        characters the rules delete only ("\\x00", a byte-order mark before a space) is one
        [UNK], and one the rules split (at U+2028, or uncased at "\\u2260", whose NFD holds
        "=") holds the pieces of all its parts; there the ids differ from `tokenize_words`.
        A word spans all its characters, `text[start:end]` whole: the characters the rules
        delete at its edges too ("Cafe\\u0301" with an uncased model, "\\x00null\\x01"), which
        `tokenize_with_offsets`' pieces leave out. A capital sigma is lower-cased in the
        context of the whole text, as `tokenize_words` does (Python's `encode_word` sees the
        word alone: "\\u0391\\u03a3.\\u0392" makes its sigma final there, not here).

        Args:
          inputs: tf.string [B] (or a scalar).

        Returns:
          (ids, starts, ends): int32 RaggedTensor [B, (W), (P)] of each word's ids, and int64
          RaggedTensors [B, (W)] of its code-point offsets into `valid_utf8(inputs)` (or
          [(W), (P)] and [(W)] for a scalar).
        """
        text, scalar = batch_of_strings(inputs, "BertTokenizerLayer")
        words, _, _, cps, word_source = self._pieces_with_offsets(text)
        flat_cps, rows = cps.flat_values, cps.value_rowids()  # [C]
        block_index, blocks = _tagger_classes()
        kind = _lookup(block_index, blocks, flat_cps)  # [C]
        # A tagger's word starts at a character alone, and at a character of a word that does
        # not follow one in its text; it ends likewise.
        in_word = tf.equal(kind, _IN_WORD)
        joins = tf.equal(rows[1:], rows[:-1]) & in_word[1:] & in_word[:-1]  # [C - 1]
        alone = tf.equal(kind, _WORD_ALONE)
        word_start = alone | (in_word & ~tf.concat([[False], joins], axis=0))
        word_end = alone | (in_word & ~tf.concat([joins, [False]], axis=0))
        first = tf.where(word_start)[:, 0]  # [T]
        word_rows = tf.gather(rows, first)
        row_starts = tf.gather(cps.row_starts(), word_rows)
        starts = first - row_starts
        ends = tf.where(word_end)[:, 0] + 1 - row_starts
        # The rules' words (runs of normalized code points) lie inside the tagger's, which
        # hold one or several of them (a character the rules delete, or split at, as U+2028
        # or an uncased "\u2260", is inside a tagger's word).
        tagger_word = tf.cumsum(tf.cast(word_start, tf.int64)) - 1  # [C]
        piece_word = tf.gather(tf.gather(tagger_word, word_source),
                               words.values.value_rowids())  # [Q]
        num_words = tf.size(first, out_type=tf.int64)
        lengths = tf.math.unsorted_segment_sum(tf.ones_like(piece_word), piece_word,
                                               num_words)  # [T]
        # A word the rules delete whole is one [UNK]: every piece moves past the empty words
        # before its own, into [UNK]s laid out for all.
        empty_before = tf.cumsum(tf.cast(tf.equal(lengths, 0), tf.int64), exclusive=True)
        position = tf.range(tf.size(piece_word, out_type=tf.int64)) + tf.gather(empty_before,
                                                                               piece_word)
        lengths = tf.maximum(lengths, 1)
        ids = tf.tensor_scatter_nd_update(
            tf.fill([tf.reduce_sum(lengths)], tf.constant(self.unk_id, tf.int32)),
            position[:, None], words.flat_values)
        pieces = tf.RaggedTensor.from_row_lengths(ids, lengths, validate=False)  # [T, (P)]
        outputs = tuple(tf.RaggedTensor.from_value_rowids(values, word_rows, nrows=cps.nrows(),
                                                          validate=False)
                        for values in (pieces, starts, ends))
        return tuple(o[0] for o in outputs) if scalar else outputs

    def tokenize_question_and_context(self, questions, contexts):
        """SQuAD's raw text: the questions tokenized whole, the contexts word by word with the
        characters each piece spans (answers are cut from the context at piece offsets).

        Args:
          questions, contexts: tf.string [B].

        Returns:
          (question_ids int32 [B, (Q')], and the contexts' `tokenize_with_offsets`: ids, starts,
          ends [B, (W), (P)]). One tokenizer call for both keeps one copy of the tables in a
          graph.
        """
        batch = tf.shape(questions)[0]
        ids, starts, ends = self.tokenize_with_offsets(
            tf.concat([questions, contexts], axis=0))  # [2B, (W), (P)]
        return ids[:batch].merge_dims(1, 2), ids[batch:], starts[batch:], ends[batch:]

    def corpus_lines(self, lines):
        """tf.string [L] -> the lines as pre-training tokenizes them (WordpieceTokenizer
        .encode_line): stripped of whitespace (`str.isspace`, `strip_whitespace`), so a line of
        whitespace only is "" (a document break)."""
        return strip_whitespace(lines)

    def check_masks_in_text(self):
        """A mask written in the text as "[MASK]" is always found (see tokenize_with_masks)."""

    def tokenize_with_masks(self, inputs):
        """tf.string [B] -> int32 RaggedTensor [B, (T)] with mask_id at each "[MASK]" of the
        text: the text is split there and the parts tokenized as usual."""
        parts = tf.strings.split(inputs, sep=MASK_TOKEN)  # [B, (parts)]
        part_ids = self(parts.flat_values)  # [N, (T)]
        is_last = tf.equal(tf.ragged.range(parts.row_lengths()) + 1,
                           parts.row_lengths()[:, tf.newaxis]).flat_values  # [N]
        mask_count = tf.cast(~is_last, tf.int64)
        masks = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(mask_count)], self.mask_id), mask_count, validate=False)
        with_masks = tf.concat([part_ids, masks], axis=1)  # [N, (T + 1 or T)]
        return parts.with_flat_values(with_masks).merge_dims(1, 2)

    def token_texts(self):
        """What each id stands for, id = index: the vocabulary's tokens ("##ing")."""
        return list(self.vocabulary)

    def asset(self):
        """(file name, text) of the vocabulary an export carries in its assets/."""
        return VOCAB_FILE, "".join(token + "\n" for token in self.vocabulary)

    def export_info(self):
        """What bert_tf_export.json records of this tokenizer."""
        return {"do_lower_case": self.do_lower_case}

    def call(self, inputs):
        pieces = self.tokenize_words(inputs)
        if pieces.shape.rank == 2:  # Scalar input: [(words), (pieces)].
            return pieces.merge_dims(0, 1)
        return pieces.merge_dims(1, 2)

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_file": list(self.vocabulary),
            "do_lower_case": self.do_lower_case,
            "max_input_chars_per_word": self.max_input_chars_per_word,
            "unk_token": self.unk_token,
        })
        return config
