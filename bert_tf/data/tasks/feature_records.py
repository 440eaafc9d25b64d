"""Fixed-length fine-tuning features: cached TFRecord files and their tf.data pipelines.

The task readers turn examples into dicts of fixed-length features (token ids [S], a label,
...) once; `cached_records` writes them to a TFRecord file named by a fingerprint of everything
the conversion depends on (source files, vocabulary, casing, sequence length, labels), so a
resumed or repeated run reuses the file and a changed setting makes a new one. `records_dataset`
reads such a file back as the fine-tuning feature dicts that bert_tf.training.task_loop expects:
for training repeated, shuffled and batched with static shapes (the remainder is dropped); for
evaluation and prediction in order, the last batch filled with zero examples whose
`example_weights` are 0, so no real example is dropped and every batch has the same shape.
"""

import hashlib
import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import fileio
from bert_tf.fileio import write_text_atomic
from bert_tf.tf_data_options import without_autotuning

# Bump when the conversion of examples to features changes, so that stale caches are not reused.
CONVERSION_VERSION = 1


def _example_proto(features, spec):
    proto_features = {}
    for name, (shape, dtype) in spec.items():
        values = np.asarray(features[name]).reshape(-1)
        if values.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"feature {name!r} has {values.size} values, expected shape {shape}")
        if dtype == "float32":
            proto_features[name] = tf.train.Feature(
                float_list=tf.train.FloatList(value=values.astype(np.float32).tolist()))
        else:
            proto_features[name] = tf.train.Feature(
                int64_list=tf.train.Int64List(value=values.astype(np.int64).tolist()))
    return tf.train.Example(features=tf.train.Features(feature=proto_features))


def write_records(path, features_iterable, spec):
    """Writes feature dicts to a TFRecord file atomically; returns how many were written.

    Args:
      path: output file (local or any tf.io.gfile URL).
      features_iterable: iterable of dicts name -> value (int/float or sequence) per example.
      spec: dict name -> (shape tuple, "int32" | "float32") of the features to write.
    """
    if fileio.is_remote(path):
        tmp = f"{path}.tmp-{os.getpid()}"
    else:
        tmp = fileio.temp_file_beside(path)  # the writer never follows a link
    count = 0
    try:
        with tf.io.TFRecordWriter(tmp) as writer:
            for features in features_iterable:
                writer.write(_example_proto(features, spec).SerializeToString())
                count += 1
        tf.io.gfile.rename(tmp, path, overwrite=True)
    finally:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.remove(tmp)
    return count


