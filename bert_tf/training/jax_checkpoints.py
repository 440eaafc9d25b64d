"""The JAX runner's checkpoints: ckpt-<step>.orbax directories of a run directory (run_directory
names them), written with Orbax, restored with fallback, rotated without touching what the run
did not write.

A checkpoint holds every model and optimizer variable (item "state": the arrays as they lie on
the devices, written by Orbax shard by shard, replicated arrays once, every process taking part)
and a small JSON item ("meta": each variable's path and shape, and the run's clock,
step_runner.RUN_STATE_KEYS). Orbax writes into a temporary directory and renames it when every
process is done, so a checkpoint is whole or absent; nothing gathers the model into one host
buffer. A save that fails (a full disk) removes that directory and raises, in one line, the
error a TensorFlow run's failed save raises (step_runner.save_failed). A run directory of
bert_tf before Orbax holds ckpt-<step>.npz files: they are still read (the run then goes on
with Orbax checkpoints).

Reading: the newest checkpoint that can be read, holds exactly this run's variables with their
shapes and finite weights is restored; each one skipped is named in one warning line with the
reason. When checkpoints exist and none can be used the resume is refused (a fresh start would
replace the run's result with a new model).

Lineage: the run keeps its newest `max_to_keep` checkpoints among those it wrote and the one it
resumed from with those before it. A checkpoint it skipped as unreadable is never deleted; when
the run reaches that step again, the unreadable one is moved aside (`<name>.unreadable`) and
kept.
"""

import contextlib
import gc
import io
import logging as logging_std
import os
import re
import shutil
import sys
import types
import zipfile

import keras
import numpy as np
from absl import logging

from bert_tf import file_names, fileio, optional
from bert_tf.run_directory import checkpoints as run_checkpoints
from bert_tf.training.step_runner import RUN_STATE_KEYS, none_restored, save_failed

_RUN_STATE_PREFIX = "run_state/"
# In the name of Orbax's temporary directory of a save in progress.
_UNFINISHED = ".orbax-checkpoint-tmp"
FORMAT = "bert_tf jax checkpoint 1"
# What reading a damaged checkpoint raises: a truncated zip, a member that is no array, an
# Orbax directory with a missing or damaged part (Orbax and tensorstore raise ValueError,
# FileNotFoundError, KeyError or their own errors, which derive from these).
_READ_ERRORS = (OSError, ValueError, EOFError, KeyError, TypeError, zipfile.BadZipFile)


def _ocp():
    return optional.require("orbax.checkpoint")


def _keyed(model, optimizer):
    """(group, index, variable) of every variable a checkpoint holds, in a stable order (the
    model's alone when `optimizer` is None: an evaluation)."""
    return ([("model", i, v) for i, v in enumerate(model.variables)]
            + [("optimizer", i, v) for i, v in enumerate(
                optimizer.variables if optimizer is not None else ())])


def _canonical(group, path):
    """A variable's path as it matches across processes and rebuilds: Keras numbers the layers,
    optimizers and seed generators a process creates after the first of a name ("adam_1/...",
    "seed_generator_3/..."), so names count without their number; the variables' order and
    shapes are compared as well."""
    del group
    return "/".join(re.sub(r"_[0-9]+$", "", part) for part in path.split("/"))


