"""Length-bucketed fine-tuning batches: bucket choice, shapes, coverage, order, parity, traces."""

import types

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.jobs import flag_checks, runtime_setup
from bert_tf.config import BertConfig
from bert_tf.data.tasks import feature_records, length_buckets
from bert_tf.modeling import BertClassifier, BertEncoder, BertTokenClassifier
from bert_tf.training import controller, task_loop, tf_runner
from bert_tf.training.loop_config import TrainLoopConfig
from bert_tf.training.runtime import on_tensorflow
from bert_tf.training.optimization import create_optimizer

S = 32
SPEC = {"input_word_ids": ((S,), "int32"), "input_mask": ((S,), "int32"),
        "input_type_ids": ((S,), "int32"), "label_ids": ((), "int32")}
TAG_SPEC = {"input_word_ids": ((S,), "int32"), "input_mask": ((S,), "int32"),
            "input_type_ids": ((S,), "int32"), "label_ids": ((S,), "int32"),
            "label_weights": ((S,), "float32")}


def _config():
    return BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64)


def _lengths(count, seed=0):
    rng = np.random.default_rng(seed)
    return [int(n) for n in rng.integers(3, S + 1, count)]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """37 classification records of lengths 3..32 (id values tell examples apart)."""
    path = str(tmp_path_factory.mktemp("buckets") / "train.tf_record")
    rng = np.random.default_rng(1)
    features = []
    for i, n in enumerate(_lengths(37)):
        ids = [2] + [int(x) for x in rng.integers(5, 50, n - 2)] + [3] + [0] * (S - n)
        features.append({"input_word_ids": ids, "input_mask": [1] * n + [0] * (S - n),
                         "input_type_ids": [0] * S, "label_ids": i % 2})
    feature_records.write_records(path, features, SPEC)
    return path, features


def test_parse_buckets_auto_list_and_off():
    fine = [4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128]
    assert length_buckets.parse_buckets("auto", 128, 512) == fine
    assert length_buckets.parse_buckets("auto", 100, 512) == fine[:-2] + [100]
    assert length_buckets.parse_buckets("auto", 300, 512)[-4:] == [192, 224, 256, 300]
    # Training batches (and XLA programs): fewer, coarser buckets.
    assert length_buckets.parse_buckets("auto", 128, 512, coarse=True) == [16, 32, 48, 64, 96,
                                                                             128]
    assert length_buckets.parse_buckets("16,32,64,128", 64, 512) == [16, 32, 64]
    assert length_buckets.parse_buckets("8, 20", 64, 512) == [8, 20, 64]
    assert length_buckets.parse_buckets("off", 128, 512) is None


@pytest.mark.parametrize("value, max_seq_length, message", [
    ("16,64,32", 128, "--length_buckets=16,64,32 is not strictly increasing (32 after 64)"),
    ("16,16", 128, "--length_buckets=16,16 is not strictly increasing (16 after 16)"),
    ("16,1024", 128, "--length_buckets=16,1024: bucket 1024 exceeds max_position_embeddings=512"),
    ("32,64", 16, "--max_seq_length=16 is below the smallest bucket 32 of --length_buckets=32,64"),
    ("16,x", 128, "--length_buckets=16,x: 'x' is not a length; expected auto, off or increasing "
                  "integers like 16,32,64,128"),
])
def test_bad_bucket_lists_name_the_flag(value, max_seq_length, message):
    config = types.SimpleNamespace(max_position_embeddings=512)
    with pytest.raises(flag_checks.FlagValueError) as error:
        runtime_setup.resolve_length_buckets(value, max_seq_length, config)
    assert str(error.value) == message


def _bucket_of(length, buckets):
    return next(b for b in buckets if b >= length)


