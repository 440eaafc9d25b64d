"""BertPretrainer under tf.distribute.MirroredStrategy over two logical CPU devices.

Runs in a fresh process: logical devices must be configured before TensorFlow initializes.
"""

import json
import os
import subprocess
import textwrap

import pytest

import zygote

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
    print(json.dumps({"replicas": mirrored.num_replicas_in_sync, "moved": moved, "diff": diff,
                      "single": single_logs, "mirrored": mirrored_logs}))
''')


@pytest.mark.slow
def test_mirrored_fit_step_equals_single_device_step(tmp_path, repo_root):
    script = tmp_path / "mirrored.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=repo_root, KERAS_BACKEND="tensorflow",
               TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([zygote.shared_python(), str(script)], capture_output=True, text=True,
                          env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2
    assert result["moved"] > 1e-3  # the step changed the weights...
    assert result["diff"] < 1e-5  # ...identically with two replicas and with one
    single, mirrored = result["single"], result["mirrored"]
    assert set(mirrored) == {"loss", "mlm_loss", "nsp_loss", "masked_lm_accuracy",
                             "next_sentence_accuracy"}
    for key in ("loss", "masked_lm_accuracy", "next_sentence_accuracy"):
        assert abs(single[key] - mirrored[key]) < 1e-4, (key, single, mirrored)
