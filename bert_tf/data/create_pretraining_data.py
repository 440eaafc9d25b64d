"""Turns a text corpus into masked-LM + next-sentence pre-training TFRecords, streaming.

Also makes the records of two BERT-family recipes: ALBERT's sentence-order prediction and
SpanBERT's span masking (see "BERT-family options" below).

Input format (as google-research/bert): UTF-8 text, one sentence per line, a blank line between
documents; gzip or bzip2 files (recognised by their first bytes) are decompressed on the fly,
and a binary or mostly non-UTF-8 file is refused, naming it, before any work starts. Output:
tf.train.Example records (see bert_tf.data.tfrecord_io) that bert_tf.data.pretraining_dataset
reads.

The per-document algorithm follows the original create_pretraining_data.py:
  * a target length of max_seq_length - 3 tokens, or with probability short_seq_prob a random
    length in [2, max_seq_length - 3] (chosen once per document and dupe);
  * sentences are accumulated until the target is reached; a random split point makes segment A;
  * segment B is the rest of the accumulated sentences, or with probability 0.5 (always when only
    one sentence was accumulated) sentences from a random other document (label 1), in which case
    the unused sentences are put back for the next instance;
  * the pair is truncated to max_seq_length - 3 tokens, one token at a time from the longer side,
    from its front or back at random;
  * min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob))) positions (len
    counts [CLS] and the two [SEP]) are chosen among non-special tokens (whole words when
    do_whole_word_mask: a "##" piece joins the word before it); each is replaced by [MASK] 80%
    of the time, by a random vocabulary id 10% (any id, as the original) and kept 10%; positions
    are sorted.

BERT-family options (each off by default; with all off the records are those of the
algorithm above):
  * sentence_order_prediction (ALBERT's SOP): segment B is always the text that follows A in
    the document, and with probability 0.5 the two are swapped (next_sentence_labels = 1 means
    swapped). A chunk of one sentence is split at a random token into A and B (ALBERT instead
    pairs it with a random document's text, an NSP negative labelled as a swap); a one-token
    chunk makes no instance. The pair is swapped before truncation.
  * do_span_mask (SpanBERT): instead of single tokens or words, spans of whole words are
    masked, each starting at a random word and max_span_length words long at most, with a
    length drawn from a geometric distribution (p = span_geometric_p) truncated to
    [1, max_span_length] (mean 3.8 words for 0.2 and 10), until the same budget of
    predictions is used (a word that would overshoot it ends its span; a span never crosses
    [SEP] and never touches another span, so its boundary tokens are unmasked). The
    80/10/10 replacement is decided once per span, as SpanBERT does. Records gain
    span_left_boundaries and span_right_boundaries (see tfrecord_io) for the span-boundary
    objective.

Packing (pack_sequences, off by default; docs/packing.md): the same instances are made, then
all instances of a chunk (every dupe) are packed whole, best-fit decreasing, into rows of
max_seq_length tokens holding at most max_instances_per_row instances and
max_predictions_per_seq predictions (P counts per row then, and caps each instance too, as
unpacked). Rows depend only on the chunk, so the output stays independent of --num_workers and
the Beam pipeline writes the same rows. Records gain instance_ids and next_sentence_positions /
_weights (see tfrecord_io).

What differs from the original, and why:
  * Streaming instead of whole-corpus-in-memory. The original reads every document of every file,
    shuffles them and all instances in memory, which does not scale. Here the documents of all
    input files, read in sorted file order as one stream, are cut into chunks of
    `documents_per_chunk` consecutive documents (a chunk may span file boundaries, so a corpus of
    one document per file still gets its random segments from other documents; the last chunk
    takes up to one extra document so that it never holds a single document alone); the random
    next segment is drawn from another document of the same chunk (not of the whole corpus), and
    finished records pass through a bounded shuffle buffer (`shuffle_buffer_size` records) on
    their way to the shards. Memory is bounded by those two sizes and the 2 * num_workers chunks
    in flight, whatever the corpus size. Only a corpus of a single document draws its random
    segments from that same document (as the original would); that is warned about.
  * Seeding per chunk. Each (chunk, dupe) gets its own random.Random (instance layouts,
    whole-word and span masking) and numpy Generator (truncation, default masking) seeded from
    a hash of (random_seed, file index and document index of the chunk's first document, dupe
    index). Chunks depend only on the corpus and documents_per_chunk, so an instance does not
    depend on which process made it or in what order: the local path gives byte-identical
    shards for a given seed whatever --num_workers is, and the Beam pipeline
    (bert_tf.data.beam_pipeline) gives the same set of records. (Versions before this seeding
    and the vectorised path below made different records for the same seed, with the same
    statistics.)
  * Vectorised per chunk (the algorithm's distributions unchanged): the chunk is tokenized in
    one call; each instance's layout is drawn as token ranges; then per dupe, numpy truncates
    every pair at once (the tokens each side loses follow from the lengths; how many of them
    come off the front is Binomial(lost, 0.5), the distribution of the original's coin per
    token), and picks the default masked positions as the candidates with the smallest
    uniform random keys (a uniformly random subset, as the original's shuffle), with the
    80/10/10 replacement drawn per position. Whole-word and span masking choose words per
    instance in Python with a lazy shuffle that stops once enough are chosen. The whole local
    path imports no TensorFlow (records and TFRecord framing are encoded by
    bert_tf.data.tfrecord_io and bert_tf.data.instance_encoder), which is most of its speed and
    memory.
  * With do_whole_word_mask a "##" piece right after [SEP] starts its own word instead of
    joining the last word of segment A.
  * The random other document is drawn uniformly from the rest of the chunk (the original makes
    up to 10 draws from the whole corpus until one differs from the current document).
  * Sentences longer than max_seq_length - 3 tokens, which can never fit an instance whole, are
    counted and logged once per input file and in the summary (the original truncates them
    silently).
  * Invalid UTF-8 bytes are replaced by U+FFFD, which the tokenizer drops (as the original's text
    cleaning does), with a warning naming the file and line, rather than failing the run.
  * max_predictions_per_seq below round(max_seq_length * masked_lm_prob) is allowed (the original
    caps silently) but warned about, and the number of predictions lost to the cap is logged.
"""

import bisect
import collections
import dataclasses
import hashlib
import itertools
import multiprocessing
import os
import random
import resource
import sys
import time

import numpy as np
from absl import logging

# No TensorFlow on this path (only gs:// and other remote paths load it, lazily): the main
# process and every worker start in well under a second and stay small.
from bert_tf.data import sequence_packing
from bert_tf.data import tfrecord_io
from bert_tf.data.instance_encoder import InstanceEncoder
from bert_tf.data.masking_recipe import MaskingRecipe
from bert_tf.data.patterns import expand_input_patterns
from bert_tf.data.patterns import has_scheme
from bert_tf.text import WordpieceTokenizer
from bert_tf.text import corpus_files
from bert_tf.text.tokenization import is_whitespace_char

