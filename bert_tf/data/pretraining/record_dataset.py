"""Reads pre-training TFRecords (original or v2 feature names) into batched feature dicts.

The records are the ones google-research/bert's create_pretraining_data.py writes ("v1" names:
input_ids, segment_ids, ...) or the same with Model Garden names ("v2": input_word_ids,
input_type_ids). Names are mapped once, here, so everything downstream sees only:

  input_word_ids       int32   [B, S]
  input_mask           int32   [B, S]
  input_type_ids       int32   [B, S]
  masked_lm_positions  int32   [B, P]
  masked_lm_ids        int32   [B, P]
  masked_lm_weights    float32 [B, P]
  next_sentence_labels int32   [B]

and, when asked for with span_boundaries=True (records written with span masking, for
SpanBERT's span-boundary objective):

  span_left_boundaries  int32  [B, P]
  span_right_boundaries int32  [B, P]

Records with those features read as well without asking for them (they are then ignored), so
one reader takes both kinds.

with B = per-replica batch size, S = max_seq_length, P = max_predictions_per_seq.

Packed rows (create_pretraining_data --pack_sequences; docs/packing.md), read with packed=True,
hold several instances per row (P then counts per row) and give instead of
next_sentence_labels [B]:

  input_instance_ids      int32   [B, S]  1..K per token, 0 on padding (from instance_ids)
  next_sentence_positions int32   [B, I]  row position of each instance's [CLS]
  next_sentence_labels    int32   [B, I]
  next_sentence_weights   float32 [B, I]  1 per instance, 0 on unused slots

A file of packed rows read as unpacked, or the reverse, fails up front naming the file;
`record_layout` tells which a file holds (run_pretraining uses it to detect packed input).

The framing of every uncompressed local file is walked first (one 12-byte read per record), so a
file cut short is named before training, not found mid-epoch. The first record of every file is
checked eagerly in Python before the pipeline is built, so a
records/flags mismatch (say --max_seq_length=128 against records written with 64) fails at once
with the file, feature and expected value named, not later as an opaque InvalidArgumentError
from inside tf.data. With vocab_size, every record's ids are also checked as it is parsed.
"""

import concurrent.futures
import re

import tensorflow as tf
from google.protobuf import message

from bert_tf.data.pretraining import tfrecord_io
# Re-exported: callers and tests import it from here.
from bert_tf.data.patterns import expand_input_patterns  # noqa: F401
from bert_tf.data.patterns import has_scheme

