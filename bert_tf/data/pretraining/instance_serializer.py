"""A per-run serializer of pre-training instances into tf.train.Example bytes, for corpus scale.

Gives exactly the bytes of tfrecord_io.serialize_instance (tests compare them),
about twice as fast, by knowing what a run of create_pretraining_data fixes up front:
  * S, P, the feature names and the vocabulary size, so token ids need no range check
    (serialize_instance takes min() and max() of every list to pick an encoding: that was the
    largest single cost of a run);
  * segment_ids are [0] * (len(A) + 2) + [1] * (len(B) + 1), so the segment_ids entry depends
    only on (len(A) + 2, number of tokens) and is built once per distinct pair;
  * masked positions are below S, so for S <= 128 each position is its own one-byte varint;
  * next_sentence_labels is 0 or 1: two entries, built once.
`serialize_batch` serializes a whole batch of padded id matrices at once: the varints of every id
are made by numpy, and each record is then a join of cached entry prefixes and byte slices.
No TensorFlow, as tfrecord_io.
"""

import functools

import numpy as np

from bert_tf.data.pretraining import example_proto, tfrecord_io
# The serializer builds records from example_proto's wire-format pieces, as tfrecord_io does, so
# both write the same format by construction.
from bert_tf.data.pretraining.example_proto import (TAG_3_LEN, int64_feature, map_entry,
                                                    ones_entry, packed_varints,
                                                    serialized_feature, varint_of_length)
from bert_tf.protobuf_wire import varint

