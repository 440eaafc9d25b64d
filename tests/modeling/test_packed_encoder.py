"""Packed rows (Krell et al. 2021): every instance gets the outputs and losses it gets alone.

A packed batch holds 5 instances in 2 rows (3 + 2) of length 32; the unpacked batch holds the
same 5 instances one per row. Models run with training=False for the parity checks (dropout
is random); the fit test trains with dropout on.
"""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.modeling import BertEncoder, BertPretrainer
from bert_tf.data.pretraining.row_packing_tf import assert_instance_ids
from bert_tf.modeling.packing_checks import check_instance_ids, instance_position_ids

SEQ = 32
VOCAB = 100
LENGTHS = ((9, 12, 7), (14, 10))  # instances per packed row; 28 and 24 real tokens
NUM_SLOTS = 3  # next_sentence_positions slots per packed row
PREDICTIONS = 3  # masked tokens per instance: one span of 3 inside segment A or B


def make_config(family):
    fields = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=SEQ)
    if family == "albert":  # shared blocks, factorized embeddings
        fields.update(share_parameters="all", embedding_size=16)
    elif family == "sinusoidal":
        fields.update(position_embedding_type="sinusoidal")
    return BertConfig(**fields)


def make_instances(seed=0):
    """One dict per instance: [CLS] A [SEP] B [SEP] ids/types, a masked span, a pair label."""
    rng = np.random.default_rng(seed)
    instances = []
    for length in (n for row in LENGTHS for n in row):
        len_a = (length - 3) // 2
        len_b = length - 3 - len_a
        ids = np.concatenate([[2], rng.integers(5, VOCAB, len_a), [3],
                              rng.integers(5, VOCAB, len_b), [3]])
        types = np.array([0] * (len_a + 2) + [1] * (len_b + 1))
        start = int(rng.integers(1, length - 1 - PREDICTIONS))  # span stays before the last [SEP]
        positions = np.arange(start, start + PREDICTIONS)
        instances.append({
            "ids": ids, "types": types, "positions": positions,
            "masked_ids": rng.integers(5, VOCAB, PREDICTIONS),
            "left": np.full(PREDICTIONS, start - 1), "right": np.full(PREDICTIONS, start + 3),
            "label": int(rng.integers(0, 2))})
    return instances


def unpacked_features(instances):
    """One instance per row, positions relative to the row."""
    batch = len(instances)
    out = {k: np.zeros((batch, SEQ), "int32")
           for k in ("input_word_ids", "input_mask", "input_type_ids")}
    out.update({k: np.zeros((batch, PREDICTIONS), "int32")
                for k in ("masked_lm_positions", "masked_lm_ids", "span_left_boundaries",
                          "span_right_boundaries")})
    out["masked_lm_weights"] = np.ones((batch, PREDICTIONS), "float32")
    out["next_sentence_labels"] = np.array([x["label"] for x in instances], "int32")
    for b, x in enumerate(instances):
        n = len(x["ids"])
        out["input_word_ids"][b, :n], out["input_type_ids"][b, :n] = x["ids"], x["types"]
        out["input_mask"][b, :n] = 1
        out["masked_lm_positions"][b] = x["positions"]
        out["masked_lm_ids"][b] = x["masked_ids"]
        out["span_left_boundaries"][b], out["span_right_boundaries"][b] = x["left"], x["right"]
    return out