# On-disk name -> model input name, per naming scheme. The remaining features share their name.
_RENAMES = {
    "v1": {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"},
    "v2": {},
}
_SCHEMES = ("v1", "v2")

# Shuffle buffer of parsed records in training (the original used 100 after a file shuffle).
_DEFAULT_SHUFFLE_BUFFER = 1000


def _compression_of(path, compression):
    """'GZIP' for *.gz files unless `compression` says otherwise ('' = uncompressed)."""
    if compression is not None:
        return compression
    return "GZIP" if path.endswith(".gz") else ""


_SPAN_BOUNDARY_FEATURES = ("span_left_boundaries", "span_right_boundaries")


def _expected_features(max_seq_length, max_predictions_per_seq, use_next_sentence_label,
                       span_boundaries=False, max_instances_per_row=None):
    """Model name -> (kind, length, flag naming the length), in a stable order.

    max_instances_per_row: I of packed rows; None = unpacked records.
    """
    features = {
        "input_word_ids": ("int64", max_seq_length, "max_seq_length"),
        "input_mask": ("int64", max_seq_length, "max_seq_length"),
        "input_type_ids": ("int64", max_seq_length, "max_seq_length"),
        "masked_lm_positions": ("int64", max_predictions_per_seq, "max_predictions_per_seq"),
        "masked_lm_ids": ("int64", max_predictions_per_seq, "max_predictions_per_seq"),
        "masked_lm_weights": ("float", max_predictions_per_seq, "max_predictions_per_seq"),
    }
    if max_instances_per_row is not None:
        slots = (max_instances_per_row, "max_instances_per_row")
        features["instance_ids"] = ("int64", max_seq_length, "max_seq_length")
        features["next_sentence_positions"] = ("int64", *slots)
        features["next_sentence_weights"] = ("float", *slots)
        if use_next_sentence_label:
            features["next_sentence_labels"] = ("int64", *slots)
    elif use_next_sentence_label:
        features["next_sentence_labels"] = ("int64", 1, "one label per example")
    if span_boundaries:
        for name in _SPAN_BOUNDARY_FEATURES:
            features[name] = ("int64", max_predictions_per_seq, "max_predictions_per_seq")
    return features


def _disk_name(model_name, scheme):
    for disk, model in _RENAMES[scheme].items():
        if model == model_name:
            return disk
    return model_name


def _read_first_record(path, compression):
    """The first serialized record of `path`, with a readable error when it cannot be read."""
    try:
        for record in tf.data.TFRecordDataset(path, compression_type=compression).take(1):
            return record.numpy()
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
        hint = ("" if compression else
                "; if it is GZIP-compressed without a .gz suffix, pass compression='GZIP'")
        raise ValueError(
            f"{path}: not a readable TFRecord file (compression={compression or 'none'!r}): "
            f"{e.message}{hint}.") from None
    raise ValueError(f"{path}: holds no records (expected tf.train.Example pre-training records).")


def _first_example(path, compression):
    """The first record of `path` as a tf.train.Example (ValueError naming the file if not)."""
    compression = _compression_of(path, compression)
    try:
        return tf.train.Example.FromString(_read_first_record(path, compression))
    except message.DecodeError:
        raise ValueError(f"{path}: the first record is not a tf.train.Example.") from None


def record_layout(path, compression=None):
    """What the first record of `path` holds: None for unpacked records, else the lengths
    (S, P, I) of a packed row (from its input_mask, masked_lm_positions and
    next_sentence_positions). Raises ValueError naming the file when it cannot be read."""
    feature_map = _first_example(path, compression).features.feature
    if _PACKED_MARKER not in feature_map:
        return None
    lengths = []
    for name in ("input_mask", "masked_lm_positions", "next_sentence_positions"):
        if name not in feature_map:
            raise ValueError(f'{path}: a packed row (it has "{_PACKED_MARKER}") without '
                             f'feature "{name}".')
        lengths.append(len(feature_map[name].int64_list.value))
    return tuple(lengths)


# The feature that marks a packed row.
_PACKED_MARKER = "instance_ids"
_PACKED_ROWS_CHECKED = 16


def _check_packed_rows(path, compression, max_instances_per_row):
    """Checks the instance ids of the first rows of a packed file (ValueError naming it)."""
    from bert_tf.modeling import packing_checks

    spec = {"instance_ids": tf.io.VarLenFeature(tf.int64),
            "input_mask": tf.io.VarLenFeature(tf.int64),
            "next_sentence_positions": tf.io.VarLenFeature(tf.int64),
            "next_sentence_weights": tf.io.VarLenFeature(tf.float32)}
    records = tf.data.TFRecordDataset(path, compression_type=compression)
    for index, record in enumerate(records.take(_PACKED_ROWS_CHECKED)):
        row = {k: tf.sparse.to_dense(v).numpy()
               for k, v in tf.io.parse_single_example(record, spec).items()}
        try:
            packing_checks.check_instance_ids(row["instance_ids"], row["input_mask"])
        except ValueError as e:
            raise ValueError(f"{path}: record {index}: {e}") from None
        ids = row["instance_ids"].tolist()
        num_instances = max(ids, default=0)
        real = int(row["next_sentence_weights"].sum())
        starts = row["next_sentence_positions"][:real].tolist()
        first = [p for p in range(len(ids)) if ids[p] > 0 and (p == 0 or ids[p - 1] != ids[p])]
        if real != num_instances or starts != first:
            raise ValueError(
                f"{path}: record {index}: next_sentence_positions {starts} "
                f"(next_sentence_weights sum {real}) do not match the starts {first} of the "
                f"{num_instances} instances in instance_ids.")


def inspect_first_record(path, *, max_seq_length, max_predictions_per_seq,
                         use_next_sentence_label=True, vocab_size=None, compression=None,
                         span_boundaries=False, max_instances_per_row=None):
    """Checks the first record of one file against the flags; returns its naming scheme.

    Args:
      path: a TFRecord file of tf.train.Example pre-training records.
      max_seq_length: S, the length every input_ids / input_mask / segment_ids list must have.
      max_predictions_per_seq: P, the length of the masked_lm_* lists.
      use_next_sentence_label: whether next_sentence_labels (an int64 list of length 1) is needed.
      vocab_size: if given, every id in the record must be < vocab_size.
      compression: '', 'GZIP' or 'ZLIB'; None picks GZIP for *.gz.
      span_boundaries: whether span_left_boundaries / span_right_boundaries are needed.
      max_instances_per_row: I when packed rows are expected (their first rows' instance ids
        are checked too); None when unpacked records are.

    Returns:
      "v1" (original names) or "v2" (input_word_ids / input_type_ids).

    Raises:
      ValueError naming the file, the feature, and what was expected versus found.
    """
    compression = _compression_of(path, compression)
    feature_map = _first_example(path, compression).features.feature
    if "input_word_ids" in feature_map:
        scheme = "v2"
    elif "input_ids" in feature_map:
        scheme = "v1"
    else:
        raise ValueError(
            f"{path}: the first record has neither input_ids (original names) nor input_word_ids "
            f"(v2 names); found features {sorted(feature_map)}.")
    is_packed = _PACKED_MARKER in feature_map
    if is_packed and max_instances_per_row is None:
        raise ValueError(
            f'{path}: holds packed rows (feature "{_PACKED_MARKER}", written by '
            "create_pretraining_data --pack_sequences) but unpacked records were expected; "
            "read it as packed (run_pretraining detects packed records by itself).")
    if not is_packed and max_instances_per_row is not None:
        raise ValueError(
            f'{path}: holds unpacked records (no feature "{_PACKED_MARKER}") but packed rows '
            "were expected (--pack_sequences); make them with create_pretraining_data "
            "--pack_sequences, or read the file as unpacked.")
    expected = _expected_features(max_seq_length, max_predictions_per_seq,
                                  use_next_sentence_label, span_boundaries,
                                  max_instances_per_row)
    for model_name, (kind, length, length_flag) in expected.items():
        name = _disk_name(model_name, scheme)
        want = f"{kind}_list of length {length} ({length_flag})"
        if name not in feature_map:
            hint = ("; the span-boundary objective needs records made with "
                    "create_pretraining_data --do_span_mask"
                    if name in _SPAN_BOUNDARY_FEATURES else "")
            raise ValueError(f'{path}: the first record has no feature "{name}" '
                             f"(expected {want}){hint}.")
        found_kind = feature_map[name].WhichOneof("kind")
        if found_kind != f"{kind}_list":
            raise ValueError(f'{path}: feature "{name}" is a {found_kind or "empty feature"}, '
                             f"expected {want}.")
        values = getattr(feature_map[name], found_kind).value
        if len(values) != length:
            raise ValueError(f'{path}: feature "{name}" has length {len(values)}, expected {want}.')
    if vocab_size is not None:
        for model_name in ("input_word_ids", "masked_lm_ids"):
            name = _disk_name(model_name, scheme)
            ids = feature_map[name].int64_list.value
            top = max(ids)
            if top >= vocab_size or min(ids) < 0:
                bad = top if top >= vocab_size else min(ids)
                raise ValueError(
                    f'{path}: feature "{name}" holds id {bad}, outside the vocabulary '
                    f"[0, {vocab_size}) (vocab_size); were the records made with another vocab?")
    if is_packed:
        _check_packed_rows(path, compression, max_instances_per_row)
    return scheme


def _parse_spec(scheme, max_seq_length, max_predictions_per_seq, use_next_sentence_label,
                span_boundaries, max_instances_per_row=None):
    spec = {}
    for model_name, (kind, length, _) in _expected_features(
            max_seq_length, max_predictions_per_seq, use_next_sentence_label,
            span_boundaries, max_instances_per_row).items():
        dtype = tf.float32 if kind == "float" else tf.int64
        spec[_disk_name(model_name, scheme)] = tf.io.FixedLenFeature([length], dtype)
    return spec


def _check_ids(features, vocab_size, path):
    """Asserts every id of input_word_ids / masked_lm_ids (int64 [S] / [P]) is in [0, V).

    Only the first record of each file is checked eagerly; this catches a bad id in any later
    record with a message naming the feature, the file and vocab_size, instead of an opaque
    out-of-range error from the embedding lookup. Returns control dependencies.
    """
    checks = []
    for name in ("input_word_ids", "masked_lm_ids"):
        ids = features[name]
        # No double quotes: tf.debugging.Assert would print them escaped.
        message = (f"pretraining_dataset: feature {name} holds an id outside the vocabulary "
                   f"[0, {vocab_size}) (vocab_size); were the records made with another vocab? "
                   "File and offending id:")
        top, bottom = tf.reduce_max(ids), tf.reduce_min(ids)
        checks.append(tf.debugging.Assert(
            (top < vocab_size) & (bottom >= 0),
            [message, path, tf.where(top >= vocab_size, top, bottom)]))
    return checks


_ID_CHECK_FAILED = re.compile(
    r"assertion failed: \[pretraining_dataset: feature (\w+) holds an id outside the "
    r"vocabulary \[0, (\d+)\).*?\] \[(.*?)\] \[(-?\d+)\]")


def out_of_vocabulary(error):
    """The one-line message of an id check (_check_ids) that a record failed mid-training,
    from the tf.errors.InvalidArgumentError tf.data raised; None for any other error."""
    found = _ID_CHECK_FAILED.search(str(error))
    if found is None:
        return None
    name, vocab_size, path, bad = found.groups()
    return (f"{path}: a record's feature {name} holds id {bad}, outside the vocabulary "
            f"[0, {vocab_size}) (vocab_size of the model's config); were the records made with "
            "another vocab? (the first record of the file was in range, a later one is not)")


def _make_record_parser(max_seq_length, max_predictions_per_seq, use_next_sentence_label,
                        vocab_size=None, span_boundaries=False, max_instances_per_row=None):
    """Returns parse(serialized [], scheme_index [], path []) -> feature dict of one example.

    With `vocab_size`, the record's input_word_ids and masked_lm_ids are asserted to be in
    [0, vocab_size) (tf.errors.InvalidArgumentError naming the feature and file otherwise).
    """
    branches = []
    for scheme in _SCHEMES:
        spec = _parse_spec(scheme, max_seq_length, max_predictions_per_seq,
                           use_next_sentence_label, span_boundaries, max_instances_per_row)
        renames = _RENAMES[scheme]

        def parse(serialized, spec=spec, renames=renames):
            parsed = tf.io.parse_single_example(serialized, spec)
            return {renames.get(k, k): v for k, v in parsed.items()}

        branches.append(parse)

    def parse_record(serialized, scheme_index, path):
        parsed = tf.switch_case(scheme_index, [lambda b=b: b(serialized) for b in branches])
        if vocab_size is not None:
            with tf.control_dependencies(_check_ids(parsed, vocab_size, path)):
                parsed = {name: tf.identity(value) for name, value in parsed.items()}
        features = {}
        packed = max_instances_per_row is not None
        for name, value in parsed.items():
            if name == "instance_ids":
                # The first rows of each file were checked up front (an in-graph check of
                # every row would cost a scan over S per record).
                features["input_instance_ids"] = tf.cast(value, tf.int32)
            elif name == "next_sentence_labels" and not packed:
                features[name] = tf.cast(tf.reshape(value, []), tf.int32)  # [1] -> []
            elif value.dtype == tf.int64:
                features[name] = tf.cast(value, tf.int32)
            else:
                features[name] = value
        if not use_next_sentence_label:
            features["next_sentence_labels"] = tf.zeros(
                [max_instances_per_row] if packed else [], tf.int32)
        return features

    return parse_record


def pretraining_dataset(input_patterns, *, batch_size, max_seq_length, max_predictions_per_seq,
                        is_training=True, seed=None, input_context=None,
                        use_next_sentence_label=True, compression=None, vocab_size=None,
                        shuffle_buffer_size=_DEFAULT_SHUFFLE_BUFFER, cycle_length=None,
                        span_boundaries=False, max_instances_per_row=None):
    """A tf.data pipeline of pre-training batches read from TFRecord files.

    Training: the file list is sharded by input pipeline (when `input_context` is given), shuffled
    every epoch, repeated forever and read `cycle_length` files at a time (interleaved, in a fixed
    order, so a given `seed` reproduces the stream exactly); records pass through a shuffle buffer.
    Evaluation: files and records are read once, in order.
    Both drop the last partial batch so every batch has the static shapes TPUs and XLA need; in
    evaluation that leaves out at most batch_size - 1 examples.

    Args:
      input_patterns: a glob, comma-separated globs, or a list of them. *.gz files are read as
        GZIP (see `compression`).
      batch_size: the global batch size; with `input_context` each pipeline yields
        `input_context.get_per_replica_batch_size(batch_size)` examples per batch.
      max_seq_length: S; must equal the length the records were written with.
      max_predictions_per_seq: P; must equal the length the records were written with.
      is_training: shuffle + repeat (True) or a single ordered pass (False).
      seed: int seed for the file and record shuffles; None = non-deterministic.
      input_context: a tf.distribute.InputContext; each input pipeline reads a disjoint shard
        (whole files when there are at least as many files as pipelines, else every n-th record).
      use_next_sentence_label: read next_sentence_labels; when False the feature is not required
        on disk and the output holds zeros.
      compression: '' (none), 'GZIP' or 'ZLIB' for every file; None = GZIP for *.gz only.
      vocab_size: if given, the first record of each file is checked eagerly to hold ids in
        [0, vocab_size), and every record's input_word_ids and masked_lm_ids are checked as
        they are parsed (tf.errors.InvalidArgumentError naming the feature, the file and
        vocab_size, rather than an out-of-range error from the embedding lookup).
      shuffle_buffer_size: records in the training shuffle buffer.
      cycle_length: files read concurrently in training; None = min(number of files, 4).
      span_boundaries: also read span_left_boundaries and span_right_boundaries (records made
        with span masking; required then). When False, records with or without them are read.
      max_instances_per_row: I: read packed rows (create_pretraining_data --pack_sequences)
        with I instance slots; None = unpacked records (packed files are then an error).

    Returns:
      tf.data.Dataset of dicts: input_word_ids, input_mask, input_type_ids int32 [B, S];
      masked_lm_positions, masked_lm_ids int32 [B, P]; masked_lm_weights float32 [B, P];
      next_sentence_labels int32 [B]; with span_boundaries, span_left_boundaries and
      span_right_boundaries int32 [B, P]. Packed: also input_instance_ids int32 [B, S],
      next_sentence_positions / next_sentence_labels int32 [B, I], next_sentence_weights
      float32 [B, I].

    Raises:
      ValueError: a pattern matches nothing, or a file's first record does not match the flags
        (the message names the file, the feature and the expected type/length).
    """
    files = expand_input_patterns(input_patterns)
    compressions = [_compression_of(path, compression) for path in files]

    def inspect(path, file_compression):
        scheme = _SCHEMES.index(inspect_first_record(
            path, max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
            use_next_sentence_label=use_next_sentence_label, vocab_size=vocab_size,
            compression=file_compression, span_boundaries=span_boundaries,
            max_instances_per_row=max_instances_per_row))
        if not file_compression and not has_scheme(path):
            # One small read per record: a truncated file fails here, named, not mid-epoch.
            tfrecord_io.check_record_framing(path)
        return scheme

    # Opening hundreds of shards one after another is slow on remote file systems; the first
    # failing file in list order is the one reported.
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
        schemes = list(pool.map(inspect, files, compressions))

    per_pipeline_batch = batch_size
    if input_context is not None:
        per_pipeline_batch = input_context.get_per_replica_batch_size(batch_size)
    parse_record = _make_record_parser(max_seq_length, max_predictions_per_seq,
                                       use_next_sentence_label, vocab_size, span_boundaries,
                                       max_instances_per_row)

    file_ds = tf.data.Dataset.from_tensor_slices((files, compressions, schemes))
    shard_records = False
    if input_context is not None and input_context.num_input_pipelines > 1:
        if len(files) >= input_context.num_input_pipelines:
            file_ds = file_ds.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        else:
            shard_records = True

    def read_file(path, file_compression, scheme_index):
        records = tf.data.TFRecordDataset(path, compression_type=file_compression)
        if shard_records:
            # Fewer files than pipelines: every pipeline reads every file but keeps a disjoint
            # every-n-th subset of its records, whatever order the files come in.
            records = records.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        return records.map(lambda r: parse_record(r, scheme_index, path))

    if is_training:
        file_ds = file_ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
        cycle = cycle_length or min(len(files), 4)
        ds = file_ds.interleave(read_file, cycle_length=cycle, block_length=1,
                                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        ds = file_ds.flat_map(read_file)
    if is_training:
        ds = ds.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(per_pipeline_batch, drop_remainder=True)
    return ds.prefetch(tf.data.AUTOTUNE)
