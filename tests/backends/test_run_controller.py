"""The run controller on the Keras backend this process runs on: the backend matrix.

tests/backends/ holds the tests every backend must pass. The suite runs them on TensorFlow (the
default) and `.ci/run` runs them again under KERAS_BACKEND=jax, as keras-hub's CI runs its suite
once per backend: the same model, loss and input through the controller and each backend's step
runner and checkpointer.
"""

import itertools
import os
import signal

import keras
import numpy as np
import pytest
from keras import ops

from bert_tf.training.controller import TrainingPreempted
from bert_tf.training.optimization import create_optimizer
from bert_tf.training.step_runner import CheckpointError
from bert_tf.training.stops import NonFiniteLossError
import toy_problem as toy

BACKEND = keras.backend.backend()


@pytest.fixture(scope="module")
def runtime():
    return toy.make_runtime()


def _build(runtime, **settings):
    return toy.build(runtime.scope(), **settings)


_train = toy.train
_weights = toy.weights


def test_fits_a_small_problem_and_evaluates(runtime, tmp_path):
    model, optimizer = _build(runtime)
    progress = []
    results = _train(runtime, model, optimizer, tmp_path, 200, on_progress=progress.append)
    assert results["step"] == 200 and results["accuracy"] > 0.9, results
    # Before each call of the steps: the share done, at the loop starts (every 20 steps, and
    # after the saves every 50).
    starts = [0, 20, 40, 50, 60, 80, 100, 120, 140, 150, 160, 180]
    np.testing.assert_allclose(progress, [s / 200 for s in starts])
    evaluation = runtime.evaluate(model=model, loss_fn=toy.loss_fn, metrics_fn=toy.metrics,
                                  dataset_fn=toy.eval_dataset_fn)
    assert evaluation["eval_steps"] == 3 and evaluation["accuracy"] > 0.9


def test_resume_with_dropout_and_accumulation_ends_where_an_uninterrupted_run_ends(runtime,
                                                                                tmp_path):
    model, optimizer = _build(runtime, num_train_steps=60, dropout=0.1)
    _train(runtime, model, optimizer, tmp_path / "straight", 60, gradient_accumulation_steps=2)
    want = _weights(model)
    model, optimizer = _build(runtime, num_train_steps=60, dropout=0.1)
    first = _train(runtime, model, optimizer, tmp_path / "resumed", 30,
                   gradient_accumulation_steps=2)
    assert first["step"] == 30
    # Rebuilt from another seed: other initial weights and dropout seeds; the checkpoint holds
    # all of it.
    model, optimizer = _build(runtime, num_train_steps=60, seed=99, dropout=0.1)
    second = _train(runtime, model, optimizer, tmp_path / "resumed", 60,
                    gradient_accumulation_steps=2)
    assert second["steps_this_run"] == 30
    for got, expected in zip(_weights(model), want):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(BACKEND != "jax", reason="TensorFlow's runner reads tf.data; .ci/run's "
                    "JAX matrix runs this")
