"""Scale and resilience of the training loop: accumulation, float16 loss scaling, XLA "auto"
(and its --jit_compile flag), SIGTERM preemption, and the non-chief copy of the best model."""

import dataclasses
import os
import signal
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training import precision
from bert_tf.training.checkpointing import CheckpointError
from bert_tf.training.distribute import get_strategy
from bert_tf.training.task_loop import BestModelKeeper
from bert_tf.training.controller import PREEMPTED_EXIT_CODE, TrainingPreempted, train
from bert_tf.training.loop_config import TrainLoopConfig
from bert_tf.training.runtime import on_tensorflow
from bert_tf.training.optimization import create_optimizer

_RNG = np.random.RandomState(0)
_X = _RNG.randn(128, 6).astype("float32")
_Y = (_X[:, 0] * _X[:, 1] > 0).astype("int32")


def _build(strategy, num_train_steps=40, seed=0):
    keras.utils.set_random_seed(seed)
    with strategy.scope():
        inputs = keras.Input((6,))
        hidden = keras.layers.Dense(16, activation="tanh", name="hidden")(inputs)
        hidden = keras.layers.LayerNormalization(name="layer_norm")(hidden)
        model = keras.Model(inputs, keras.layers.Dense(2, name="logits")(hidden))
        optimizer = create_optimizer(1e-2, num_train_steps, 4)
    return model, optimizer


def _dataset_fn(batch_size):
    """Rows in a fixed order: micro-batches of 4 concatenate to the batches of 16."""
    def dataset_fn(input_context):
        dataset = tf.data.Dataset.from_tensor_slices({"x": _X, "y": _Y}).repeat()
        return dataset.batch(batch_size, drop_remainder=True)
    return dataset_fn


def _loss_fn(model, batch, training):
    logits = tf.cast(model(batch["x"], training=training), tf.float32)
    nll = keras.losses.sparse_categorical_crossentropy(batch["y"], logits, from_logits=True)
    return {"loss": tf.reduce_mean(nll), "count": tf.cast(tf.size(nll), tf.float32)}


LOOP_FIELDS = {f.name for f in dataclasses.fields(TrainLoopConfig)}

def _train(model, optimizer, strategy, output_dir, num_train_steps, batch_size=16, **kwargs):
    settings = dict(steps_per_loop=5, save_checkpoints_steps=10, global_batch_size=batch_size)
    settings.update({k: kwargs.pop(k) for k in list(kwargs) if k in LOOP_FIELDS})
    return train(model=model, optimizer=optimizer, loss_fn=_loss_fn,
                 dataset_fn=_dataset_fn(batch_size), runtime=on_tensorflow(strategy),
                 output_dir=str(output_dir),
                 loop_config=TrainLoopConfig(num_train_steps, **settings), **kwargs)


def _weights(model):
    return [v.numpy() for v in model.weights]


def test_accumulated_micro_batches_equal_one_big_batch_and_resume(tmp_path):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    big = _train(model, optimizer, strategy, tmp_path / "big", 20)
    want = _weights(model)

    # 4 micro-batches of 4 per step; stopped at 10 and resumed (the input skips 10 x 4 batches).
    model, optimizer = _build(strategy)
    _train(model, optimizer, strategy, tmp_path / "accumulated", 10, batch_size=4,
           gradient_accumulation_steps=4)
    model, optimizer = _build(strategy, seed=7)
    accumulated = _train(model, optimizer, strategy, tmp_path / "accumulated", 20,
                         batch_size=4, gradient_accumulation_steps=4)
    assert accumulated["step"] == 20 and accumulated["steps_this_run"] == 10
    assert int(optimizer.iterations.numpy()) == 20
    for got, expected, variable in zip(_weights(model), want, model.weights):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=variable.path)
    # The mean loss over the last window's micro-batches is the big batches' mean loss.
    np.testing.assert_allclose(accumulated["loss"], big["loss"], rtol=1e-5)


def test_accumulation_steps_must_be_positive(tmp_path):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    with pytest.raises(ValueError, match=r"^--gradient_accumulation_steps=0 must be >= 1$"):
        _train(model, optimizer, strategy, tmp_path, 10, gradient_accumulation_steps=0)


def test_a_batch_size_ramp_rises_to_the_accumulation_count_at_its_share_of_training():
    config = TrainLoopConfig(100, gradient_accumulation_steps=4, batch_size_ramp=0.6)
    # 1 + 3 x fraction / 0.6, rounded down: the full 4 exactly at 60% of training.
    assert [config.accumulation_at(f) for f in (0.0, 0.19, 0.2, 0.45, 0.59, 0.6, 0.9, 1.0)] \
        == [1, 1, 2, 3, 3, 4, 4, 4]
    assert TrainLoopConfig(100, gradient_accumulation_steps=4).accumulation_at(0.0) == 4


