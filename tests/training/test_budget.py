"""Training to a time budget: the duration flag, the clock, the budget-shaped learning rate, and
the run controller stopping on time and continuing the same budget after a preemption."""

import os
import signal

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training import budget, controller, tf_runner
from bert_tf.training.budget import (BudgetClock, duration_flag_text, format_duration,
                                     parse_duration)
from bert_tf.training.controller import TrainingPreempted, train
from bert_tf.training.distribute import get_strategy
from bert_tf.training.loop_config import TrainLoopConfig
from bert_tf.training.optimization import (BudgetSchedule, WarmupLinearDecay,
                                           WarmupStableDecay, create_optimizer)
from bert_tf.training.runtime import on_tensorflow

_RNG = np.random.RandomState(0)
_X = _RNG.randn(128, 6).astype("float32")
_Y = (_X[:, 0] > 0).astype("int32")


@pytest.mark.parametrize("text, seconds", [("600s", 600.0), ("45m", 2700.0), ("24h", 86400.0),
                                           ("1h30m", 5400.0), ("1.5h", 5400.0),
                                           (" 2m30s ", 150.0), ("10M", 600.0)])
def test_durations_parse(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text, message", [
    ("10", "--time_budget='10' does not parse: expected a duration such as 600s, 45m, 24h or "
           "1h30m"),
    ("ten minutes", "--time_budget='ten minutes' does not parse: expected a duration such as "
                    "600s, 45m, 24h or 1h30m"),
    ("-5m", "--time_budget='-5m' does not parse: expected a duration such as 600s, 45m, 24h "
            "or 1h30m"),
    ("0s", "--time_budget='0s' must be more than zero: expected a duration such as 600s, 45m, "
           "24h or 1h30m"),
    ("5m1h", "--time_budget='5m1h' does not parse: expected a duration such as 600s, 45m, 24h "
             "or 1h30m (each unit once, hours before minutes before seconds)"),
    ("", "--time_budget='' does not parse: expected a duration such as 600s, 45m, 24h or "
         "1h30m"),
])
def test_bad_durations_are_refused_naming_the_flag_and_the_forms(text, message):
    with pytest.raises(ValueError) as error:
        parse_duration(text)
    assert str(error.value) == message


@pytest.mark.parametrize("seconds, text", [(45.0, "45s"), (60, "1m"), (2700, "45m"),
                                           (5400, "1h30m"), (86400, "24h"), (90.25, "1m30.25s"),
                                           (0.1, "0.1s")])
def test_durations_in_the_flags_form_parse_back(seconds, text):
    assert duration_flag_text(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds)


def test_format_duration():
    assert format_duration(3723.9) == "1h02m03s"
    assert format_duration(-4) == "0h00m00s"


def test_the_clock_moves_the_schedule_linearly_to_the_end_of_the_training_time():
    clock = BudgetClock(100.0, start_time=1000.0, reserve_seconds=10.0)
    clock.note_save(0.0)
    # 10 s of set-up, then training: 100 - 10 spent - 10 reserve = 80 s of training.
    clock.start_training(now=1010.0)
    assert clock.spent(now=1010.0) == 10.0 and clock.training_left(now=1010.0) == 80.0
    assert clock.fraction(now=1010.0) == 0.0
    assert clock.fraction(now=1050.0) == pytest.approx(0.5)
    assert clock.fraction_per_second(now=1050.0) == pytest.approx(1 / 80)
    assert clock.fraction(now=1090.0) == pytest.approx(1.0)
    assert clock.fraction(now=1200.0) == 1.0
    assert clock.state(now=1050.0) == {"seconds_spent": 50.0,
                                       "schedule_fraction": pytest.approx(0.5)}


def test_a_resumed_clock_continues_the_budget_and_the_schedule():
    # 60 s of a 100 s budget spent before, the schedule 0.6 done; this part's set-up takes 5 s.
    clock = BudgetClock(100.0, start_time=0.0, spent_before=60.0, fraction_before=0.6,
                        reserve_seconds=5.0)
    clock.note_save(0.0)
    clock.start_training(now=5.0)
    assert clock.spent(now=5.0) == 65.0 and clock.training_left(now=5.0) == 30.0
    assert clock.fraction(now=5.0) == pytest.approx(0.6)
    assert clock.fraction(now=20.0) == pytest.approx(0.8)
    assert clock.fraction(now=35.0) == pytest.approx(1.0)


def test_the_reserve_keeps_the_slowest_save_and_a_share_of_the_budget():
    clock = BudgetClock(1000.0, start_time=0.0, save_seconds=2.0)
    assert clock.reserve() == 10.0  # 1% of the budget beats the 2 s first guess
    clock.note_save(4.0)
    clock.note_save(2.0)
    clock.set_reserve(20.0)
    assert clock.reserve() == 24.0


