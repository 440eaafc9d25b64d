"""In-graph byte-level BPE: strings -> the ids `BpeTokenizer` (and Hugging Face `tokenizers`) give.

The stages of `bert_tf.text.bpe`, with stock TensorFlow and tensorflow_text ops and constants
only (no lookup-table resources), so the layer runs in `tf.data`, `tf.function` and SavedModels
that a fresh process loads with only tensorflow and tensorflow_text imported:

1. Added tokens: an alternation of the tokens' literal text, longest first (RE2's
   leftmost-first choice is then `tokenizers`' leftmost-longest), with `\\s*` before a token
   that strips on its left and after one that strips on its right, cuts the text (by
   `regex_replace` marking the cuts with the byte 0xFF, which valid UTF-8 never holds, then
   `strings.split`: tf_text.regex_split stops at a NUL character). A match is mapped to its id
   by comparing it (stripped) to every token's text. Done on the raw text for
   `normalized: false` tokens, then on the normalized rest (`normalize_utf8`).
2. Words: RE2 has no lookahead for GPT-2's `\\s+(?!\\S)`, so the split pattern matches
   whitespace one character at a time (a space before a word still joins it); runs are then
   rebuilt: all of a run is one word, except that its last character is a word of its own
   when a word follows that did not take it.
3. BPE: a word whose bytes are a vocabulary token that BPE leaves whole (found by 63-bit
   fingerprint in a sorted constant array, then compared) is that token. Other words run a
   `tf.while_loop` over a dense [words, bytes] matrix of symbol ids (short and long words
   apart, each step only as wide as its longest active word). Pair ranks are looked up by
   searchsorted in the sorted pair keys. Each step, a word merges at once every pair ranked
   below a bound T, the lowest rank at which that could differ from merging one pair at a
   time (two overlapping pairs below T, or a merge below T making a new pair below T); when
   no pair is below T, it merges the leftmost occurrences of its lowest-ranked pair up to the
   first that makes a lower pair. Either way the result is that of `tokenizers`' priority
   queue (lowest rank first, leftmost on ties). Words leave the loop once nothing merges.

Limits of the in-graph face (the Python `BpeTokenizer` has none of them; the constructor
raises): the normalizer may use NFC / NFD / NFKC / NFKD and Lowercase only; no added token may
be `single_word`; and in a stage with a stripping token, no added token may begin or end with
whitespace. Invalid UTF-8 input is replaced by U+FFFD per bad byte before tokenizing.
"""

import json

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.file_names import TOKENIZER_FILE
from bert_tf.text import bpe, word_offsets
from bert_tf.text.layers import (PYTHON_WHITESPACE, batch_of_strings, strip_whitespace,
                                 valid_utf8)

_HASH_BUCKETS = 2**63 - 1
_NO_RANK = np.iinfo(np.int32).max
# Words up to this many bytes go through the merge loop together, longer ones apart.
_SHORT_WORD_BYTES = 16


def _alternation(tokens, contents, space):
    """RE2 alternation of added tokens, longest literal first, with strip rules as `\\s*`."""
    order = sorted(range(len(tokens)), key=lambda i: -len(contents[i].encode("utf-8")))
    parts = []
    for i in order:
        part = re2_literal(contents[i])
        if tokens[i].lstrip:
            part = f"[{space}]*" + part
        if tokens[i].rstrip:
            part += f"[{space}]*"
        parts.append(part)
    return "|".join(parts)


def re2_literal(text):
    """`text` as an RE2 literal: every non-alphanumeric character as \\x{...}."""
    return "".join(c if c.isascii() and c.isalnum() else "\\x{%x}" % ord(c) for c in text)


def regex_pieces(text, pattern):
    """Splits tf.string [K] into the matches of `pattern` and the text between them, in order.

    Returns:
      (pieces, parent): tf.string [N], the non-empty pieces, and int32 [N], the index of the
      string each comes from. (tf_text.regex_split stops at a NUL character; regex_replace
      does not, and valid UTF-8 never holds the byte 0xFF that marks the cuts.)
    """
    marked = tf.strings.regex_replace(text, pattern, b"\xff\\0\xff")
    split = tf.strings.split(marked, sep=b"\xff")
    pieces, parent = split.flat_values, _parents(split.row_splits)
    keep = tf.strings.length(pieces) > 0
    return tf.boolean_mask(pieces, keep), tf.boolean_mask(parent, keep)