def packed_features(instances):
    """The instances packed into len(LENGTHS) rows as the contract lays them out."""
    rows, slots = len(LENGTHS), NUM_SLOTS * PREDICTIONS
    out = {k: np.zeros((rows, SEQ), "int32")
           for k in ("input_word_ids", "input_mask", "input_type_ids", "input_instance_ids")}
    out.update({k: np.zeros((rows, slots), "int32")
                for k in ("masked_lm_positions", "masked_lm_ids", "span_left_boundaries",
                          "span_right_boundaries")})
    out["masked_lm_weights"] = np.zeros((rows, slots), "float32")
    for k in ("next_sentence_positions", "next_sentence_labels"):
        out[k] = np.zeros((rows, NUM_SLOTS), "int32")
    out["next_sentence_weights"] = np.zeros((rows, NUM_SLOTS), "float32")
    it = iter(instances)
    for r, lengths in enumerate(LENGTHS):
        offset = 0
        for i in range(len(lengths)):
            x = next(it)
            n = len(x["ids"])
            row = slice(offset, offset + n)
            out["input_word_ids"][r, row], out["input_type_ids"][r, row] = x["ids"], x["types"]
            out["input_mask"][r, row], out["input_instance_ids"][r, row] = 1, i + 1
            p = slice(i * PREDICTIONS, (i + 1) * PREDICTIONS)
            out["masked_lm_positions"][r, p] = x["positions"] + offset
            out["masked_lm_ids"][r, p], out["masked_lm_weights"][r, p] = x["masked_ids"], 1.0
            out["span_left_boundaries"][r, p] = x["left"] + offset
            out["span_right_boundaries"][r, p] = x["right"] + offset
            out["next_sentence_positions"][r, i] = offset
            out["next_sentence_labels"][r, i] = x["label"]
            out["next_sentence_weights"][r, i] = 1.0
            offset += n
    return out


def instance_rows():
    """(packed row, offset, length, slot) of each instance, in order."""
    return [(r, sum(lengths[:i]), n, i) for r, lengths in enumerate(LENGTHS)
            for i, n in enumerate(lengths)]


def test_instance_position_ids():
    ids = tf.constant([[1, 1, 1, 2, 2, 3, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]])
    np.testing.assert_array_equal(instance_position_ids(ids),
                                  [[0, 1, 2, 0, 1, 0, 0, 1], [0, 1, 2, 3, 4, 5, 6, 7]])


