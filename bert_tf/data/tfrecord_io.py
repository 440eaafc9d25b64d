"""Writes pre-training instances as tf.train.Example TFRecords (original "v1" or "v2" names).

One record holds one instance, padded to fixed lengths (S = max_seq_length,
P = max_predictions_per_seq), with every integer stored as int64 as the original writes them:

  input_ids / input_word_ids         int64 [S]  token ids, 0-padded
  input_mask                         int64 [S]  1 on real tokens
  segment_ids / input_type_ids       int64 [S]  0 for [CLS] A [SEP], 1 for B [SEP]
  masked_lm_positions                int64 [P]  0-padded
  masked_lm_ids                      int64 [P]  original token ids at those positions, 0-padded
  masked_lm_weights                  float [P]  1.0 on real predictions, 0.0 on padding
  next_sentence_labels               int64 [1]  0 = B follows A, 1 = B is random

Files are written under a temporary name in the destination directory and renamed into place
only after every shard closed cleanly, so a reader never sees a truncated shard.
"""

import os
import tempfile
import uuid

import tensorflow as tf

# Naming scheme -> on-disk names of the three sequence features (the rest are shared).
FEATURE_NAMES = {
    "v1": {"input_ids": "input_ids", "input_mask": "input_mask", "segment_ids": "segment_ids"},
    "v2": {"input_ids": "input_word_ids", "input_mask": "input_mask",
           "segment_ids": "input_type_ids"},
}

_COMPRESSIONS = ("", "GZIP")


def _int64_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def serialize_instance(input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
                       next_sentence_label, *, max_seq_length, max_predictions_per_seq,
                       feature_names="v1"):
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

    Returns:
      bytes: the serialized tf.train.Example. Map keys are serialized in sorted order, so equal
      instances give byte-identical records in every process and run.

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
    seq_pad = [0] * (max_seq_length - num_tokens)
    pred_pad = [0] * (max_predictions_per_seq - num_predictions)
    names = FEATURE_NAMES[feature_names]
    features = {
        names["input_ids"]: _int64_feature(list(input_ids) + seq_pad),
        names["input_mask"]: _int64_feature([1] * num_tokens + seq_pad),
        names["segment_ids"]: _int64_feature(list(segment_ids) + seq_pad),
        "masked_lm_positions": _int64_feature(list(masked_lm_positions) + pred_pad),
        "masked_lm_ids": _int64_feature(list(masked_lm_ids) + pred_pad),
        "masked_lm_weights": _float_feature([1.0] * num_predictions + [0.0] * len(pred_pad)),
        "next_sentence_labels": _int64_feature([int(next_sentence_label)]),
    }
    example = tf.train.Example(features=tf.train.Features(feature=features))
    return example.SerializeToString(deterministic=True)


def parse_spec(max_seq_length, max_predictions_per_seq, feature_names="v1"):
    """The tf.io.parse_single_example spec of the records `serialize_instance` writes.

    Args:
      max_seq_length: S.
      max_predictions_per_seq: P.
      feature_names: "v1" or "v2".

    Returns:
      dict on-disk name -> tf.io.FixedLenFeature (int64 [S] / [P] / [1], float32 [P]).
    """
    names = FEATURE_NAMES[feature_names]
    return {
        names["input_ids"]: tf.io.FixedLenFeature([max_seq_length], tf.int64),
        names["input_mask"]: tf.io.FixedLenFeature([max_seq_length], tf.int64),
        names["segment_ids"]: tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def check_output_files(output_files, compression=""):
    """Validates a list of output shard paths before any work starts.

    Args:
      output_files: list of str paths (local or any tf.io.gfile file system).
      compression: "" or "GZIP"; GZIP shards must end in ".gz" and plain ones must not, because
        readers (bert_tf.data.pretraining_dataset) pick the decompression from the suffix.

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


class ShardedRecordWriter:
    """Writes records round-robin over several TFRecord shards, renaming them into place at the end.

    Use as a context manager. Each shard is written to a hidden temporary file beside its final
    path; on a clean exit all shards are renamed into place, on an exception the temporary files
    are deleted and no output appears.

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
        token = uuid.uuid4().hex[:8]
        self._tmp_files = [
            os.path.join(os.path.dirname(p), f".tmp_{token}_{os.path.basename(p)}")
            for p in self.output_files]
        self._writers = None

    def __enter__(self):
        options = tf.io.TFRecordOptions(compression_type=self.compression)
        self._writers = []
        try:
            for tmp in self._tmp_files:
                self._writers.append(tf.io.TFRecordWriter(tmp, options))
        except BaseException:
            self._abort()
            raise
        return self

    def write(self, record):
        """Appends one serialized record (bytes) to the next shard in turn."""
        shard = self.num_written % len(self._writers)
        self._writers[shard].write(record)
        self.counts[shard] += 1
        self.num_written += 1

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._abort()
            return False
        for writer in self._writers:
            writer.close()
        for tmp, final in zip(self._tmp_files, self.output_files):
            tf.io.gfile.rename(tmp, final, overwrite=True)
        return False

    def _abort(self):
        for writer in self._writers or []:
            writer.close()
        for tmp in self._tmp_files:
            if tf.io.gfile.exists(tmp):
                tf.io.gfile.remove(tmp)