def test_training_batches_are_cut_to_their_bucket(records):
    path, features = records
    buckets = [8, 16, 24, 32]
    dataset = feature_records.records_dataset(path, SPEC, batch_size=4, is_training=True,
                                              seed=3, length_buckets=buckets)
    assert dataset.element_spec["input_word_ids"].shape.as_list() == [4, None]
    widths = set()
    by_ids = {tuple(f["input_word_ids"]): f for f in features}
    for batch in dataset.take(30):
        ids = batch["input_word_ids"].numpy()
        lengths = batch["input_mask"].numpy().sum(1)
        width = ids.shape[1]
        widths.add(width)
        assert ids.shape[0] == 4
        # Every example of the batch belongs to the batch's bucket; only padding was cut.
        assert {_bucket_of(n, buckets) for n in lengths} == {width}
        for row in ids:
            assert tuple(row) + (0,) * (S - width) in by_ids
    assert len(widths) >= 3


def test_evaluation_batches_cover_every_example_once(records):
    path, features = records
    dataset = feature_records.records_dataset(path, SPEC, batch_size=4, is_training=False,
                                              num_examples=len(features),
                                              length_buckets=[8, 16, 32])
    seen, fill_rows = [], []
    for batch in dataset:
        index = batch["example_index"].numpy()
        weights = batch["example_weights"].numpy()
        assert batch["input_word_ids"].shape[0] == 4
        np.testing.assert_array_equal(weights, (index >= 0).astype(np.float32))
        fill_rows.append(int((index < 0).sum()))
        width = batch["input_word_ids"].shape[1]
        longest = max(sum(features[i]["input_mask"]) for i in index if i >= 0)
        assert width == _bucket_of(longest, [8, 16, 32])  # cut to its longest example's bucket
        for row, i in zip(batch["input_word_ids"].numpy(), index):
            if i >= 0:
                assert list(row) == features[i]["input_word_ids"][:width]
                seen.append(int(i))
    assert sorted(seen) == list(range(len(features)))
    # One sorted window (37 examples < 64 batches): lengths never decrease, stable on ties, and
    # only the pass's last batch is filled up.
    assert seen == sorted(range(len(features)), key=lambda i: (sum(features[i]["input_mask"]), i))
    assert fill_rows == [0] * (len(fill_rows) - 1) + [3]


class _TraceCounter:
    """Wraps a model; counts Python executions of its call (= tf.function traces)."""

    def __init__(self, model):
        self.model, self.traces = model, 0

    def __call__(self, features, training=None):
        self.traces += 1
        return self.model(features, training=training)


def test_predictions_match_the_unbucketed_path_in_order(records):
    path, features = records
    tf.keras.utils.set_random_seed(0)
    model = BertClassifier(BertEncoder(_config()), 3)

    def run(buckets):
        counter = _TraceCounter(model)
        dataset = feature_records.records_dataset(path, SPEC, batch_size=4, is_training=False,
                                                  num_examples=len(features),
                                                  length_buckets=buckets)
        return task_loop.predict(counter, dataset)[:len(features)], counter.traces

    full, _ = run(None)
    bucketed, traces = run([8, 16, 24, 32])
    assert bucketed.shape == full.shape == (37, 3)
    np.testing.assert_allclose(bucketed, full, atol=1e-5)
    assert traces == 1  # the dataset's element spec, sequence dimension None, is the signature


def test_tagging_predictions_are_padded_back_to_full_length(tmp_path):
    rng = np.random.default_rng(2)
    features = []
    for n in _lengths(11, seed=4):
        ids = [2] + [int(x) for x in rng.integers(5, 50, n - 2)] + [3] + [0] * (S - n)
        features.append({"input_word_ids": ids, "input_mask": [1] * n + [0] * (S - n),
                         "input_type_ids": [0] * S, "label_ids": [0] * S,
                         "label_weights": [1.0] * n + [0.0] * (S - n)})
    path = str(tmp_path / "tags.tf_record")
    feature_records.write_records(path, features, TAG_SPEC)
    tf.keras.utils.set_random_seed(0)
    model = BertTokenClassifier(BertEncoder(_config()), 5)
    outputs = []
    for buckets in (None, [16, 32]):
        dataset = feature_records.records_dataset(path, TAG_SPEC, batch_size=4,
                                                  is_training=False, num_examples=11,
                                                  length_buckets=buckets)
        outputs.append(task_loop.predict(model, dataset, sequence_length=S)[:11])
    full, bucketed = outputs
    assert bucketed.shape == (11, S, 5)
    for row, f in enumerate(features):
        n = sum(f["input_mask"])
        np.testing.assert_allclose(bucketed[row, :n], full[row, :n], atol=1e-5)