def _parents(row_splits):
    """Row of each value of a ragged row partition: int32 [row_splits[-1]]."""
    splits = tf.cast(row_splits, tf.int32)
    return tf.searchsorted(splits[1:], tf.range(splits[-1]), side="right")


def _in_order(parent, *values):
    """Sorts values (each [N]) by parent, keeping the order among equal parents."""
    order = tf.argsort(parent, stable=True)
    return (tf.gather(parent, order),) + tuple(tf.gather(v, order) for v in values)


def _compact(dense, keep):
    """Moves the kept entries of each row of int32 [R, L] to its front; -1 after them."""
    length = tf.shape(dense)[1]
    columns = tf.broadcast_to(tf.range(length)[None, :], tf.shape(dense))
    order = tf.argsort(tf.where(keep, columns, columns + length), axis=1, stable=True)
    kept = tf.reduce_sum(tf.cast(keep, tf.int32), axis=1, keepdims=True)
    return tf.where(columns < kept, tf.gather(dense, order, batch_dims=1), -1)


def _lowercase(text):
    """`bpe.lowercase` on tf.string [N]: ICU's full lower-case mapping (the one Rust and
    Python use), whose only context rule in the root locale, a word-final sigma, `tokenizers`
    does not apply: every "Σ" becomes "σ" first. The op stops at a NUL character, so the text
    is lowered between NULs and put back together. (ICU takes its default locale from the
    environment: under a Turkish or Lithuanian locale "I" would lower differently.)"""
    parts = tf.strings.split(tf.strings.regex_replace(text, "\u03a3", "\u03c3"), "\x00")
    lowered = tf.strings.lower(parts.flat_values, encoding="utf-8")  # [P]
    last = tf.equal(tf.range(tf.size(lowered, out_type=tf.int64)) + 1,
                    tf.gather(parts.row_limits(), parts.value_rowids()))
    lowered = tf.strings.join([lowered, tf.where(last, "", tf.constant("\x00"))])
    return tf.strings.reduce_join(parts.with_flat_values(lowered), axis=1)