# Lines of a file reported individually for invalid UTF-8 before only a total is logged.
_MAX_DECODE_WARNINGS_PER_FILE = 3
_PROGRESS_EVERY_SECONDS = 10.0


@dataclasses.dataclass(frozen=True)
class PretrainingDataOptions(MaskingRecipe):
    """Settings of instance creation: the masking recipe, and what only record making needs.

    Field names are the command-line flag names. The recipe's fields (max_seq_length,
    max_predictions_per_seq, masked_lm_prob, short_seq_prob, do_whole_word_mask,
    sentence_order_prediction, do_span_mask, span_geometric_p, max_span_length,
    pack_sequences, max_instances_per_row) are documented in masking_recipe.MaskingRecipe;
    with pack_sequences, max_predictions_per_seq is P per row (see
    sequence_packing.default_max_predictions_per_row).

    Args:
      dupe_factor: how many times each document is used, each with different masks (>= 1).
      random_seed: the seed everything random derives from.
      feature_names: "v1" (original record names) or "v2".
      documents_per_chunk: consecutive documents of the corpus (files in sorted order, so a
        chunk may span files) processed together; the random next segment comes from another
        document of this pool (>= 2).
    """

    dupe_factor: int = 10
    random_seed: int = 12345
    feature_names: str = "v1"
    documents_per_chunk: int = 1000

    def validate(self):
        """Raises ValueError naming the first flag whose value is out of range."""
        if self.max_seq_length < 5:
            raise ValueError(f"--max_seq_length={self.max_seq_length} must be at least 5 "
                             "([CLS] A [SEP] B [SEP] with one token each).")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"--max_predictions_per_seq={self.max_predictions_per_seq} must be "
                             "at least 1.")
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"--masked_lm_prob={self.masked_lm_prob} must be in (0, 1).")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"--short_seq_prob={self.short_seq_prob} must be in [0, 1].")
        if self.dupe_factor < 1:
            raise ValueError(f"--dupe_factor={self.dupe_factor} must be at least 1.")
        if self.feature_names not in tfrecord_io.FEATURE_NAMES:
            raise ValueError(f'--feature_names={self.feature_names} must be "v1" or "v2".')
        if self.documents_per_chunk < 2:
            raise ValueError(f"--documents_per_chunk={self.documents_per_chunk} must be at "
                             "least 2 (random next segments come from another document of the "
                             "chunk).")
        if not 0.0 < self.span_geometric_p <= 1.0:
            raise ValueError(f"--span_geometric_p={self.span_geometric_p} must be in (0, 1].")
        if self.max_span_length < 1:
            raise ValueError(f"--max_span_length={self.max_span_length} must be at least 1.")
        if self.max_instances_per_row < 0:
            raise ValueError(f"--max_instances_per_row={self.max_instances_per_row} must be at "
                             "least 1 (or 0 for the default, max(2, max_seq_length // 16)).")

    @property
    def uncapped_predictions(self):
        """Predictions a full-length instance would get without the max_predictions_per_seq cap."""
        return max(1, int(round(self.max_seq_length * self.masked_lm_prob)))


@dataclasses.dataclass
class DocumentChunk:
    """Up to documents_per_chunk + 1 consecutive documents of the corpus, as raw text.

    Documents are numbered within their file, and a chunk may hold the end of one file and the
    start of the next (files are read in the sorted input order).

    Args:
      keys: list of (file_index, document_index) per document: the file's position in the
        sorted input file list and the document's index within that file (documents count
        from 0 and only documents with at least one non-blank line are counted). Both are part
        of every seed.
      documents: list of documents, each a list of stripped, non-empty lines (sentences).
      num_bytes: input bytes read since the previous chunk (for progress reporting).
    """

    keys: list
    documents: list
    num_bytes: int = 0


@dataclasses.dataclass
class Instance:
    """One pre-training instance before padding.

    Args:
      input_ids: list of int, [CLS] A [SEP] B [SEP] with masking applied, length <= S.
      segment_ids: list of int, 0 up to and including the first [SEP], then 1.
      masked_lm_positions: sorted list of int, positions into input_ids, length <= P.
      masked_lm_ids: list of int, the original ids at those positions.
      next_sentence_label: 1 if B is a random segment (sentence-order prediction: if A and B
        are swapped), else 0.
      span_left_boundaries: with span masking, list of int: per prediction, the position just
        before its span; else None.
      span_right_boundaries: with span masking, the position just after the span; else None.
    """

    input_ids: list
    segment_ids: list
    masked_lm_positions: list
    masked_lm_ids: list
    next_sentence_label: int
    span_left_boundaries: list = None
    span_right_boundaries: list = None