def test_training_traces_once_whatever_the_buckets(records, tmp_path):
    path, _ = records
    tf.keras.utils.set_random_seed(0)
    strategy = tf.distribute.get_strategy()
    model = BertClassifier(BertEncoder(_config()), 2)
    model(next(iter(feature_records.records_dataset(path, SPEC, batch_size=4,
                                                    is_training=True))))
    traces = []

    def loss_fn(model, batch, training):
        traces.append(batch["input_word_ids"].shape.as_list())
        return task_loop.classification_loss_fn(model, batch, training)

    results = controller.train(
        model=model, optimizer=create_optimizer(1e-3, 12, 1), loss_fn=loss_fn,
        dataset_fn=lambda ctx: feature_records.records_dataset(
            path, SPEC, batch_size=4, is_training=True, seed=0, input_context=ctx,
            length_buckets=[8, 16, 24, 32]),
        runtime=on_tensorflow(strategy), output_dir=str(tmp_path / "run"),
        loop_config=TrainLoopConfig(12, steps_per_loop=4, save_checkpoints_steps=12),
        handle_sigterm=False)
    assert results["step"] == 12 and np.isfinite(results["loss"])
    # The part-name trace and the training loop's trace, both with the length unknown.
    assert traces == [[4, None], [4, None]]


def test_accumulated_micro_batches_of_different_buckets(records):
    """Gradient accumulation stacks its micro-batches: those of different buckets are padded
    to the widest, which must leave the summed gradients those of the batches as cut."""
    path, _ = records
    tf.keras.utils.set_random_seed(0)
    model = BertClassifier(BertEncoder(_config()), 2)
    dataset = feature_records.records_dataset(path, SPEC, batch_size=4, is_training=True, seed=5,
                                              length_buckets=[8, 16, 24, 32])
    batches = []
    for batch in dataset:
        if batch["input_word_ids"].shape[1] not in {b["input_word_ids"].shape[1] for b in batches}:
            batches.append(batch)
        if len(batches) == 2:
            break
    assert batches[0]["input_word_ids"].shape[1] != batches[1]["input_word_ids"].shape[1]

    def grad_fn(batch):  # dropout off: the two paths must see the same forward pass
        with tf.GradientTape() as tape:
            loss = task_loop.classification_loss_fn(model, batch, False)["loss"]
        return {"loss": loss}, tape.gradient(loss, model.trainable_variables)

    spec = dataset.element_spec
    accumulated = tf.function(lambda a, b: tf_runner._accumulate(grad_fn, (a, b)),
                              input_signature=[spec, spec])(*batches)
    separate = [grad_fn(b) for b in batches]
    np.testing.assert_allclose(accumulated[0]["loss"],
                               separate[0][0]["loss"] + separate[1][0]["loss"], rtol=1e-5)
    for got, first, second in zip(accumulated[1], separate[0][1], separate[1][1]):
        want = tf.convert_to_tensor(first) + tf.convert_to_tensor(second)
        np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("shuffle", [False, True])
def test_keras_dataset_knows_its_length(shuffle):
    # 11 examples of lengths 3-10 at S=16: buckets 8 (7 examples) and 16 (4): 3 + 2 batches of 3.
    lengths = np.array([3, 4, 5, 6, 7, 8, 8, 9, 10, 10, 9])
    mask = (np.arange(16)[None, :] < lengths[:, None]).astype(np.int32)
    features = {"input_word_ids": mask * 7, "input_mask": mask, "input_type_ids": 0 * mask}
    dataset = length_buckets.keras_dataset(features, np.arange(11), batch_size=3,
                                           buckets=[8, 16], shuffle=shuffle, seed=1)
    assert int(dataset.cardinality()) == 5
    batches = list(dataset)
    assert len(batches) == 5
    assert sorted(int(x["input_word_ids"].shape[1]) for x, _ in batches) == [8, 8, 8, 16, 16]
    assert sorted(int(i) for _, y in batches for i in y) == list(range(11))
