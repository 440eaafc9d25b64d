"""Training checkpoints: step-exact resume with fallback, and warm starts from saved weights.

A training checkpoint is a `tf.train.Checkpoint(model=..., optimizer=..., rng=...)` kept by a
`tf.train.CheckpointManager`; `rng` holds the states of the model's Keras random generators
(dropout), so a resumed step draws the masks an uninterrupted run would (see random_state).
TensorFlow writes a checkpoint's data and index files first and only then rewrites the small
`checkpoint` state file (itself via write-to-temp + rename), so a crash mid-save leaves the
state file pointing at the previous, complete checkpoint.
"""

import os
import shutil
import socket
import tempfile

import keras
import tensorflow as tf
from absl import logging

from bert_tf import file_names, fileio
from bert_tf.run_directory import checkpoints as run_checkpoints
# Raised by every checkpoint reader, on either backend (defined where JAX runs find it).
from bert_tf.training.step_runner import CheckpointError, none_restored, save_failed  # noqa: F401

# Variables of an original google-research/bert (TF1) checkpoint start with these scopes.
_TF1_BERT_PREFIXES = ("bert/", "cls/predictions/", "cls/seq_relationship/")
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def check_writable_dir(path, flag="--output_dir"):
    """Creates `path` if needed and proves a file can be written there; raises a clear error."""
    try:
        tf.io.gfile.makedirs(path)
        if not fileio.is_remote(path):
            # A new name of its own (O_EXCL): never a file or link already there.
            fd, probe = tempfile.mkstemp(dir=path, prefix=".bert_tf_write_probe-")
            os.close(fd)
            os.remove(probe)
            return
        # Per process: the workers of a multi-worker run probe the same directory at once.
        probe = os.path.join(path, f".bert_tf_write_probe-{socket.gethostname()}-{os.getpid()}")
        with tf.io.gfile.GFile(probe, "w") as f:
            f.write("ok")
        tf.io.gfile.remove(probe)
    except (tf.errors.OpError, OSError) as e:
        raise CheckpointError(f"{flag}={path} is not a writable directory: {e}") from None


def random_state(model):
    """The states of every Keras random generator in `model`, as one trackable.

    Each Keras 3 Dropout (and any layer drawing random numbers with a
    keras.random.SeedGenerator) holds a state variable [seed, counter] (int64 [2]) that every
    call advances; it is not among the model's weights, so tf.train.Checkpoint(model=...) does
    not save it and a resumed run would redraw the masks of the steps it already trained.
    Generators are keyed by their order in the model (creation order), which is the same in
    every process building the same model; auto-generated names are not (they count the
    generators created earlier in the process).

    Returns:
      A tf.train.Checkpoint with children generator_0, generator_1, ..., to add to the
      training checkpoint as `rng`; None for a model without random generators.
    """
    states, seen = {}, set()
    for layer in model._flatten_layers(include_self=True, recursive=True):
        for generator in getattr(layer, "_seed_generators", ()):
            if id(generator) not in seen:
                seen.add(id(generator))
                states[f"generator_{len(states)}"] = generator.state
    return tf.train.Checkpoint(**states) if states else None


def has_random_state(path):
    """True when the checkpoint at `path` holds random-generator states (written by train()
    since exact resume with dropout); older checkpoints hold model and optimizer only."""
    try:
        return any(name.startswith("rng/") for name, _ in tf.train.list_variables(path))
    except (tf.errors.OpError, ValueError):
        return True  # unreadable: the restore reports it


def save(manager, step):
    """manager.save(checkpoint_number=step), or a CheckpointError that says nothing was lost.

    A failed save (disk full, quota, permissions) leaves the previous checkpoint and the state
    file pointing at it intact (TensorFlow writes shards to a temporary directory and the state
    file by rename); the partial files of `step` are removed so that their space is free again.
    """
    try:
        return manager.save(checkpoint_number=step)
    except (tf.errors.OpError, OSError) as e:
        prefix = os.path.join(manager.directory, file_names.checkpoint_name(step))
        for path in tf.io.gfile.glob(prefix + "_temp") + tf.io.gfile.glob(prefix + ".*"):
            try:
                if tf.io.gfile.isdir(path):
                    tf.io.gfile.rmtree(path)
                else:
                    tf.io.gfile.remove(path)
            except (tf.errors.OpError, OSError):
                pass
        raise save_failed(step, manager.directory, fileio.failure_reason(e),
                          manager.latest_checkpoint) from None