class Checkpointer:
    """Saves and restores the JAX runner's checkpoints in `directory`, keeping `max_to_keep`;
    every process calls save (Orbax coordinates them), only the `writer` (process 0) removes
    old checkpoints.

    Attributes:
      last_good: the newest checkpoint this run saved or restored (finite weights), or None.
    """

    def __init__(self, directory, max_to_keep=5, writer=True):
        self.directory = directory
        self.max_to_keep = max_to_keep
        self.writer = writer
        self.last_good = None
        self._lineage = set()
        self._skipped = set()

    def restore(self, model, optimizer=None):
        """Loads the newest usable checkpoint into the model and the optimizer (the model alone
        when it is None); (its path, its run state), or (None, {}).

        Raises:
          CheckpointError: checkpoints exist and none can be used.
        """
        if self.writer:
            self._remove_unfinished()
        steps = run_checkpoints.jax_checkpoint_steps(self.directory)
        keyed = _keyed(model, optimizer)
        for step in reversed(steps):
            path = run_checkpoints.jax_checkpoint_file(self.directory, step)
            arrays, run_state, problem = _read(path, keyed)
            if problem is None:
                problem = _nonfinite(arrays, keyed)
            if problem is not None:
                logging.warning("Checkpoint %s cannot be restored (%s); falling back to the "
                                "previous checkpoint.", path, problem)
                self._skipped.add(step)
                continue
            for (_, _, variable), array in zip(keyed, arrays):
                variable.assign(array)
            logging.info("Restored training state from %s", path)
            self.last_good = path
            self._lineage = {s for s in steps if s <= step}
            return path, run_state
        if steps:
            raise none_restored(self.directory, [run_checkpoints.jax_checkpoint_file(
                self.directory, step) for step in steps])
        return None, {}

    def save(self, model, optimizer, step, run_state, values=None):
        """Writes ckpt-<step>.orbax (every process; each returns its path) and removes the
        run's own checkpoints beyond the newest max_to_keep.

        Args:
          model, optimizer: whose variables are saved.
          step: the global step.
          run_state: the run's clock (RUN_STATE_KEYS).
          values: {id(variable): array} of the values to save where they differ from the
            variables' own (the compiled loop's state on the devices); None: the variables'.
        """
        ocp = _ocp()
        path = file_names.path(self.directory,
                               file_names.checkpoint_name(step, file_names.JAX_CHECKPOINT_SUFFIX))
        if step in self._skipped and fileio.exists(path):
            if self.writer:
                aside = path + ".unreadable"
                fileio.rename(path, aside)
                logging.warning("Moved the unreadable %s aside to %s (kept)", path, aside)
            self._skipped.discard(step)
        keyed = _keyed(model, optimizer)
        values = values or {}
        state = {group: [values.get(id(v), v.value) if keras.backend.backend() == "jax"
                         else np.asarray(v.value) for g, _, v in keyed if g == group]
                 for group in ("model", "optimizer")}
        meta = {"format": FORMAT,
                "run_state": {key: float(run_state.get(key, 0.0)) for key in RUN_STATE_KEYS},
                "variables": [[group, v.path, list(v.shape),
                               keras.backend.standardize_dtype(v.dtype)] for group, _, v in keyed]}
        error = None
        # Kept past the save only if it fails: its writes in flight report after it raised.
        stop_dropping = _drop_closed_loop_tracebacks()
        with _held_orbax_errors() as held:
            try:
                with _checkpointer() as checkpointer:
                    checkpointer.save(_orbax_path(path), args=ocp.args.Composite(
                        state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)))
            except (OSError, ValueError) as e:
                error = e
        if error is not None and _storage_failure(error):
            _close_abandoned_writes()
            if self.writer:
                self._remove_unfinished(step)
            raise save_failed(step, self.directory, fileio.failure_reason(error), self.last_good)
        held.release()
        if error is not None:
            raise error  # not the storage's: as Orbax raised it
        stop_dropping()
        self._lineage.add(step)
        if self.writer:
            for old in sorted(s for s in self._lineage if s != step)[:-self.max_to_keep + 1
                                                                       or None]:
                self._remove(old)
            logging.info("Saved checkpoint for step %d to %s", step, path)
        self.last_good = path
        return path

    def _remove_unfinished(self, step=None):
        """Removes the temporary directories of saves a kill interrupted (Orbax writes
        ckpt-<step>.orbax.orbax-checkpoint-tmp-<n> and renames it when done), or `step`'s
        alone (a save that failed)."""
        if not fileio.isdir(self.directory):
            return
        prefix = (file_names.CHECKPOINT_PREFIX + "-" if step is None else
                  file_names.checkpoint_name(step, file_names.JAX_CHECKPOINT_SUFFIX) + ".")
        for name in fileio.listdir(self.directory):
            name = name.rstrip("/")
            if name.startswith(prefix) and _UNFINISHED in name:
                if step is None:
                    logging.info("Removing the unfinished checkpoint %s (a save that was "
                                 "interrupted)", name)
                _remove_tree(file_names.path(self.directory, name))

    def _remove(self, step):
        path = run_checkpoints.jax_checkpoint_file(self.directory, step)
        if fileio.isdir(path):
            _remove_tree(path)
        elif fileio.exists(path):
            fileio.remove(path)
        self._lineage.discard(step)


