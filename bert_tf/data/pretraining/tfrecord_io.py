"""Writes pre-training instances as tf.train.Example TFRecords (original "v1" or "v2" names).

One record holds one instance, padded to fixed lengths (S = max_seq_length,
P = max_predictions_per_seq), with every integer stored as int64 as the original writes them:

  input_ids / input_word_ids         int64 [S]  token ids, 0-padded
  input_mask                         int64 [S]  1 on real tokens
  segment_ids / input_type_ids       int64 [S]  0 for [CLS] A [SEP], 1 for B [SEP]
  masked_lm_positions                int64 [P]  0-padded
  masked_lm_ids                      int64 [P]  original token ids at those positions, 0-padded
  masked_lm_weights                  float [P]  1.0 on real predictions, 0.0 on padding
  next_sentence_labels               int64 [1]  0 = B follows A, 1 = B is random (with
                                                sentence-order prediction: 1 = A and B swapped)

With span masking (SpanBERT) two more features give each prediction's span boundaries:

  span_left_boundaries               int64 [P]  position just before the prediction's masked span
  span_right_boundaries              int64 [P]  position just after it (both 0-padded)

Packed rows (create_pretraining_data --pack_sequences; see docs/packing.md) hold up to I
instances in one row of S tokens, each still [CLS] A [SEP] B [SEP], and add or change:

  instance_ids                       int64 [S]  1..K: the (1-based) instance of each token in
                                                the row, 0 on padding
  masked_lm_positions, _ids, _weights     [P]  row positions: the predictions of all
                                                instances (P per row)
  next_sentence_positions            int64 [I]  row position of each instance's [CLS], 0-padded
  next_sentence_labels               int64 [I]  each instance's label, 0-padded
  next_sentence_weights              float [I]  1.0 per instance, 0.0 on unused slots
  span_left_boundaries, _right_boundaries  [P]  row positions (inside the instance)

Files are written under a temporary name in the destination directory and renamed into place
only after every shard closed cleanly, so a reader never sees a truncated shard. The name
holds the writer's pid and host (.tmp_<token>-<pid>-<host>_<shard>, the host as 8 hex digits
of its name's hash): what a killed writer left is removed by the next run writing those shards
(remove_stale_temp_files), never a live one's.

No TensorFlow here: the tf.train.Example protobuf and the TFRecord framing are encoded by hand
(both formats are small and frozen), so create_pretraining_data and its worker processes start
in a fraction of a second and stay far below TensorFlow's ~600 MB footprint. Only paths with a
scheme (gs://, s3://, ...) import TensorFlow, for its file systems. The tests check that
TensorFlow parses these bytes to the same values as its own tf.train.Example, and that its
TFRecordDataset reads the files (plain and GZIP).
"""

import functools
import gzip
import hashlib
import os
import re
import socket
import struct
import tempfile
import uuid

import google_crc32c
import numpy as np
from absl import logging

from bert_tf import fileio
from bert_tf.data.pretraining.example_proto import (
    TAG_3_LEN,
    example_from_entries,
    serialized_feature,
    int64_feature,
    map_entry,
    ones_entry,
    packed_varints)

# Naming scheme -> on-disk names of the three sequence features (the rest are shared).
FEATURE_NAMES = {
    "v1": {"input_ids": "input_ids", "input_mask": "input_mask", "segment_ids": "segment_ids"},
    "v2": {"input_ids": "input_word_ids", "input_mask": "input_mask",
           "segment_ids": "input_type_ids"},
}

# The optional span-boundary features (same names in both schemes).
SPAN_BOUNDARY_FEATURES = ("span_left_boundaries", "span_right_boundaries")

