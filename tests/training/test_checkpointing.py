"""The TensorFlow checkpointer (training.checkpointing) as a run uses it: fall back past a
damaged or unreadable latest checkpoint, resume one written without the dropout generators,
refuse another model's checkpoints and an unwritable directory, warm start from a Keras or
TensorFlow checkpoint (and name an original TF1 one), and a full disk that loses nothing."""

import gc
import os
import subprocess

import keras
import pytest
import tensorflow as tf
import numpy as np

from bert_tf.training import checkpointing
from bert_tf.training.distribute import get_strategy
from bert_tf.training.optimization import create_optimizer
import toy_problem as toy

_build, _train = toy.tf_build, toy.tf_train


def _resume_with_another_seed(strategy, output_dir, num_train_steps, caplog):
    """Resumes output_dir's run to num_train_steps in a model built from another seed (its
    weights must come from a checkpoint): (the results, the messages logged)."""
    model, optimizer = _build(strategy, seed=5)
    results = _train(model, optimizer, strategy, output_dir, num_train_steps, steps_per_loop=10)
    return results, [r.getMessage() for r in caplog.records]


def test_checkpoint_without_random_state_still_resumes(tmp_path, caplog):
    # Checkpoints written before the dropout state was saved hold model and optimizer only.
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy, dropout=0.1)
    with strategy.scope():
        optimizer.build(model.trainable_variables)
    optimizer.iterations.assign(10)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=optimizer),
                               str(tmp_path), 5).save(checkpoint_number=10)
    model, optimizer = _build(strategy, dropout=0.1, seed=3)
    results = _train(model, optimizer, strategy, tmp_path, 20, steps_per_loop=10)
    assert results["steps_this_run"] == 10
    assert any("holds no random-generator states" in r.getMessage() for r in caplog.records)


def test_corrupt_latest_checkpoint_falls_back_to_previous(tmp_path, caplog):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    _train(model, optimizer, strategy, tmp_path, 100)
    data_file = tmp_path / "ckpt-100.data-00000-of-00001"
    data_file.write_bytes(data_file.read_bytes()[:40])  # truncated, as by a full disk

    results, messages = _resume_with_another_seed(strategy, tmp_path, 120, caplog)
    # Restored step 50, so this run trained 70 steps.
    assert results["steps_this_run"] == 70
    assert any("ckpt-100 cannot be restored" in m and "falling back" in m for m in messages)