def test_the_budget_schedule_has_the_step_schedules_shapes():
    steps = 200
    linear = WarmupLinearDecay(1e-3, steps, 20)
    wsd = WarmupStableDecay(1e-3, steps, 20, 40)
    by_budget = BudgetSchedule(1e-3, "linear", warmup_proportion=0.1)
    by_budget_wsd = BudgetSchedule(1e-3, "wsd", warmup_proportion=0.1, decay_proportion=0.2)
    for schedule in (by_budget, by_budget_wsd):
        schedule.set_anchor(step=0, fraction=0.0, fraction_per_step=1 / steps)
    # (Not exactly at a phase boundary, where float32 fractions may fall on either side.)
    for step in (0, 7, 19, 21, 100, 159, 161, 170, 199, 250):
        np.testing.assert_allclose(float(by_budget(step)), float(linear(step)), atol=1e-9)
        np.testing.assert_allclose(float(by_budget_wsd(step)), float(wsd(step)), atol=1e-9)


def test_the_budget_schedule_follows_its_anchor():
    schedule = BudgetSchedule(1.0, "linear", warmup_proportion=0.0)
    schedule.set_anchor(step=500, fraction=0.25, fraction_per_step=0.001)
    # 100 steps after the anchor: 0.25 + 0.1 of the budget spent.
    assert float(schedule(600)) == pytest.approx(1 - 0.35)
    assert float(schedule(5000)) == 0.0


def test_bad_budget_schedules_are_refused():
    with pytest.raises(ValueError, match=r"--warmup_proportion=1.0 must be in \[0, 1\)"):
        BudgetSchedule(1e-3, warmup_proportion=1.0)
    with pytest.raises(ValueError, match=r"--decay_proportion=0.95 must be in \(0, 1 - "
                                         r"--warmup_proportion = 0.9\]"):
        BudgetSchedule(1e-3, "wsd", warmup_proportion=0.1, decay_proportion=0.95)


def _build(strategy, seed=0):
    keras.utils.set_random_seed(seed)
    with strategy.scope():
        inputs = keras.Input((6,))
        hidden = keras.layers.Dense(16, activation="tanh")(inputs)
        model = keras.Model(inputs, keras.layers.Dense(2)(hidden))
        optimizer = create_optimizer(1e-2, 1, 0, budget_warmup_proportion=0.2)
    return model, optimizer


def _dataset_fn(input_context):
    dataset = tf.data.Dataset.from_tensor_slices({"x": _X, "y": _Y}).repeat()
    return dataset.batch(16, drop_remainder=True)


def _loss_fn(model, batch, training):
    logits = tf.cast(model(batch["x"], training=training), tf.float32)
    nll = keras.losses.sparse_categorical_crossentropy(batch["y"], logits, from_logits=True)
    return {"loss": tf.reduce_mean(nll)}


class _FakeTime:
    """A wall clock that moves only as training does: each step takes `step` seconds and a
    runner's first call also `compile` seconds (whatever this machine's load), so the budget's
    arithmetic is checked exactly."""

    def __init__(self, monkeypatch, step=0.01, compile=1.0):
        self.now, self.step, self.compile = 1e9, step, compile
        self.calls = 0
        for module in (controller, budget):
            monkeypatch.setattr(module.time, "time", lambda: self.now)
        run_steps = tf_runner.TensorFlowStepRunner.run_steps
        restore = tf_runner.TensorFlowStepRunner.restore

        def timed_run_steps(runner, num_steps, accumulation):
            result = run_steps(runner, num_steps, accumulation)
            self.now += result.steps_run * self.step + (self.compile if runner.first else 0.0)
            runner.first = False
            return result

        def timed_restore(runner):
            runner.first = True
            return restore(runner)

        monkeypatch.setattr(tf_runner.TensorFlowStepRunner, "run_steps", timed_run_steps)
        monkeypatch.setattr(tf_runner.TensorFlowStepRunner, "restore", timed_restore)


def _train(model, optimizer, strategy, output_dir, budget_seconds, **kwargs):
    return train(runtime=on_tensorflow(strategy), model=model, optimizer=optimizer,
                 loss_fn=_loss_fn, dataset_fn=_dataset_fn, output_dir=str(output_dir),
                 loop_config=TrainLoopConfig(num_train_steps=1, steps_per_loop=20,
                                             save_checkpoints_steps=10**6,
                                             time_budget_seconds=budget_seconds), **kwargs)