@dataclasses.dataclass
class CreationStats:
    """Counters summed over chunks; `add` merges another instance into this one."""

    documents: int = 0
    instances: int = 0
    random_next: int = 0
    tokens: int = 0
    predictions: int = 0
    capped_instances: int = 0
    capped_predictions: int = 0
    long_lines: int = 0
    num_bytes: int = 0
    rows: int = 0  # records written: instances, or packed rows with pack_sequences
    # file index -> sentences of that file longer than max_seq_length - 3 tokens. Not a counter
    # of its own (the Beam runner reports only the total), so left out of comparisons.
    long_lines_per_file: dict = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def counter_names(cls):
        """The integer counters, in declaration order (the Beam metrics carry these)."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.name != "long_lines_per_file")

    def add(self, other):
        for name in self.counter_names():
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for file_index, count in other.long_lines_per_file.items():
            self.long_lines_per_file[file_index] = (
                self.long_lines_per_file.get(file_index, 0) + count)


def document_seed(random_seed, file_index, document_index, dupe_index):
    """A 64-bit seed for one (file, document, dupe), the same in every process and run; a
    chunk's draws of one dupe are seeded with its first document's.

    Python's hash() is salted per process, so a cryptographic hash of the decimal values is used.
    """
    key = f"{random_seed}/{file_index}/{document_index}/{dupe_index}".encode("ascii")
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little")


def _file_size(path):
    if has_scheme(path):
        import tensorflow as tf

        return tf.io.gfile.stat(path).length
    return os.path.getsize(path)


def iter_file_documents(path):
    """Reads one input file's documents, streaming (one document in memory at a time).

    Blank (or whitespace-only) lines separate documents; repeated blank lines are one separator.
    Invalid UTF-8 is replaced by U+FFFD with a warning naming the file and line. gzip and bzip2
    files are decompressed (see bert_tf.text.corpus_files); a damaged stream raises ValueError
    naming the file and the line reached.

    Args:
      path: the input text file.

    Yields:
      (lines, num_bytes): a document as a list of stripped, non-empty lines, and the input bytes
      read since the previous yield (of the file as stored: compressed bytes for gzip/bzip2).
      A last (lines=None, num_bytes) reports trailing bytes that held no document.
    """
    current = []
    num_documents = num_bytes = bad_lines = num_lines = 0
    line_number = 0
    # Progress counts the bytes of the file as stored: compressed ones for gzip/bzip2 input.
    stored_read = 0

    def stored_bytes(f, content_bytes):
        nonlocal stored_read
        position = corpus_files.stored_bytes_read(f)
        if position is None:
            return content_bytes
        read, stored_read = position - stored_read, position
        return read

    with corpus_files.open_corpus(path) as f:
        try:
            for line_number, raw in enumerate(f, start=1):
                num_bytes += len(raw)
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    line = raw.decode("utf-8", errors="replace")
                    bad_lines += 1
                    if bad_lines <= _MAX_DECODE_WARNINGS_PER_FILE:
                        logging.warning("%s:%d: invalid UTF-8 (%s); replaced the bad bytes with "
                                        "U+FFFD.", path, line_number, e.reason)
                line = line.strip()
                if line:
                    num_lines += 1
                    current.append(line)
                    continue
                if current:
                    num_documents += 1
                    yield current, stored_bytes(f, num_bytes)
                    current, num_bytes = [], 0
        except corpus_files.STREAM_ERRORS as e:
            # A local disk error, or (mostly) a gzip/bzip2 stream cut short.
            raise ValueError(f"{path}: cannot read past line {line_number} ({e}); the file is "
                             "truncated or corrupt.") from None
        num_bytes = stored_bytes(f, num_bytes)
    if current:
        num_documents += 1
        yield current, num_bytes
        num_bytes = 0
    if num_bytes:
        yield None, num_bytes
    if bad_lines > _MAX_DECODE_WARNINGS_PER_FILE:
        logging.warning("%s: %d lines held invalid UTF-8 in total (bad bytes replaced).",
                        path, bad_lines)
    if num_documents == 1 and num_lines > 1:
        logging.info("%s has no blank line between sentences: read as one document of %d "
                     "sentences.", path, num_lines)


def iter_document_chunks(input_files, documents_per_chunk):
    """Cuts the documents of all input files, read in order as one stream, into DocumentChunks.

    Chunks hold documents_per_chunk documents and may span file boundaries, so random next
    segments come from other documents even when every file holds a single document. The last
    chunk holds between 2 and documents_per_chunk + 1 documents (when the corpus has at least
    two), never one alone. Only a chunk's worth of documents is in memory at a time.

    Args:
      input_files: the input text files, in the order that defines file indexes.
      documents_per_chunk: documents per chunk (>= 2).

    Yields:
      DocumentChunk, in corpus order; a corpus without documents yields one empty chunk
      carrying its byte count.
    """
    keys, documents = [], []
    num_bytes = 0
    for file_index, path in enumerate(input_files):
        document_index = 0
        for lines, read_bytes in iter_file_documents(path):
            num_bytes += read_bytes
            if lines is None:
                continue
            keys.append((file_index, document_index))
            documents.append(lines)
            document_index += 1
            # Two documents are held back, so the last chunk cannot end up with one alone.
            if len(documents) == documents_per_chunk + 2:
                yield DocumentChunk(keys[:-2], documents[:-2], num_bytes)
                keys, documents, num_bytes = keys[-2:], documents[-2:], 0
    if documents or num_bytes:
        yield DocumentChunk(keys, documents, num_bytes)


def truncation_drops(len_a, len_b, max_num_tokens):
    """Tokens the original's trimming removes from A and from B, for arrays of pair lengths.

    The original trims the longer list (B on a tie) one token at a time until the pair fits, so
    the longer list first loses the difference, then B and A alternate, B first. Which end each
    token comes from is a fair coin per token: the number taken from the front is then
    Binomial(drops, 0.5), drawn by the caller.

    Args:
      len_a, len_b: int arrays [N].
      max_num_tokens: the budget of A + B.

    Returns:
      (drop_a, drop_b): int arrays [N].
    """
    excess = np.maximum(len_a + len_b - max_num_tokens, 0)
    a_longer = len_a > len_b
    gap = np.minimum(np.abs(len_a - len_b), excess)
    rest = excess - gap
    return (np.where(a_longer, gap, 0) + rest // 2,
            np.where(a_longer, 0, gap) + (rest + 1) // 2)


def _iter_shuffled(items, rng):
    """Yields the elements of `items` in a uniformly random order, drawing lazily.

    A forward Fisher-Yates shuffle (done in place on `items`) that stops when the caller stops:
    whole-word and span masking need only the first ~15% of an instance's candidates, so this
    makes one draw per candidate used instead of one per candidate. The draws are inlined
    getrandbits rejection sampling, unbiased like random.randrange.
    """
    getrandbits = rng.getrandbits
    n = len(items)
    for i in range(n):
        remaining = n - i
        k = remaining.bit_length()
        j = getrandbits(k)
        while j >= remaining:
            j = getrandbits(k)
        j += i
        items[i], items[j] = items[j], items[i]
        yield items[i]


# Private-use characters (category Co, which every rule of the basic tokenizer keeps as they
# are) join a chunk's sentences and documents into one text, so that a whole chunk is
# tokenized in one pass; spaced, each comes out as a word of its own, mapped to these ids.
_SEGMENT_BREAK, _DOCUMENT_BREAK = "\ue000", "\ue001"
_SEGMENT_BREAK_ID, _DOCUMENT_BREAK_ID = -1, -2
# Characters str.split() splits on that the original tokenizer does not treat as whitespace
# (it deletes the controls among them, joining their neighbours): text holding any of them is
# tokenized line by line instead.
_SPLIT_NOT_WHITESPACE = tuple(chr(c) for c in range(0x3001)
                              if chr(c).isspace() and not is_whitespace_char(chr(c)))
# Word cache entries; the cache is dropped when full so memory stays bounded on any corpus.
_WORD_CACHE_LIMIT = 200_000


class _WordIds(dict):
    """Whitespace-separated raw word -> its token ids (tuple), computed on first use by the full
    tokenizer; the break words map to their ids. Tokenizing text is tokenizing each of its
    str.split() words (no rule of the tokenizer looks across whitespace), so a cache of raw
    words turns most of the work into one C-level lookup per word (map(d.__getitem__, ...))."""

    def __init__(self, tokenizer):
        super().__init__()
        self._tokenizer = tokenizer
        self._reset()

    def _reset(self):
        self.clear()
        self[_SEGMENT_BREAK] = (_SEGMENT_BREAK_ID,)
        self[_DOCUMENT_BREAK] = (_DOCUMENT_BREAK_ID,)

    def __missing__(self, word):
        if len(self) >= _WORD_CACHE_LIMIT:
            self._reset()
        ids = self[word] = tuple(self._tokenizer.encode(word))
        return ids


@dataclasses.dataclass
class _ChunkTokens:
    """A chunk's documents tokenized, as one flat array.

    Args:
      tokens: int32 array [total tokens]: every non-empty segment's ids, in order.
      offsets: list of int, one more than segments: segment s is tokens[offsets[s]:offsets[s+1]].
      first_segment: list of int, one more than documents: document d's segments are
        first_segment[d] .. first_segment[d + 1] - 1 (documents without any token are left out).
      keys: (file_index, document_index) of each kept document.
    """

    tokens: np.ndarray
    offsets: list
    first_segment: list
    keys: list


class InstanceMaker:
    """Creates masked, padded, serialized pre-training records from documents.

    The work of a chunk is split so that little of it is per-token Python: the chunk is
    tokenized in one call into a flat id array; each (document, dupe) draws its instances'
    layout (target length, split point, random next segment) with its own random.Random, as
    (start, length) ranges of that array; then, per dupe, numpy truncates all pairs, gathers the
    token matrix, masks it (default masking) and encodes the records (InstanceEncoder
    .encode_batch), with a numpy Generator seeded per (chunk, dupe). Whole-word and span
    masking choose words per instance in Python, with a random.Random seeded per (chunk, dupe).

    Args:
      tokenizer: a bert_tf.text.WordpieceTokenizer (its vocab gives [CLS], [SEP], [MASK] and the
        "##" continuation pieces).
      options: PretrainingDataOptions (validated here).
    """

    def __init__(self, tokenizer, options):
        options.validate()
        self.tokenizer = tokenizer
        self.options = options
        self.vocab_size = tokenizer.vocab_size
        self.cls_id, self.sep_id, self.mask_id = (tokenizer.cls_id, tokenizer.sep_id,
                                                  tokenizer.mask_id)
        self._continuation_ids = frozenset(
            i for t, i in tokenizer.vocab.items() if t.startswith("##"))
        # Cumulative weights of span lengths 1..max_span_length: p (1 - p)^(l - 1), truncated.
        q = 1.0 - options.span_geometric_p
        self._span_length_cdf = list(itertools.accumulate(
            options.span_geometric_p * q ** (length - 1)
            for length in range(1, options.max_span_length + 1)))
        self._encoder = InstanceEncoder(options.max_seq_length, options.max_predictions_per_seq,
                                        options.feature_names, self.vocab_size)
        self._word_ids = _WordIds(tokenizer)

    def _tokenize_chunk(self, chunk, stats):
        """Tokenizes a DocumentChunk into a _ChunkTokens; counts long sentences into stats."""
        documents = chunk.documents
        text = f" {_DOCUMENT_BREAK} ".join(f" {_SEGMENT_BREAK} ".join(lines)
                                           for lines in documents)
        segment_breaks = sum(len(lines) - 1 for lines in documents)
        if (text.count(_SEGMENT_BREAK) == segment_breaks
                and text.count(_DOCUMENT_BREAK) == len(documents) - 1
                and not any(c in text for c in _SPLIT_NOT_WHITESPACE)):
            ids = np.fromiter(itertools.chain.from_iterable(map(
                self._word_ids.__getitem__, text.split())), dtype=np.int32)
        else:
            # The text itself holds a break character, or a character str.split() would
            # wrongly split on: tokenize line by line instead.
            flat = []
            for d, lines in enumerate(documents):
                if d:
                    flat.append(_DOCUMENT_BREAK_ID)
                for s, line in enumerate(lines):
                    if s:
                        flat.append(_SEGMENT_BREAK_ID)
                    flat.extend(self.tokenizer.encode(line))
            ids = np.array(flat, dtype=np.int32)
        breaks = np.flatnonzero(ids < 0)
        # Segment k (one per line, possibly empty) is ids[starts[k]:ends[k]]; k breaks precede
        # it, so in the array without breaks it starts at starts[k] - k.
        starts = np.concatenate([[0], breaks + 1])
        lengths = np.append(breaks, len(ids)) - starts
        segment_document = np.concatenate(
            [[0], np.cumsum(ids[breaks] == _DOCUMENT_BREAK_ID)]).astype(np.int64)
        tokens = ids[ids >= 0]
        kept = lengths > 0
        num_documents = len(documents)
        long = np.bincount(segment_document[lengths > self.options.max_seq_length - 3],
                           minlength=num_documents)
        for d in np.flatnonzero(long).tolist():
            file_index = chunk.keys[d][0]
            stats.long_lines += int(long[d])
            stats.long_lines_per_file[file_index] = (
                stats.long_lines_per_file.get(file_index, 0) + int(long[d]))
        per_document = np.bincount(segment_document[kept], minlength=num_documents)
        kept_documents = np.flatnonzero(per_document)
        offsets = np.append((starts - np.arange(len(starts)))[kept], len(tokens))
        first_segment = np.concatenate([[0], np.cumsum(per_document[kept_documents])])
        return _ChunkTokens(tokens, offsets.tolist(), first_segment.tolist(),
                            [chunk.keys[d] for d in kept_documents.tolist()])

    def process_chunk(self, chunk):
        """Tokenizes a DocumentChunk and makes all its records.

        Args:
          chunk: DocumentChunk.

        Returns:
          (records, stats): list of serialized tf.train.Example bytes, ordered by dupe then
          document, and the CreationStats of the chunk.
        """
        options = self.options
        stats = CreationStats(num_bytes=chunk.num_bytes)
        if not chunk.documents:
            return [], stats
        chunk_tokens = self._tokenize_chunk(chunk, stats)
        keys = chunk_tokens.keys
        stats.documents = len(keys)
        records, instances = [], []
        for dupe in range(options.dupe_factor):
            # The chunk's first document (kept or not) names the chunk in the seed.
            seed = document_seed(options.random_seed, *chunk.keys[0], dupe)
            rng = random.Random(seed)
            plan = []
            for position in range(len(keys)):
                self._plan_document(chunk_tokens, position, rng, plan)
            if not plan:
                continue
            np_rng = np.random.default_rng([seed, 1])
            made = self._make_dupe(chunk_tokens.tokens, plan, np_rng, stats,
                                   as_instances=options.pack_sequences)
            (instances if options.pack_sequences else records).extend(made)
        if options.pack_sequences:
            records = self.packed_records(instances)
        stats.rows = len(records)
        return records, stats

    def _plan_document(self, chunk_tokens, position, rng, plan):
        """Draws the instances of one document as the original does (see the module
        docstring), as token ranges of chunk_tokens.tokens: appends a_start, a_length,
        b_start, b_length, label per instance to `plan` (a flat list), before truncation."""
        options = self.options
        offsets, first_segment = chunk_tokens.offsets, chunk_tokens.first_segment
        max_num_tokens = options.max_seq_length - 3
        target_length = max_num_tokens
        random_ = rng.random

        def randint(low, high):
            # random.randint's distribution (to within 2**-53 per value) at a third of its cost.
            return low + int(random_() * (high - low + 1))

        if random_() < options.short_seq_prob:
            target_length = randint(2, max_num_tokens)
        sentence_order = options.sentence_order_prediction
        num_documents = len(first_segment) - 1
        end = first_segment[position + 1]
        start = i = first_segment[position]  # `start`: first segment of the current chunk
        while i < end:
            if i + 1 < end and offsets[i + 1] - offsets[start] < target_length:
                i += 1
                continue
            num_segments = i + 1 - start
            if sentence_order:
                if num_segments >= 2:
                    split = offsets[start + randint(1, num_segments - 1)]
                elif offsets[i + 1] - offsets[i] >= 2:
                    # One segment: split at a random token.
                    split = offsets[i] + randint(1, offsets[i + 1] - offsets[i] - 1)
                else:
                    start = i = i + 1
                    continue
                a0, b1 = offsets[start], offsets[i + 1]
                if random_() < 0.5:
                    plan.extend((split, b1 - split, a0, split - a0, 1))
                else:
                    plan.extend((a0, split - a0, split, b1 - split, 0))
                start = i = i + 1
                continue
            a_end = start + 1
            if num_segments >= 2:
                a_end = start + randint(1, num_segments - 1)
            a0, a1 = offsets[start], offsets[a_end]
            if num_segments == 1 or random_() < 0.5:
                if num_documents == 1:
                    # Only a one-document corpus (chunks span files and the last chunk is never
                    # a lone document) has nothing else to draw from; the original does the
                    # same then.
                    other = position
                else:
                    other = randint(0, num_documents - 2)
                    other += other >= position
                other_first, other_end = first_segment[other], first_segment[other + 1]
                j = other_first + randint(0, other_end - other_first - 1)
                # Segments from j until B reaches target_length - len(A) tokens (or the end).
                b_end = bisect.bisect_left(offsets, offsets[j] + target_length - (a1 - a0),
                                           j + 1, other_end)
                plan.extend((a0, a1 - a0, offsets[j], offsets[b_end] - offsets[j], 1))
                # The segments after A were not used: go back so the next instance has them.
                i = a_end - 1
            else:
                plan.extend((a0, a1 - a0, a1, offsets[i + 1] - a1, 0))
            start = i = i + 1

    def _make_dupe(self, tokens, plan, np_rng, stats, as_instances):
        """Truncates, masks and encodes the instances of one plan (one dupe of a chunk).

        Args:
          tokens: the chunk's int32 token array.
          plan: flat list from _plan_document, 5 ints per instance.
          np_rng: numpy Generator for truncation and default masking.
          stats: CreationStats to update, or None.
          as_instances: return Instance objects instead of serialized records.

        Returns:
          list of bytes (or of Instance), one per instance in plan order.
        """
        options = self.options
        seq_length, max_predictions = options.max_seq_length, options.max_predictions_per_seq
        a_start, len_a, b_start, len_b, labels = np.array(
            plan, dtype=np.int64).reshape(-1, 5).T.copy()
        num_instances = len(labels)
        drop_a, drop_b = truncation_drops(len_a, len_b, seq_length - 3)
        a_start += np_rng.binomial(drop_a, 0.5)
        b_start += np_rng.binomial(drop_b, 0.5)
        len_a -= drop_a
        len_b -= drop_b
        num_tokens = len_a + len_b + 3

        # [CLS] A [SEP] B [SEP], zeros after, as an [N, S] matrix gathered from `tokens`
        # (int32 and broadcast row offsets: this is the largest array work of a run).
        column = np.arange(seq_length, dtype=np.int32)[None, :]
        last_a = len_a.astype(np.int32)[:, None]
        in_a = column <= last_a
        in_a[:, 0] = False
        in_b = (column >= last_a + 2) & (column < num_tokens.astype(np.int32)[:, None] - 1)
        source = np.where(in_a, (a_start - 1).astype(np.int32)[:, None],
                          (b_start - len_a - 2).astype(np.int32)[:, None])
        source += column
        candidates = in_a | in_b
        ids = np.take(tokens, source, mode="clip")
        ids *= candidates
        rows = np.arange(num_instances)
        ids[:, 0] = self.cls_id
        ids[rows, len_a + 1] = self.sep_id
        ids[rows, num_tokens - 1] = self.sep_id

        uncapped = np.maximum(1, np.rint(num_tokens * options.masked_lm_prob).astype(np.int64))
        num_to_predict = np.minimum(max_predictions, uncapped)
        if stats is not None:
            stats.instances += num_instances
            stats.random_next += int(labels.sum())
            stats.tokens += int(num_tokens.sum())
            capped = uncapped > num_to_predict
            stats.capped_instances += int(capped.sum())
            stats.capped_predictions += int((uncapped - num_to_predict)[capped].sum())

        if options.do_whole_word_mask or options.do_span_mask:
            # Words are found and chosen per instance in Python.
            py_rng = random.Random(int(np_rng.integers(1 << 63)))
            out = []
            for row, (t, la, label, k) in enumerate(zip(
                    num_tokens.tolist(), len_a.tolist(), labels.tolist(),
                    num_to_predict.tolist())):
                instance = self._word_masked_instance(ids[row, :t].tolist(), la, label, k,
                                                      py_rng)
                if stats is not None:
                    stats.predictions += len(instance.masked_lm_positions)
                if as_instances:
                    out.append(instance)
                else:
                    out.append(self._encoder.encode(
                        instance.input_ids, la + 2, instance.masked_lm_positions,
                        instance.masked_lm_ids, label, instance.span_left_boundaries,
                        instance.span_right_boundaries))
            return out

        # Default masking: the first num_to_predict candidates in a uniformly random order are
        # the positions of the num_to_predict smallest random keys among the candidates.
        candidates &= (ids != self.cls_id) & (ids != self.sep_id)
        num_to_predict = np.minimum(num_to_predict, candidates.sum(axis=1))
        keys = np_rng.random((num_instances, seq_length))
        keys[~candidates] = 2.0
        smallest = min(max_predictions, seq_length)
        lowest = np.sort(np.partition(keys, smallest - 1, axis=1)[:, :smallest], axis=1)
        threshold = np.where(num_to_predict > 0,
                             lowest[rows, np.maximum(num_to_predict - 1, 0)], -1.0)
        pred_rows, pred_cols = np.nonzero(keys <= threshold[:, None])
        rank = np.arange(len(pred_rows)) - (np.cumsum(num_to_predict) - num_to_predict)[pred_rows]
        originals = ids[pred_rows, pred_cols]
        # 80% [MASK], 10% kept, 10% a random id (any id, as the original).
        draw = np_rng.random(len(pred_rows))
        replaced = np.where(draw < 0.8, self.mask_id, originals)
        random_ids = draw >= 0.9
        replaced[random_ids] = np_rng.integers(0, self.vocab_size, int(random_ids.sum()))
        ids[pred_rows, pred_cols] = replaced
        positions = np.zeros((num_instances, max_predictions), dtype=np.int64)
        masked_ids = np.zeros((num_instances, max_predictions), dtype=np.int64)
        positions[pred_rows, rank] = pred_cols
        masked_ids[pred_rows, rank] = originals
        if stats is not None:
            stats.predictions += int(num_to_predict.sum())
        if not as_instances:
            return self._encoder.encode_batch(ids, num_tokens, len_a + 2, positions, masked_ids,
                                              num_to_predict, labels)
        return [Instance(ids[r, :t].tolist(), [0] * (la + 2) + [1] * (t - la - 2),
                         positions[r, :k].tolist(), masked_ids[r, :k].tolist(), label)
                for r, (t, la, k, label) in enumerate(zip(
                    num_tokens.tolist(), len_a.tolist(), num_to_predict.tolist(),
                    labels.tolist()))]

    def instances_from_document(self, documents, position, rng, stats=None):
        """The instances of one document (the original's algorithm, see the module docstring).

        Args:
          documents: list of documents, each a non-empty list of non-empty segments (lists of
            int ids); the random next segment is drawn from the others.
          position: index into `documents` of the document to use.
          rng: random.Random for this (document, dupe); it also seeds the truncation and
            masking draws.
          stats: optional CreationStats to update.

        Returns:
          list of Instance.
        """
        segments = [segment for document in documents for segment in document]
        tokens = np.array([i for segment in segments for i in segment], dtype=np.int32)
        offsets = [0, *itertools.accumulate(len(segment) for segment in segments)]
        first_segment = [0, *itertools.accumulate(len(document) for document in documents)]
        plan = []
        self._plan_document(_ChunkTokens(tokens, offsets, first_segment, []), position, rng,
                            plan)
        if not plan:
            return []
        return self._make_dupe(tokens, plan, np.random.default_rng(rng.getrandbits(64)), stats,
                               as_instances=True)

    def _word_masked_instance(self, input_ids, len_a, label, num_to_predict, rng):
        """Whole-word or span masking of one instance, in place on input_ids (list of int,
        [CLS] A [SEP] B [SEP], len_a tokens in A) -> Instance."""
        options = self.options
        # Candidate words: their piece positions; a "##" piece joins the word just before it;
        # unlike the original, not across a [SEP] (a B that starts mid-word after truncation
        # starts a word of its own).
        candidates = []
        cls_id, sep_id, continuation = self.cls_id, self.sep_id, self._continuation_ids
        for index, token_id in enumerate(input_ids):
            if token_id == cls_id or token_id == sep_id:
                continue
            if (candidates and candidates[-1][-1] == index - 1 and token_id in continuation):
                candidates[-1].append(index)
            else:
                candidates.append([index])
        original = list(input_ids)
        left_boundaries = right_boundaries = None
        if options.do_span_mask:
            positions, left_boundaries, right_boundaries = self._span_mask(
                input_ids, candidates, num_to_predict, rng)
        else:
            positions = []
            for word in _iter_shuffled(candidates, rng):
                if len(positions) >= num_to_predict:
                    break
                # A word that would overshoot the budget is skipped, so whole-word masking may
                # predict slightly fewer than num_to_predict tokens.
                if len(positions) + len(word) > num_to_predict:
                    continue
                positions.extend(word)
            random_ = rng.random
            # Replacement draws follow the random order in which the positions were chosen.
            for index in positions:
                if random_() < 0.8:
                    input_ids[index] = self.mask_id
                elif random_() < 0.5:
                    pass  # kept as is
                else:
                    input_ids[index] = rng.randint(0, self.vocab_size - 1)
            positions.sort()
        segment_ids = [0] * (len_a + 2) + [1] * (len(input_ids) - len_a - 2)
        return Instance(input_ids, segment_ids, positions, [original[p] for p in positions],
                        label, left_boundaries, right_boundaries)

    def packed_records(self, instances):
        """Packs instances (see sequence_packing.pack_instances) into serialized rows.

        Args:
          instances: list of Instance, in chunk order.

        Returns:
          list of serialized tf.train.Example rows (tfrecord_io.serialize_packed_row), in the
          order the rows were opened; instances keep their placement order within a row.
        """
        options = self.options
        rows = sequence_packing.pack_instances(
            [len(x.input_ids) for x in instances],
            [len(x.masked_lm_positions) for x in instances],
            max_seq_length=options.max_seq_length,
            max_instances_per_row=options.instances_per_row,
            max_predictions_per_row=options.max_predictions_per_seq)
        with_spans = options.do_span_mask
        records = []
        for row in rows:
            ids, segments, instance_ids, positions, masked_ids = [], [], [], [], []
            cls_positions, labels, lefts, rights = [], [], [], []
            for slot, index in enumerate(row, start=1):
                x = instances[index]
                offset = len(ids)
                ids.extend(x.input_ids)
                segments.extend(x.segment_ids)
                instance_ids.extend([slot] * len(x.input_ids))
                positions.extend(p + offset for p in x.masked_lm_positions)
                masked_ids.extend(x.masked_lm_ids)
                cls_positions.append(offset)
                labels.append(x.next_sentence_label)
                if with_spans:
                    lefts.extend(p + offset for p in x.span_left_boundaries)
                    rights.extend(p + offset for p in x.span_right_boundaries)
            records.append(tfrecord_io.serialize_packed_row(
                ids, segments, instance_ids, positions, masked_ids, cls_positions, labels,
                max_seq_length=options.max_seq_length,
                max_predictions_per_seq=options.max_predictions_per_seq,
                max_instances_per_row=options.instances_per_row,
                feature_names=options.feature_names,
                span_left_boundaries=lefts if with_spans else None,
                span_right_boundaries=rights if with_spans else None))
        return records

    def _span_mask(self, input_ids, words, num_to_predict, rng):
        """Masks SpanBERT spans of whole words in place (see the module docstring).

        Args:
          input_ids: list of int, the instance; masked ids are written into it.
          words: list of words, each the list of its piece positions, in position order.
          num_to_predict: the prediction budget.
          rng: the instance's random.Random.

        Returns:
          (positions, left_boundaries, right_boundaries): lists of int sorted by position: the
          masked positions, and for each the position just before / after its span.
        """
        num_words = len(words)
        span_of_word = [None] * num_words  # (first word, last word) of a masked word's span

        def touches(a, b):
            # Words a < b touch when no token lies between them (a [SEP] keeps them apart).
            return 0 <= a and b < num_words and words[a][-1] + 1 == words[b][0]

        def free(w):
            # Unmasked, and neither neighbour it touches is masked.
            return (span_of_word[w] is None
                    and not (touches(w - 1, w) and span_of_word[w - 1] is not None)
                    and not (touches(w, w + 1) and span_of_word[w + 1] is not None))

        used = 0
        spans = []
        cdf = self._span_length_cdf

        def sample_length():
            return bisect.bisect_right(cdf, rng.random() * cdf[-1]) + 1

        def place(first, length, whole):
            """The last word of a span of up to `length` words from `first`, or None. With
            `whole`, a span cut short by [SEP] or another span is refused; one cut short by
            the budget never is (the budget ends the last span)."""
            if not free(first) or used + len(words[first]) > num_to_predict:
                return None
            last, pieces = first, len(words[first])
            while last - first + 1 < length:
                if not (touches(last, last + 1) and free(last + 1)):
                    if whole:
                        return None
                    break
                if used + pieces + len(words[last + 1]) > num_to_predict:
                    break
                last += 1
                pieces += len(words[last])
            return last

        # First the drawn length is placed whole at a random start, so realized lengths follow
        # the distribution; if starts run out before the budget does (short or crowded
        # sequences), a second pass takes whatever fits from each remaining start.
        for whole in (True, False):
            length = sample_length()
            for first in _iter_shuffled(list(range(num_words)), rng):
                if used >= num_to_predict:
                    break
                last = place(first, length, whole)
                if last is None:
                    if not whole:
                        length = sample_length()
                    continue
                for w in range(first, last + 1):
                    span_of_word[w] = (first, last)
                used += sum(len(words[w]) for w in range(first, last + 1))
                spans.append((first, last))
                length = sample_length()
            if used >= num_to_predict:
                break

        # The 80/10/10 replacement, once per span, in the order the spans were chosen.
        random_ = rng.random
        for first, last in spans:
            span_positions = [p for w in range(first, last + 1) for p in words[w]]
            if random_() < 0.8:
                for p in span_positions:
                    input_ids[p] = self.mask_id
            elif random_() < 0.5:
                pass  # kept as is
            else:
                for p in span_positions:
                    input_ids[p] = rng.randint(0, self.vocab_size - 1)
        positions, lefts, rights = [], [], []
        for w, span in enumerate(span_of_word):
            if span is not None:
                for p in words[w]:
                    positions.append(p)
                    lefts.append(words[span[0]][0] - 1)
                    rights.append(words[span[1]][-1] + 1)
        return positions, lefts, rights


def nonempty_input_files(input_files):
    """Drops (with a warning) zero-byte files; raises ValueError if every file is empty or
    naming the first file that is not text (binary, mostly not UTF-8, or a damaged gzip/bzip2
    file; see bert_tf.text.corpus_files), before any work starts."""
    kept = []
    for path in input_files:
        if _file_size(path) == 0:
            logging.warning("Input file %s is empty; skipping it.", path)
        else:
            corpus_files.check_corpus_file(path)
            kept.append(path)
    if not kept:
        raise ValueError(f"All input files are empty: {', '.join(input_files)}.")
    return kept


def warn_if_predictions_capped(options):
    """Logs a warning when max_predictions_per_seq is below what masked_lm_prob asks for."""
    if options.max_predictions_per_seq < options.uncapped_predictions:
        logging.warning(
            "--max_predictions_per_seq=%d is below round(--max_seq_length=%d * "
            "--masked_lm_prob=%g) = %d: long instances get only %d predictions (as the "
            "original); the number capped is logged at the end.",
            options.max_predictions_per_seq, options.max_seq_length, options.masked_lm_prob,
            options.uncapped_predictions, options.max_predictions_per_seq)


def log_long_lines(path, count, options):
    """Logs, once per input file, how many of its sentences exceed an instance's token budget."""
    logging.warning("%s: %d sentences are longer than --max_seq_length=%d - 3 = %d tokens and "
                    "were truncated.", path, count, options.max_seq_length,
                    options.max_seq_length - 3)


def log_summary(stats, options):
    """Logs the final counters, including predictions lost to max_predictions_per_seq, sentences
    truncated for length, and a corpus of one document (random next segments from itself)."""
    logging.info(
        "Wrote %d instances from %d documents (dupe_factor=%d): %.1f%% %s, %.1f tokens "
        "and %.2f predictions per instance.", stats.instances, stats.documents,
        options.dupe_factor, 100.0 * stats.random_next / max(stats.instances, 1),
        "swapped" if options.sentence_order_prediction else "random next",
        stats.tokens / max(stats.instances, 1), stats.predictions / max(stats.instances, 1))
    if options.pack_sequences and stats.rows:
        logging.info(
            "Packed %d instances into %d rows of %d tokens: %.2f instances per row, %.1f%% of "
            "tokens real (unpacked: %.1f%%).", stats.instances, stats.rows,
            options.max_seq_length, stats.instances / stats.rows,
            100.0 * stats.tokens / (stats.rows * options.max_seq_length),
            100.0 * stats.tokens / (max(stats.instances, 1) * options.max_seq_length))
    if stats.capped_instances:
        logging.warning(
            "--max_predictions_per_seq=%d capped %d of %d instances, dropping %d predictions "
            "that --masked_lm_prob=%g asked for.", options.max_predictions_per_seq,
            stats.capped_instances, stats.instances, stats.capped_predictions,
            options.masked_lm_prob)
    if stats.long_lines:
        logging.warning("%d sentences in total were longer than --max_seq_length=%d - 3 = %d "
                        "tokens and were truncated.", stats.long_lines, options.max_seq_length,
                        options.max_seq_length - 3)
    if stats.documents == 1 and stats.random_next and not options.sentence_order_prediction:
        logging.warning("The corpus holds a single document: the %d random next segments "
                        "(next_sentence_labels=1) come from that same document. Add more "
                        "documents (blank lines separate them) for real next-sentence "
                        "negatives.", stats.random_next)


# Per-process state of the worker pool, set once by _init_worker.
_worker_maker = None


def _init_worker(vocab_file, do_lower_case, options):
    global _worker_maker
    _worker_maker = InstanceMaker(WordpieceTokenizer(vocab_file, do_lower_case=do_lower_case),
                                  options)


def _process_chunk_in_worker(chunk):
    return _framed_chunk_records(_worker_maker, chunk)


def _framed_chunk_records(maker, chunk):
    """process_chunk with every record already in TFRecord framing: the CRCs are computed by
    the workers, in parallel, and the writing process only shuffles and copies bytes."""
    records, stats = maker.process_chunk(chunk)
    return tfrecord_io.frame_records(records), stats


def _iter_chunk_results(chunks, maker, vocab_file, do_lower_case, options, num_workers):
    """Yields (framed records, stats) per chunk in input order, in-process or over a process pool.

    With several workers at most 2 * num_workers chunks are in flight, so reading never runs
    far ahead of processing, and results are taken in submission order, which keeps the output
    independent of scheduling.
    """
    if num_workers == 1:
        for chunk in chunks:
            yield _framed_chunk_records(maker, chunk)
        return
    global _worker_maker
    if "fork" in multiprocessing.get_all_start_methods() and "tensorflow" not in sys.modules:
        # A forked worker inherits this process's InstanceMaker (vocabulary, word cache) and
        # modules: it starts in milliseconds, where a spawned one re-imports and reloads the
        # vocabulary (~0.3 s of CPU each, a visible share of a few-MB corpus).
        context, initializer, initargs = multiprocessing.get_context("fork"), None, ()
        _worker_maker = maker
    else:
        # "spawn": the caller initialized TensorFlow (the Beam path, a notebook), and forking
        # such a process is unsafe. Workers import no TensorFlow, so they start quickly.
        context = multiprocessing.get_context("spawn")
        initializer, initargs = _init_worker, (vocab_file, do_lower_case, options)
    with context.Pool(num_workers, initializer=initializer, initargs=initargs) as pool:
        _enlarge_pipes(pool)
        pending = collections.deque()
        for chunk in chunks:
            pending.append(pool.apply_async(_process_chunk_in_worker, (chunk,)))
            if len(pending) >= 2 * num_workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
    _worker_maker = None
    # The pool has joined its workers: RUSAGE_CHILDREN's maxrss is the largest one's peak.
    logging.info("Peak RSS: writer %.0f MB, largest worker %.0f MB.",
                 resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                 resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


def _enlarge_pipes(pool):
    """Grows the pool's task and result pipes to 1 MB (Linux; elsewhere a no-op).

    A chunk's records (several MB) otherwise cross a 64 KB pipe in thousands of blocking
    read/write pairs, each a context switch between worker and writer.
    """
    try:
        import fcntl  # POSIX only
    except ImportError:
        return
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return
    for queue in (getattr(pool, "_inqueue", None), getattr(pool, "_outqueue", None)):
        reader = getattr(queue, "_reader", None)
        if reader is None:
            continue
        try:
            fcntl.fcntl(reader.fileno(), set_size, 1 << 20)
        except OSError:
            pass  # over the system's limit (/proc/sys/fs/pipe-max-size): keep the default


def format_progress(stats, written, elapsed, total_bytes):
    """One progress line: documents, documents/s, MB/s, instances made and written, ETA.

    Args:
      stats: CreationStats so far (documents, instances and input bytes processed).
      written: records written to the shards so far (made minus those in the shuffle buffer).
      elapsed: seconds since the run started (> 0).
      total_bytes: input bytes of the whole run; the ETA extrapolates the share processed.
    """
    fraction = min(stats.num_bytes / max(total_bytes, 1), 1.0)
    eta = elapsed * (1.0 - fraction) / fraction if fraction > 0 else float("nan")
    return (f"{stats.documents} documents ({stats.documents / elapsed:.1f} docs/s, "
            f"{stats.num_bytes / 1e6 / elapsed:.2f} MB/s), {stats.instances} instances made, "
            f"{written} written, {100.0 * fraction:.1f}% of input, ETA {_format_seconds(eta)}")


class _Progress:
    """Reports progress on stderr every _PROGRESS_EVERY_SECONDS: as an absl log line, or, when
    stderr is a terminal, as one line redrawn in place (a bar) about every second."""

    def __init__(self, total_bytes, stream=None):
        self.total_bytes = max(total_bytes, 1)
        self.stream = stream if stream is not None else sys.stderr
        self.on_terminal = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every = 1.0 if self.on_terminal else _PROGRESS_EVERY_SECONDS
        self.start = self.last = time.monotonic()

    def update(self, stats, written, force=False):
        """Reports if the interval has passed (always with force=True, the final report)."""
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        self.last = now
        line = format_progress(stats, written, max(now - self.start, 1e-6), self.total_bytes)
        if self.on_terminal:
            fraction = min(stats.num_bytes / self.total_bytes, 1.0)
            filled = int(round(20 * fraction))
            self.stream.write(f"\r[{'#' * filled}{'.' * (20 - filled)}] {line}\x1b[K")
            if force:
                self.stream.write("\n")
            self.stream.flush()
        else:
            logging.info("%s.", line)


def _format_seconds(seconds):
    if seconds != seconds:  # NaN: nothing processed yet
        return "unknown"
    seconds = int(round(seconds))
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def create_pretraining_data(input_patterns, output_files, vocab_file, *, do_lower_case=True,
                            options=None, num_workers=1, compression="",
                            shuffle_buffer_size=100_000):
    """Writes pre-training TFRecords for a corpus, streaming, over `num_workers` processes.

    Args:
      input_patterns: comma-separated globs (str) or a list of them; files are read in sorted
        order within each pattern.
      output_files: comma-separated paths (str) or a list; records go round-robin to them.
      vocab_file: WordPiece vocabulary, one token per line.
      do_lower_case: lower-case and strip accents before WordPiece (match the vocab / checkpoint).
      options: PretrainingDataOptions; None = the original defaults.
      num_workers: processes that tokenize and mask (1 = in this process). The output does not
        depend on it.
      compression: "" or "GZIP" (GZIP output names must end in .gz).
      shuffle_buffer_size: records held to shuffle the output order (>= 1; 1 = no shuffle).

    Returns:
      CreationStats of the whole run.

    Raises:
      ValueError: a bad option (names the flag), a glob matching nothing (names it), a missing
        output directory, all inputs empty, or no document in any input; the tokenizer's error
        for a bad vocab file. Invalid settings are reported before any input is read, and on any
        error no output file is created.
    """
    options = options or PretrainingDataOptions()
    options.validate()
    if num_workers < 1:
        raise ValueError(f"--num_workers={num_workers} must be at least 1.")
    if shuffle_buffer_size < 1:
        raise ValueError(f"shuffle_buffer_size={shuffle_buffer_size} must be at least 1.")
    if isinstance(output_files, str):
        output_files = [p.strip() for p in output_files.split(",") if p.strip()]
    tfrecord_io.check_output_files(output_files, compression)
    input_files = nonempty_input_files(expand_input_patterns(input_patterns))
    maker = InstanceMaker(WordpieceTokenizer(vocab_file, do_lower_case=do_lower_case), options)
    warn_if_predictions_capped(options)
    logging.info("Creating pre-training data from %d files into %d shards with %d workers.",
                 len(input_files), len(output_files), num_workers)

    stats = CreationStats()
    logged_files = set()

    def log_finished_files(up_to):
        # Files before index `up_to` are complete: their long-line counts are final.
        for file_index in sorted(stats.long_lines_per_file):
            if file_index < up_to and file_index not in logged_files:
                logged_files.add(file_index)
                log_long_lines(input_files[file_index],
                               stats.long_lines_per_file[file_index], options)

    progress = _Progress(sum(_file_size(p) for p in input_files))
    # The output order is shuffled with its own stream, seeded from random_seed as well.
    shuffle_rng = np.random.default_rng(document_seed(options.random_seed, -1, -1, -1))
    buffer = np.empty(shuffle_buffer_size, dtype=object)
    buffered = 0
    with tfrecord_io.ShardedRecordWriter(output_files, compression) as writer:
        for records, chunk_stats in _iter_chunk_results(
                iter_document_chunks(input_files, options.documents_per_chunk), maker,
                vocab_file, do_lower_case, options, num_workers):
            stats.add(chunk_stats)
            if chunk_stats.long_lines_per_file:
                log_finished_files(max(chunk_stats.long_lines_per_file))
            room = min(shuffle_buffer_size - buffered, len(records))
            buffer[buffered:buffered + room] = records[:room]
            buffered += room
            for start in range(room, len(records), shuffle_buffer_size):
                # Emit distinct random buffered records, in random order, and keep the new
                # ones in their places (numpy object arrays: no per-record Python).
                incoming = records[start:start + shuffle_buffer_size]
                slots = shuffle_rng.choice(shuffle_buffer_size, len(incoming), replace=False)
                writer.write_framed_many(buffer[slots].tolist())
                new = np.empty(len(incoming), dtype=object)
                new[:] = incoming
                buffer[slots] = new
            progress.update(stats, writer.num_written)
        log_finished_files(len(input_files))
        if stats.instances == 0:
            raise ValueError(f"No documents with any token in the input files "
                             f"({', '.join(input_files)}); nothing to write.")
        writer.write_framed_many(buffer[shuffle_rng.permutation(buffered)].tolist())
        progress.update(stats, writer.num_written, force=True)
    log_summary(stats, options)
    return stats
