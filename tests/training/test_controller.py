"""The run controller over the TensorFlow step runner: over-fitting, exact resume, NaN stop,
checkpoint fallback, warm start."""

import os
import subprocess

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training import checkpointing
from bert_tf.training.distribute import get_strategy
from bert_tf.training.runtime import on_tensorflow
from bert_tf.training.stops import NonFiniteLossError
from bert_tf.training.optimization import create_optimizer
import toy_problem as toy



def _build(strategy, num_train_steps=300, **settings):
    return toy.build(strategy.scope(), num_train_steps=num_train_steps, **settings)


def _train(model, optimizer, strategy, output_dir, num_train_steps, steps_per_loop=25,
           **settings):
    return toy.train(on_tensorflow(strategy), model, optimizer, output_dir, num_train_steps,
                     steps_per_loop=steps_per_loop, **settings)


def test_overfits_a_small_problem_and_writes_outputs(tmp_path):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    results = _train(model, optimizer, strategy, tmp_path, 300)
    assert results["step"] == 300 and results["steps_this_run"] == 300
    assert results["accuracy"] > 0.95 and results["loss"] < 0.2, results
    assert results["examples_per_second"] > 0
    # Checkpoints at every multiple of 50, the manager keeps the newest 5.
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-300")
    assert sorted(os.path.basename(p) for p in tf.io.gfile.glob(str(tmp_path / "ckpt-*.index"))) \
        == [f"ckpt-{s}.index" for s in (100, 150, 200, 250, 300)]
    events = tf.io.gfile.glob(str(tmp_path / "summaries" / "train" / "events.out.tfevents.*"))
    tags = set()
    for event in tf.compat.v1.train.summary_iterator(events[0]):
        tags.update(v.tag for v in event.summary.value)
    assert {"loss", "accuracy", "learning_rate", "examples_per_second"} <= tags
    evaluation = on_tensorflow(strategy).evaluate(
        model=model, loss_fn=toy.loss_fn, metrics_fn=toy.metrics, dataset_fn=toy.eval_dataset_fn)
    assert evaluation["eval_steps"] == 3 and evaluation["accuracy"] > 0.95


def test_resume_with_dropout_matches_uninterrupted_run_bitwise(tmp_path):
    # Dropout 0.1 and 2 accumulated micro-batches: the dropout generator's state must resume
    # with the step (before, the resumed steps redrew the masks of steps already trained).
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy, num_train_steps=60, dropout=0.1)
    _train(model, optimizer, strategy, tmp_path / "straight", 60, steps_per_loop=20,
           gradient_accumulation_steps=2)
    want = [v.numpy() for v in model.weights]

    # "Crash" after 30 steps (the schedule still targets 60), then a fresh process-like rebuild
    # from another seed (other initial weights and dropout seeds: the checkpoint must hold all).
    model, optimizer = _build(strategy, num_train_steps=60, dropout=0.1)
    first = _train(model, optimizer, strategy, tmp_path / "resumed", 30, steps_per_loop=20,
                   gradient_accumulation_steps=2)
    assert first["step"] == 30
    saved = dict(tf.train.list_variables(str(tmp_path / "resumed" / "ckpt-30")))
    assert saved["rng/generator_0/.ATTRIBUTES/VARIABLE_VALUE"] == [2]  # [seed, counter]
    model, optimizer = _build(strategy, num_train_steps=60, seed=99, dropout=0.1)
    second = _train(model, optimizer, strategy, tmp_path / "resumed", 60, steps_per_loop=20,
                    gradient_accumulation_steps=2)
    assert second["step"] == 60 and second["steps_this_run"] == 30
    for v, w in zip(model.weights, want):
        np.testing.assert_array_equal(v.numpy(), w, err_msg=v.path)


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


def test_nonfinite_update_is_never_saved(tmp_path):
    # Finite weights to step 4, then an infinite learning rate: step 5's loss is still finite
    # (computed before the update) but its update is not. It must not reach a checkpoint.
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy, num_train_steps=10)
    _train(model, optimizer, strategy, tmp_path, 4, steps_per_loop=2, save_checkpoints_steps=2)
    model, optimizer = _build(strategy, num_train_steps=10, learning_rate=float("inf"))
    with pytest.raises(NonFiniteLossError) as error:
        _train(model, optimizer, strategy, tmp_path, 10, steps_per_loop=2,
               save_checkpoints_steps=1)
    assert str(error.value) == (
        "the update made the weights non-finite (NaN/Inf) at step 5; training stopped without "
        f"saving. Last good checkpoint: {tmp_path}/ckpt-4")
    assert tf.train.latest_checkpoint(str(tmp_path)) == f"{tmp_path}/ckpt-4"
    reader = tf.train.load_checkpoint(str(tmp_path / "ckpt-4"))
    # Weights and optimizer slots (the object graph saves the model's weights once, under
    # optimizer/_trainable_variables).
    floats = [reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
              if "_trainable_variables" in name or "_variables/" in name]
    assert len(floats) > 6 and all(np.isfinite(value).all() for value in floats)


