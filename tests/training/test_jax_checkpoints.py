"""The JAX runner's checkpoints (Orbax): restore with fallback and one-line reasons, a refusal
when none can be used, rotation that keeps what the run did not write, the .npz checkpoints of
bert_tf before Orbax still read.

The checkpointer reads and writes Keras variables, so it runs here on the TensorFlow backend
(Orbax writing NumPy arrays); tests/test_run_pretraining_jax.py runs it inside JAX runs.
"""

import glob
import logging
import os
import sys

import keras
import numpy as np
import pytest

from bert_tf import run_directory
from bert_tf.training.jax_checkpoints import Checkpointer, load_arrays, newest_run_state
from bert_tf.training.step_runner import CheckpointError

# tensorstore's callbacks of a failed read may outlive the event loop Orbax closed: a pytest
# warning, nothing a user sees.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _model(seed=0, width=4):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(width, name="dense")(inputs))
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def _kernel(model):
    return model.get_layer("dense").kernel.numpy()


def _file(directory, step):
    return run_directory.jax_checkpoint_file(str(directory), step)


def _saved(tmp_path, steps, seed=0):
    """A run directory with checkpoints at `steps`, each of a different model (seed + step)."""
    checkpointer = Checkpointer(str(tmp_path), max_to_keep=10)
    kernels = {}
    for step in steps:
        model, optimizer = _model(seed + step)
        checkpointer.save(model, optimizer, step, {"seconds_spent": float(step)})
        kernels[step] = _kernel(model)
    return kernels


def test_restores_the_newest_checkpoint_and_its_run_state(tmp_path):
    kernels = _saved(tmp_path, [10, 20])
    model, optimizer = _model(99)
    path, state = Checkpointer(str(tmp_path)).restore(model, optimizer)
    assert path == _file(tmp_path, 20)
    np.testing.assert_array_equal(_kernel(model), kernels[20])
    assert state == {"seconds_spent": 20.0, "schedule_fraction": 0.0, "micro_batches": 0.0}
    assert newest_run_state(str(tmp_path))["seconds_spent"] == 20.0


def _damage(path):
    """Cuts every data file of an Orbax checkpoint in half (as a full disk or a bad copy)."""
    for name in glob.glob(os.path.join(path, "state", "**", "d", "*"), recursive=True):
        with open(name, "rb") as f:
            data = f.read()
        with open(name, "wb") as f:
            f.write(data[:len(data) // 2])


def _junk(path):
    """A directory named like a checkpoint that is none (a user's, or a copy gone wrong)."""
    os.makedirs(path)
    with open(os.path.join(path, "notes.txt"), "w") as f:
        f.write("junk")


def test_a_damaged_checkpoint_falls_back_to_the_one_before_in_one_line(tmp_path, caplog):
    kernels = _saved(tmp_path, [10, 20])
    newest = _file(tmp_path, 20)
    _damage(newest)
    model, optimizer = _model(99)
    with caplog.at_level(logging.WARNING):
        path, _ = Checkpointer(str(tmp_path)).restore(model, optimizer)
    assert path == _file(tmp_path, 10)
    np.testing.assert_array_equal(_kernel(model), kernels[10])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                and r.getMessage().startswith("Checkpoint ")]
    assert len(warnings) == 1 and "\n" not in warnings[0] and len(warnings[0]) < 500
    assert warnings[0].startswith(f"Checkpoint {newest} cannot be restored (not a readable "
                                  "checkpoint: ")
    assert warnings[0].endswith("; falling back to the previous checkpoint.")


def test_a_truncated_npz_of_an_older_bert_tf_falls_back_in_one_line(tmp_path, caplog):
    model, optimizer = _model(10)
    arrays = {f"{group}/{i}/{v.path}": v.numpy() for group, variables in (
        ("model", model.variables), ("optimizer", optimizer.variables))
        for i, v in enumerate(variables)}
    arrays["run_state/seconds_spent"] = np.float64(7.0)
    np.savez(tmp_path / "ckpt-10.npz", **arrays)
    np.savez(tmp_path / "ckpt-20.npz", **arrays)
    data = (tmp_path / "ckpt-20.npz").read_bytes()
    (tmp_path / "ckpt-20.npz").write_bytes(data[:len(data) // 2])
    restored, restored_optimizer = _model(99)
    with caplog.at_level(logging.WARNING):
        path, state = Checkpointer(str(tmp_path)).restore(restored, restored_optimizer)
    assert path == str(tmp_path / "ckpt-10.npz") and state == {"seconds_spent": 7.0}
    np.testing.assert_array_equal(_kernel(restored), _kernel(model))
    assert any(r.getMessage().startswith(f"Checkpoint {tmp_path}/ckpt-20.npz cannot be restored "
                                         "(not a readable checkpoint: BadZipFile: ")
               for r in caplog.records)


def test_a_checkpoint_of_another_shape_is_named_in_one_line_without_its_arrays(tmp_path,
                                                                               caplog):
    _saved(tmp_path, [10])
    model, optimizer = _model(0, width=5)
    with caplog.at_level(logging.WARNING), pytest.raises(CheckpointError) as error:
        Checkpointer(str(tmp_path)).restore(model, optimizer)
    # bert_tf's (absl's) only: TensorFlow's garbage collector may warn meanwhile about a
    # checkpoint object an earlier test in this process left.
    [warning] = [r.getMessage() for r in caplog.records
                 if r.levelno == logging.WARNING and r.name == "absl"]
    assert "model/dense/kernel has shape [3, 4] there and [3, 5] in this run's model" in warning
    assert len(warning) < 400
    assert str(error.value) == (
        f"none of the checkpoints in {tmp_path} could be restored ({_file(tmp_path, 10)}): the "
        "warnings above say why each was skipped; rerun with the settings of the run that wrote "
        "them to resume it, move them away to start afresh, or choose a new --output_dir")


def test_a_checkpoint_missing_a_variable_is_named(tmp_path, caplog):
    _saved(tmp_path, [10])
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4, name="dense")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2, name="head")(hidden))
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)
    with caplog.at_level(logging.WARNING), pytest.raises(CheckpointError):
        Checkpointer(str(tmp_path)).restore(model, optimizer)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "it holds other variables than this run builds: not in it ['model/head/bias', " \
        "'model/head/kernel'" in warning