def restore_latest(manager, checkpoint, without_rng=None, validate=None):
    """Restores the newest readable checkpoint of `manager` into `checkpoint`.

    A checkpoint that fails to restore (truncated or corrupt data, missing shard) is logged and
    skipped in favour of the one before it. If the `checkpoint` state file is missing or corrupt
    the ckpt-<n> files in the directory are used instead of starting afresh.

    Args:
      manager: a tf.train.CheckpointManager.
      checkpoint: the tf.train.Checkpoint to restore into (the manager's).
      without_rng: the same checkpoint without its `rng` child, used (with a warning) for a
        checkpoint written before random states were saved.
      validate: optional `() -> reason or None` run after a restore (e.g. "weights are not
        finite"): a reason skips that checkpoint like an unreadable one.

    Returns:
      The path restored, or None when there is no usable checkpoint (a fresh start).
    """
    candidates = list(manager.checkpoints)
    if not candidates:
        candidates = run_checkpoints.checkpoint_prefixes(manager.directory)
        if candidates:
            logging.warning("The `checkpoint` state file in %s is missing or unreadable; "
                            "resuming from the checkpoint files found there (%s).",
                            manager.directory, ", ".join(candidates))
    for path in reversed(candidates):
        target = checkpoint
        if without_rng is not None and not has_random_state(path):
            logging.warning("%s holds no random-generator states (written by an older "
                            "bert_tf): dropout masks after this resume differ from an "
                            "uninterrupted run's", path)
            target = without_rng
        try:
            # Every object of `target` must be restored; values the checkpoint holds beyond
            # them (the optimizer's, when an evaluation restores the model alone) are expected,
            # not one warning per variable (also when the check fails: the status, deleted
            # later, would print them).
            target.restore(path).expect_partial().assert_existing_objects_matched()
        except (tf.errors.OpError, ValueError, AssertionError, IndexError) as e:
            # IndexError: the checkpoint reader's "Read less bytes than requested" (truncated).
            _expect_partial_restore(e)
            reason = str(e).splitlines()[0][:300] if str(e) else ""
            logging.warning("Checkpoint %s cannot be restored (%s: %s); falling back to the "
                            "previous checkpoint.", path, type(e).__name__, reason)
            continue
        problem = validate() if validate is not None else None
        if problem:
            logging.warning("Checkpoint %s cannot be restored (%s); falling back to the "
                            "previous checkpoint.", path, problem)
            continue
        logging.info("Restored training state from %s", path)
        return path
    if candidates:
        raise none_restored(manager.directory, candidates)
    return None


def _expect_partial_restore(error):
    """Silences the restore that raised `error` part-way, as expect_partial() silences the
    ones that return: TensorFlow's restore coordinator, freed later, would log each value of
    the skipped checkpoint the target lacks (`run_state/...`, which is read apart) as "deleted
    with unrestored values", which reads as if the fallback's run state were lost."""
    tb = error.__traceback__
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if type(value).__name__ == "_CheckpointRestoreCoordinator":
                value.expect_partial = True
        tb = tb.tb_next


def is_tf1_bert_checkpoint(path):
    """True when `path` is a name-based (TF1) checkpoint with original BERT variable names."""
    try:
        names = [name for name, _ in fileio.list_checkpoint_variables(path)]
    except (tf.errors.OpError, ValueError):
        return False
    if _OBJECT_GRAPH_KEY in names:
        return False
    return any(name.startswith(_TF1_BERT_PREFIXES) for name in names)


def warm_start(init_checkpoint, model, checkpoint_key="model"):
    """Loads weights (only) into `model` from a Keras file or a tf.train.Checkpoint.

    Args:
      init_checkpoint: a `.keras` or `.weights.h5` file, or the prefix/directory of a
        tf.train.Checkpoint that stored the model under `checkpoint_key` (as train() writes).
      model: the keras.Model (or any trackable) to load into.
      checkpoint_key: the attribute name the model was saved under in the checkpoint.

    Original TF1, Hugging Face and keras-hub checkpoints, and loading only the encoder of a
    different bert_tf model, are bert_tf.interop.warm_start's job (which the run_* CLIs use).

    Raises:
      CheckpointError: the path is missing, is an original TF1 BERT checkpoint (see
        bert_tf.interop.warm_start), or its variables do not match the model.
    """
    if init_checkpoint.endswith((".keras", ".weights.h5")):
        if not tf.io.gfile.exists(init_checkpoint):
            raise CheckpointError(f"--init_checkpoint={init_checkpoint}: no such file")
        try:
            model.load_weights(init_checkpoint)
        except (ValueError, OSError) as e:
            raise CheckpointError(
                f"--init_checkpoint={init_checkpoint} does not fit the model: {e}") from None
        logging.info("Warm-started %s from %s", getattr(model, "name", "model"), init_checkpoint)
        return
    path = init_checkpoint
    if fileio.isdir(path):
        path = tf.train.latest_checkpoint(path)
        if path is None:
            raise CheckpointError(f"--init_checkpoint={init_checkpoint}: directory holds no "
                                  "checkpoint (no `checkpoint` state file)")
    if not tf.io.gfile.exists(path + ".index"):
        raise CheckpointError(f"--init_checkpoint={init_checkpoint}: no checkpoint at {path} "
                              "(expected <prefix>.index, a .keras or a .weights.h5 file)")
    if is_tf1_bert_checkpoint(path):
        raise CheckpointError(
            f"--init_checkpoint={init_checkpoint} is an original TF1 BERT checkpoint "
            "(variables named bert/...); load it with bert_tf.interop.warm_start, which reads "
            "every checkpoint format")
    status = tf.train.Checkpoint(**{checkpoint_key: model}).restore(path).expect_partial()
    try:
        status.assert_existing_objects_matched()
    except AssertionError as e:
        raise CheckpointError(
            f"--init_checkpoint={init_checkpoint} does not match the model's variables: "
            f"{str(e).splitlines()[0][:500]}") from None
    logging.info("Warm-started %s from %s", getattr(model, "name", "model"), path)


def save_keras_model(model, path):
    """Saves `model` as a .keras file atomically (a temporary file, then moved into place)."""
    if fileio.is_remote(path):
        # Keras writes the zip piecewise; build it locally and upload the finished file.
        local = tempfile.mkdtemp(prefix="bert_tf_keras_")
        tmp = os.path.join(local, os.path.basename(path))
    else:
        local = None
        tmp = fileio.temp_file_beside(path)  # Keras writes into it, never through a link
    try:
        keras.saving.save_model(model, tmp)
        fileio.publish_file(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
        if local:
            shutil.rmtree(local, ignore_errors=True)