def test_on_jax_a_generator_of_numpy_batches_feeds_the_loop_and_a_resume_skips_what_it_used(
        runtime, tmp_path):
    """No tf.data: the input a machine without TensorFlow gives (jax_runner.numpy_batches)."""
    def numpy_batches(_):
        for step in itertools.count():
            index = np.random.default_rng(step).permutation(96)[:toy.GLOBAL_BATCH]
            yield {"x": toy.X[index], "y": toy.Y[index]}

    model, optimizer = _build(runtime, num_train_steps=60, dropout=0.1)
    straight = _train(runtime, model, optimizer, tmp_path / "straight", 60,
                      gradient_accumulation_steps=2, dataset_fn=numpy_batches)
    assert straight["accuracy"] > 0.75, straight
    want = _weights(model)
    model, optimizer = _build(runtime, num_train_steps=60, dropout=0.1)
    _train(runtime, model, optimizer, tmp_path / "resumed", 30, gradient_accumulation_steps=2,
           dataset_fn=numpy_batches)
    model, optimizer = _build(runtime, num_train_steps=60, seed=99, dropout=0.1)
    second = _train(runtime, model, optimizer, tmp_path / "resumed", 60,
                    gradient_accumulation_steps=2, dataset_fn=numpy_batches)
    # The resumed run skipped the 60 micro-batches the first 30 steps used: it ends where the
    # uninterrupted run ends.
    assert second["steps_this_run"] == 30
    for got, expected in zip(_weights(model), want):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_a_batch_size_ramp_grows_the_steps_and_resumes_after_sigterm_exactly(runtime, tmp_path,
                                                                          monkeypatch):
    runner_class = _runner_class()
    run_steps = runner_class.run_steps
    calls = []

    def recorded(runner, num_steps, accumulation):
        if recorded.sigterm_at_call == len(calls):
            os.kill(os.getpid(), signal.SIGTERM)  # the call's first step sees it
        result = run_steps(runner, num_steps, accumulation)
        calls.append((result.steps_run, accumulation))
        return result

    monkeypatch.setattr(runner_class, "run_steps", recorded)
    ramp = dict(gradient_accumulation_steps=3, batch_size_ramp=0.5)
    recorded.sigterm_at_call = None
    model, optimizer = _build(runtime, num_train_steps=60, dropout=0.1)
    straight = _train(runtime, model, optimizer, tmp_path / "straight", 60, **ramp)
    want = _weights(model)
    # Calls start at steps 0, 20, 40 and 50 (a save): 1 micro-batch a step, then 1 + 2 x the
    # share done / 0.5, rounded down, up to 3 from half-way on.
    assert calls == [(20, 1), (20, 2), (10, 3), (10, 3)]
    assert straight["micro_batches"] == 20 + 40 + 30 + 30
    # Each term is one micro-batch's mean loss: the window's mean stays a per-batch loss.
    assert 0 < straight["loss"] < 0.7 and straight["accuracy"] > 0.6, straight

    calls.clear()
    recorded.sigterm_at_call = 1
    model, optimizer = _build(runtime, num_train_steps=60, dropout=0.1)
    with pytest.raises(TrainingPreempted) as preempted:
        _train(runtime, model, optimizer, tmp_path / "resumed", 60, **ramp)
    assert preempted.value.step == 21 and calls == [(20, 1), (1, 2)]
    assert runtime.saved_run_state(str(tmp_path / "resumed"))["micro_batches"] == 22
    calls.clear()
    recorded.sigterm_at_call = None
    model, optimizer = _build(runtime, num_train_steps=60, seed=99, dropout=0.1)
    resumed = _train(runtime, model, optimizer, tmp_path / "resumed", 60, **ramp)
    assert calls == [(19, 2), (10, 3), (10, 3)]
    assert resumed["steps_this_run"] == 39 and resumed["micro_batches"] == 120
    for got, expected in zip(_weights(model), want):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_a_nan_loss_stops_before_any_save_naming_the_last_good_checkpoint(runtime, tmp_path):
    model, optimizer = _build(runtime)
    _train(runtime, model, optimizer, tmp_path, 40, save_checkpoints_steps=20)

    def poisoned(model, batch, training):
        parts = toy.loss_fn(model, batch, training)
        return dict(parts, loss=parts["loss"] * np.float32("nan"))

    model, optimizer = _build(runtime)
    with pytest.raises(NonFiniteLossError) as error:
        _train(runtime, model, optimizer, tmp_path, 80, save_checkpoints_steps=20,
               loss_fn=poisoned)
    checkpoint = {"tensorflow": "ckpt-40", "jax": "ckpt-40.orbax"}[BACKEND]
    assert str(error.value) == (f"loss became NaN at step 41; training stopped without saving. "
                                f"Last good checkpoint: {tmp_path}/{checkpoint}")


def test_no_readable_checkpoint_is_refused(runtime, tmp_path):
    model, optimizer = _build(runtime)
    _train(runtime, model, optimizer, tmp_path, 20, save_checkpoints_steps=20)
    # Another model's checkpoint: none fits.
    keras.utils.set_random_seed(0)
    with runtime.scope():
        inputs = keras.Input((6,))
        other = keras.Model(inputs, keras.layers.Dense(2, name="logits")(
            keras.layers.Dense(8, name="hidden")(inputs)))
        other_optimizer = create_optimizer(1e-2, 40, 1)
    with pytest.raises(CheckpointError, match=rf"none of the checkpoints in {tmp_path} could "
                                              "be restored"):
        _train(runtime, other, other_optimizer, tmp_path, 40)