def test_when_no_checkpoint_can_be_read_the_resume_is_refused(tmp_path):
    _saved(tmp_path, [10, 20])
    _damage(_file(tmp_path, 10))
    _damage(_file(tmp_path, 20))
    model, optimizer = _model(99)
    before = _kernel(model)
    with pytest.raises(CheckpointError, match=r"none of the checkpoints in .* could be "
                                              r"restored \(.*ckpt-10.orbax, .*ckpt-20.orbax\)"):
        Checkpointer(str(tmp_path)).restore(model, optimizer)
    np.testing.assert_array_equal(_kernel(model), before)


def test_a_checkpoint_with_nan_weights_is_skipped(tmp_path, caplog):
    kernels = _saved(tmp_path, [10])
    model, optimizer = _model(20)
    model.get_layer("dense").kernel.assign(np.full((3, 4), np.nan, "float32"))
    Checkpointer(str(tmp_path)).save(model, optimizer, 20, {})
    model, optimizer = _model(99)
    checkpointer = Checkpointer(str(tmp_path))
    with caplog.at_level(logging.WARNING):
        path, _ = checkpointer.restore(model, optimizer)
    assert path == _file(tmp_path, 10) == checkpointer.last_good
    np.testing.assert_array_equal(_kernel(model), kernels[10])
    assert any("its weights hold NaN/Inf (model/dense/kernel)" in r.getMessage()
               for r in caplog.records)


def test_rotation_keeps_unreadable_checkpoints_and_the_one_just_written(tmp_path):
    _saved(tmp_path, [10, 20, 30])
    # Two unreadable checkpoints above the newest readable one (not this run's to delete).
    for step in (40, 50):
        _junk(_file(tmp_path, step))
    model, optimizer = _model(99)
    checkpointer = Checkpointer(str(tmp_path), max_to_keep=2)
    path, _ = checkpointer.restore(model, optimizer)
    assert path == _file(tmp_path, 30)
    for step in (35, 40, 45):
        saved = checkpointer.save(model, optimizer, step, {})
        assert saved == _file(tmp_path, step)
        # The one just written is there and whole.
        np.testing.assert_array_equal(load_arrays(saved)["model/0/dense/kernel"], _kernel(model))
    # Kept: the newest two of the run's own (40 and 45) and the unreadable 50; the unreadable
    # 40 it wrote over was moved aside, not deleted.
    assert run_directory.jax_checkpoint_steps(str(tmp_path)) == [40, 45, 50]
    with open(os.path.join(_file(tmp_path, 40) + ".unreadable", "notes.txt")) as f:
        assert f.read() == "junk"
    assert os.listdir(_file(tmp_path, 50)) == ["notes.txt"]


