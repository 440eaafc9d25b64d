"""Length buckets: fine-tuning batches padded to the shortest of a few fixed lengths that fits.

Fine-tuning records are written padded to --max_seq_length (S). Short text (sentiment phrases,
queries, NER sentences) then spends most of the encoder's compute on padding. Here each example
is assigned the smallest bucket length >= its real length (the 1s of `input_mask`), examples
of one bucket are batched together and every sequence feature of the batch is cut to that
bucket's length. Cutting only removes padding positions (mask 0), which attention ignores,
so a model's outputs on the real tokens are those of the full-length batch.

A handful of fixed lengths keeps the set of shapes small: XLA compiles one program per
bucket, and the training loop's tf.function is traced once with the sequence dimension
unknown ([B, None]).

Training: examples are shuffled, then grouped into full batches per bucket (drop_remainder:
every batch has the static batch size). A bucket's batch leaves as soon as the shuffled stream
has filled it, so buckets are interleaved at random rather than sorted, and with one bucket the
batches are exactly those of the unbucketed pipeline. (A second shuffle of whole batches
measured worse: it mixes several epochs' batches, and a test regression fit lost accuracy.)

Evaluation and prediction: one pass in windows of `EVAL_WINDOW_BATCHES` batches; each window is
sorted by length (stable) and cut into batches, so a batch holds examples of nearly one length
and is cut to the bucket of its longest. Only the pass's last batch can be partial: it is
filled up with zero examples (`example_weights` 0, `example_index` -1) so every example is seen
exactly once and every batch has the batch size; `example_index` (the position in the file)
lets bert_tf.training.task_loop.predict return the outputs in the file's order. (Grouping by
bucket in arrival order instead left each bucket a partial, filled batch and examples padded
up to a whole bucket: 1.7x the positions of the sorted windows on short SST-2-like text.)
"""

import numbers

import tensorflow as tf

from bert_tf.text.input_packing import bucket_lengths

AUTO = "auto"
OFF = "off"


class BucketError(ValueError):
    """A length-bucket setting that cannot work."""


def auto_buckets(max_seq_length, coarse=False):
    """The "auto" buckets for S = max_seq_length (bert_tf.text.input_packing.bucket_lengths): fine
    steps (4, 8, 12, 16, 24, ..., 64, 80, ...) for evaluation and prediction without XLA;
    coarse ones (16, 32, 48, 64, 96, ...) for training batches and under XLA."""
    return list(bucket_lengths(max_seq_length, coarse))