def _check_graph_support(spec):
    steps = [s for s in spec.normalizer
             if s not in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase")]
    if steps:
        raise ValueError(f"{spec.source}: normalizer {steps[0]} is not supported in-graph "
                         "(NFC, NFD, NFKC, NFKD and Lowercase are); use the Python "
                         "BpeTokenizer.")
    for token in spec.added_tokens:
        if token.single_word:
            raise ValueError(f"{spec.source}: added token {token.content!r} is single_word, "
                             "which the in-graph tokenizer does not support.")
    for normalized in (False, True):
        stage = [t for t in spec.added_tokens if t.normalized == normalized]
        if any(t.lstrip or t.rstrip for t in stage) and any(
                t.content[:1].isspace() or t.content[-1:].isspace() for t in stage):
            raise ValueError(f"{spec.source}: added tokens that strip whitespace beside tokens "
                             "that begin or end with whitespace are not supported in-graph.")


@keras.saving.register_keras_serializable(package="bert_tf")
class BpeTokenizerLayer(word_offsets.WholeWordLayer, keras.layers.Layer):
    """Tokenizes strings into byte-level BPE ids inside the TensorFlow graph.

    Output equals `BpeTokenizer(tokenizer_json).encode(text)` (no [CLS]/[SEP]; pack with
    `BertPackInputs(cls_id=layer.cls_id, sep_id=layer.sep_id, pad_id=layer.pad_id)`).

    Args:
      tokenizer_json: path of a byte-level BPE tokenizer.json, or its parsed dict (what
        `get_config` stores, so saved models do not depend on the file); the layer of a
        `BpeTokenizer` is `bert_tf.text.tokenizer_layer(tokenizer)`.
      roles: optional dict role -> token for the special ids (see `BpeTokenizer`).

    Call args:
      inputs: tf.string tensor [B] (or a scalar), UTF-8 text.

    Returns:
      int32 RaggedTensor [B, (tokens)] of ids (or [tokens] for a scalar input).

    Examples:

    >>> layer = BpeTokenizerLayer("tokenizer.json")  # doctest: +SKIP
    >>> layer(tf.constant(["Hello world"])).to_list()  # doctest: +SKIP
    [[13225, 1533]]
    """

    # The in-graph side of the bert_tf.text.Tokenizer interface.
    kind = "byte-level BPE"
    # TensorFlow Text has LiteRT kernels for WordPiece only.
    litert_kernels = False

    def __init__(self, tokenizer_json, roles=None, **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        if not isinstance(tokenizer_json, dict):
            if not bpe.fileio.isfile(tokenizer_json):
                raise FileNotFoundError(f"tokenizer file '{tokenizer_json}' does not exist.")
            with bpe.fileio.open_file(tokenizer_json, "rb") as f:
                try:
                    tokenizer_json = json.loads(f.read().decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as e:
                    raise ValueError(f"tokenizer file '{tokenizer_json}': not a JSON tokenizer "
                                     f"file ({e}).") from None
        self.tokenizer_json = tokenizer_json
        self.roles = dict(roles) if roles else None
        tokenizer = bpe.BpeTokenizer(tokenizer_json, roles=self.roles)
        spec = tokenizer.spec
        _check_graph_support(spec)
        self.spec = spec
        self._take_roles(tokenizer)

        space = bpe.character_classes()[2]
        self._space_class = space
        self._word_pattern = bpe.re2_split_pattern()
        self._stages = []
        for normalized in (False, True):
            tokens = [t for t in spec.added_tokens if t.normalized == normalized]
            contents = [bpe.normalize(t.content, spec.normalizer) if normalized else t.content
                        for t in tokens]
            if tokens:
                self._stages.append({
                    "pattern": _alternation(tokens, contents, space),
                    "contents": np.array([c.encode("utf-8") for c in contents], dtype=object),
                    "ids": np.array([t.id for t in tokens], dtype=np.int32),
                })
            else:
                self._stages.append(None)

        # Symbols of the 256 bytes (-1: not in the vocabulary).
        self._byte_ids = np.array([-1 if i is None else i for i in tokenizer._byte_ids],
                                  dtype=np.int32)
        self._bytes_missing = bool((self._byte_ids < 0).any())
        # Pairs as int64 keys left * V + right, sorted, with their rank and merged id.
        size = self.vocab_size
        items = sorted((a * size + b, rank, new) for (a, b), (rank, new)
                       in tokenizer._merges.items())
        self._merge_keys = np.array([k for k, _, _ in items] or [-1], dtype=np.int64)
        self._merge_ranks = np.array([r for _, r, _ in items] or [_NO_RANK], dtype=np.int32)
        self._merge_ids = np.array([n for _, _, n in items] or [0], dtype=np.int32)
        self._whole_words = self._whole_word_table(tokenizer)
        # Strings and ragged tensors must reach `call` as TensorFlow tensors, unconverted.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    def _whole_word_table(self, tokenizer):
        """Vocabulary tokens that BPE of their own bytes leaves whole, by fingerprint.

        Returns:
          dict of numpy arrays sorted by "hashes" (int64): "words" (bytes), "ids" (int32).
        """
        added = {t.id for t in self.spec.added_tokens}
        words, ids = [], []
        for index, token in enumerate(self.spec.vocab):
            data = bpe.token_bytes(token) if token and index not in added else None
            if not data:
                continue
            if self.spec.ignore_merges or tokenizer._merge(data) == [index]:
                words.append(data)
                ids.append(index)
        with tf.init_scope():  # The fingerprints must be concrete even if built inside a graph.
            hashes = tf.strings.to_hash_bucket_fast(
                np.array(words or [b""], dtype=object), _HASH_BUCKETS).numpy()
        order = np.argsort(hashes, kind="stable")
        return {"hashes": hashes[order].astype(np.int64),
                "words": np.array(words or [b""], dtype=object)[order],
                "ids": np.array(ids or [-1], dtype=np.int32)[order]}

    # -- stage 1: added tokens --------------------------------------------------------------

    def _split_added(self, strings, fixed, stage):
        """Splits the text entries (fixed == -1) on a stage's added tokens.

        Args:
          strings: tf.string [K]; fixed: int32 [K], an added token's id or -1 for text.
          stage: dict of the stage's pattern, contents and ids.

        Returns:
          (parent, strings, fixed): int32 [K'], the entry each new entry comes from, and the
          new entries in order.
        """
        pattern = stage["pattern"]
        pieces, parent = regex_pieces(tf.where(fixed >= 0, "", strings), pattern)
        is_token = tf.strings.regex_full_match(pieces, pattern)
        stripped = tf.strings.regex_replace(
            pieces, f"^[{self._space_class}]+|[{self._space_class}]+$", "")
        contents = tf.constant(stage["contents"], tf.string)
        exact = tf.equal(pieces[:, None], contents[None, :])  # [N, A]
        loose = tf.equal(stripped[:, None], contents[None, :])
        which = tf.argmax(tf.cast(tf.where(tf.reduce_any(exact, axis=1, keepdims=True),
                                           exact, loose), tf.int32), axis=1)
        piece_fixed = tf.where(is_token, tf.gather(tf.constant(stage["ids"]), which), -1)
        kept = tf.cast(tf.where(fixed >= 0)[:, 0], tf.int32)  # Entries already tokens.
        return _in_order(tf.concat([kept, parent], axis=0),
                         tf.concat([tf.gather(strings, kept), pieces], axis=0),
                         tf.concat([tf.gather(fixed, kept), piece_fixed], axis=0))

    # -- stage 2: words ---------------------------------------------------------------------

    def _words(self, pieces):
        """GPT-2 words of text pieces.

        Args:
          pieces: tf.string [K].

        Returns:
          (words, piece): tf.string [W] in order, and int32 [W], the piece of each.
        """
        if self.spec.add_prefix_space:
            keep = (tf.strings.length(pieces) == 0) | tf.equal(tf.strings.substr(pieces, 0, 1),
                                                               " ")
            pieces = tf.where(keep, pieces, tf.strings.join([" ", pieces]))
        if not self.spec.use_regex:
            keep = tf.strings.length(pieces) > 0
            return (tf.boolean_mask(pieces, keep),
                    tf.boolean_mask(tf.range(tf.size(pieces)), keep))
        tokens, piece = regex_pieces(pieces, self._word_pattern)  # [T]
        is_space = tf.strings.regex_full_match(tokens, f"[{self._space_class}]")
        starts_with_space = tf.equal(tf.strings.substr(tokens, 0, 1), " ")
        same_as_prev = tf.concat([[False], tf.equal(piece[1:], piece[:-1])], axis=0)
        same_as_next = tf.concat([tf.equal(piece[1:], piece[:-1]), [False]], axis=0)
        prev_space = tf.concat([[False], is_space[:-1]], axis=0) & same_as_prev
        next_word = tf.concat([~is_space[1:] & ~starts_with_space[1:], [False]],
                              axis=0) & same_as_next
        # A run of whitespace is one word; its last character is a word of its own when the
        # word after it did not take it (it is not a space).
        starts = ~is_space | ~prev_space | next_word
        group = tf.cumsum(tf.cast(starts, tf.int32)) - 1
        words = tf.strings.unsorted_segment_join(tokens, group,
                                                 tf.reduce_sum(tf.cast(starts, tf.int32)))
        return words, tf.boolean_mask(piece, starts)

    # -- stage 3: BPE -----------------------------------------------------------------------

    def _word_ids(self, words):
        """BPE ids of words.

        Args:
          words: tf.string [W], UTF-8 bytes.

        Returns:
          (ids, word): int32 [I] in order, and int32 [I], the word of each.
        """
        table = self._whole_words
        hashes = tf.strings.to_hash_bucket_fast(words, _HASH_BUCKETS)
        table_hashes = tf.constant(table["hashes"])
        index = tf.minimum(tf.searchsorted(table_hashes, hashes), tf.size(table_hashes) - 1)
        whole = ((tf.gather(table_hashes, index) == hashes)
                 & (tf.gather(tf.constant(table["words"], tf.string), index) == words))
        whole_words = tf.cast(tf.where(whole)[:, 0], tf.int32)
        other_words = tf.cast(tf.where(~whole)[:, 0], tf.int32)
        merged, merged_row = self._merge(tf.gather(words, other_words))
        word, ids = _in_order(
            tf.concat([whole_words, tf.gather(other_words, merged_row)], axis=0),
            tf.concat([tf.gather(tf.gather(tf.constant(table["ids"]), index), whole_words),
                       merged], axis=0))
        return ids, word

    def _merge(self, words):
        """BPE merges of words by rank, short and long words apart.

        The merge loop works on a [words, bytes] matrix as wide as the longest word; one long
        word (a sentence of CJK without spaces) would otherwise make every word that wide.

        Args:
          words: tf.string [R], UTF-8 bytes.

        Returns:
          (ids, row): int32 [I] in order, and int32 [I], the word of each.
        """
        short = tf.strings.length(words) <= _SHORT_WORD_BYTES
        groups = [tf.cast(tf.where(short)[:, 0], tf.int32),
                  tf.cast(tf.where(~short)[:, 0], tf.int32)]
        ids, rows = [], []
        for group in groups:
            group_ids, group_rows = self._merge_words(tf.gather(words, group))
            ids.append(group_ids)
            rows.append(tf.gather(group, group_rows))
        rows, ids = _in_order(tf.concat(rows, axis=0), tf.concat(ids, axis=0))
        return ids, rows

    def _merge_words(self, words):
        """BPE merges of words by rank: tf.string [R] -> (ids, row) as `_merge`."""
        lengths = tf.strings.length(words)  # Bytes.
        width = tf.reduce_max(tf.concat([lengths, [1]], axis=0))
        byte_values = tf.cast(tf.io.decode_raw(words, tf.uint8, fixed_length=width), tf.int32)
        columns = tf.range(width)[None, :]
        dense = tf.where(columns < lengths[:, None],
                         tf.gather(tf.constant(self._byte_ids), byte_values), -1)  # [R, L]
        if self._bytes_missing:
            if self.spec.unk_id is None:  # tokenizers drops bytes it has no token for.
                dense = _compact(dense, dense >= 0)
            else:
                dense = tf.where((columns < lengths[:, None]) & (dense < 0), self.spec.unk_id,
                                 dense)
        keys, ranks = tf.constant(self._merge_keys), tf.constant(self._merge_ranks)
        new_ids, size = tf.constant(self._merge_ids), tf.constant(self.vocab_size, tf.int64)

        def lookup(left, right):
            """(rank, merged id) of symbol pairs; rank _NO_RANK where there is no merge."""
            key = tf.cast(left, tf.int64) * size + tf.cast(right, tf.int64)
            index = tf.minimum(tf.searchsorted(keys, tf.reshape(key, [-1])), tf.size(keys) - 1)
            index = tf.reshape(index, tf.shape(key))
            found = (tf.gather(keys, index) == key) & (left >= 0) & (right >= 0)
            return tf.where(found, tf.gather(ranks, index), _NO_RANK), tf.gather(new_ids, index)

        def step(dense, active):
            """One round of merges on the rows still active. dense: int32 [R, L]."""
            rows = tf.where(active)[:, 0]
            work = tf.gather(dense, rows)  # [A, L]
            # Only as wide as the longest active row (merges shorten rows).
            length = tf.maximum(tf.reduce_max(tf.reduce_sum(tf.cast(work >= 0, tf.int32),
                                                            axis=1)), 1)
            work = work[:, :length]
            padded = tf.pad(work, [[0, 0], [1, 2]], constant_values=-1)  # [A, L + 3]
            left, right = padded[:, 1:length], padded[:, 2:length + 1]  # [A, L - 1]
            rank, merged = lookup(left, right)
            best = tf.reduce_min(rank, axis=1, keepdims=True)  # [A, 1]
            hit = (rank == best) & (best < _NO_RANK)
            # Occurrences of the best pair that overlap (a a a for the pair (a, a)): take every
            # other one of a run, from its left, as the sequential merges do.
            run_start = hit & ~tf.pad(hit[:, :-1], [[0, 0], [1, 0]])
            run_id = tf.cumsum(tf.cast(run_start, tf.int32), axis=1)
            columns = tf.range(length - 1)[None, :]
            columns = tf.broadcast_to(columns, tf.shape(hit))
            run = tf.range(tf.shape(hit)[0])[:, None] * length + run_id  # One id per row's run.
            start_col = tf.gather(tf.math.unsorted_segment_min(
                tf.where(hit, columns, length), run, tf.shape(hit)[0] * length), run)
            chosen = hit & tf.equal((columns - start_col) % 2, 0)
            # Each merge makes pairs with its left neighbour (merged already if the previous
            # chosen pair ends there) and its original right one; once one of them ranks
            # below the best pair, the sequential merges would take it next: stop there.
            prev_chosen = tf.pad(chosen[:, :-2], [[0, 0], [2, 0]])  # The pair two to the left.
            neighbour_left = tf.where(
                prev_chosen, tf.pad(merged[:, :-2], [[0, 0], [2, 0]], constant_values=-1),
                padded[:, :length - 1])
            neighbour_right = padded[:, 3:length + 2]
            rank_left, _ = lookup(neighbour_left, merged)
            rank_right, _ = lookup(merged, neighbour_right)
            lower = chosen & ((rank_left < best) | (rank_right < best))
            first_lower = tf.reduce_min(tf.where(lower, columns, length), axis=1, keepdims=True)
            chosen &= columns <= first_lower
            # Faster when it is exact: every pair ranked below a bound T at once. T is the
            # lowest rank at which that would differ from merging one at a time: two
            # overlapping pairs both below it, or a merge below it making a pair below it
            # (with its original neighbours, or with the merge two to its left).
            new_rank = tf.minimum(lookup(padded[:, :length - 1], merged)[0],
                                  lookup(merged, neighbour_right)[0])
            no_rank = tf.constant(_NO_RANK)
            rank_next = tf.pad(rank[:, 1:], [[0, 0], [0, 1]], constant_values=no_rank)
            rank_2 = tf.pad(rank[:, :-2], [[0, 0], [2, 0]], constant_values=no_rank)
            merged_2 = tf.pad(merged[:, :-2], [[0, 0], [2, 0]], constant_values=-1)
            bound = tf.reduce_min(tf.minimum(
                tf.maximum(rank, tf.minimum(new_rank, rank_next)),
                tf.maximum(tf.maximum(rank, rank_2), lookup(merged_2, merged)[0])),
                axis=1, keepdims=True)  # [A, 1]
            below = rank < bound
            chosen = tf.where(tf.reduce_any(below, axis=1, keepdims=True), below, chosen)
            # Merge: the chosen column takes the merged id, the one after it goes.
            chosen_full = tf.pad(chosen, [[0, 0], [0, 1]])  # [A, L]
            after_chosen = tf.pad(chosen, [[0, 0], [1, 0]])
            work = tf.where(chosen_full, tf.pad(merged, [[0, 0], [0, 1]]), work)
            work = _compact(work, ~after_chosen & (work >= 0))
            work = tf.pad(work, [[0, 0], [0, tf.shape(dense)[1] - length]], constant_values=-1)
            dense = tf.tensor_scatter_nd_update(dense, rows[:, None], work)
            still = tf.scatter_nd(rows[:, None], tf.reduce_any(chosen, axis=1),
                                  tf.shape(active, out_type=tf.int64))
            return dense, still

        active = tf.ones([tf.shape(dense)[0]], tf.bool)
        dense, _ = tf.while_loop(lambda dense, active: tf.reduce_any(active), step,
                                 (dense, active))
        rows = tf.broadcast_to(tf.range(tf.shape(dense)[0])[:, None], tf.shape(dense))
        return tf.boolean_mask(dense, dense >= 0), tf.boolean_mask(rows, dense >= 0)

    # -- the layer --------------------------------------------------------------------------

    # No autograph: the code has no Python control flow on tensors, and converting it took
    # seconds at each trace.
    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, inputs, words="pieces", texts=None):
        """Words of the text, each tokenized as it reads after a space, with their spans: the
        raw-text face of data read word by word (CoNLL tagging words, SQuAD context words).

        Args:
          inputs: tf.string [B].
          words: "pieces" (the GPT-2 pattern's words without their leading space, as CoNLL
            files give words) or "whitespace" (SQuAD's words): see
            `bert_tf.text.word_offsets.tokenize_with_offsets`.
          texts: optional tf.string [T] tokenized whole in the same call (a SQuAD question:
            one call keeps one copy of the tables in a graph).

        Returns:
          (ids, starts, ends): RaggedTensors [B, (W), (P)]: int32 ids, word w of a text
          encoded as `BpeTokenizer.encode_word(word, first=w == 0)`; int64 code-point
          offsets into `valid_utf8(inputs)` of the whole word, for each of its pieces
          (`text[start:end]` is the word: answers and tags cover whole words). With `texts`,
          a fourth: their ids, int32 RaggedTensor [T, (tokens)], as `call` gives them.
        """
        # A vocabulary without every byte can leave a word no piece: it gets [UNK] (as the
        # tagging and SQuAD data give it), or without one it is left out.
        return word_offsets.tokenize_with_offsets(
            self, inputs, words, texts, space_before=True,
            may_leave_words_empty=self._bytes_missing)

    @property
    def do_lower_case(self):
        """True when the file's normalizer lower-cases."""
        return "Lowercase" in self.spec.normalizer

    def corpus_lines(self, lines):
        """tf.string [L] -> the lines as pre-training tokenizes them (BpeTokenizer.encode_line):
        each line's words (str.split()) joined by single spaces, with one in front, so every
        word reads as after a space; a line of whitespace only becomes ""."""
        # create_pretraining_data splits a line into words with str.split().
        words = tf.strings.regex_replace(strip_whitespace(lines), f"{PYTHON_WHITESPACE}+", " ")
        return tf.where(tf.equal(words, ""), words, tf.strings.join([" ", words]))

    def check_masks_in_text(self):
        """A mask written in the text is found as an added token ("[MASK]" for ModernBERT,
        "<mask>" for RoBERTa, with its flags, as the Python tokenizer and Hugging Face
        `tokenizers` find it).

        Raises:
          ValueError: the file has no mask token among its added tokens.
        """
        if self.mask_id is None or self.mask_id not in {t.id for t in self.spec.added_tokens}:
            raise ValueError(f"export: {self.spec.source} has no mask token among its added "
                             "tokens, so a mask written in the text could not be found; a "
                             "fill-mask export needs one (e.g. [MASK]).")

    def tokenize_with_masks(self, inputs):
        """tf.string [B] -> int32 RaggedTensor [B, (T)] with mask_id at each mask token of the
        text (an added token: see check_masks_in_text)."""
        return tf.cast(self(inputs), tf.int32)

    def token_texts(self):
        """What each id stands for, id = index: the text of a token (" cat" for "Ġcat"; a
        piece of a multi-byte character as U+FFFD), special tokens as they are."""
        texts = []
        for token in self.spec.vocab:
            data = bpe.token_bytes(token)
            texts.append(token if data is None else data.decode("utf-8", "replace"))
        return texts

    def asset(self):
        """(file name, text) of the tokenizer file an export carries in its assets/."""
        return TOKENIZER_FILE, json.dumps(self.tokenizer_json, ensure_ascii=False)

    def export_info(self):
        """What bert_tf_export.json records of this tokenizer."""
        return {"tokenizer": f"byte-level BPE (assets/{TOKENIZER_FILE})"}

    def call(self, inputs):
        text, scalar = batch_of_strings(inputs, "BpeTokenizerLayer")
        text = valid_utf8(text)
        strings = text
        fixed = -tf.ones_like(text, dtype=tf.int32)
        row = tf.range(tf.size(text))  # The input each entry comes from.
        for normalized, stage in zip((False, True), self._stages):
            if normalized:
                normal = strings
                for form in self.spec.normalizer:
                    normal = (_lowercase(normal) if form == "Lowercase"
                              else tf_text.normalize_utf8(normal, form))
                strings = tf.where(fixed >= 0, strings, normal)
            if stage is not None:
                parent, strings, fixed = self._split_added(strings, fixed, stage)
                row = tf.gather(row, parent)
        words, word_piece = self._words(tf.where(fixed >= 0, "", strings))
        ids, id_word = self._word_ids(words)
        kept = tf.cast(tf.where(fixed >= 0)[:, 0], tf.int32)
        piece, ids = _in_order(tf.concat([kept, tf.gather(word_piece, id_word)], axis=0),
                               tf.concat([tf.gather(fixed, kept), ids], axis=0))
        # int64 row splits, as every other ragged tensor of bert_tf.text.
        ids = tf.RaggedTensor.from_value_rowids(
            ids, tf.cast(tf.gather(row, piece), tf.int64), nrows=tf.size(text, out_type=tf.int64),
            validate=False)
        return ids[0] if scalar else ids

    def get_config(self):
        config = super().get_config()
        config.update({"tokenizer_json": self.tokenizer_json, "roles": self.roles})
        return config
