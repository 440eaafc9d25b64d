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
No TensorFlow, as tfrecord_io.
"""

import functools

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