def parse_buckets(value, max_seq_length, max_position_embeddings, flag="--length_buckets",
                  coarse=False):
    """The bucket lengths a --length_buckets value asks for: the one check of bucket lengths,
    for training, evaluation, prediction and the serving signatures.

    Args:
      value: "auto", "off" (or "", "none"), or comma-separated increasing lengths
        ("16,32,64,128"), or a list of ints.
      max_seq_length: S, the length the records are padded to (always the last bucket).
      max_position_embeddings: of the model; no bucket may exceed it.
      flag: the flag named in errors.
      coarse: "auto" gives the coarse bucket set (training; XLA compiles one program per
        length).

    Returns:
      list of increasing ints ending with max_seq_length, or None when bucketing is off.
      Listed lengths above max_seq_length are left out (S is the longest input anyway).

    Raises:
      BucketError naming `flag`: a length that is not a positive integer, a list that is not
      strictly increasing, a length above max_position_embeddings, or a max_seq_length below
      the smallest bucket.
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in (OFF, "", "none", "false"):
            return None
        if text == AUTO:
            return auto_buckets(max_seq_length, coarse)
        items = [item.strip() for item in text.split(",") if item.strip()]
    else:
        items = list(value)
    lengths = []
    for item in items:
        try:
            if isinstance(item, bool) or not isinstance(item, (str, numbers.Integral)):
                raise TypeError
            length = int(item)
        except (TypeError, ValueError):
            raise BucketError(f"{flag}={_show(value)}: {item!r} is not a length; expected auto, "
                              "off or increasing integers like 16,32,64,128") from None
        if length < 1:
            raise BucketError(f"{flag}={_show(value)}: lengths must be >= 1, got {length}")
        lengths.append(length)
    if not lengths:
        return None
    for previous, length in zip(lengths, lengths[1:]):
        if length <= previous:
            raise BucketError(f"{flag}={_show(value)} is not strictly increasing ({length} "
                              f"after {previous})")
    if lengths[-1] > max_position_embeddings:
        raise BucketError(f"{flag}={_show(value)}: bucket {lengths[-1]} exceeds "
                          f"max_position_embeddings={max_position_embeddings}")
    if max_seq_length < lengths[0]:
        raise BucketError(f"--max_seq_length={max_seq_length} is below the smallest bucket "
                          f"{lengths[0]} of {flag}={_show(value)}")
    return [b for b in lengths if b < max_seq_length] + [max_seq_length]


def _show(value):
    return value if isinstance(value, str) else ",".join(str(v) for v in value)


def sequence_feature_names(spec, max_seq_length, per_example=()):
    """Names of the features of `spec` (name -> (shape, dtype)) that are [S] per example,
    but those in `per_example` (a multi-label classifier's labels [C] are not a sequence,
    even where C happens to equal S)."""
    return sorted(name for name, (shape, _) in spec.items()
                  if tuple(shape) == (max_seq_length,) and name not in per_example)


def _bucket_of(lengths, buckets_t):
    """Index of the smallest bucket >= each length (lengths int32, any shape)."""
    return tf.searchsorted(buckets_t, tf.reshape(lengths, [-1]), side="left")


def _cut(batch, width, sequence_names):
    return {name: (value[:, :width] if name in sequence_names else value)
            for name, value in batch.items()}


def _width_of_batch(batch, buckets_t):
    """The bucket length of a batch: that of its longest example (all share one bucket)."""
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(batch["input_mask"], tf.int32), axis=1))
    return tf.gather(buckets_t, _bucket_of(longest, buckets_t)[0])


def training_batches(dataset, buckets, batch_size, sequence_names):
    """Full batches of one bucket each, cut to the bucket's length, in the order they fill.

    Args:
      dataset: a shuffled, repeated Dataset of single examples (dicts, [S] sequence features
        with an int `input_mask`).
      buckets: increasing bucket lengths ending with S (parse_buckets).
      batch_size: examples per batch (the remainder of a bucket waits for the next epoch's
        examples; the stream repeats).
      sequence_names: the [S] features to cut.

    Returns:
      Dataset of dicts with sequence features [batch_size, bucket] (static batch size,
      sequence dimension None in the element spec) and the other features [batch_size, ...].
    """
    buckets_t = tf.constant(buckets, tf.int32)
    names = frozenset(sequence_names)

    def key(features):
        length = tf.reduce_sum(tf.cast(features["input_mask"], tf.int32))
        return tf.cast(_bucket_of(length, buckets_t)[0], tf.int64)

    dataset = dataset.group_by_window(
        key, lambda _, window: window.batch(batch_size, drop_remainder=True),
        window_size=batch_size)
    return dataset.map(lambda batch: _cut(batch, _width_of_batch(batch, buckets_t), names),
                       num_parallel_calls=tf.data.AUTOTUNE)


def _fill_rows(batch, batch_size):
    """Pads a partial batch to batch_size rows of zeros (example_index -1)."""
    rows = tf.shape(batch["example_index"])[0]
    missing = batch_size - rows
    filled = {}
    for name, value in batch.items():
        paddings = [[0, missing]] + [[0, 0]] * (len(value.shape) - 1)
        constant = -1 if name == "example_index" else 0
        filled[name] = tf.pad(value, paddings, constant_values=tf.cast(constant, value.dtype))
        filled[name] = tf.ensure_shape(filled[name], [batch_size] + value.shape[1:])
    return filled


# Examples sorted together for evaluation and prediction: enough for batches of one length,
# few enough to hold in memory (64 x 32 examples of 512 ids: 16 MB for three features).
EVAL_WINDOW_BATCHES = 64


def evaluation_batches(dataset, buckets, batch_size, sequence_names,
                       window_batches=EVAL_WINDOW_BATCHES):
    """One pass in length-sorted batches, every example exactly once.

    Args:
      dataset: a finite Dataset of single examples in file order (dicts with `input_mask`
        and `example_weights`).
      buckets, batch_size, sequence_names: as in training_batches.
      window_batches: batches per sorted window.

    Returns:
      Dataset of dicts as training_batches gives, plus `example_index` int32 [batch_size]
      (the example's position in `dataset`; -1 on fill rows, whose example_weights are 0).
    """
    buckets_t = tf.constant(buckets, tf.int32)
    names = frozenset(sequence_names)
    dataset = dataset.enumerate().map(
        lambda index, features: dict(features, example_index=tf.cast(index, tf.int32)))

    def sort_window(window):
        lengths = tf.reduce_sum(tf.cast(window["input_mask"], tf.int32), axis=1)
        order = tf.argsort(lengths, stable=True)
        return {name: tf.gather(value, order) for name, value in window.items()}

    dataset = (dataset.batch(window_batches * batch_size).map(sort_window).unbatch()
               .batch(batch_size))

    def finish(batch):
        width = _width_of_batch(batch, buckets_t)
        return _cut(_fill_rows(batch, batch_size), width, names)

    return dataset.map(finish)


def keras_dataset(features, labels, *, batch_size, buckets, shuffle=False, seed=None,
                  sample_weights=None, cut_labels=True):
    """(features, labels) batches of in-memory arrays for Keras `fit` / `evaluate`, by bucket.

    Args:
      features: dict of NumPy arrays, the [N, S] inputs (input_word_ids, input_mask,
        input_type_ids) and any others.
      labels: array [N] (or [N, S] for tagging: then cut like the inputs), or a dict of such
        arrays (a model with several outputs: SQuAD's start_logits and end_logits).
      batch_size: examples per batch (a bucket's last batch may be smaller; Keras takes it).
      buckets: increasing bucket lengths ending with S (parse_buckets / auto_buckets).
      shuffle: reshuffle the examples every epoch (training).
      seed: shuffle seed.
      sample_weights: optional array [N] or [N, S] (tagging's weights on first pieces, cut
        like the inputs): the batches are then (features, labels, weights).
      cut_labels: labels [N, S] are per token and cut like the inputs; False for labels that
        are per example whatever their width (a multi-label classifier's [N, C]).

    Returns:
      Dataset of (dict of [b, bucket] features, labels[, weights]) in the order the buckets
      fill: for metrics, not for predictions that must line up with the input. Its length
      (batches per epoch) is known, so Keras shows progress from the first epoch; it shuffles
      itself, so pass `fit(..., shuffle=False)` (Keras warns that it ignores shuffle=True for
      a Dataset).

    Raises:
      ValueError: no examples, or a batch_size that is not an integer >= 1.
    """
    if not len(features["input_word_ids"]):
        # tf.data's own error (a shuffle buffer of 0) names none of this.
        raise ValueError("keras_dataset: features hold no examples; give at least one")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or (
            batch_size < 1):
        raise ValueError(f"keras_dataset: batch_size={batch_size!r} must be an integer >= 1")
    width_s = int(features["input_word_ids"].shape[1])
    names = frozenset(n for n, v in features.items() if tuple(v.shape[1:]) == (width_s,))
    buckets_t = tf.constant(buckets, tf.int32)
    targets = (labels,) if sample_weights is None else (labels, sample_weights)
    dataset = tf.data.Dataset.from_tensor_slices((dict(features), *targets))
    if shuffle:
        dataset = dataset.shuffle(len(features["input_word_ids"]), seed=seed,
                                  reshuffle_each_iteration=True)

    def key(x, *_):
        length = tf.reduce_sum(tf.cast(x["input_mask"], tf.int32))
        return tf.cast(_bucket_of(length, buckets_t)[0], tf.int64)

    def cut(x, y, *weights):
        width = _width_of_batch(x, buckets_t)
        cut_one = lambda t: t[:, :width] if tuple(t.shape[1:]) == (width_s,) else t  # noqa: E731
        if cut_labels:
            y = tf.nest.map_structure(cut_one, y)
        return (_cut(x, width, names), y, *map(cut_one, weights))

    dataset = dataset.group_by_window(key, lambda _, window: window.batch(batch_size),
                                      window_size=batch_size)
    # Each bucket gives ceil(its examples / batch_size) batches, whatever the order.
    lengths = tf.reduce_sum(tf.cast(features["input_mask"], tf.int32), axis=1)
    per_bucket = tf.math.bincount(tf.cast(_bucket_of(lengths, buckets_t), tf.int32),
                                  minlength=len(buckets))
    num_batches = int(tf.reduce_sum(-(-per_bucket // batch_size)))
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(num_batches))
    return dataset.map(cut).prefetch(tf.data.AUTOTUNE)
