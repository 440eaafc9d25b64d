"""Making masked-LM / next-sentence instances from a chunk of documents (the original's algorithm).

InstanceMaker turns a corpus_reading.DocumentChunk into serialized records: it tokenizes the
chunk in one pass, lays out each instance's segments A and B (next-sentence or
sentence-order pairs), truncates every pair and masks it (tokens, whole words or SpanBERT
spans), vectorised with numpy, and packs instances into rows when asked (row_packing). The
algorithm and what differs from the original are described in create_pretraining_data's
module doc. No TensorFlow here.
"""

import bisect
import dataclasses
import hashlib
import itertools
import random

import numpy as np

from bert_tf.data.pretraining import row_packing
from bert_tf.data.pretraining import tfrecord_io
from bert_tf.data.pretraining.instance_serializer import InstanceSerializer
from bert_tf.text.tokenization import is_whitespace_char


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
        # Each word is encoded as it reads inside running text (byte-level BPE folds the space
        # before a word into its first token, "Ġworld").
        self._encode = tokenizer.encode_word
        self._reset()

    def _reset(self):
        self.clear()
        self[_SEGMENT_BREAK] = (_SEGMENT_BREAK_ID,)
        self[_DOCUMENT_BREAK] = (_DOCUMENT_BREAK_ID,)

    def __missing__(self, word):
        if len(self) >= _WORD_CACHE_LIMIT:
            self._reset()
        ids = self[word] = tuple(self._encode(word))
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
    token matrix, masks it (default masking) and serializes the records (InstanceSerializer
    .serialize_batch), with a numpy Generator seeded per (chunk, dupe). Whole-word and span
    masking choose words per instance in Python, with a random.Random seeded per (chunk, dupe).

    Args:
      tokenizer: a bert_tf.text.WordpieceTokenizer (its vocab gives [CLS], [SEP], [MASK] and the
        "##" continuation pieces), or a byte-level bert_tf.text.BpeTokenizer (a ModernBERT's
        tokenizer.json: every word, a line's first too, is encoded as it reads after a space,
        so a word's first token starts with "Ġ" and whole-word masking finds it).
      options: PretrainingDataOptions (validated here).
    """

    def __init__(self, tokenizer, options):
        options.validate()
        self.tokenizer = tokenizer
        self.options = options
        self.vocab_size = tokenizer.vocab_size
        self.cls_id, self.sep_id, self.mask_id = (tokenizer.cls_id, tokenizer.sep_id,
                                                  tokenizer.mask_id)
        self._continuation_ids = tokenizer.continuation_ids()
        # Cumulative weights of span lengths 1..M (SpanBERT's geometric or ALBERT's n-grams).
        self._span_length_cdf = list(itertools.accumulate(options.span_length_weights()))
        self._serializer = InstanceSerializer(
            options.max_seq_length, options.max_predictions_per_seq, options.feature_names,
            self.vocab_size)
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
                    flat.extend(self.tokenizer.encode_line(line))
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

        if options.do_whole_word_mask or options.masks_spans:
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
                    out.append(self._serializer.serialize(
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
            return self._serializer.serialize_batch(ids, num_tokens, len_a + 2, positions,
                                                    masked_ids, num_to_predict, labels)
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
        if options.masks_spans:
            positions, left_boundaries, right_boundaries = self._span_mask(
                input_ids, candidates, num_to_predict, rng)
            if not options.do_span_mask:  # n-grams: no span-boundary objective to feed
                left_boundaries = right_boundaries = None
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
        """Packs instances (see row_packing.pack_instances) into serialized rows.

        Args:
          instances: list of Instance, in chunk order.

        Returns:
          list of serialized tf.train.Example rows (tfrecord_io.serialize_packed_row), in the
          order the rows were opened; instances keep their placement order within a row.
        """
        options = self.options
        rows = row_packing.pack_instances(
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
        """Masks spans of whole words in place (SpanBERT's, or ALBERT's n-grams; see
        create_pretraining_data's module docstring).

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
