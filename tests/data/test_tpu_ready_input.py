"""Every training input pipeline is TPU-ready: dense tensors with static shapes (the batch
dimension too, so drop_remainder), int32 ids, float32 weights, nothing else on device (no
strings, no ragged or sparse tensors: tokenization stays on the host, inside tf.data)."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import pretraining_dataset
from bert_tf.data import text_pretraining_dataset
from bert_tf.data.tasks.classifier_data import classifier_spec
from bert_tf.data.tasks.feature_records import records_dataset, write_records
from bert_tf.data.pretraining.masking_recipe import MaskingRecipe
from bert_tf.data.tasks.squad import squad_dataset
from bert_tf.data.tasks.tagging_data import tagging_spec

S, P, GLOBAL_BATCH = 16, 4, 8
# 2 replicas fed by one input pipeline: each dataset batch is one replica's, 8 / 2 examples.
CONTEXT = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                     num_replicas_in_sync=2)
PER_REPLICA = 4
FLOAT_FEATURES = {"masked_lm_weights", "label_weights", "example_weights"}


def _assert_tpu_ready(dataset, regression=False):
    for name, spec in dataset.element_spec.items():
        assert type(spec) is tf.TensorSpec, (name, spec)  # not ragged, sparse or nested
        assert spec.shape.is_fully_defined() and spec.shape[0] == PER_REPLICA, (name, spec)
        floats = name in FLOAT_FEATURES or (regression and name == "label_ids")
        assert spec.dtype == (tf.float32 if floats else tf.int32), (name, spec)
    for batch in dataset.take(3):  # the values have those shapes too, batch after batch
        for name, value in batch.items():
            assert value.shape == dataset.element_spec[name].shape, name


def test_pretraining_records(tmp_path):
    spec = {"input_ids": ((S,), "int32"), "input_mask": ((S,), "int32"),
            "segment_ids": ((S,), "int32"), "masked_lm_positions": ((P,), "int32"),
            "masked_lm_ids": ((P,), "int32"), "masked_lm_weights": ((P,), "float32"),
            "next_sentence_labels": ((1,), "int32")}
    rng = np.random.RandomState(0)
    examples = [{"input_ids": rng.randint(5, 30, S), "input_mask": np.ones(S),
                 "segment_ids": np.zeros(S), "masked_lm_positions": np.arange(1, P + 1),
                 "masked_lm_ids": rng.randint(5, 30, P), "masked_lm_weights": np.ones(P),
                 "next_sentence_labels": [i % 2]} for i in range(21)]
    write_records(str(tmp_path / "train.tfrecord"), examples, spec)
    _assert_tpu_ready(pretraining_dataset(
        str(tmp_path / "train.tfrecord"), batch_size=GLOBAL_BATCH, max_seq_length=S,
        max_predictions_per_seq=P, seed=1, input_context=CONTEXT, vocab_size=30))


def test_raw_text_masked_on_the_fly(tmp_path):
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away"]
    (tmp_path / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    rng = np.random.RandomState(0)
    documents = ["\n".join(" ".join(rng.choice(words, 6)) for _ in range(4)) for _ in range(12)]
    (tmp_path / "corpus.txt").write_text("\n\n".join(documents) + "\n")
    _assert_tpu_ready(text_pretraining_dataset(
        str(tmp_path / "corpus.txt"), vocab_file=str(tmp_path / "vocab.txt"),
        do_lower_case=True, batch_size=GLOBAL_BATCH,
        recipe=MaskingRecipe(max_seq_length=S, max_predictions_per_seq=P), seed=1,
        input_context=CONTEXT, block_lines=16))


@pytest.mark.parametrize("regression", [False, True])
def test_classification_records(tmp_path, regression):
    spec = classifier_spec(S, is_regression=regression)
    examples = [{"input_word_ids": [2] + [7] * (S - 2) + [3], "input_mask": [1] * S,
                 "input_type_ids": [0] * S, "label_ids": 0.5 if regression else i % 3}
                for i in range(11)]
    write_records(str(tmp_path / "train.tfrecord"), examples, spec)
    _assert_tpu_ready(records_dataset(str(tmp_path / "train.tfrecord"), spec,
                                      batch_size=GLOBAL_BATCH, is_training=True, seed=1,
                                      input_context=CONTEXT), regression=regression)


def test_tagging_records(tmp_path):
    spec = tagging_spec(S)
    examples = [{"input_word_ids": [2, 7, 8, 3] + [0] * (S - 4),
                 "input_mask": [1] * 4 + [0] * (S - 4), "input_type_ids": [0] * S,
                 "label_ids": [0, 1, 2] + [0] * (S - 3),
                 "label_weights": [0.0, 1.0, 1.0] + [0.0] * (S - 3)} for _ in range(9)]
    write_records(str(tmp_path / "train.tfrecord"), examples, spec)
    _assert_tpu_ready(records_dataset(str(tmp_path / "train.tfrecord"), spec,
                                      batch_size=GLOBAL_BATCH, is_training=True, seed=1,
                                      input_context=CONTEXT))


def test_squad_features():
    rows = 13
    arrays = {"input_word_ids": np.full((rows, S), 7, np.int32),
              "num_tokens": np.full(rows, S - 3, np.int32),
              "segment_a_length": np.full(rows, 5, np.int32),
              "start_positions": np.full(rows, 6, np.int32),
              "end_positions": np.full(rows, 8, np.int32)}
    # squad_dataset takes the per-replica batch size.
    _assert_tpu_ready(squad_dataset(arrays, batch_size=PER_REPLICA, is_training=True, seed=1,
                                    input_context=CONTEXT))
