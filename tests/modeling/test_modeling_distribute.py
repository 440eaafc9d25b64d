"""BertPretrainer and dropout under tf.distribute.MirroredStrategy over two logical CPUs.

Runs in a fresh process: logical devices must be configured before TensorFlow initializes.
"""

import json
import os
import subprocess
import textwrap

import pytest

import zygote

# One worker runs the module: its two-device process (the module fixture) runs once.
pytestmark = pytest.mark.xdist_group("modeling_distribute")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent('''
    import json, os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    import numpy as np
    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertEncoder, BertPretrainer

    rng = np.random.default_rng(0)
    B, S, P, V = 8, 16, 4, 100
    features = {
        "input_word_ids": rng.integers(5, V, (B, S)).astype("int32"),
        "input_mask": np.ones((B, S), "int32"),
        "input_type_ids": np.zeros((B, S), "int32"),
        "masked_lm_positions": np.tile(np.array([1, 4, 7, 9], "int32"), (B, 1)),
        "masked_lm_ids": rng.integers(5, V, (B, P)).astype("int32"),
        # Equal weights per replica, so the mean of per-replica losses is the global loss.
        "masked_lm_weights": np.ones((B, P), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (B,)).astype("int32"),
    }
    config = BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=S,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def one_step(strategy, initial):
        with strategy.scope():
            model = BertPretrainer(BertEncoder(config))
            if initial is not None:
                model.set_weights(initial)
            model.compile(optimizer=keras.optimizers.SGD(0.5))
        start = model.get_weights()
        logs = model.fit(tf.data.Dataset.from_tensors(features), verbose=0,
                         shuffle=False).history
        return start, model.get_weights(), {k: v[0] for k, v in logs.items()}

    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    start, single_after, single_logs = one_step(tf.distribute.get_strategy(), None)
    _, mirrored_after, mirrored_logs = one_step(mirrored, start)
    moved = max(float(np.abs(a - s).max()) for a, s in zip(single_after, start))
    diff = max(float(np.abs(a - b).max()) for a, b in zip(single_after, mirrored_after))

    # Dropout: both replicas get the same rows, so only their masks can tell them apart.
    from bert_tf.modeling import BertClassifier
    from bert_tf.modeling.dropout import FusedDropout
    from bert_tf.modeling.tf_kernels import replica_seed

    seed = tf.constant([3, 5], tf.int32)
    unfolded = bool((replica_seed(seed).numpy() == seed.numpy()).all())
    ones = tf.ones([64, 256])
    with mirrored.scope():
        layer = FusedDropout(0.5, seed=3)
        layer.build(ones.shape)
        dropout_config = BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, intermediate_size=64,
                                    max_position_embeddings=S)
        classifier = BertClassifier(BertEncoder(dropout_config), num_classes=3)
        # Only its head drops: `config` has no dropout.
        head_only = BertClassifier(BertEncoder(config), num_classes=3, dropout_rate=0.5)
    rows = {k: features[k][:4] for k in ("input_word_ids", "input_mask", "input_type_ids")}

    @tf.function
    def masks_and_logits():
        return mirrored.run(lambda: (layer(ones, training=True),
                                     classifier(rows, training=True),
                                     head_only(rows, training=True)))

    def per_replica():
        masks, logits, head_logits = masks_and_logits()
        local = mirrored.experimental_local_results
        return ([m.numpy() > 0 for m in local(masks)], [x.numpy() for x in local(logits)],
                [x.numpy() for x in local(head_logits)])

    state = layer.seed_generator.state.numpy()
    (mask_a, mask_b), (logits_a, logits_b), (head_a, head_b) = per_replica()
    layer.seed_generator.state.assign(state)
    (again_a, again_b), _, _ = per_replica()
    inference = mirrored.experimental_local_results(
        mirrored.run(tf.function(lambda: classifier(rows, training=False))))

    # ELECTRA's generator samples (kernels.categorical): Keras' draw on one device, and each
    # replica's own draw on two.
    from bert_tf.modeling import kernels
    uniform = tf.zeros([4096, 8])
    one_device = [kernels.categorical(uniform, keras.random.SeedGenerator(7)).numpy(),
                  keras.random.categorical(uniform, 1, dtype="int32",
                                           seed=keras.random.SeedGenerator(7)).numpy()]
    with mirrored.scope():
        sampler = keras.random.SeedGenerator(7)
    samples = mirrored.experimental_local_results(
        mirrored.run(tf.function(lambda: kernels.categorical(uniform, sampler))))
    print(json.dumps({"replicas": mirrored.num_replicas_in_sync, "moved": moved, "diff": diff,
                      "single": single_logs, "mirrored": mirrored_logs,
                      "unfolded_on_one_device": unfolded,
                      "kept": [float(mask_a.mean()), float(mask_b.mean())],
                      "masks_agree": float((mask_a == mask_b).mean()),
                      "logits_diff": float(np.abs(logits_a - logits_b).max()),
                      "head_only_logits_diff": float(np.abs(head_a - head_b).max()),
                      "same_state_same_masks": bool((again_a == mask_a).all()
                                                    and (again_b == mask_b).all()),
                      "inference_diff": float(np.abs(inference[0].numpy()
                                                     - inference[1].numpy()).max()),
                      "samples_as_keras_on_one_device": bool((one_device[0]
                                                              == one_device[1]).all()),
                      "samples_agree": float((samples[0].numpy()
                                              == samples[1].numpy()).mean())}))
''')


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    script = tmp_path_factory.mktemp("mirrored") / "mirrored.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, KERAS_BACKEND="tensorflow",
               TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([zygote.shared_python(), str(script)], capture_output=True, text=True,
                          env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2
    return result


@pytest.mark.slow
def test_mirrored_fit_step_equals_single_device_step(result):
    assert result["moved"] > 1e-3  # the step changed the weights...
    assert result["diff"] < 1e-5  # ...identically with two replicas and with one
    single, mirrored = result["single"], result["mirrored"]
    assert set(mirrored) == {"loss", "mlm_loss", "nsp_loss", "masked_lm_accuracy",
                             "next_sentence_accuracy"}
    for key in ("loss", "masked_lm_accuracy", "next_sentence_accuracy"):
        assert abs(single[key] - mirrored[key]) < 1e-4, (key, single, mirrored)


@pytest.mark.slow
def test_replicas_draw_their_own_dropout_masks(result):
    """The replicas of a mirrored strategy share each dropout generator's state; each folds its
    replica id into the drawn seed, so the same rows on two replicas are masked independently
    (about half the positions agree at rate 0.5), in the encoder and in the task head, and
    again identically from the same generator state (what an exact resume needs). One device
    draws with the seed as it is."""
    assert result["unfolded_on_one_device"] is True
    assert all(0.45 < kept < 0.55 for kept in result["kept"]), result["kept"]
    assert 0.45 < result["masks_agree"] < 0.55, result["masks_agree"]
    assert result["logits_diff"] > 1e-3 and result["inference_diff"] < 1e-6, result
    assert result["head_only_logits_diff"] > 1e-3, result
    assert result["same_state_same_masks"] is True


@pytest.mark.slow
def test_replicas_draw_their_own_electra_samples(result):
    """ELECTRA's generator samples replacements from a shared generator too: one device draws
    as keras.random.categorical does; two replicas sampling 4,096 rows of 8 equal logits agree
    on about 1/8 of them (the same draw would agree on all)."""
    assert result["samples_as_keras_on_one_device"] is True
    assert 0.09 < result["samples_agree"] < 0.16, result["samples_agree"]