def _remove_tree(path):
    if fileio.is_remote(path):
        fileio.gfile().rmtree(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _read(path, keyed):
    """(arrays in `keyed` order, run state, None), or (None, None, the reason in a few words)
    when `path` cannot be read or does not hold these variables."""
    try:
        if path.endswith(file_names.JAX_NPZ_CHECKPOINT_SUFFIX):
            return _read_npz(path, keyed)
        return _read_orbax(path, keyed)
    except _READ_ERRORS as e:
        _drop_closed_loop_tracebacks()
        reason = str(e).splitlines()[0][:200] if str(e) else ""
        return None, None, f"not a readable checkpoint: {type(e).__name__}: {reason}"


def _storage_failure(error):
    """Whether `error`, raised by an Orbax save, is the storage's (a full disk, a quota,
    permissions): an OSError, or TensorStore's ValueError carrying an OS error
    (`[os_error_code='28']`, RESOURCE_EXHAUSTED). Any other is raised as it is."""
    return isinstance(error, OSError) or bool(
        re.search(r"os_error_code|RESOURCE_EXHAUSTED", str(error)))


def _drop_closed_loop_tracebacks():
    """After a failed Orbax read or save, TensorStore finishes the operations still in flight
    on its own threads and posts each result to the event loop Orbax has already closed: every
    one prints a traceback of `RuntimeError: Event loop is closed`, around the run's own error
    line, that says nothing about the checkpoint. Those tracebacks, and only those, are
    dropped from then on. Returns what stops dropping them (a save that succeeded: nothing
    failed, and another library's are not this one's to drop)."""
    previous = sys.unraisablehook
    if getattr(previous, "_drops_closed_loop_errors", False):
        return lambda: None

    def unraisablehook(unraisable):
        if unraisable.exc_type is RuntimeError and str(unraisable.exc_value) == (
                "Event loop is closed"):
            return
        previous(unraisable)

    unraisablehook._drops_closed_loop_errors = True
    sys.unraisablehook = unraisablehook

    def stop():
        if sys.unraisablehook is unraisablehook:
            sys.unraisablehook = previous

    return stop


def _close_abandoned_writes():
    """Closes the writes a failed Orbax save left suspended: TensorStore keeps their tasks,
    pending on an event loop already closed, and the interpreter finalizing them at exit
    printed a traceback for each (`ImportError: sys.meta_path is None`, a hundred of them
    after a full disk). Closed now, they end as any cancelled write does (bert_tf runs one
    Orbax operation at a time: none of them is another's)."""
    for value in gc.get_objects():
        if (isinstance(value, types.CoroutineType) and value.cr_frame is not None
                and not value.cr_running
                and f"{os.sep}orbax{os.sep}" in value.cr_code.co_filename):
            with contextlib.suppress(Exception):
                value.close()


class _HeldRecords(logging_std.Filter):
    """Holds back the error records Orbax logs while a save runs (each failed write of its
    threads, with a traceback): the save's own error says what failed in one line."""

    def __init__(self):
        super().__init__()
        self.records = []

    def filter(self, record):
        if record.levelno >= logging_std.ERROR and f"{os.sep}orbax{os.sep}" in record.pathname:
            self.records.append(record)
            return False
        return True

    def release(self):
        """Logs what was held (a save that succeeded after all)."""
        records, self.records = self.records, []
        for record in records:
            logging_std.getLogger(record.name).handle(record)


@contextlib.contextmanager
def _held_orbax_errors():
    held = _HeldRecords()
    logger = logging_std.getLogger("absl")  # Orbax logs through absl
    logger.addFilter(held)
    try:
        yield held
    finally:
        logger.removeFilter(held)


def _orbax_path(path):
    """`path` as Orbax takes it: a local path made absolute (Orbax refuses a relative one, as a
    relative --output_dir gives)."""
    return path if "://" in path else os.path.abspath(path)


def _checkpointer():
    """An Orbax checkpointer of the two items (state, meta); close it after use."""
    ocp = _ocp()
    return ocp.Checkpointer(ocp.CompositeCheckpointHandler())


def _read_meta(checkpointer, path):
    ocp = _ocp()
    return checkpointer.restore(_orbax_path(path),
                                args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta


def _read_orbax(path, keyed):
    ocp = _ocp()
    with _checkpointer() as checkpointer:
        meta = _read_meta(checkpointer, path)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            return None, None, f"not a bert_tf JAX checkpoint (its meta item is not {FORMAT!r})"
        model_only = not any(group == "optimizer" for group, _, _ in keyed)
        saved = [(group, _canonical(group, p), tuple(shape))
                 for group, p, shape, *_ in meta["variables"]
                 if not (model_only and group == "optimizer")]
        problem = _mismatch(saved, keyed)
        if problem is not None:
            return None, None, problem
        target = {group: [_abstract(v) for g, _, v in keyed if g == group]
                  for group in ("model", "optimizer")}
        if model_only:
            # Read on the host and dropped: Orbax restores the tree it was given whole.
            target["optimizer"] = [np.zeros(shape, dtype) for group, _, shape, dtype
                                   in meta["variables"] if group == "optimizer"]
        state = checkpointer.restore(_orbax_path(path), args=ocp.args.Composite(
            state=ocp.args.StandardRestore(target))).state
    arrays = list(state["model"]) + ([] if model_only else list(state["optimizer"]))
    return arrays, dict(meta.get("run_state") or {}), None


def _abstract(variable):
    """What Orbax restores a variable's array as: in place on its devices (JAX), else NumPy."""
    value = variable.value
    if keras.backend.backend() == "jax":
        import jax

        return jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=value.sharding)
    return np.zeros(variable.shape, keras.backend.standardize_dtype(variable.dtype))


def _read_npz(path, keyed):
    """A checkpoint of bert_tf before Orbax: one .npz of every variable keyed
    "<group>/<index>/<path>", and "run_state/<key>"."""
    with fileio.open_file(path, "rb") as f:
        with np.load(io.BytesIO(f.read())) as data:
            arrays = {key: data[key] for key in data.files}
    by_key, run_state = {}, {}
    for key, array in arrays.items():
        if key.startswith(_RUN_STATE_PREFIX):
            run_state[key[len(_RUN_STATE_PREFIX):]] = float(array)
            continue
        group, index, variable_path = key.split("/", 2)
        by_key[(group, int(index))] = (_canonical(group, variable_path), array)
    groups = {group for group, _, _ in keyed}
    saved = [(group, by_key[(group, index)][0], tuple(by_key[(group, index)][1].shape))
             for group, index in sorted(by_key, key=lambda k: (k[0] != "model", k[1]))
             if group in groups]
    problem = _mismatch(saved, keyed)
    if problem is not None:
        return None, None, problem
    return [by_key[(group, index)][1] for group, index, _ in keyed], run_state, None


def _mismatch(saved, keyed):
    """The difference between a checkpoint's variables ([(group, canonical path, shape)]) and
    this run's, in one line, or None."""
    expected = [(group, _canonical(group, v.path), tuple(v.shape)) for group, _, v in keyed]
    names_saved = {(g, p) for g, p, _ in saved}
    names_expected = {(g, p) for g, p, _ in expected}
    if [(g, p) for g, p, _ in saved] != [(g, p) for g, p, _ in expected]:
        missing = sorted(f"{g}/{p}" for g, p in names_expected - names_saved)[:3]
        unknown = sorted(f"{g}/{p}" for g, p in names_saved - names_expected)[:3]
        return (f"it holds other variables than this run builds: not in it {missing}, only in "
                f"it {unknown}; it was written with other model or optimizer settings")
    for (group, name, shape), (_, _, wanted) in zip(saved, expected):
        if shape != wanted:
            return (f"{group}/{name} has shape {list(shape)} there and {list(wanted)} in this "
                    "run's model")
    return None


def _nonfinite(arrays, keyed):
    for (group, _, variable), array in zip(keyed, arrays):
        floating = "float" in keras.backend.standardize_dtype(array.dtype)
        # Checked where the array lies (on its devices under JAX).
        if group == "model" and floating and not bool(keras.ops.all(keras.ops.isfinite(array))):
            return f"its weights hold NaN/Inf (model/{variable.path})"
    return None


def newest_run_state(directory):
    """The run state (RUN_STATE_KEYS) of the newest readable checkpoint in `directory`; {}
    when none can be read or it holds none. Reads only the small part that holds it."""
    for step in reversed(run_checkpoints.jax_checkpoint_steps(directory)):
        path = run_checkpoints.jax_checkpoint_file(directory, step)
        try:
            if path.endswith(file_names.JAX_NPZ_CHECKPOINT_SUFFIX):
                with fileio.open_file(path, "rb") as f, np.load(io.BytesIO(f.read())) as data:
                    return {key: float(data[_RUN_STATE_PREFIX + key]) for key in RUN_STATE_KEYS
                            if _RUN_STATE_PREFIX + key in data.files}
            with _checkpointer() as checkpointer:
                return dict(_read_meta(checkpointer, path).get("run_state") or {})
        except _READ_ERRORS:
            continue
    return {}


def load_arrays(path):
    """Every variable a checkpoint holds as NumPy, keyed "<group>/<index>/<path>" (group
    "model" or "optimizer"); for inspection and comparisons, not for resuming.

    Raises:
      ValueError (or OSError): `path` is not a readable checkpoint.
    """
    if path.endswith(file_names.JAX_NPZ_CHECKPOINT_SUFFIX):
        with fileio.open_file(path, "rb") as f, np.load(io.BytesIO(f.read())) as data:
            return {key: data[key] for key in data.files if not key.startswith(_RUN_STATE_PREFIX)}
    ocp = _ocp()
    with _checkpointer() as checkpointer:
        variables = _read_meta(checkpointer, path)["variables"]
        # NumPy targets: read on this host whatever devices wrote it.
        target = {group: [np.zeros(shape, dtype) for g, _, shape, dtype in variables
                          if g == group] for group in ("model", "optimizer")}
        state = checkpointer.restore(_orbax_path(path), args=ocp.args.Composite(
            state=ocp.args.StandardRestore(target))).state
    arrays, index = {}, {"model": 0, "optimizer": 0}
    for group, variable_path, *_ in variables:
        arrays[f"{group}/{index[group]}/{variable_path}"] = np.asarray(
            state[group][index[group]])
        index[group] += 1
    return arrays