def test_a_damaged_checkpoint_skipped_leaves_no_warning_of_unrestored_values(tmp_path,
                                                                             caplog):
    # A restore that fails part-way (a tensor's checksum) used to leave TensorFlow's restore
    # coordinator to log the run state (read apart) as "deleted with unrestored values".
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    _train(model, optimizer, strategy, tmp_path, 20, steps_per_loop=10, save_checkpoints_steps=10)
    data_file = tmp_path / "ckpt-20.data-00000-of-00001"
    data = bytearray(data_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    data_file.write_bytes(bytes(data))

    results, _ = _resume_with_another_seed(strategy, tmp_path, 30, caplog)
    gc.collect()
    assert results["steps_this_run"] == 20
    messages = [r.getMessage() for r in caplog.records]
    assert any("ckpt-20 cannot be restored (DataLossError: " in m for m in messages)
    assert not [m for m in messages if "unrestored values" in m or "could not be found" in m]


def test_warm_start_from_keras_and_tf_checkpoints(tmp_path):
    strategy = get_strategy("one_device")
    source, optimizer = _build(strategy, seed=1)
    _train(source, optimizer, strategy, tmp_path / "source", 20)
    source.save_weights(str(tmp_path / "source.weights.h5"))
    want = [v.numpy() for v in source.weights]

    for init in (str(tmp_path / "source"), str(tmp_path / "source.weights.h5")):
        model, optimizer = _build(strategy, seed=2)
        checkpointing.warm_start(init, model)
        for v, w in zip(model.weights, want):
            np.testing.assert_array_equal(v.numpy(), w)
        assert int(optimizer.iterations.numpy()) == 0  # weights only


def test_warm_start_detects_tf1_bert_checkpoint(tmp_path):
    with tf.Graph().as_default():
        tf.compat.v1.get_variable("bert/embeddings/word_embeddings", shape=[4, 2])
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            prefix = saver.save(session, str(tmp_path / "bert_model.ckpt"))
    model, _ = _build(get_strategy("one_device"))
    with pytest.raises(checkpointing.CheckpointError,
                       match=r"is an original TF1 BERT checkpoint \(variables named "
                             r"bert/...\); load it with bert_tf.interop.warm_start"):
        checkpointing.warm_start(prefix, model)


def test_warm_start_missing_path(tmp_path):
    model, _ = _build(get_strategy("one_device"))
    with pytest.raises(checkpointing.CheckpointError,
                       match=r"--init_checkpoint=.*/nope: no checkpoint at"):
        checkpointing.warm_start(str(tmp_path / "nope"), model)


def test_unwritable_output_dir_fails_up_front(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    with pytest.raises(checkpointing.CheckpointError,
                       match=rf"--output_dir={blocker}/out is not a writable directory"):
        _train(model, optimizer, strategy, blocker / "out", 10)


def test_corrupt_state_file_resumes_from_checkpoint_files(tmp_path, caplog):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    _train(model, optimizer, strategy, tmp_path, 50)
    (tmp_path / "checkpoint").write_text("not a CheckpointState {{{")
    results, messages = _resume_with_another_seed(strategy, tmp_path, 60, caplog)
    assert results["steps_this_run"] == 10
    assert any("state file" in m and "missing or unreadable" in m for m in messages)


def test_checkpoint_of_another_model_is_a_clear_error(tmp_path):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    _train(model, optimizer, strategy, tmp_path, 50)
    with strategy.scope():
        inputs = keras.Input((6,))
        other = keras.Model(inputs, keras.layers.Dense(3, name="logits")(inputs))
        other_optimizer = create_optimizer(1e-2, 100, 10)
    with pytest.raises(checkpointing.CheckpointError,
                       match=rf"none of the checkpoints in {tmp_path} could be restored"):
        _train(other, other_optimizer, strategy, tmp_path, 60)


@pytest.fixture
def small_disk(tmp_path):
    """A 96 KiB tmpfs (as root) that training fills up; elsewhere a directory whose 12th
    checkpoint save fails with ENOSPC, injected below TensorFlow's saver."""
    mount = tmp_path / "disk"
    mount.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mount)],
        capture_output=True).returncode == 0
    if mounted:
        yield mount, None
        # Lazy: the failed run's summary writer may still hold a file open.
        subprocess.run(["umount", "-l", str(mount)], check=True)
        return
    original = tf.train.CheckpointManager.save
    calls = []

    def failing_save(self, *args, **kwargs):
        calls.append(1)
        if len(calls) >= 12:
            raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")
        return original(self, *args, **kwargs)

    tf.train.CheckpointManager.save = failing_save
    yield mount, calls
    tf.train.CheckpointManager.save = original


def test_disk_full_while_saving_loses_nothing(small_disk):
    disk, _ = small_disk
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy, num_train_steps=200)
    with pytest.raises(checkpointing.CheckpointError) as error:
        _train(model, optimizer, strategy, disk / "run", 200, steps_per_loop=1,
               save_checkpoints_steps=1, max_checkpoints_to_keep=None)
    latest = tf.train.latest_checkpoint(str(disk / "run"))
    step = int(latest.rsplit("-", 1)[1])
    assert str(error.value).startswith(f"saving the checkpoint of step {step + 1} in "
                                       f"{disk / 'run'} failed (")
    assert str(error.value).endswith(f"nothing was lost: the previous checkpoint {latest} is "
                                     "intact. Free space (or fix the directory) and rerun the "
                                     "same command to resume")
    # No partial files of the failed step stay behind, and the previous one restores.
    assert not tf.io.gfile.glob(f"{disk}/run/ckpt-{step + 1}*")
    model, optimizer = _build(strategy, num_train_steps=200, seed=4)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                     rng=checkpointing.random_state(model) or tf.train.Checkpoint())
    checkpoint.restore(latest).expect_partial().assert_existing_objects_matched()
    assert int(optimizer.iterations.numpy()) == step > 0