def fingerprint(parts):
    """A short hex digest of a JSON-serialisable description of a conversion."""
    text = json.dumps([CONVERSION_VERSION, parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def cached_records(directory, name, parts, spec, make_features):
    """The TFRecord file of one split's features, converted now or reused from an earlier run.

    Args:
      directory: where cached files live (created if needed).
      name: the split's name in the file name ("train", "dev", ...).
      parts: JSON-serialisable description of every input of the conversion.
      spec: the feature spec (see write_records).
      make_features: `() -> (iterable of feature dicts, stats dict)`; the stats dict may be
        filled while the iterable is consumed (e.g. a count of truncated examples) and is
        stored with the file.

    Returns:
      (path, meta) with meta = {"num_examples": int, **stats}.
    """
    tf.io.gfile.makedirs(directory)
    stem = os.path.join(directory, f"{name}-{fingerprint(parts)}")
    path, meta_path = stem + ".tf_record", stem + ".json"
    if tf.io.gfile.exists(path) and tf.io.gfile.exists(meta_path):
        with tf.io.gfile.GFile(meta_path) as f:
            meta = json.load(f)
        logging.info("Reusing %d %s features from %s", meta["num_examples"], name, path)
        return path, meta
    features, stats = make_features()
    count = write_records(path, features, spec)
    meta = dict(stats, num_examples=count)
    write_text_atomic(meta_path, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    logging.info("Wrote %d %s features to %s", count, name, path)
    return path, meta


def _parse_fn(spec):
    feature_spec = {
        name: tf.io.FixedLenFeature(shape, tf.float32 if dtype == "float32" else tf.int64)
        for name, (shape, dtype) in spec.items()}

    def parse(record):
        parsed = tf.io.parse_single_example(record, feature_spec)
        return {name: tf.cast(value, tf.float32 if spec[name][1] == "float32" else tf.int32)
                for name, value in parsed.items()}
    return parse


def _with_weight(features, weight):
    return dict(features, example_weights=tf.constant(weight, tf.float32))


def records_dataset(path, spec, *, batch_size, is_training, num_examples=None, seed=None,
                    input_context=None, shuffle_buffer=10000, length_buckets=None,
                    per_example=()):
    """A tf.data pipeline of fine-tuning feature dicts from a file `write_records` wrote.

    Args:
      path: the TFRecord file.
      spec: its feature spec.
      batch_size: the global batch size; with `input_context` each pipeline yields its
        replicas' share (per-replica batches).
      is_training: repeat, shuffle and drop the remainder; else one ordered pass.
      num_examples: records in the file (needed for evaluation padding).
      seed: shuffle seed (None: nondeterministic).
      input_context: tf.distribute.InputContext; training input is sharded by pipeline.
      shuffle_buffer: examples held for shuffling.
      length_buckets: increasing bucket lengths ending with the records' S (see
        bert_tf.data.tasks.length_buckets.parse_buckets), or None for full-length batches. With
        buckets, the [S] features of each batch are cut to its bucket's length ([B, None] in
        the element spec) and evaluation batches carry `example_index` int32 [B] (position in
        the file, -1 on fill rows), in bucket order rather than file order.
      per_example: features never cut, whatever their width (a multi-label classifier's
        label_ids [C]).

    Returns:
      Dataset of dicts: the spec's features (int32 / float32, static shapes) plus
      `example_weights` float32 [B] (1 for real examples, 0 for evaluation padding).
    """
    if length_buckets is not None:
        from bert_tf.data.tasks import length_buckets as buckets_lib

        max_seq_length = int(length_buckets[-1])
        sequence_names = buckets_lib.sequence_feature_names(spec, max_seq_length, per_example)
        if "input_mask" not in sequence_names:
            raise ValueError(f"records_dataset: length buckets need an input_mask of length "
                             f"{max_seq_length} (the last bucket) in the spec of {path}")
    per_replica = (input_context.get_per_replica_batch_size(batch_size) if input_context
                   else batch_size)
    dataset = tf.data.TFRecordDataset(path)
    parse = _parse_fn(spec)
    if is_training:
        if input_context and input_context.num_input_pipelines > 1:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.repeat()
        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        dataset = dataset.map(lambda f: _with_weight(f, 1.0))
        if length_buckets is not None:
            dataset = buckets_lib.training_batches(dataset, length_buckets, per_replica,
                                                   sequence_names)
            return dataset.prefetch(tf.data.AUTOTUNE)
        return dataset.batch(per_replica, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    if num_examples is None:
        raise ValueError("records_dataset: evaluation needs num_examples to pad the last batch")
    dataset = dataset.map(parse).map(lambda f: _with_weight(f, 1.0))
    if length_buckets is not None:
        dataset = buckets_lib.evaluation_batches(dataset, length_buckets, per_replica,
                                                 sequence_names)
        return without_autotuning(dataset.prefetch(1))
    padding = -num_examples % per_replica
    if padding:
        zeros = {name: tf.zeros(shape, tf.float32 if dtype == "float32" else tf.int32)
                 for name, (shape, dtype) in spec.items()}
        dataset = dataset.concatenate(
            tf.data.Dataset.from_tensors(_with_weight(zeros, 0.0)).repeat(padding))
    return dataset.batch(per_replica, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