def _runner_class():
    if BACKEND == "jax":
        from bert_tf.training.jax_runner import JaxStepRunner
        return JaxStepRunner
    from bert_tf.training.tf_runner import TensorFlowStepRunner
    return TensorFlowStepRunner


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_or_ctrl_c_saves_the_step_reached_and_exits_128_plus_it(runtime, tmp_path,
                                                                        monkeypatch, signum,
                                                                        code):
    handler = signal.getsignal(signal.SIGINT)
    model, optimizer = _build(runtime, num_train_steps=10**6)
    runner_class = _runner_class()
    run_steps = runner_class.run_steps

    def signalled(runner, num_steps, accumulation):
        if not signalled.sent:
            signalled.sent = True
            os.kill(os.getpid(), signum)
        return run_steps(runner, num_steps, accumulation)

    signalled.sent = False
    monkeypatch.setattr(runner_class, "run_steps", signalled)
    with pytest.raises(TrainingPreempted) as preempted:
        _train(runtime, model, optimizer, tmp_path / "run", 10**6, steps_per_loop=10,
               save_checkpoints_steps=10**6)
    assert preempted.value.code == code and 1 <= preempted.value.step <= 10
    assert os.path.basename(preempted.value.checkpoint).startswith(
        f"ckpt-{preempted.value.step}")
    if signum == signal.SIGINT:
        assert str(preempted.value) == (
            f"interrupted by Ctrl-C at step {preempted.value.step}; saved checkpoint "
            f"{preempted.value.checkpoint}; the same command resumes it; exit code 130")
    # Training over, the signals have their handlers back.
    assert signal.getsignal(signal.SIGINT) is handler


def test_ctrl_c_twice_stops_at_once_without_a_checkpoint(runtime, tmp_path, monkeypatch):
    handler = signal.getsignal(signal.SIGINT)
    model, optimizer = _build(runtime, num_train_steps=10**6)
    runner_class = _runner_class()
    run_steps, save = runner_class.run_steps, runner_class.save
    survived = []

    def once(runner, num_steps, accumulation):
        if not survived:
            os.kill(os.getpid(), signal.SIGINT)
            survived.append(True)  # the first Ctrl-C asks for a checkpoint: no interrupt
        return run_steps(runner, num_steps, accumulation)

    def again(runner, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # pressed again while the checkpoint is written
        return save(runner, *args, **kwargs)

    monkeypatch.setattr(runner_class, "run_steps", once)
    monkeypatch.setattr(runner_class, "save", again)
    with pytest.raises(KeyboardInterrupt):
        _train(runtime, model, optimizer, tmp_path / "run", 10**6, steps_per_loop=10,
               save_checkpoints_steps=10**6)
    assert survived
    assert not [n for n in os.listdir(tmp_path / "run") if n.startswith("ckpt-")]
    assert signal.getsignal(signal.SIGINT) is handler


def test_an_ignored_ctrl_c_stays_ignored(runtime, tmp_path, monkeypatch):
    # A background job of a shell script ignores SIGINT: training must not take it over.
    model, optimizer = _build(runtime, num_train_steps=20)
    runner_class = _runner_class()
    run_steps = runner_class.run_steps

    def signalled(runner, num_steps, accumulation):
        os.kill(os.getpid(), signal.SIGINT)
        return run_steps(runner, num_steps, accumulation)

    monkeypatch.setattr(runner_class, "run_steps", signalled)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        results = _train(runtime, model, optimizer, tmp_path / "run", 20, steps_per_loop=10)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert results["step"] == 20


def test_a_time_budget_ends_training_with_the_learning_rate_at_zero(runtime, tmp_path,
                                                                   monkeypatch):
    # A clock that moves only as training does (10 ms a step, 1 s to compile): the budget's
    # arithmetic whatever this machine's load.
    from bert_tf.training import budget, controller

    now = [1e9]
    for module in (controller, budget):
        monkeypatch.setattr(module.time, "time", lambda: now[0])
    runner_class = _runner_class()
    run_steps = runner_class.run_steps

    def timed(runner, num_steps, accumulation):
        result = run_steps(runner, num_steps, accumulation)
        now[0] += 0.01 * result.steps_run + (1.0 if not timed.called else 0.0)
        timed.called = True
        return result

    timed.called = False
    monkeypatch.setattr(runner_class, "run_steps", timed)
    model, optimizer = _build(runtime, budget=True)
    progress = []
    results = _train(runtime, model, optimizer, tmp_path, 1, time_budget_seconds=6.0,
                     start_time=now[0], on_progress=progress.append)
    # The budget's share, what the learning rate follows: from 0, rising, nearly 1 at the end
    # (it steps back a little when the first measured save is quicker than guessed).
    assert progress[0] == 0.0 and 0.9 < progress[-1] < 1.0
    assert all(b > a - 0.01 for a, b in zip(progress, progress[1:])), progress
    # 6 s: 1 s compiling, then 10 ms a step up to the reserve kept for the final save.
    assert 400 < results["step"] < 500 and 5.4 < results["seconds_spent"] <= 6.0, results
    rate = optimizer._learning_rate(results["step"])
    assert float(ops.convert_to_numpy(rate)) < 1e-4