@pytest.mark.parametrize("settings, message", [
    (dict(gradient_accumulation_steps=4, batch_size_ramp=0.0),
     "--batch_size_ramp=0.0 must be in (0, 1]: the share of training over which the batch "
     "grows"),
    (dict(gradient_accumulation_steps=4, batch_size_ramp=1.5),
     "--batch_size_ramp=1.5 must be in (0, 1]: the share of training over which the batch "
     "grows"),
    (dict(batch_size_ramp=0.5),
     "--batch_size_ramp=0.5 grows the batch from --train_batch_size to --train_batch_size x "
     "--gradient_accumulation_steps: set --gradient_accumulation_steps >= 2 (it is 1)"),
])
def test_a_batch_size_ramp_needs_a_share_and_a_larger_batch(settings, message):
    with pytest.raises(ValueError) as raised:
        TrainLoopConfig(100, **settings)
    assert str(raised.value) == message


@pytest.fixture
def float16_policy():
    keras.mixed_precision.set_global_policy("mixed_float16")
    yield
    keras.mixed_precision.set_global_policy("float32")


def test_float16_skips_overflowing_steps_and_counts_them(tmp_path, float16_policy):
    strategy = get_strategy("one_device")
    model, inner = _build(strategy, num_train_steps=60)
    assert precision.computes_in_float16(model)
    start = _weights(model)
    with strategy.scope():
        # 2**40 x the loss overflows float16 in the backward pass: the scale must halve ~25 times.
        optimizer = precision.DynamicLossScaleOptimizer(inner, initial_scale=2.0 ** 40)
    first = _train(model, optimizer, strategy, tmp_path, 1, steps_per_loop=1)
    assert first["step"] == 1 and int(optimizer.iterations.numpy()) == 1
    assert float(optimizer.dynamic_scale.numpy()) == 2.0 ** 39
    for got, expected in zip(_weights(model), start):
        np.testing.assert_array_equal(got, expected)  # the step was skipped

    results = _train(model, optimizer, strategy, tmp_path, 60)
    assert results["step"] == 60 and int(optimizer.iterations.numpy()) == 60
    assert float(optimizer.dynamic_scale.numpy()) <= 2.0 ** 20
    assert np.isfinite(results["loss"]) and results["loss"] < results["first_log"]["loss"]
    assert all(np.isfinite(w).all() for w in _weights(model))
    assert any(not np.array_equal(a, b) for a, b in zip(_weights(model), start))


def test_float16_models_get_a_loss_scale_in_their_checkpoints(tmp_path, float16_policy):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    _train(model, optimizer, strategy, tmp_path, 10)
    names = [name for name, _ in tf.train.list_variables(str(tmp_path / "ckpt-10"))]
    assert any(name.startswith("optimizer/dynamic_scale") for name in names), names
    assert int(optimizer.iterations.numpy()) == 10
    with strategy.scope():
        keras_lso = keras.optimizers.LossScaleOptimizer(optimizer)
    with pytest.raises(ValueError, match="not a keras LossScaleOptimizer"):
        _train(model, keras_lso, strategy, tmp_path / "keras_lso", 10)


def _cpuinfo(tmp_path, vendor, flags, name="Some CPU"):
    path = tmp_path / f"cpuinfo-{vendor}-{len(flags)}"
    path.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: 26\n"
                    f"model name\t: {name}\nflags\t\t: {flags}\n\nprocessor\t: 1\n"
                    "vendor_id\t: other\n")
    return str(path)


