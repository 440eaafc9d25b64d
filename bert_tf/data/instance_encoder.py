"""A per-run encoder of pre-training instances into tf.train.Example bytes, for corpus scale.

Gives exactly the bytes of bert_tf.data.tfrecord_io.serialize_instance (tests compare them),
about twice as fast, by knowing what a run of create_pretraining_data fixes up front:
  * S, P, the feature names and the vocabulary size, so token ids need no range check
    (serialize_instance takes min() and max() of every list to pick an encoding: that was the
    largest single cost of a run);
  * segment_ids are [0] * (len(A) + 2) + [1] * (len(B) + 1), so the segment_ids entry depends
    only on (len(A) + 2, number of tokens) and is built once per distinct pair;
  * masked positions are below S, so for S <= 128 each position is its own one-byte varint;
  * next_sentence_labels is 0 or 1: two entries, built once.
`encode_batch` encodes a whole batch of padded id matrices at once: the varints of every id
are made by numpy, and each record is then a join of cached entry prefixes and byte slices.
No TensorFlow, as tfrecord_io.
"""

import functools
import operator

import numpy as np

from bert_tf.data import tfrecord_io
# The encoder reuses tfrecord_io's wire-format pieces so both stay the same format by
# construction.
from bert_tf.data.tfrecord_io import _TAG_3_LEN
from bert_tf.data.tfrecord_io import _feature
from bert_tf.data.tfrecord_io import _int64_feature
from bert_tf.data.tfrecord_io import _map_entry
from bert_tf.data.tfrecord_io import _ones_entry
from bert_tf.data.tfrecord_io import _packed_varints
from bert_tf.data.tfrecord_io import _varint_of_length


