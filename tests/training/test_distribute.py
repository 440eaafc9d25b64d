"""get_strategy, and the training loop under MirroredStrategy over 2 logical CPUs and under
MultiWorkerMirroredStrategy with 2 worker processes (with gradient accumulation and SIGTERM)."""

import json
import os
import socket
import subprocess
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training.distribute import StrategyError, get_strategy, is_chief

import zygote

# The model, data and loss every distributed run shares. Replica r of n gets rows
# [r*16/n, (r+1)*16/n) of each global batch of 16: together the batches of one device. With
# gradient accumulation over 2 micro-batches of 8, the two micro-batches hold those 16 rows.
# `preempt`: the process sends itself SIGTERM after step 10's checkpoint, and the run resumes
# from the checkpoint the loop saves at the step it stops at.
_COMMON = textwrap.dedent("""
    import json, os, signal, sys
    import numpy as np, keras, tensorflow as tf
    from bert_tf.training.distribute import get_strategy
    from bert_tf.training.controller import TrainingPreempted, train
    from bert_tf.training.loop_config import TrainLoopConfig
    from bert_tf.training.runtime import on_tensorflow
    from bert_tf.training.optimization import create_optimizer

    rng = np.random.RandomState(0)
    x = rng.randn(64, 6).astype("float32")
    y = (x[:, 0] * x[:, 1] > 0).astype("int32")

    def make_dataset_fn(global_batch):
        def dataset_fn(ctx):
            batch = ctx.get_per_replica_batch_size(global_batch)
            ds = tf.data.Dataset.from_tensor_slices({"x": x, "y": y}).repeat().batch(16)
            ds = ds.unbatch().batch(batch, drop_remainder=True)
            return ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        return dataset_fn

    def loss_fn(model, b, training):
        logits = model(b["x"], training=training)
        nll = keras.losses.sparse_categorical_crossentropy(b["y"], logits, from_logits=True)
        return {"loss": tf.reduce_mean(nll)}

    def run(strategy, output_dir, accumulation=1, preempt=False, ramp=None):
        keras.utils.set_random_seed(0)
        with strategy.scope():
            inputs = keras.Input((6,))
            h = keras.layers.Dense(16, activation="tanh")(inputs)
            model = keras.Model(inputs, keras.layers.Dense(2)(h))
            optimizer = create_optimizer(3e-2, 40, 4)
        signals = [10] if preempt else []

        def on_checkpoint(step):
            if step in signals:
                signals.remove(step)
                os.kill(os.getpid(), signal.SIGTERM)

        def train_to(stop):
            return train(model=model, optimizer=optimizer, loss_fn=loss_fn,
                         dataset_fn=make_dataset_fn(16 // accumulation),
                         runtime=on_tensorflow(strategy), output_dir=output_dir,
                         loop_config=TrainLoopConfig(
                             stop, steps_per_loop=10, save_checkpoints_steps=10,
                             gradient_accumulation_steps=accumulation,
                             batch_size_ramp=ramp),
                         on_checkpoint=on_checkpoint)

        losses, preempted_at = [], None
        for stop in (20, 40):
            try:
                losses.append(train_to(stop)["loss"])
            except TrainingPreempted as e:
                assert e.code == 143, e.code
                preempted_at = e.step
                losses.append(train_to(stop)["loss"])
        return {"replicas": strategy.num_replicas_in_sync, "losses": losses,
                "kernel": model.weights[0].numpy().tolist(), "preempted_at": preempted_at}
""")

# Runs in a fresh process: logical devices must be configured before TF initialises them.
_MIRRORED_SCRIPT = textwrap.dedent("""
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
""") + _COMMON + textwrap.dedent("""
    # One MirroredStrategy for all mirrored runs: with a second one, its first all-reduce
    # collided with the first one's (same collective instance key, other shape).
    strategy = get_strategy("mirrored")
    out = {"one_device": run(get_strategy("one_device"), sys.argv[1] + "/one_device"),
           "mirrored": run(strategy, sys.argv[1] + "/mirrored"),
           "mirrored_accumulated": run(strategy, sys.argv[1] + "/accumulated", accumulation=2),
           # A batch growing from 8 to 16 rows (the ramp's end at half of each stop), and the
           # same run stopped by SIGTERM at step 11 and resumed.
           "mirrored_ramp": run(strategy, sys.argv[1] + "/ramp", accumulation=2, ramp=0.5),
           "mirrored_ramp_preempted": run(strategy, sys.argv[1] + "/ramp_preempted",
                                          accumulation=2, ramp=0.5, preempt=True)}

    # float16 loss scaling when only replica 1's gradient overflows: both replicas skip.
    from bert_tf.training.precision import DynamicLossScaleOptimizer
    with strategy.scope():
        weights = keras.Variable(np.ones(3, np.float32))
        scaled = DynamicLossScaleOptimizer(keras.optimizers.SGD(0.1), initial_scale=4.0)
        scaled.build([weights])

    @tf.function
    def overflow_on_replica_1():
        def apply():
            context = tf.distribute.get_replica_context()
            grad = tf.ones(3) * scaled.dynamic_scale
            grad = tf.where(context.replica_id_in_sync_group == 1, grad * np.inf, grad)
            scaled.apply([grad], [weights])
        strategy.run(apply)

    overflow_on_replica_1()
    out["overflow"] = {"weights": weights.numpy().tolist(),
                       "iterations": int(scaled.iterations.numpy()),
                       "scale": float(scaled.dynamic_scale.numpy())}

    print("RESULT" + json.dumps(out))
""")