# The CPU types of docs/benchmarks.md, each with what "auto" picks: dtype for fixed-shape
# batches, dtype for length buckets, XLA under that dtype.
@pytest.mark.parametrize("vendor, flags, kind, dtype, varying_dtype, xla", [
    ("AuthenticAMD", "avx2 avx512f avx512_bf16 avx512_vnni", "amd_avx512_bf16",
     "mixed_bfloat16", "mixed_bfloat16", False),
    ("GenuineIntel", "avx2 avx512f avx512_bf16", "intel_avx512_bf16", "mixed_bfloat16",
     "float32", True),
    ("GenuineIntel", "avx2 avx512f avx512_bf16 amx_bf16 amx_tile", "amx", "mixed_bfloat16",
     "mixed_bfloat16", False),
    ("AuthenticAMD", "avx2 fma", "avx2", "float32", "float32", False),
    ("GenuineIntel", "avx2 avx512f avx512bw", "avx512", "float32", "float32", False),
])
def test_auto_choices_follow_the_cpu_type(tmp_path, vendor, flags, kind, dtype, varying_dtype,
                                          xla):
    strategy = get_strategy("one_device")
    path = _cpuinfo(tmp_path, vendor, flags)
    info = precision.cpu_info(path)
    assert (info.kind, info.vendor, info.family, info.model_name) == (kind, vendor, 26,
                                                                      "Some CPU")
    assert precision.resolve_dtype("auto", strategy, path) == dtype
    assert precision.resolve_dtype("auto", strategy, path, varying_shapes=True) == varying_dtype
    assert precision.resolve_jit_compile("auto", strategy, dtype, path) is xla
    # Length buckets never get XLA from "auto"; float32 gets it on no CPU type measured.
    assert precision.resolve_jit_compile("auto", strategy, dtype, path,
                                         varying_shapes=True) is False
    assert precision.resolve_jit_compile("auto", strategy, "float32", path) is False
    assert precision.resolve_jit_compile("true", strategy, "float32", path) is True


def test_emulated_bfloat16_is_kept_and_logged_once(tmp_path, monkeypatch):
    from absl import logging

    strategy = get_strategy("one_device")
    path = _cpuinfo(tmp_path, "AuthenticAMD", "avx2 fma", name="AMD EPYC 7B13")
    warnings = []
    monkeypatch.setattr(logging, "warning", lambda *args: warnings.append(args[0] % args[1:]))
    monkeypatch.setattr(precision, "_warned_emulated", [])
    for _ in range(2):
        assert precision.resolve_dtype("mixed_bfloat16", strategy, path) == "mixed_bfloat16"
    assert warnings == ["--dtype=mixed_bfloat16 on a CPU without native bfloat16 (AMD EPYC "
                        "7B13: no AVX512_BF16 or AMX): bfloat16 is emulated and slower than "
                        "float32 here; --dtype=auto picks float32"]
    native = _cpuinfo(tmp_path, "AuthenticAMD", "avx512f avx512_bf16")
    monkeypatch.setattr(precision, "_warned_emulated", [])
    assert precision.resolve_dtype("mixed_bfloat16", strategy, native) == "mixed_bfloat16"
    assert len(warnings) == 1


def test_xla_failure_names_the_op_in_one_line():
    @tf.function(jit_compile=True)
    def step(x):
        return tf.strings.length(tf.strings.as_string(x))

    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        step(tf.constant([1.0]))
    assert precision.unsupported_xla_op(raised.value)[::2] == ("AsString", "XLA_CPU_JIT")
    assert precision.xla_fallback_message(raised.value) == (
        "--jit_compile=true: XLA cannot compile op AsString on XLA_CPU_JIT; training continues "
        "without XLA")
    assert precision.xla_fallback_message(ValueError("shapes differ")) is None


def test_jit_compile_values():
    strategy = get_strategy("one_device")
    assert precision.resolve_jit_compile("auto", strategy, "float32") is False  # CPU
    assert precision.resolve_jit_compile("true", strategy) is True
    assert precision.resolve_jit_compile(False, strategy) is False
    assert precision.parse_jit_compile("Auto") == "auto"
    with pytest.raises(ValueError, match=r"--jit_compile='sometimes'; expected one of true, "
                                         r"false, auto"):
        precision.parse_jit_compile("sometimes")


@pytest.mark.parametrize("cpu_flags, expected", [
    ("fpu sse avx2 fma avx512f avx512_bf16 amx_tile", "mixed_bfloat16"),
    ("fpu sse avx2 fma amx_bf16 amx_tile", "mixed_bfloat16"),
    ("fpu sse avx2 fma avx512f avx512bw", "float32"),  # AVX512 without bf16: emulated
    (None, "float32"),  # no /proc/cpuinfo
])
def test_dtype_auto_follows_the_cpu(tmp_path, cpu_flags, expected):
    strategy = get_strategy("one_device")
    cpuinfo = tmp_path / "cpuinfo"
    if cpu_flags is not None:
        cpuinfo.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {cpu_flags}\n")
    assert precision.resolve_dtype("auto", strategy, str(cpuinfo)) == expected
    # An explicit dtype is kept whatever the CPU.
    assert precision.resolve_dtype("mixed_float16", strategy, str(cpuinfo)) == "mixed_float16"