class InstanceEncoder:
    """Serializes instances of one run (fixed S, P, feature names, vocabulary size).

    Args:
      max_seq_length: S.
      max_predictions_per_seq: P.
      feature_names: "v1" or "v2" (see tfrecord_io).
      vocab_size: V; every token id must be in [0, V).
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, feature_names, vocab_size):
        if feature_names not in tfrecord_io.FEATURE_NAMES:
            raise ValueError(f'feature_names must be "v1" or "v2", got {feature_names!r}.')
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.feature_names = feature_names
        names = tfrecord_io.FEATURE_NAMES[feature_names]
        self._input_ids_name = names["input_ids"]
        self._input_mask_name = names["input_mask"]
        self._segment_ids_name = names["segment_ids"]
        # Varint of every id: ids of vocabularies up to 2**16 come from the shared table.
        self._id_varints = (tfrecord_io._SMALL_VARINTS[:vocab_size] if vocab_size <= 1 << 16
                            else [tfrecord_io._varint(v) for v in range(vocab_size)])
        self._positions_are_bytes = max_seq_length <= 128
        self._labels = [_map_entry("next_sentence_labels", _int64_feature([label]))
                        for label in (0, 1)]
        self._order = list(tfrecord_io._SORTED_NAMES[feature_names])
        self._order_with_spans = list(tfrecord_io._SORTED_NAMES_WITH_SPANS[feature_names])
        self._prefixes = {}  # (name, payload length) -> map entry bytes before the payload
        self._vocab_size = vocab_size
        self._varints = None  # encode_batch's lookup tables, made on first use

    @functools.lru_cache(maxsize=None)
    def _segment_entry(self, first_segment_length, num_tokens):
        segment_ids = [0] * first_segment_length + [1] * (num_tokens - first_segment_length)
        return _map_entry(self._segment_ids_name, _feature(
            _TAG_3_LEN, bytes(segment_ids) + b"\x00" * (self.max_seq_length - num_tokens)))

    def _positions_payload(self, positions):
        if self._positions_are_bytes:
            return bytes(positions)
        return _packed_varints(positions)

    def encode(self, input_ids, first_segment_length, masked_lm_positions, masked_lm_ids,
               next_sentence_label, span_left_boundaries=None, span_right_boundaries=None):
        """One instance -> serialized tf.train.Example bytes.

        Args:
          input_ids: list of int, length T <= S: [CLS] A [SEP] B [SEP] after masking.
          first_segment_length: len(A) + 2, the tokens with segment id 0 ([CLS] A [SEP]).
          masked_lm_positions: sorted list of int, length M <= P.
          masked_lm_ids: list of int, length M.
          next_sentence_label: 0 or 1.
          span_left_boundaries, span_right_boundaries: optional lists of int, length M.

        Returns:
          bytes, equal to tfrecord_io.serialize_instance of the same instance with
          segment_ids = [0] * first_segment_length + [1] * (T - first_segment_length).
        """
        num_tokens, num_predictions = len(input_ids), len(masked_lm_positions)
        seq_length, max_predictions = self.max_seq_length, self.max_predictions_per_seq
        if num_tokens > seq_length or num_predictions > max_predictions:
            raise ValueError(f"An instance of {num_tokens} tokens and {num_predictions} "
                             f"predictions exceeds max_seq_length={seq_length} or "
                             f"max_predictions_per_seq={max_predictions}.")
        id_varints = self._id_varints.__getitem__
        pred_pad = b"\x00" * (max_predictions - num_predictions)
        entries = {
            self._input_ids_name: _map_entry(self._input_ids_name, _feature(
                _TAG_3_LEN, b"".join(map(id_varints, input_ids))
                + b"\x00" * (seq_length - num_tokens))),
            self._input_mask_name: _ones_entry(self._input_mask_name, num_tokens, seq_length,
                                               False),
            self._segment_ids_name: self._segment_entry(first_segment_length, num_tokens),
            "masked_lm_positions": _map_entry("masked_lm_positions", _feature(
                _TAG_3_LEN, self._positions_payload(masked_lm_positions) + pred_pad)),
            "masked_lm_ids": _map_entry("masked_lm_ids", _feature(
                _TAG_3_LEN, b"".join(map(id_varints, masked_lm_ids)) + pred_pad)),
            "masked_lm_weights": _ones_entry("masked_lm_weights", num_predictions,
                                             max_predictions, True),
            "next_sentence_labels": self._labels[next_sentence_label],
        }
        order = self._order
        if span_left_boundaries is not None:
            order = self._order_with_spans
            for name, values in zip(tfrecord_io.SPAN_BOUNDARY_FEATURES,
                                    (span_left_boundaries, span_right_boundaries)):
                entries[name] = _map_entry(name, _feature(
                    _TAG_3_LEN, _packed_varints(values) + pred_pad))
        features = b"".join([entries[name] for name in order])
        return b"".join((b"\x0a", _varint_of_length(len(features)), features))

    def _entry_prefix(self, name, payload_length):
        """The bytes of `name`'s Int64List map entry before a packed payload of that length."""
        key = (name, payload_length)
        prefix = self._prefixes.get(key)
        if prefix is None:
            entry = _map_entry(name, _feature(_TAG_3_LEN, b"\x00" * payload_length))
            prefix = self._prefixes[key] = entry[:len(entry) - payload_length]
        return prefix

    def encode_batch(self, input_ids, num_tokens, first_segment_lengths, masked_lm_positions,
                     masked_lm_ids, num_predictions, next_sentence_labels):
        """N instances -> N serialized tf.train.Example bytes (spans unsupported: use encode).

        Args:
          input_ids: int array [N, S] after masking, zeros past each row's num_tokens.
          num_tokens: int array [N], T per row (<= S).
          first_segment_lengths: int array [N], len(A) + 2 per row.
          masked_lm_positions: int array [N, P], sorted per row, zeros past num_predictions.
          masked_lm_ids: int array [N, P], zeros past num_predictions.
          num_predictions: int array [N], M per row (<= P).
          next_sentence_labels: int array [N] of 0 or 1.

        Returns:
          list of N bytes, each equal to `encode` of the row.
        """
        seq_length, max_predictions = self.max_seq_length, self.max_predictions_per_seq
        if input_ids.shape[1:] != (seq_length,) or masked_lm_ids.shape[1:] != (max_predictions,):
            raise ValueError(f"encode_batch expects input_ids [N, {seq_length}] and masked_lm_ids "
                             f"[N, {max_predictions}], got {input_ids.shape} and "
                             f"{masked_lm_ids.shape}.")
        if self._varints is None:
            self._varints = _varint_table(max(self._vocab_size, seq_length))
        ids_data, ids_offsets, ids_lengths = _varint_rows(input_ids, self._varints)
        mlm_data, mlm_offsets, mlm_lengths = _varint_rows(masked_lm_ids, self._varints)
        pos_data, pos_offsets, pos_lengths = _varint_rows(masked_lm_positions, self._varints)
        ids_name, mask_name, seg_name = (self._input_ids_name, self._input_mask_name,
                                         self._segment_ids_name)
        mask_entries = [_ones_entry(mask_name, t, seq_length, False)
                        for t in range(seq_length + 1)]
        weight_entries = [_ones_entry("masked_lm_weights", m, max_predictions, True)
                          for m in range(max_predictions + 1)]
        segment_entry, labels = self._segment_entry, self._labels
        # Entry prefixes by payload length (at most 3 bytes per value).
        ids_prefix = [self._entry_prefix(ids_name, n) for n in range(3 * seq_length + 1)]
        pos_prefix = [self._entry_prefix("masked_lm_positions", n)
                      for n in range(3 * max_predictions + 1)]
        mlm_prefix = [self._entry_prefix("masked_lm_ids", n)
                      for n in range(3 * max_predictions + 1)]
        # Parts are made in this order and put in sorted key order by one itemgetter.
        kinds = [ids_name, mask_name, seg_name, "masked_lm_positions", "masked_lm_ids",
                 "masked_lm_weights", "next_sentence_labels"]
        in_key_order = operator.itemgetter(*[kinds.index(name) for name in self._order])
        varint_of_length = _varint_of_length
        records = []
        for ids_off, ids_len, mlm_off, mlm_len, pos_off, pos_len, t, first, m, label in zip(
                ids_offsets, ids_lengths, mlm_offsets, mlm_lengths, pos_offsets, pos_lengths,
                num_tokens.tolist(), first_segment_lengths.tolist(), num_predictions.tolist(),
                next_sentence_labels.tolist()):
            features = b"".join(in_key_order((
                ids_prefix[ids_len] + ids_data[ids_off:ids_off + ids_len],
                mask_entries[t],
                segment_entry(first, t),
                pos_prefix[pos_len] + pos_data[pos_off:pos_off + pos_len],
                mlm_prefix[mlm_len] + mlm_data[mlm_off:mlm_off + mlm_len],
                weight_entries[m],
                labels[label])))
            records.append(b"".join((b"\x0a", varint_of_length(len(features)), features)))
        return records