@pytest.mark.parametrize("family", ["bert", "albert", "sinusoidal"])
def test_encoder_packed_instance_matches_it_alone(family):
    instances = make_instances()
    encoder = BertEncoder(make_config(family))
    alone = encoder(unpacked_features(instances), training=False)
    packed_in = packed_features(instances)
    packed = encoder(packed_in, training=False)
    pooled = encoder.pool_at(packed["sequence_output"],
                             packed_in["next_sentence_positions"]).numpy()
    for b, (r, offset, n, slot) in enumerate(instance_rows()):
        np.testing.assert_allclose(packed["sequence_output"][r, offset:offset + n],
                                   alone["sequence_output"][b, :n], rtol=1e-5, atol=1e-5)
        for layer in range(2):
            np.testing.assert_allclose(packed["encoder_outputs"][layer][r, offset:offset + n],
                                       alone["encoder_outputs"][layer][b, :n],
                                       rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(pooled[r, slot], alone["pooled_output"][b],
                                   rtol=1e-5, atol=1e-5)
    # The encoder's own pooled_output of a packed row is its first instance's.
    np.testing.assert_allclose(packed["pooled_output"], pooled[:, 0], rtol=1e-6, atol=1e-6)
    # Without instance ids the same row is one long sequence: the mask is what separates them.
    del packed_in["input_instance_ids"]
    mixed = encoder(packed_in, training=False)["sequence_output"]
    assert np.abs(mixed[0, 9:21] - alone["sequence_output"][1, :12]).max() > 1e-2


PRETRAINERS = {
    "bert_nsp": ("bert", dict()),
    "albert_sop": ("albert", dict(sentence_order_prediction=True)),
    "spanbert_sinusoidal": ("sinusoidal", dict(span_boundary_objective=True)),
}


def make_pretrainer(name):
    family, options = PRETRAINERS[name]
    return BertPretrainer(BertEncoder(make_config(family)), **options)


@pytest.mark.parametrize("name", sorted(PRETRAINERS))
def test_pretrainer_packed_logits_and_losses_match_unpacked(name):
    instances = make_instances(seed=1)
    model = make_pretrainer(name)
    unpacked, packed = unpacked_features(instances), packed_features(instances)
    alone = model(unpacked, training=False)
    out = model(packed, training=False)
    assert tuple(out["nsp_logits"].shape) == (len(LENGTHS), NUM_SLOTS, 2)
    heads = ["mlm_logits"] + (["sbo_logits"] if "spanbert" in name else [])
    for b, (r, _, _, slot) in enumerate(instance_rows()):
        p = slice(slot * PREDICTIONS, (slot + 1) * PREDICTIONS)
        for head in heads:
            np.testing.assert_allclose(out[head][r, p], alone[head][b], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out["nsp_logits"][r, slot], alone["nsp_logits"][b],
                                   rtol=1e-5, atol=1e-5)

    expected = model.compute_pretraining_losses(unpacked, alone)
    parts = model.compute_pretraining_losses(packed, out)
    assert set(parts) == set(expected)
    for key in parts:
        np.testing.assert_allclose(parts[key], expected[key], rtol=1e-5, atol=1e-6,
                                   err_msg=key)
    assert float(parts["nsp_count"]) == 5.0 and float(parts["mlm_weight_sum"]) == 15.0
    # The pair loss is the mean CE over the 5 real instances; unused slots do not count.
    logits = out["nsp_logits"].numpy().reshape(-1, 2).astype("float64")
    labels = packed["next_sentence_labels"].reshape(-1)
    ce = np.log(np.exp(logits).sum(-1)) - logits[np.arange(len(labels)), labels]
    weights = packed["next_sentence_weights"].reshape(-1)
    np.testing.assert_allclose(parts["nsp_loss"], (weights * ce).sum() / 5.0, rtol=1e-5)


def test_packed_step_compiles_with_xla():
    model = make_pretrainer("albert_sop")
    features = {k: tf.constant(v) for k, v in packed_features(make_instances()).items()}
    eager = model(features, training=False)

    @tf.function(jit_compile=True)
    def forward(batch):
        outputs = model(batch, training=False)
        return outputs, model.compute_pretraining_losses(batch, outputs)["loss"]

    compiled, loss = forward(features)
    for key in ("mlm_logits", "nsp_logits"):
        np.testing.assert_allclose(compiled[key], eager[key], rtol=1e-4, atol=1e-4)
    assert np.isfinite(loss.numpy())


def test_packed_and_unpacked_models_share_weights(tmp_path):
    instances = make_instances(seed=2)
    packed, unpacked = packed_features(instances), unpacked_features(instances)
    trained_packed = make_pretrainer("bert_nsp")
    num_weights = len(trained_packed.weights)
    packed_out = trained_packed(packed, training=False)
    assert len(trained_packed.weights) == num_weights  # the packed path adds no variable
    trained_packed.save_weights(tmp_path / "packed.weights.h5")

    reloaded = make_pretrainer("bert_nsp")
    reloaded.load_weights(tmp_path / "packed.weights.h5")
    unpacked_out = reloaded(unpacked, training=False)
    for b, (r, _, _, slot) in enumerate(instance_rows()):
        np.testing.assert_allclose(unpacked_out["nsp_logits"][b], packed_out["nsp_logits"][r, slot],
                                   rtol=1e-5, atol=1e-5)
    # And back: a checkpoint of the unpacked model runs packed rows.
    reloaded.save_weights(tmp_path / "unpacked.weights.h5")
    again = make_pretrainer("bert_nsp")
    again.load_weights(tmp_path / "unpacked.weights.h5")
    np.testing.assert_allclose(again(packed, training=False)["mlm_logits"],
                               packed_out["mlm_logits"], rtol=1e-6, atol=1e-6)


def test_fit_on_packed_rows_counts_instances():
    features = packed_features(make_instances(seed=3))
    model = make_pretrainer("bert_nsp")  # dropout 0.1 on while training
    model.compile(optimizer=keras.optimizers.AdamW(1e-3))
    dataset = tf.data.Dataset.from_tensors(features).repeat(3)
    history = model.fit(dataset, epochs=1, shuffle=False, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    # Per epoch: 3 batches x 5 real instances (6 slots each); 3 x 15 masked predictions.
    assert float(model.nsp_accuracy_tracker.count) == 15.0
    assert float(model.mlm_accuracy_tracker.count) == 45.0

    logs = model.evaluate(dataset.take(1), verbose=0, return_dict=True)
    parts = model.compute_pretraining_losses(features, model(features, training=False))
    assert float(model.nsp_accuracy_tracker.count) == 5.0
    np.testing.assert_allclose(logs["next_sentence_accuracy"],
                               parts["nsp_correct"] / 5.0, rtol=1e-6)
    np.testing.assert_allclose(logs["nsp_loss"], parts["nsp_loss"], rtol=1e-5)


def test_missing_packed_pair_features_are_named():
    model = make_pretrainer("bert_nsp")
    features = packed_features(make_instances())
    weights = features.pop("next_sentence_weights")
    with pytest.raises(KeyError, match="BertPretrainer: packed features \\(with "
                                       "next_sentence_positions\\) lack next_sentence_weights"):
        model.compute_pretraining_losses(features, model(features, training=False))
    features["next_sentence_weights"] = weights
    del features["next_sentence_positions"]
    with pytest.raises(KeyError, match="BertPretrainer: features lack next_sentence_positions"):
        model(features)


BAD_ROWS = [
    # (instance ids, input mask, message after "input_instance_ids: row 1, ")
    ([1, 1, 2, 2, 0, 0], [1, 1, 1, 1, 1, 0],
     "position 4: id 0 on a real token (input_mask=1; expected >= 1)"),
    ([1, 1, 2, 2, 1, 0], [1, 1, 1, 1, 1, 0],
     "position 4: id 1 follows 2 (expected 2 or 3: instance ids must be 1, 2, ... in order, "
     "each one contiguous run)"),
    ([1, 1, 3, 3, 0, 0], [1, 1, 1, 1, 0, 0],
     "position 2: id 3 follows 1 (expected 1 or 2: instance ids must be 1, 2, ... in order, "
     "each one contiguous run)"),
    ([2, 2, 2, 0, 0, 0], [1, 1, 1, 0, 0, 0],
     "position 0: id 2 follows 0 (expected 1: instance ids must be 1, 2, ... in order, each "
     "one contiguous run)"),
    ([1, 1, 1, 1, 2, 2], [1, 1, 1, 1, 0, 0],
     "position 4: id 2 on padding (input_mask=0; expected 0)"),
    ([1, 1, 0, 1, 0, 0], [1, 1, 0, 1, 0, 0],
     "position 3: instance 1 resumes after padding (each instance must be one contiguous run)"),
]


@pytest.mark.parametrize("ids,mask,message", BAD_ROWS)
def test_inconsistent_instance_ids_are_rejected(ids, mask, message):
    good = [1, 1, 1, 2, 2, 0]
    batch_ids, batch_mask = np.array([good, ids]), np.array([[1, 1, 1, 1, 1, 0], mask])
    with pytest.raises(ValueError, match=f"^{re.escape('input_instance_ids: row 1, ' + message)}$"):
        check_instance_ids(batch_ids, batch_mask)
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_instance_ids"):
        assert_instance_ids(tf.constant(batch_ids), tf.constant(batch_mask))


def test_consistent_instance_ids_pass_both_checks():
    ids = np.array([[1, 1, 2, 2, 2, 3, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]])
    mask = (ids > 0).astype("int32")
    check_instance_ids(ids, mask)
    check_instance_ids(ids[0], mask[0])
    np.testing.assert_array_equal(assert_instance_ids(ids, mask), ids)
    with pytest.raises(ValueError, match=r"^input_instance_ids: shape \(2, 8\) must equal "
                                         r"input_mask's \(2, 7\) and be \[S\] or \[B, S\]$"):
        check_instance_ids(ids, mask[:, :7])


def test_encoder_rejects_inconsistent_ids_eagerly():
    encoder = BertEncoder(make_config("bert"))
    features = packed_features(make_instances())
    features["input_instance_ids"][1, 30] = 2  # padding (input_mask=0) marked as instance 2
    # (Keras wraps the message in its call context; the type and the text stay.)
    with pytest.raises(ValueError, match=re.escape("input_instance_ids: row 1, position 30: id "
                                                   "2 on padding (input_mask=0; expected 0)")):
        encoder(features)