def test_training_stops_when_the_budget_is_spent_with_the_rate_at_zero(tmp_path, monkeypatch):
    clock = _FakeTime(monkeypatch, step=0.01, compile=1.0)
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    results = _train(model, optimizer, strategy, tmp_path, 6.0, start_time=clock.now)
    # 6 s: 1 s compiling, the rest at 10 ms a step but for the end's reserve (the final save).
    assert 400 < results["step"] < 500
    assert results["time_budget_seconds"] == 6.0
    assert 5.4 < results["seconds_spent"] <= 6.0
    # The rate fell to 0 with the budget, and the run's last checkpoint says so.
    assert float(tf.convert_to_tensor(optimizer.learning_rate)) < 0.01 * 1e-2
    state = tf_runner._read_run_state(tf.train.latest_checkpoint(str(tmp_path)))
    assert state == {"seconds_spent": results["seconds_spent"], "schedule_fraction": 1.0,
                     "micro_batches": results["step"]}

    # The run's budget is spent: resuming it trains nothing.
    model, optimizer = _build(strategy, seed=1)
    again = _train(model, optimizer, strategy, tmp_path, 6.0, start_time=clock.now)
    assert again["steps_this_run"] == 0 and again["step"] == results["step"]


def test_the_rate_warms_up_and_decays_over_the_budget(tmp_path, monkeypatch):
    clock = _FakeTime(monkeypatch, step=0.01, compile=0.0)
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    rates = []
    run_steps = tf_runner.TensorFlowStepRunner.run_steps

    def recording(runner, num_steps, accumulation):
        result = run_steps(runner, num_steps, accumulation)
        rates.append(float(tf.convert_to_tensor(optimizer.learning_rate)))
        return result

    monkeypatch.setattr(tf_runner.TensorFlowStepRunner, "run_steps", recording)
    _train(model, optimizer, strategy, tmp_path, 10.0, start_time=clock.now)
    peak = int(np.argmax(rates))
    # Warmup is 20% of the training time, then a linear decay to 0 at its end (the rate read
    # after each call of 20 steps).
    assert 0.15 < peak / len(rates) < 0.25 and max(rates) > 0.9 * 1e-2
    assert all(a <= b for a, b in zip(rates[:peak], rates[1:peak + 1]))
    assert all(a >= b for a, b in zip(rates[peak:], rates[peak + 1:]))
    assert rates[-1] < 0.01 * 1e-2


def test_a_preempted_budget_run_resumes_the_same_budget(tmp_path, monkeypatch):
    clock = _FakeTime(monkeypatch, step=0.01, compile=1.0)
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    run_steps = tf_runner.TensorFlowStepRunner.run_steps

    def sigterm_at_3s(runner, num_steps, accumulation):
        result = run_steps(runner, num_steps, accumulation)
        if clock.now >= 1e9 + 3.0 and not sigterm_at_3s.sent:
            sigterm_at_3s.sent = True
            os.kill(os.getpid(), signal.SIGTERM)
            result = run_steps(runner, 1, accumulation)  # the step in flight sees it
        return result

    sigterm_at_3s.sent = False
    monkeypatch.setattr(tf_runner.TensorFlowStepRunner, "run_steps", sigterm_at_3s)
    start = clock.now
    with pytest.raises(TrainingPreempted) as preempted:
        _train(model, optimizer, strategy, tmp_path, 8.0, start_time=start)
    state = tf_runner._read_run_state(preempted.value.checkpoint)
    assert 3.0 <= state["seconds_spent"] < 3.5
    assert 0.2 < state["schedule_fraction"] < 0.5
    rate_at_stop = float(tf.convert_to_tensor(optimizer.learning_rate))

    # An hour later the job is restarted: that hour is not the budget's.
    clock.now += 3600
    monkeypatch.setattr(tf_runner.TensorFlowStepRunner, "run_steps", run_steps)
    _FakeTime(monkeypatch, step=0.01, compile=1.0).now = clock.now
    model, optimizer = _build(strategy, seed=1)
    schedule = optimizer._learning_rate
    schedule.set_anchor(preempted.value.step, state["schedule_fraction"], 0.0)
    assert float(schedule(preempted.value.step)) == pytest.approx(rate_at_stop, rel=1e-5)
    resumed = _train(model, optimizer, strategy, tmp_path, 8.0, start_time=clock.now)
    assert resumed["step"] > preempted.value.step
    # Both parts together stay within the budget: the clock did not restart.
    assert 7.4 < resumed["seconds_spent"] <= 8.0
    assert resumed["seconds_spent"] - resumed["wall_time_seconds"] == pytest.approx(
        state["seconds_spent"])