def test_nan_loss_stops_with_step_and_keeps_last_good_checkpoint(tmp_path):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    calls = tf.Variable(0)

    def poisoned_loss_fn(model, batch, training):
        parts = toy.loss_fn(model, batch, training)
        calls.assign_add(1)
        # The 37th step's loss is NaN.
        bad = tf.where(calls == 37, tf.constant(np.nan, tf.float32), 0.0)
        parts["loss"] = parts["loss"] + bad
        return parts

    with pytest.raises(NonFiniteLossError) as error:
        _train(model, optimizer, strategy, tmp_path, 100, steps_per_loop=10,
               save_checkpoints_steps=20, loss_fn=poisoned_loss_fn)
    assert str(error.value) == (
        f"loss became NaN at step 37; training stopped without saving. "
        f"Last good checkpoint: {tmp_path}/ckpt-20")
    assert tf.train.latest_checkpoint(str(tmp_path)) == f"{tmp_path}/ckpt-20"


def test_corrupt_latest_checkpoint_falls_back_to_previous(tmp_path, caplog):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    _train(model, optimizer, strategy, tmp_path, 100)
    data_file = tmp_path / "ckpt-100.data-00000-of-00001"
    data_file.write_bytes(data_file.read_bytes()[:40])  # truncated, as by a full disk

    model, optimizer = _build(strategy, seed=5)
    results = _train(model, optimizer, strategy, tmp_path, 120, steps_per_loop=10)
    # Restored step 50, so this run trained 70 steps.
    assert results["steps_this_run"] == 70
    assert any("ckpt-100 cannot be restored" in r.getMessage() and "falling back" in r.getMessage()
               for r in caplog.records)


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


def test_jit_compiled_steps_match_eager_graph_steps(tmp_path):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy, num_train_steps=40)
    plain = _train(model, optimizer, strategy, tmp_path / "plain", 40, steps_per_loop=20)
    model_xla, optimizer_xla = _build(strategy, num_train_steps=40)
    xla = _train(model_xla, optimizer_xla, strategy, tmp_path / "xla", 40, steps_per_loop=20,
                 jit_compile=True)
    assert abs(plain["loss"] - xla["loss"]) < 1e-3
    for a, b in zip(model.weights, model_xla.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3, atol=1e-4)


def test_corrupt_state_file_resumes_from_checkpoint_files(tmp_path, caplog):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    _train(model, optimizer, strategy, tmp_path, 50)
    (tmp_path / "checkpoint").write_text("not a CheckpointState {{{")
    model, optimizer = _build(strategy, seed=5)
    results = _train(model, optimizer, strategy, tmp_path, 60, steps_per_loop=10)
    assert results["steps_this_run"] == 10
    assert any("state file" in r.getMessage() and "missing or unreadable" in r.getMessage()
               for r in caplog.records)


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


def test_a_constant_keras_learning_rate_under_a_mirrored_strategy(tmp_path):
    # A plain Keras optimizer's rate is a (mirrored) variable; logging it used float(), which
    # a MirroredVariable refuses.
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    model, _ = _build(strategy)
    with strategy.scope():
        optimizer = keras.optimizers.SGD(0.05)
    results = _train(model, optimizer, strategy, tmp_path, 4, steps_per_loop=2,
                     save_checkpoints_steps=4, log_steps=2)
    assert results["step"] == 4 and np.isfinite(results["loss"])


def _loss_with_a_string_op(model, batch, training):
    parts = toy.loss_fn(model, batch, training)
    # AsString has no XLA kernel: a model XLA cannot compile (its value adds nothing).
    digits = tf.strings.length(tf.strings.as_string(parts["loss"]))
    parts["loss"] += 0.0 * tf.cast(digits, tf.float32)
    return parts


def test_jit_compile_true_on_a_graph_xla_cannot_compile_trains_without_it(tmp_path, caplog):
    """One warning naming the op, then the same steps without XLA: the weights equal a run
    with jit_compile=False."""
    strategy = get_strategy("one_device")
    finals = []
    for jit_compile, out in ((True, tmp_path / "xla"), (False, tmp_path / "plain")):
        model, optimizer = _build(strategy, dropout=0.2)
        caplog.clear()
        results = _train(model, optimizer, strategy, out, 20, steps_per_loop=10,
                         save_checkpoints_steps=20, jit_compile=jit_compile,
                         loss_fn=_loss_with_a_string_op)
        assert results["step"] == 20
        fallback = [r.getMessage() for r in caplog.records if "XLA cannot" in r.getMessage()]
        assert fallback == ([
            "--jit_compile=true: XLA cannot compile op AsString on XLA_CPU_JIT; training "
            "continues without XLA"] if jit_compile else []), fallback
        finals.append([v.numpy() for v in model.weights])
    for got, want in zip(*finals):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