# One worker of a 2-worker cluster on 127.0.0.1 (TF_CONFIG set by the test). Only worker 1
# (not the chief) is sent SIGTERM; the chief must stop at the same step and save.
_WORKER_SCRIPT = _COMMON + textwrap.dedent("""
    strategy = get_strategy("multi_worker_mirrored")
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    result = run(strategy, sys.argv[1], preempt=index == 1)
    if index == 1:
        result["one_device"] = run(get_strategy("one_device"), sys.argv[1] + "_single",
                                   preempt=True)
    print("RESULT" + json.dumps(result))
""")


def _result(proc):
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")][0]
    return json.loads(line[len("RESULT"):])


def _assert_same_trajectory(single, distributed):
    assert single["losses"][-1] < single["losses"][0]  # it trained
    np.testing.assert_allclose(distributed["losses"], single["losses"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(distributed["kernel"], single["kernel"], rtol=1e-4, atol=1e-5)


def test_one_device_strategy():
    strategy = get_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    assert strategy.num_replicas_in_sync == 1
    assert is_chief(strategy)


def test_unknown_strategy_and_too_many_gpus():
    with pytest.raises(ValueError, match="--distribution_strategy='horovod'; expected one of "
                                         "one_device, mirrored, multi_worker_mirrored, tpu"):
        get_strategy("horovod")
    with pytest.raises(ValueError, match=r"--num_gpus=8 but only 0 GPU\(s\) are visible"):
        get_strategy("mirrored", num_gpus=8)


_EXPECTED = ('expected JSON like {"cluster": {"worker": ["host:port", ...]}, "task": '
             '{"type": "worker", "index": 0}}')


@pytest.mark.parametrize("raw,message", [
    ("", f"TF_CONFIG is set but empty; {_EXPECTED} (or unset it to train on this host alone)"),
    ("{bad", "TF_CONFIG is not JSON (Expecting property name enclosed in double quotes: line 1 "
             f"column 2 (char 1)); {_EXPECTED}"),
    ('{"cluster": {"worker": ["localhost:1"]}}',
     f'TF_CONFIG needs a "cluster" and a "task" object; {_EXPECTED}'),
    ('{"cluster": {"ps": ["h:1"]}, "task": {"type": "ps", "index": 0}}',
     f"TF_CONFIG cluster has no worker or chief; {_EXPECTED}"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "evaluator", "index": 0}}',
     "TF_CONFIG task type 'evaluator' is not a job of the cluster (worker)"),
    ('{"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 2}}',
     "TF_CONFIG task index 2 is out of range: the cluster's worker job has 2 host(s) (h:1, "
     "h:2), so index is 0 to 1"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker"}}',
     f"TF_CONFIG task has no index; {_EXPECTED}"),
])
def test_bad_tf_config(monkeypatch, raw, message):
    """Each malformed TF_CONFIG is one line naming what is wrong, before TensorFlow reads it."""
    monkeypatch.setenv("TF_CONFIG", raw)
    with pytest.raises(StrategyError) as raised:
        get_strategy("multi_worker_mirrored")
    assert str(raised.value) == message


@pytest.mark.slow
def test_mirrored_two_cpus_matches_one_device(tmp_path, repo_root):
    env = dict(os.environ, PYTHONPATH=repo_root, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([zygote.shared_python(), "-c", _MIRRORED_SCRIPT, str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=300)
    result = _result(proc)
    assert result["one_device"]["replicas"] == 1 and result["mirrored"]["replicas"] == 2
    _assert_same_trajectory(result["one_device"], result["mirrored"])
    # 2 replicas x 2 accumulated micro-batches of 4 rows: the same updates as 16 rows at once.
    _assert_same_trajectory(result["one_device"], result["mirrored_accumulated"])
    # A resume over two replicas skips the micro-batches the ramp's steps consumed.
    ramp, preempted = result["mirrored_ramp"], result["mirrored_ramp_preempted"]
    assert preempted["preempted_at"] == 11 and ramp["preempted_at"] is None
    np.testing.assert_allclose(preempted["kernel"], ramp["kernel"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(preempted["losses"][-1], ramp["losses"][-1], rtol=1e-5)
    # Half the early steps train on 8 rows: another trajectory than the constant 16.
    assert not np.allclose(ramp["kernel"], result["mirrored_accumulated"]["kernel"])
    # The skipped float16 step left the weights alone, halved the scale and still counted.
    assert result["overflow"] == {"weights": [1.0, 1.0, 1.0], "iterations": 1, "scale": 2.0}


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
def test_multi_worker_two_processes_match_one_device(tmp_path, repo_root):
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    procs = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, PYTHONPATH=repo_root, TF_CONFIG=json.dumps(tf_config),
                   TF_CPP_MIN_LOG_LEVEL="2")
        procs.append(subprocess.Popen(
            [zygote.shared_python(), "-c", _WORKER_SCRIPT, str(tmp_path / "out")], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    finished = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        finished.append(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
    chief, worker = (_result(p) for p in finished)
    assert chief["replicas"] == 2 and worker["replicas"] == 2
    # SIGTERM reached worker 1 after step 10; both workers stopped after step 11 (one step
    # later: the signal arrived between calls) and resumed there.
    assert chief["preempted_at"] == worker["preempted_at"] == 11
    assert worker["one_device"]["preempted_at"] == 11
    _assert_same_trajectory(worker["one_device"], chief)
    np.testing.assert_allclose(worker["kernel"], chief["kernel"], rtol=0, atol=0)
    # One checkpoint directory, the chief's, with the preemption's ckpt-11; worker 1's
    # temporary copies are removed.
    out = tmp_path / "out"
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-40")
    assert sorted(int(p.name[len("ckpt-"):-len(".index")]) for p in out.glob("ckpt-*.index")) \
        == [10, 11, 20, 30, 40]
    assert not (out / ".worker_tmp").exists()
    assert sorted(p.name for p in (out / "summaries").iterdir()) == ["train"]