# Every on-disk feature name per scheme, in the (sorted) order of a deterministic serialization.
SORTED_NAMES = {
    scheme: sorted([*names.values(), "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                    "next_sentence_labels"])
    for scheme, names in FEATURE_NAMES.items()}
SORTED_NAMES_WITH_SPANS = {
    scheme: sorted(names + list(SPAN_BOUNDARY_FEATURES)) for scheme, names in SORTED_NAMES.items()}

# The features packed rows add (same names in both schemes).
PACKED_FEATURES = ("instance_ids", "next_sentence_positions", "next_sentence_weights")

_COMPRESSIONS = ("", "GZIP")


# A framed record starts with its length (uint64 LE) and that length's masked CRC (uint32 LE).
_HEADER = struct.Struct("<QI")


def serialize_instance(input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
                       next_sentence_label, *, max_seq_length, max_predictions_per_seq,
                       feature_names="v1", span_left_boundaries=None,
                       span_right_boundaries=None):
    """Serializes one pre-training instance as a padded tf.train.Example.

    Args:
      input_ids: list of int, length T <= max_seq_length: [CLS] A [SEP] B [SEP] after masking.
      segment_ids: list of int (0 or 1), length T.
      masked_lm_positions: list of int, length M <= max_predictions_per_seq, sorted positions
        into input_ids that the model must predict.
      masked_lm_ids: list of int, length M: the original token ids at those positions.
      next_sentence_label: 0 (B follows A) or 1 (B is a random segment).
      max_seq_length: S, the padded length of the three sequence features.
      max_predictions_per_seq: P, the padded length of the masked_lm_* features.
      feature_names: "v1" (input_ids, segment_ids: the original) or "v2" (input_word_ids,
        input_type_ids).
      span_left_boundaries, span_right_boundaries: optional lists of int, length M: for each
        prediction, the positions just before and just after its masked span (span masking).
        Both or neither; without them the record is exactly the original's.

    Returns:
      bytes: the serialized tf.train.Example, byte-identical to TensorFlow's deterministic
      serialization. Map keys are serialized in sorted order, so equal instances give
      byte-identical records in every process and run.

    Raises:
      ValueError: an unknown naming scheme, or lists longer than S / P or of unequal length.
    """
    if feature_names not in FEATURE_NAMES:
        raise ValueError(f'feature_names must be "v1" or "v2", got {feature_names!r}.')
    num_tokens, num_predictions = len(input_ids), len(masked_lm_positions)
    if num_tokens > max_seq_length or len(segment_ids) != num_tokens:
        raise ValueError(
            f"input_ids has {num_tokens} ids and segment_ids {len(segment_ids)}; expected equal "
            f"lengths <= max_seq_length={max_seq_length}.")
    if num_predictions > max_predictions_per_seq or len(masked_lm_ids) != num_predictions:
        raise ValueError(
            f"masked_lm_positions has {num_predictions} entries and masked_lm_ids "
            f"{len(masked_lm_ids)}; expected equal lengths <= "
            f"max_predictions_per_seq={max_predictions_per_seq}.")
    with_spans = span_left_boundaries is not None or span_right_boundaries is not None
    if with_spans and (span_left_boundaries is None or span_right_boundaries is None
                       or len(span_left_boundaries) != num_predictions
                       or len(span_right_boundaries) != num_predictions):
        raise ValueError(
            "span_left_boundaries and span_right_boundaries must both be given, each with one "
            f"entry per masked position ({num_predictions}).")
    # Padding is zeros, and the varint of 0 is one zero byte.
    seq_pad = b"\x00" * (max_seq_length - num_tokens)
    pred_pad = b"\x00" * (max_predictions_per_seq - num_predictions)
    names = FEATURE_NAMES[feature_names]
    entries = {
        names["input_ids"]: map_entry(
            names["input_ids"], serialized_feature(TAG_3_LEN, packed_varints(input_ids) + seq_pad)),
        names["input_mask"]: ones_entry(names["input_mask"], num_tokens, max_seq_length,
                                         False),
        names["segment_ids"]: map_entry(
            names["segment_ids"],
            serialized_feature(TAG_3_LEN, packed_varints(segment_ids) + seq_pad)),
        "masked_lm_positions": map_entry("masked_lm_positions", serialized_feature(
            TAG_3_LEN, packed_varints(masked_lm_positions) + pred_pad)),
        "masked_lm_ids": map_entry("masked_lm_ids", serialized_feature(
            TAG_3_LEN, packed_varints(masked_lm_ids) + pred_pad)),
        "masked_lm_weights": ones_entry("masked_lm_weights", num_predictions,
                                         max_predictions_per_seq, True),
        "next_sentence_labels": map_entry("next_sentence_labels",
                                           int64_feature([int(next_sentence_label)])),
    }
    if not with_spans:
        return example_from_entries([entries[name] for name in SORTED_NAMES[feature_names]])
    for name, values in zip(SPAN_BOUNDARY_FEATURES, (span_left_boundaries,
                                                      span_right_boundaries)):
        entries[name] = map_entry(
            name, serialized_feature(TAG_3_LEN, packed_varints(values) + pred_pad))
    return example_from_entries([entries[name]
                                  for name in SORTED_NAMES_WITH_SPANS[feature_names]])


def serialize_packed_row(input_ids, segment_ids, instance_ids, masked_lm_positions,
                         masked_lm_ids, next_sentence_positions, next_sentence_labels, *,
                         max_seq_length, max_predictions_per_seq, max_instances_per_row,
                         feature_names="v1", span_left_boundaries=None,
                         span_right_boundaries=None):
    """Serializes one packed row of instances as a padded tf.train.Example.

    Args:
      input_ids, segment_ids, instance_ids: lists of int, length T <= S: the row's instances
        one after the other; instance_ids 1..K per token.
      masked_lm_positions, masked_lm_ids: lists of int, length M <= P, row positions.
      next_sentence_positions, next_sentence_labels: lists of int, length K <= I: each
        instance's [CLS] position and label.
      max_seq_length: S. max_predictions_per_seq: P (per row). max_instances_per_row: I.
      feature_names: "v1" or "v2".
      span_left_boundaries, span_right_boundaries: optional lists of int, length M.

    Returns:
      bytes: the serialized tf.train.Example, map keys in sorted order (deterministic).

    Raises:
      ValueError: lists longer than S / P / I or of unequal length.
    """
    num_tokens, num_instances = len(input_ids), len(next_sentence_positions)
    if len(instance_ids) != num_tokens:
        raise ValueError(f"instance_ids has {len(instance_ids)} entries, expected {num_tokens}.")
    if num_instances > max_instances_per_row or len(next_sentence_labels) != num_instances:
        raise ValueError(
            f"next_sentence_positions has {num_instances} entries and next_sentence_labels "
            f"{len(next_sentence_labels)}; expected equal lengths <= "
            f"max_instances_per_row={max_instances_per_row}.")
    if num_tokens > max_seq_length or len(segment_ids) != num_tokens:
        raise ValueError(
            f"input_ids has {num_tokens} ids and segment_ids {len(segment_ids)}; expected equal "
            f"lengths <= max_seq_length={max_seq_length}.")
    num_predictions = len(masked_lm_positions)
    if num_predictions > max_predictions_per_seq or len(masked_lm_ids) != num_predictions:
        raise ValueError(
            f"masked_lm_positions has {num_predictions} entries and masked_lm_ids "
            f"{len(masked_lm_ids)}; expected equal lengths <= "
            f"max_predictions_per_seq={max_predictions_per_seq}.")
    seq_pad = b"\x00" * (max_seq_length - num_tokens)
    pred_pad = b"\x00" * (max_predictions_per_seq - len(masked_lm_positions))
    slot_pad = b"\x00" * (max_instances_per_row - num_instances)
    names = FEATURE_NAMES[feature_names]

    def ints(name, values, pad):
        return map_entry(name, serialized_feature(TAG_3_LEN, packed_varints(values) + pad))

    entries = {
        names["input_ids"]: ints(names["input_ids"], input_ids, seq_pad),
        names["input_mask"]: ones_entry(names["input_mask"], num_tokens, max_seq_length,
                                         False),
        names["segment_ids"]: ints(names["segment_ids"], segment_ids, seq_pad),
        "instance_ids": ints("instance_ids", instance_ids, seq_pad),
        "masked_lm_positions": ints("masked_lm_positions", masked_lm_positions, pred_pad),
        "masked_lm_ids": ints("masked_lm_ids", masked_lm_ids, pred_pad),
        "masked_lm_weights": ones_entry("masked_lm_weights", len(masked_lm_positions),
                                         max_predictions_per_seq, True),
        "next_sentence_positions": ints("next_sentence_positions", next_sentence_positions,
                                        slot_pad),
        "next_sentence_labels": ints("next_sentence_labels", next_sentence_labels, slot_pad),
        "next_sentence_weights": ones_entry("next_sentence_weights", num_instances,
                                             max_instances_per_row, True),
    }
    if span_left_boundaries is not None:
        entries["span_left_boundaries"] = ints("span_left_boundaries", span_left_boundaries,
                                               pred_pad)
        entries["span_right_boundaries"] = ints("span_right_boundaries", span_right_boundaries,
                                                pred_pad)
    return example_from_entries([entries[name] for name in sorted(entries)])


def parse_spec(max_seq_length, max_predictions_per_seq, feature_names="v1",
               span_boundaries=False):
    """The tf.io.parse_single_example spec of the records `serialize_instance` writes.

    Args:
      max_seq_length: S.
      max_predictions_per_seq: P.
      feature_names: "v1" or "v2".
      span_boundaries: include span_left_boundaries and span_right_boundaries.

    Returns:
      dict on-disk name -> tf.io.FixedLenFeature (int64 [S] / [P] / [1], float32 [P]).
    """
    import tensorflow as tf  # only readers need it; writing records does not

    names = FEATURE_NAMES[feature_names]
    spec = {
        names["input_ids"]: tf.io.FixedLenFeature([max_seq_length], tf.int64),
        names["input_mask"]: tf.io.FixedLenFeature([max_seq_length], tf.int64),
        names["segment_ids"]: tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    if span_boundaries:
        spec.update({name: tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
                     for name in SPAN_BOUNDARY_FEATURES})
    return spec


def check_output_files(output_files, compression=""):
    """Validates a list of output shard paths before any work starts.

    Args:
      output_files: list of str paths (local or any tf.io.gfile file system).
      compression: "" or "GZIP"; GZIP shards must end in ".gz" and plain ones must not, because
        readers (record_dataset) pick the decompression from the suffix.

    Raises:
      ValueError: no path, a repeated path, a suffix that contradicts `compression`, a
        directory that does not exist (named, with the path that needs it), a path that is a
        directory, or a local directory where no file can be created (a small probe file is
        created and removed in each distinct directory, so an unwritable destination such as
        /proc fails here, before any work, instead of after it).
    """
    if compression not in _COMPRESSIONS:
        raise ValueError(f'compression must be "" or "GZIP", got {compression!r}.')
    if not output_files:
        raise ValueError("No output file given.")
    seen = set()
    for path in output_files:
        if path in seen:
            raise ValueError(f"Output file {path} is listed twice.")
        seen.add(path)
        if compression == "GZIP" and not path.endswith(".gz"):
            raise ValueError(f"Output file {path} must end in .gz when writing GZIP records "
                             "(readers choose decompression by the suffix).")
        if compression == "" and path.endswith(".gz"):
            raise ValueError(f"Output file {path} ends in .gz but records are not compressed; "
                             "pass --gzip or choose another name.")
        directory = os.path.dirname(path) or "."
        # Object stores (gs://, s3://) have no directories to check.
        if "://" not in path and not os.path.isdir(directory):
            raise ValueError(f"Output directory {directory} does not exist (for output file "
                             f"{path}); create it first.")
        if "://" not in path and os.path.isdir(path):
            raise ValueError(f"Output file {path} is a directory.")
    probed = set()
    for path in output_files:
        directory = os.path.dirname(path) or "."
        if "://" in path or directory in probed:
            continue
        probed.add(directory)
        try:
            fd, probe = tempfile.mkstemp(prefix=".tmp_probe_", dir=directory)
        except OSError as e:
            raise ValueError(f"Output file {path} cannot be written: cannot create a file in "
                             f"{directory} ({e.strerror}).") from None
        os.close(fd)
        os.remove(probe)


# The middle of a writer's temporary name (.tmp_<middle>_<shard>): the token, then the
# writer's pid and host (_host_tag); bert_tf before them wrote the token alone.
_TEMP_WRITER = re.compile(r"[0-9a-f]{8}-(?P<pid>[0-9]+)-(?P<host>[0-9a-f]{8})")
_TEMP_UNKNOWN_WRITER = re.compile(r"[0-9a-f]{8}")


def _host_tag():
    """This host, in a temporary name: 8 hex digits of its name's hash (a host name of up to
    64 characters would push a long shard's temporary name past the 255 bytes of a file
    name)."""
    return hashlib.sha256(socket.gethostname().encode("utf-8")).hexdigest()[:8]


def remove_stale_temp_files(output_files):
    """Removes the partial shards that writers of `output_files` killed before their end left
    beside them (.tmp_<token>-<pid>-<host tag>_<shard>, tens of MB each), before a run writes them
    again: only those of this host whose process is gone, never a live writer's. Temporaries
    of a bert_tf that did not name its writer are named in a warning and kept (whose they are
    cannot be told). Returns the paths removed.
    """
    host = _host_tag()
    by_directory = {}
    for path in output_files:
        by_directory.setdefault(os.path.dirname(path) or ".", set()).add(os.path.basename(path))
    removed, unknown = [], []
    for directory, shards in sorted(by_directory.items()):
        try:
            names = fileio.listdir(directory)
        except OSError:
            continue
        for name in sorted(names):
            # The middle parts this name has for each shard it may be of (a.tfrecord's
            # temporaries also end in x_a.tfrecord's).
            middles = [name[len(".tmp_"):-len(shard) - 1] for shard in shards
                       if name.startswith(".tmp_") and name.endswith(f"_{shard}")
                       and len(name) > len(shard) + len(".tmp__")]
            writers = [_TEMP_WRITER.fullmatch(middle) for middle in middles]
            stale = os.path.join(directory, name)
            if any(w and w["host"] == host and not fileio.process_alive(w["pid"])
                   for w in writers):
                fileio.remove(stale)
                removed.append(stale)
            elif any(_TEMP_UNKNOWN_WRITER.fullmatch(middle) for middle in middles):
                unknown.append(stale)
    if removed:
        logging.info("Removed %d partial shard(s) that killed runs left: %s", len(removed),
                     ", ".join(removed))
    if unknown:
        logging.warning("Kept %d partial shard(s) of an earlier bert_tf, whose writer cannot be "
                        "told (a killed run's if no other command writes these outputs: remove "
                        "them): %s", len(unknown), ", ".join(unknown))
    return removed


def _masked_crc32c(data):
    # TFRecord stores CRCs masked, because a CRC of data that embeds CRCs is weak.
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(record):
    """One record in TFRecord framing, as tf.io.TFRecordWriter writes it.

    Layout: uint64 length (little-endian), masked crc32c of those 8 bytes (uint32 LE), the
    record bytes, masked crc32c of the record (uint32 LE).

    Args:
      record: bytes.

    Returns:
      bytes of length len(record) + 16.
    """
    return b"".join((_frame_header(len(record)), record,
                     struct.pack("<I", _masked_crc32c(record))))


def frame_records(records):
    """`frame_record` of each of a list of records, with no Python-level work per record (the
    CRCs and framing run through C-level map() calls): list of bytes."""
    if not records:
        return []
    crcs = np.fromiter(map(google_crc32c.value, records), dtype=np.uint64, count=len(records))
    masked = (((crcs >> np.uint64(15)) | (crcs << np.uint64(17))) + np.uint64(0xA282EAD8)) \
        & np.uint64(0xFFFFFFFF)
    trailers = map(_UINT32.pack, masked.tolist())
    return list(map(b"".join, zip(map(_frame_header, map(len, records)), records, trailers)))


_UINT32 = struct.Struct("<I")


@functools.lru_cache(maxsize=4096)
def _frame_header(length):
    """A record's length (uint64 LE) and its masked CRC; records of a run repeat few lengths."""
    packed = struct.pack("<Q", length)
    return packed + struct.pack("<I", _masked_crc32c(packed))


def check_record_framing(path):
    """Walks an uncompressed local TFRecord file's framing; returns its number of records.

    Reads only each record's 12-byte header (length and the length's CRC) and seeks past the
    record, so it costs one small read per record, not a read of the data: a file cut short
    (an interrupted write or copy) or that is not TFRecord is found before training starts,
    instead of as a DataLossError naming no file at the end of an epoch.

    Raises:
      ValueError: naming the file, the record and its byte offset.
    """
    size = os.path.getsize(path)
    offset = count = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while offset < size:
            header = os.pread(fd, 12, offset)
            if len(header) < 12:
                raise ValueError(f"{path}: truncated TFRecord file: record {count} at byte "
                                 f"{offset} has a {len(header)}-byte header of 12, then the "
                                 "file ends (an interrupted write or copy?); re-create it.")
            length, length_crc = _HEADER.unpack(header)
            if _masked_crc32c(header[:8]) != length_crc:
                raise ValueError(f"{path}: not a TFRecord file, or corrupt at byte {offset} "
                                 f"(record {count}): the record length's checksum does not "
                                 "match.")
            end = offset + length + 16
            if end > size:
                raise ValueError(f"{path}: truncated TFRecord file: record {count} at byte "
                                 f"{offset} needs {end - offset} bytes, but the file ends "
                                 f"after {size - offset} (an interrupted write or copy?); "
                                 "re-create it.")
            offset = end
            count += 1
    finally:
        os.close(fd)
    return count


def _open_for_writing(path):
    if "://" in path:
        import tensorflow as tf  # only remote file systems (gs://, ...) need it

        return tf.io.gfile.GFile(path, "wb")
    return open(path, "wb")


def _remove_if_exists(path):
    if "://" in path:
        import tensorflow as tf

        if tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)
    elif os.path.exists(path):
        os.remove(path)


class TFRecordFile:
    """Appends framed records to one file, GZIP-compressed or not (what TFRecordDataset reads).

    Args:
      path: the file to create (local, or any tf.io.gfile file system when it has a scheme).
      compression: "" or "GZIP".
    """

    # zlib's default level, as TensorFlow's GZIP record writer uses.
    _GZIP_LEVEL = 6

    def __init__(self, path, compression=""):
        self._raw = _open_for_writing(path)
        self._file = self._raw
        if compression == "GZIP":
            # No name and mtime 0 in the gzip header, so equal records give equal bytes.
            self._file = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw,
                                       compresslevel=self._GZIP_LEVEL, mtime=0)

    def write(self, record):
        """Appends one record (bytes)."""
        self._file.write(frame_record(record))

    def write_framed(self, framed):
        """Appends a record already framed by `frame_record` (worker processes frame them, so
        the process that writes only copies bytes)."""
        self._file.write(framed)

    def close(self):
        """Flushes and closes (the gzip trailer, then the file)."""
        try:
            if self._file is not self._raw:
                self._file.close()
        finally:
            self._raw.close()


class ShardedRecordWriter:
    """Writes records round-robin over several TFRecord shards, renaming them into place at the end.

    Use as a context manager. Each shard is written to a hidden temporary file beside its final
    path; on a clean exit all shards are renamed into place, on an exception the temporary files
    are deleted and no output appears. A shard path that appeared or changed after the writer
    was made is never replaced (fileio.TargetChangedError names it).

    Args:
      output_files: list of str, the final shard paths (checked by `check_output_files`).
      compression: "" or "GZIP".

    Example:
      with ShardedRecordWriter(["a.tfrecord", "b.tfrecord"]) as writer:
          for record in records:
              writer.write(record)
    """

    def __init__(self, output_files, compression=""):
        check_output_files(output_files, compression)
        self.output_files = list(output_files)
        self.compression = compression
        self.num_written = 0
        self.counts = [0] * len(self.output_files)
        # What the final moves compare with: a shard that appears meanwhile is never replaced.
        self._expected = [fileio.state(p) for p in self.output_files]
        token = f"{uuid.uuid4().hex[:8]}-{os.getpid()}-{_host_tag()}"
        self._tmp_files = [
            os.path.join(os.path.dirname(p), f".tmp_{token}_{os.path.basename(p)}")
            for p in self.output_files]
        self._writers = None

    def __enter__(self):
        self._writers = []
        try:
            for tmp in self._tmp_files:
                self._writers.append(TFRecordFile(tmp, self.compression))
        except BaseException:
            self._abort()
            raise
        return self

    def write(self, record):
        """Appends one serialized record (bytes) to the next shard in turn."""
        self._to_shard(self.num_written % len(self._writers), record, framed=False)
        self.num_written += 1

    def write_framed(self, framed):
        """As `write`, for a record already framed by `frame_record`."""
        self._to_shard(self.num_written % len(self._writers), framed, framed=True)
        self.num_written += 1

    def write_framed_many(self, framed_records):
        """`write_framed` of each record in order, with one write per shard per 8192 records
        (a bounded copy)."""
        for start in range(0, len(framed_records), 8192):
            self._write_framed_batch(framed_records[start:start + 8192])

    def _write_framed_batch(self, framed_records):
        num_shards = len(self._writers)
        for offset in range(min(num_shards, len(framed_records))):
            shard = (self.num_written + offset) % num_shards
            mine = framed_records[offset::num_shards]
            self._to_shard(shard, b"".join(mine), framed=True, count=len(mine))
        self.num_written += len(framed_records)

    def _to_shard(self, shard, data, framed, count=1):
        """Writes `data` (one record, or `count` framed ones) to `shard`, naming the output
        file when the write fails."""
        writer = self._writers[shard]
        try:
            (writer.write_framed if framed else writer.write)(data)
        except OSError as e:
            raise self._write_error(shard, e) from None
        self.counts[shard] += count

    def _write_error(self, shard, error):
        # The OS error (say ENOSPC) names no file; the caller's except/exit cleans up.
        return OSError(error.errno, f"cannot write output file {self.output_files[shard]} "
                                    f"(via {self._tmp_files[shard]}): {error.strerror or error}; "
                                    "no output was kept")

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._abort()
            return False
        # Closing flushes buffered records, so a full disk often shows up only here.
        for shard, writer in enumerate(self._writers):
            try:
                writer.close()
            except OSError as e:
                self._abort()
                raise self._write_error(shard, e) from None
            except BaseException:
                self._abort()
                raise
        try:
            for final, expected in zip(self.output_files, self._expected):
                fileio.check_unchanged(final, expected)
            for tmp, final, expected in zip(self._tmp_files, self.output_files, self._expected):
                fileio.publish_file(tmp, final, expected)
        except BaseException:
            self._abort()
            raise
        return False

    def _abort(self):
        for writer in self._writers or []:
            try:
                writer.close()
            except OSError:
                pass  # the file is deleted next; the original exception is what matters
        for tmp in self._tmp_files:
            _remove_if_exists(tmp)