def test_dtype_auto_sets_the_policy_named_in_the_log():
    strategy = get_strategy("one_device")
    try:
        dtype = on_tensorflow(strategy).set_precision("auto")
        assert dtype == precision.resolve_dtype("auto", strategy)
        assert keras.mixed_precision.global_policy().name == dtype
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_sigterm_mid_call_saves_that_step_and_resume_matches(tmp_path):
    """SIGTERM while a 10^6-step call runs: the loop stops within a step, saves, raises."""
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy, num_train_steps=10**6)
    previous = signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        with pytest.raises(TrainingPreempted) as preempted:
            _train(model, optimizer, strategy, tmp_path / "run", 10**6, steps_per_loop=10**6,
                   save_checkpoints_steps=10**6)
    finally:
        timer.cancel()
    stopped = preempted.value.step
    assert preempted.value.code == PREEMPTED_EXIT_CODE == 143
    assert 0 < stopped < 10**6 and int(optimizer.iterations.numpy()) == stopped
    assert preempted.value.checkpoint == str(tmp_path / "run" / f"ckpt-{stopped}")
    assert tf.train.latest_checkpoint(str(tmp_path / "run")) == preempted.value.checkpoint
    assert signal.getsignal(signal.SIGTERM) is previous

    # Resumed for 7 more steps, it ends where an uninterrupted run of stopped + 7 steps ends.
    model, optimizer = _build(strategy, num_train_steps=10**6, seed=3)
    resumed = _train(model, optimizer, strategy, tmp_path / "run", stopped + 7,
                     save_checkpoints_steps=10**6)
    assert resumed["steps_this_run"] == 7
    got = _weights(model)
    model, optimizer = _build(strategy, num_train_steps=10**6)
    _train(model, optimizer, strategy, tmp_path / "straight", stopped + 7,
           steps_per_loop=50, save_checkpoints_steps=10**6)
    for a, b in zip(got, _weights(model)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_non_chief_keeps_its_own_best_copy(tmp_path):
    strategy = get_strategy("one_device")
    model, _ = _build(strategy)
    chief = BestModelKeeper(model, str(tmp_path), "accuracy")
    assert chief.update(5, {"accuracy": 0.5})
    chief_weights = _weights(model)

    # A restarted non-chief knows the chief's earlier best, writes nothing to best/, and keeps
    # its own copy of a newer best in its worker directory.
    model.weights[0].assign(model.weights[0] + 1.0)
    worker_dir = tmp_path / ".worker_tmp" / "worker_1_best"
    worker = BestModelKeeper(model, str(tmp_path), "accuracy", write=False,
                             worker_dir=str(worker_dir))
    assert worker.best["step"] == 5 and not worker.update(6, {"accuracy": 0.4})
    assert worker.update(7, {"accuracy": 0.9})
    assert (worker_dir / "metrics.json").exists()
    assert not (tmp_path / "best" / "model-7.index").exists()
    newer = _weights(model)
    model.weights[0].assign(model.weights[0] * 0.0)
    assert worker.restore()["step"] == 7
    np.testing.assert_array_equal(_weights(model)[0], newer[0])

    # Without a newer best of its own, it restores the chief's.
    other = BestModelKeeper(model, str(tmp_path), "accuracy", write=False,
                            worker_dir=str(tmp_path / "unused"))
    assert other.restore()["step"] == 5
    np.testing.assert_array_equal(_weights(model)[0], chief_weights[0])


@pytest.mark.parametrize("argv, value, serialized", [
    ([], "auto", "--jit_compile=auto"),
    (["--jit_compile"], True, "--jit_compile=true"),
    (["--nojit_compile"], False, "--jit_compile=false"),
    (["--jit_compile=auto"], "auto", "--jit_compile=auto"),
    (["--jit_compile=False"], False, "--jit_compile=false"),
])
def test_jit_compile_flag_round_trips_through_a_flagfile(argv, value, serialized):
    # A bare --jit_compile written for "auto" would read back as true.
    from absl import flags
    from bert_tf.cli import flags as cli_flags
    flag_values = flags.FlagValues()
    cli_flags.define_runtime_flags(flag_values)
    flag_values(["prog", *argv])
    assert flag_values.jit_compile == value
    assert flag_values["jit_compile"].serialize() == serialized


def test_resuming_across_float16_and_other_dtypes_names_the_flag(tmp_path, float16_policy):
    strategy = get_strategy("one_device")
    model, optimizer = _build(strategy)
    _train(model, optimizer, strategy, tmp_path, 5, steps_per_loop=5)
    keras.mixed_precision.set_global_policy("float32")
    model, optimizer = _build(strategy)
    with pytest.raises(CheckpointError) as error:
        _train(model, optimizer, strategy, tmp_path, 10, steps_per_loop=5)
    assert str(error.value) == (
        f"{tmp_path}/ckpt-5 was written by a run with float16 loss scaling, but this run does "
        "not compute in float16: resume with the --dtype the run started with")
