"""The TensorFlow step runner under the run controller (training.tf_runner): its input (resumed,
no autotuning, on one CPU a plain iterator), over-fitting with its summaries, bitwise resume
with the dropout generators' state, the NaN and non-finite update stops, XLA against the plain
graph and XLA's fallback, a Keras optimizer under a mirrored strategy. Its checkpointer:
tests/training/test_checkpointing.py; the contract every backend's runner keeps:
tests/backends."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training.distribute import get_strategy
from bert_tf.training.runtime import on_tensorflow
from bert_tf.training.stops import NonFiniteLossError
import toy_problem as toy

_build, _train = toy.tf_build, toy.tf_train


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


def test_one_cpu_trains_from_a_plain_iterator_without_autotuning_past_what_was_consumed():
    from bert_tf.training import tf_runner

    # The pipeline feeding 2 of its replicas: a global micro-batch is 2 of its batches.
    context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                         num_replicas_in_sync=2)
    dataset = tf_runner.input_pipeline(lambda ctx: tf.data.Dataset.range(100), context, 3)
    assert list(dataset.take(2).as_numpy_iterator()) == [6, 7]
    # Tearing an iterator down waited for tf.data's autotuning threads (up to a minute after a
    # long run): no autotuning, and on one CPU no distributed iterator with buffers of its own.
    assert dataset.options().autotune.enabled is False
    iterator = tf_runner._input_iterator(get_strategy("one_device"),
                                         lambda ctx: tf.data.Dataset.range(100), 5)
    assert isinstance(iterator, tf.data.Iterator) and int(next(iterator)) == 5