class InstanceSerializer:
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
        self._id_varints = (example_proto.SMALL_VARINTS[:vocab_size] if vocab_size <= 1 << 16
                            else [varint(v) for v in range(vocab_size)])
        self._positions_are_bytes = max_seq_length <= 128
        self._labels = [map_entry("next_sentence_labels", int64_feature([label]))
                        for label in (0, 1)]
        self._order = list(tfrecord_io.SORTED_NAMES[feature_names])
        self._order_with_spans = list(tfrecord_io.SORTED_NAMES_WITH_SPANS[feature_names])
        self._prefixes = {}  # (name, longest payload) -> _prefix_table
        self._vocab_size = vocab_size
        self._varints = None  # serialize_batch's lookup tables, made on first use

    @functools.lru_cache(maxsize=None)
    def _segment_entry(self, first_segment_length, num_tokens):
        segment_ids = [0] * first_segment_length + [1] * (num_tokens - first_segment_length)
        return map_entry(self._segment_ids_name, serialized_feature(
            TAG_3_LEN, bytes(segment_ids) + b"\x00" * (self.max_seq_length - num_tokens)))

    def _positions_payload(self, positions):
        if self._positions_are_bytes:
            return bytes(positions)
        return packed_varints(positions)

    def serialize(self, input_ids, first_segment_length, masked_lm_positions, masked_lm_ids,
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
            self._input_ids_name: map_entry(self._input_ids_name, serialized_feature(
                TAG_3_LEN, b"".join(map(id_varints, input_ids))
                + b"\x00" * (seq_length - num_tokens))),
            self._input_mask_name: ones_entry(self._input_mask_name, num_tokens, seq_length,
                                               False),
            self._segment_ids_name: self._segment_entry(first_segment_length, num_tokens),
            "masked_lm_positions": map_entry("masked_lm_positions", serialized_feature(
                TAG_3_LEN, self._positions_payload(masked_lm_positions) + pred_pad)),
            "masked_lm_ids": map_entry("masked_lm_ids", serialized_feature(
                TAG_3_LEN, b"".join(map(id_varints, masked_lm_ids)) + pred_pad)),
            "masked_lm_weights": ones_entry("masked_lm_weights", num_predictions,
                                             max_predictions, True),
            "next_sentence_labels": self._labels[next_sentence_label],
        }
        order = self._order
        if span_left_boundaries is not None:
            order = self._order_with_spans
            for name, values in zip(tfrecord_io.SPAN_BOUNDARY_FEATURES,
                                    (span_left_boundaries, span_right_boundaries)):
                entries[name] = map_entry(name, serialized_feature(
                    TAG_3_LEN, packed_varints(values) + pred_pad))
        features = b"".join([entries[name] for name in order])
        return b"".join((b"\x0a", varint_of_length(len(features)), features))

    def _prefix_table(self, name, max_payload_length):
        """The bytes of `name`'s Int64List map entry before its packed payload, for every
        payload length 0 .. max_payload_length, as a padded table.

        Returns:
          (bytes_table, lengths): uint8 [max_payload_length + 1, K] (prefix then zeros) and
          int64 [max_payload_length + 1], each prefix's length.
        """
        key = (name, max_payload_length)
        if key not in self._prefixes:
            prefixes = []
            for n in range(max_payload_length + 1):
                entry = map_entry(name, serialized_feature(TAG_3_LEN, b"\x00" * n))
                prefixes.append(entry[:len(entry) - n])
            width = max(len(p) for p in prefixes)
            table = np.zeros((len(prefixes), width), dtype=np.uint8)
            for n, prefix in enumerate(prefixes):
                table[n, :len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
            self._prefixes[key] = (table, np.array([len(p) for p in prefixes]))
        return self._prefixes[key]

    def _constant(self, entry, num_rows):
        """A piece (see serialize_batch) of the same bytes in every row."""
        row = np.frombuffer(entry, dtype=np.uint8)
        return np.broadcast_to(row, (num_rows, len(row))), None, len(row)

    def _varint_piece(self, values, bound):
        """The packed varints of int array [N, W], every value below `bound`, as a piece."""
        pieces, used, lengths = self._varints
        num_rows, width = values.shape
        # Bytes a value can need: 1 below 2**7, 2 below 2**14, else 3.
        num_bytes = 1 if bound <= 1 << 7 else 2 if bound <= 1 << 14 else 3
        if num_bytes == 1:
            return values.astype(np.uint8), None, width
        return (pieces[values].view(np.uint8), used[values].view(np.bool_),
                lengths[values].sum(axis=1, dtype=np.int64))

    def _prefixed(self, name, payload, max_payload_length):
        """[prefix piece, payload piece] of a packed Int64List entry."""
        payload_lengths = payload[2]
        if isinstance(payload_lengths, int):
            entry = map_entry(name, serialized_feature(TAG_3_LEN, b"\x00" * payload_lengths))
            return [self._constant(entry[:len(entry) - payload_lengths], len(payload[0])),
                    payload]
        table, prefix_lengths = self._prefix_table(name, max_payload_length)
        lengths = prefix_lengths[payload_lengths]
        prefix_mask = np.arange(table.shape[1]) < lengths[:, None]
        return [(table[payload_lengths], prefix_mask, lengths), payload]

    def serialize_batch(self, input_ids, num_tokens, first_segment_lengths, masked_lm_positions,
                     masked_lm_ids, num_predictions, next_sentence_labels):
        """N instances -> N serialized tf.train.Example bytes (spans unsupported: use serialize).

        Every record is assembled by numpy: each part of a record (a map entry's prefix, a
        packed payload) is a piece, a [N, width] byte matrix with a mask of the bytes that
        belong to it (None: all), and the masked bytes of all pieces side by side, read row by
        row, are the records one after the other.

        Args:
          input_ids: int array [N, S] after masking, zeros past each row's num_tokens.
          num_tokens: int array [N], T per row (<= S).
          first_segment_lengths: int array [N], len(A) + 2 per row.
          masked_lm_positions: int array [N, P], sorted per row, zeros past num_predictions.
          masked_lm_ids: int array [N, P], zeros past num_predictions.
          num_predictions: int array [N], M per row (<= P).
          next_sentence_labels: int array [N] of 0 or 1.

        Returns:
          list of N bytes, each equal to `serialize` of the row.
        """
        seq_length, max_predictions = self.max_seq_length, self.max_predictions_per_seq
        if input_ids.shape[1:] != (seq_length,) or masked_lm_ids.shape[1:] != (max_predictions,):
            raise ValueError(f"serialize_batch expects input_ids [N, {seq_length}] and "
                             f"masked_lm_ids [N, {max_predictions}], got {input_ids.shape} and "
                             f"{masked_lm_ids.shape}.")
        num_rows = len(num_tokens)
        if num_rows == 0:
            return []
        # Ids, positions, and the features' length of a record (below 6 S + 10 P + 256).
        length_bound = 6 * seq_length + 10 * max_predictions + 256
        if self._varints is None:
            self._varints = _varint_table(max(self._vocab_size, length_bound))
        column = np.arange(seq_length)
        num_tokens = np.asarray(num_tokens)[:, None]
        first = np.asarray(first_segment_lengths)[:, None]
        in_predictions = np.arange(max_predictions) < np.asarray(num_predictions)[:, None]
        ids_name, mask_name, segment_name = (self._input_ids_name, self._input_mask_name,
                                             self._segment_ids_name)
        parts = {
            ids_name: self._prefixed(
                ids_name, self._varint_piece(input_ids, self._vocab_size), 3 * seq_length),
            mask_name: self._prefixed(
                mask_name, ((column < num_tokens).view(np.uint8), None, seq_length),
                seq_length),
            segment_name: self._prefixed(
                segment_name,
                (((column >= first) & (column < num_tokens)).view(np.uint8), None, seq_length),
                seq_length),
            "masked_lm_positions": self._prefixed(
                "masked_lm_positions", self._varint_piece(masked_lm_positions, seq_length),
                3 * max_predictions),
            "masked_lm_ids": self._prefixed(
                "masked_lm_ids", self._varint_piece(masked_lm_ids, self._vocab_size),
                3 * max_predictions),
            "masked_lm_weights": [
                self._constant(ones_entry("masked_lm_weights", 0, max_predictions, True)[
                    :-4 * max_predictions], num_rows),
                (in_predictions.astype("<f4").view(np.uint8), None, 4 * max_predictions)],
            "next_sentence_labels": [
                (np.stack([np.frombuffer(e, dtype=np.uint8) for e in self._labels])[
                    np.asarray(next_sentence_labels)], None, len(self._labels[0]))],
        }
        pieces = [piece for name in self._order for piece in parts[name]]
        feature_lengths = np.broadcast_to(sum(length for _, _, length in pieces), (num_rows,))
        # The Example's header: field 1 (Features), then the varint of the features' length.
        pieces = ([self._constant(b"\x0a", num_rows),
                   self._varint_piece(feature_lengths[:, None], length_bound)] + pieces)
        width = sum(d.shape[1] for d, _, _ in pieces)
        data = np.empty((num_rows, width), dtype=np.uint8)
        mask = np.ones((num_rows, width), dtype=bool)
        column = 0
        for piece_data, piece_mask, _ in pieces:
            end = column + piece_data.shape[1]
            data[:, column:end] = piece_data
            if piece_mask is not None:
                mask[:, column:end] = piece_mask
            column = end
        flat = data[mask].tobytes()
        ends = np.cumsum(feature_lengths + 1 + pieces[1][2]).tolist()
        return [flat[start:end] for start, end in zip([0] + ends[:-1], ends)]


def _varint_table(size):
    """Varints of 0 .. size - 1 (size <= 2**21) as numpy lookup tables, 4 bytes per value.

    Returns:
      (pieces, used, lengths): pieces uint32 [size] whose little-endian bytes are the value's
      varint then zeros; used uint32 [size] whose bytes are 1 where `pieces` has a varint byte;
      lengths int8 [size], the varint's length in bytes.
    """
    if size > 1 << 21:
        raise ValueError(f"serialize_batch supports values below 2**21, not {size}.")
    v = np.arange(size, dtype=np.uint32)
    two, three = (v >= 0x80).astype(np.uint32), (v >= 0x4000).astype(np.uint32)
    pieces = (((v & 0x7F) | (two << 7)) | ((((v >> 7) & 0x7F) | (three << 7)) << 8)
              | ((v >> 14) << 16))
    used = 1 | (two << 8) | (three << 16)
    return pieces.astype("<u4"), used.astype("<u4"), (1 + two + three).astype(np.int8)
