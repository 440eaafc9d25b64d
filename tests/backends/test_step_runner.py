"""The step runner of the backend this process runs on (training.tf_runner or
training.jax_runner), driven directly through its contract (training.step_runner.StepRunner)
without the run controller: what each call returns and leaves behind. In the backend matrix:
the suite runs it on TensorFlow, `.ci/run` again under KERAS_BACKEND=jax.
"""

import os

import keras
import numpy as np
import pytest
from keras import ops

from bert_tf.training.loop_config import TrainLoopConfig
from bert_tf.training.step_runner import RUN_STATE_KEYS, Restored, StepsResult
import toy_problem as toy

BACKEND = keras.backend.backend()


@pytest.fixture(scope="module")
def runtime():
    return toy.make_runtime()


def _runner(runtime, output_dir, num_train_steps=40, seed=0, accumulation=1, loss_fn=None,
            dropout=0.1):
    model, optimizer = toy.build(runtime.scope(), num_train_steps=num_train_steps, seed=seed,
                                 dropout=dropout)
    config = TrainLoopConfig(num_train_steps, steps_per_loop=10, save_checkpoints_steps=10,
                             global_batch_size=toy.GLOBAL_BATCH,
                             gradient_accumulation_steps=accumulation)
    runner = runtime.step_runner(model=model, optimizer=optimizer,
                                 loss_fn=loss_fn or toy.loss_fn, dataset_fn=toy.dataset_fn,
                                 output_dir=str(output_dir), loop_config=config,
                                 handle_sigterm=False)
    return runner, model, optimizer


def _steps(runner, counts, accumulation=1):
    """Runs run_steps once per count; the StepsResults."""
    results = []
    for count in counts:
        results.append(runner.run_steps(count, accumulation))
    runner.sync_model()
    return results


def test_steps_sum_every_part_and_the_trained_weights_reach_the_model(runtime, tmp_path):
    runner, model, optimizer = _runner(runtime, tmp_path, accumulation=2)
    try:
        assert runner.restore() == Restored(None, 0, {})
        before = toy.weights(model)
        runner.start(0)
        first, second = _steps(runner, (10, 20), accumulation=2)
    finally:
        runner.close(stop_handled=False)
    assert isinstance(first, StepsResult)
    assert (first.steps_run, second.steps_run, first.stop, first.nonfinite) == (10, 20, False,
                                                                                False)
    # Each micro-batch adds a term per replica on TensorFlow, one global term on JAX.
    assert runner.terms_per_batch == (1 if BACKEND == "jax" else runtime.num_replicas)
    for result, steps in ((first, 10), (second, 20)):
        # A step trains accumulation x the global batch.
        assert result.sums["count"] == steps * 2 * toy.GLOBAL_BATCH
        assert 0 <= result.sums["correct"] <= result.sums["count"]
        # Each term's mean loss is summed: divided by the terms, the mean loss of the steps.
        assert 0 < result.sums["loss"] / (steps * 2 * runner.terms_per_batch) < 1.0
    # Trained: the weights moved, and the later steps fit better than the first ones.
    assert second.sums["loss"] / 20 < first.sums["loss"] / 10
    assert any(not np.array_equal(a, b) for a, b in zip(before, toy.weights(model)))
    assert int(ops.convert_to_numpy(optimizer.iterations)) == 30


def test_the_learning_rate_follows_the_schedule(runtime, tmp_path):
    runner, _, optimizer = _runner(runtime, tmp_path, num_train_steps=40)
    try:
        runner.restore()
        # 10 warmup steps to 1e-2; BERT's linear decay runs from step 0 to 0 at step 40.
        assert runner.learning_rate(5) == pytest.approx(5e-3, rel=1e-5)
        assert runner.learning_rate(25) == pytest.approx(1e-2 * (1 - 25 / 40), rel=1e-5)
        assert runner.learning_rate(40) == pytest.approx(0.0, abs=1e-9)
    finally:
        runner.close(stop_handled=False)


def test_a_saved_step_restores_into_a_model_built_from_another_seed(runtime, tmp_path):
    runner, model, _ = _runner(runtime, tmp_path)
    try:
        runner.restore()
        runner.start(0)
        _steps(runner, (10,))
        run_state = {"seconds_spent": 12.5, "schedule_fraction": 0.25, "micro_batches": 10.0}
        assert set(run_state) == set(RUN_STATE_KEYS)
        path = runner.save(10, run_state)
        runner.finish()
    finally:
        runner.close(stop_handled=False)
    assert os.path.basename(path).startswith("ckpt-10") and runner.last_good_checkpoint() == path
    saved = toy.weights(model)
    assert runtime.saved_run_state(str(tmp_path)) == run_state

    again, rebuilt, optimizer = _runner(runtime, tmp_path, seed=7)
    try:
        restored = again.restore()
    finally:
        again.close(stop_handled=False)
    assert (restored.path, restored.step, restored.run_state) == (path, 10, run_state)
    assert int(ops.convert_to_numpy(optimizer.iterations)) == 10
    for got, want in zip(toy.weights(rebuilt), saved):
        np.testing.assert_array_equal(got, want)


def test_a_step_that_makes_the_loss_nan_ends_the_call_there(runtime, tmp_path):
    def nan_from_the_start(model, batch, training):
        parts = toy.loss_fn(model, batch, training)
        return dict(parts, loss=parts["loss"] * np.float32("nan"))

    runner, _, _ = _runner(runtime, tmp_path, loss_fn=nan_from_the_start)
    try:
        runner.restore()
        runner.start(0)
        [result] = _steps(runner, (10,))
    finally:
        runner.close(stop_handled=False)
    assert result.nonfinite and result.steps_run == 1
    assert runner.last_good_checkpoint() is None