def test_only_the_writer_removes_old_checkpoints(tmp_path):
    model, optimizer = _model(0)
    others = Checkpointer(str(tmp_path), max_to_keep=1, writer=False)
    for step in (10, 20):
        assert others.save(model, optimizer, step, {}) == _file(tmp_path, step)
    assert run_directory.jax_checkpoint_steps(str(tmp_path)) == [10, 20]


def test_a_full_disk_while_saving_is_one_line_and_loses_nothing(tmp_path, monkeypatch, caplog):
    import orbax.checkpoint as ocp

    hook = sys.unraisablehook
    monkeypatch.setattr(sys, "unraisablehook", hook)  # put back at the end
    kernels = _saved(tmp_path, [10])
    # A save that succeeds leaves the process's unraisable errors as they were.
    assert sys.unraisablehook is hook
    checkpointer = Checkpointer(str(tmp_path))
    checkpointer.restore(*_model(99))

    def full_disk(self, directory, *args, **kwargs):
        # What TensorStore raises (through Orbax) once a shard of the new checkpoint met a
        # full disk, and the error record Orbax's writing thread logs first.
        partial = os.path.join(str(directory) + ".orbax-checkpoint-tmp", "state")
        os.makedirs(partial)
        with open(os.path.join(partial, "shard"), "wb") as f:
            f.write(b"half")
        logging.getLogger("absl").handle(logging.makeLogRecord(dict(
            name="absl", levelno=logging.ERROR, levelname="ERROR",
            pathname=f"{os.sep}orbax{os.sep}checkpoint{os.sep}future.py",
            msg="_SignalingThread.run() raised an exception")))
        raise ValueError(f'RESOURCE_EXHAUSTED: Error writing "model.0/0" in OCDBT database at '
                         f'local file "{partial}/": Failed to write 857483 bytes to file 22: '
                         "No space left on device [os_error_code='28']")

    monkeypatch.setattr(ocp.Checkpointer, "save", full_disk)
    with caplog.at_level(logging.INFO), pytest.raises(CheckpointError) as error:
        checkpointer.save(*_model(20), 20, {})
    assert str(error.value) == (
        f"saving the checkpoint of step 20 in {tmp_path} failed (No space left on device); "
        f"nothing was lost: the previous checkpoint {_file(tmp_path, 10)} is intact. Free "
        "space (or fix the directory) and rerun the same command to resume")
    assert error.value.__context__ is None and error.value.__cause__ is None
    # The partial save is gone, Orbax's error record was not logged, and the run resumes.
    assert sorted(os.listdir(tmp_path)) == ["ckpt-10.orbax"]
    assert not [r for r in caplog.records if "raised an exception" in r.getMessage()]
    # The failed save's writes still in flight report to a closed event loop: not printed.
    assert getattr(sys.unraisablehook, "_drops_closed_loop_errors", False)
    monkeypatch.undo()
    model, optimizer = _model(99)
    assert Checkpointer(str(tmp_path)).restore(model, optimizer)[0] == _file(tmp_path, 10)
    np.testing.assert_array_equal(_kernel(model), kernels[10])


def test_a_save_failing_for_another_reason_raises_that_error(tmp_path, monkeypatch, caplog):
    """Every ValueError of Orbax's read as a full disk: `... failed (destination exists);
    nothing was lost ... Free space`."""
    import orbax.checkpoint as ocp

    raised = ValueError("Destination /x/ckpt-20.orbax already exists")

    def refused(self, directory, *args, **kwargs):
        logging.getLogger("absl").handle(logging.makeLogRecord(dict(
            name="absl", levelno=logging.ERROR, levelname="ERROR",
            pathname=f"{os.sep}orbax{os.sep}checkpoint{os.sep}checkpointer.py",
            msg="Orbax's own record")))
        raise raised

    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    monkeypatch.setattr(ocp.Checkpointer, "save", refused)
    with caplog.at_level(logging.INFO), pytest.raises(ValueError) as error:
        Checkpointer(str(tmp_path)).save(*_model(20), 20, {})
    assert error.value is raised
    # What Orbax logged meanwhile is logged, not held back.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        "Orbax's own record"]