def _varint_table(size):
    """Varints of 0 .. size - 1 (size <= 2**21) as numpy lookup tables, 4 bytes per value.

    Returns:
      (pieces, used, lengths): pieces uint32 [size] whose little-endian bytes are the value's
      varint then zeros; used uint32 [size] whose bytes are 1 where `pieces` has a varint byte;
      lengths int8 [size], the varint's length in bytes.
    """
    if size > 1 << 21:
        raise ValueError(f"encode_batch supports values below 2**21, not {size}.")
    v = np.arange(size, dtype=np.uint32)
    two, three = (v >= 0x80).astype(np.uint32), (v >= 0x4000).astype(np.uint32)
    pieces = (((v & 0x7F) | (two << 7)) | ((((v >> 7) & 0x7F) | (three << 7)) << 8)
              | ((v >> 14) << 16))
    used = 1 | (two << 8) | (three << 16)
    return pieces.astype("<u4"), used.astype("<u4"), (1 + two + three).astype(np.int8)


def _varint_rows(values, table):
    """Base-128 varints of a non-negative int array [N, W], per row, through a _varint_table
    covering every value.

    Returns:
      (data, offsets, lengths): all rows' varints concatenated (bytes), and per row the start
      and the byte length of its varints in `data` (lists of int).
    """
    pieces, used, value_lengths = table
    flat = values.ravel()
    data = pieces[flat].view(np.uint8)[used[flat].view(np.bool_)].tobytes()
    lengths = value_lengths[values].sum(axis=1, dtype=np.int64)
    return data, (np.cumsum(lengths) - lengths).tolist(), lengths.tolist()
