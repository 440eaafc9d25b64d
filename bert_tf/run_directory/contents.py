"""What a run directory holds and whether one can be written: its model file, the names that
mark a training run's directory, the results of runs that only evaluate, the writability probe,
the files written once training is done."""

import contextlib
import json
import os
import sys
import tempfile

from bert_tf import fileio
from bert_tf.file_names import (BEST_DIR, EVAL_ONLY_RESULTS_FILE, LOCK_FILE, MODEL_FILES,
                                RUN_MARKERS, is_checkpoint_file, path)
from bert_tf.run_directory.checkpoints import checkpoint_names
from bert_tf.run_directory.errors import RunDirectoryError, TrainedFileError
from bert_tf.run_directory.lock import describe_holder, lock_holder


def model_file(location, flag=None):
    """The .keras file `location` names: the file itself, or the first of MODEL_FILES in it.

    Args:
      location: a .keras file or a run's output directory (local or any tf.io.gfile file
        system).
      flag: the flag `location` came from (e.g. "--model_dir"), named in the errors.

    Raises:
      FileNotFoundError, ValueError: naming `location` (and the flag) and what was expected;
        a directory whose run holds its lock is named as in use.
    """
    location = str(location)
    where = fileio.named(location, flag)
    if fileio.isfile(location):
        if not location.endswith(".keras"):
            raise ValueError(f"{where}: expected a run's output directory or a .keras file")
        return location
    if not fileio.isdir(location):
        raise FileNotFoundError(f"{where}: no such directory or .keras file")
    for name in MODEL_FILES:
        candidate = path(location, name)
        if fileio.isfile(candidate):
            return candidate
    holder = lock_holder(location)
    running = (f"; its run is still running ({describe_holder(holder)}; lock file "
               f"{path(location, LOCK_FILE)}): its models are written when it ends"
               if holder else "")
    raise FileNotFoundError(f"{where}: found none of {', '.join(MODEL_FILES)}; expected "
                            "the output directory of run_pretraining, run_classifier, run_squad "
                            f"or run_tagging{running}")


def model_runs(output_dir, init_checkpoint=None):
    """The directories that may hold the run a fine-tuning command's model comes from, nearest
    first: --output_dir, --init_checkpoint's directory (itself, or the file's), and for
    RUN/best/model-N, RUN. Paths only: none is checked to exist."""
    candidates = [str(output_dir)] if output_dir else []
    if init_checkpoint:
        init_checkpoint = str(init_checkpoint)
        directory = (init_checkpoint if fileio.isdir(init_checkpoint)
                     else os.path.dirname(init_checkpoint) or ".")
        candidates.append(directory)
        if os.path.basename(os.path.normpath(directory)) == BEST_DIR:
            candidates.append(os.path.dirname(os.path.normpath(directory)))
    return candidates


def markers(directory):
    """The names in `directory` that mark a training run's directory (sorted), or []."""
    directory = str(directory)
    if not fileio.isdir(directory):
        return []
    names = set(fileio.listdir(directory))
    found = {name for name in RUN_MARKERS if name in names}
    found.update(name for name in names if is_checkpoint_file(name))
    return sorted(found)


def _nearest_existing(location):
    location = os.path.abspath(location)
    while not os.path.exists(location):
        parent = os.path.dirname(location)
        if parent == location:
            break
        location = parent
    return location


def check_writable(directory, flag="--output_dir", create=True):
    """`directory` (made later if missing, when `create`) can receive files: a file is created
    and removed there, or in its nearest existing parent; nothing is left behind, no
    directory made. Remote paths are not probed.

    Raises:
      RunDirectoryError naming the flag.
    """
    directory = str(directory)
    if fileio.is_remote(directory):
        return
    directory = os.path.abspath(os.path.expanduser(directory or "."))
    if not os.path.isdir(directory):
        if os.path.exists(directory):
            raise RunDirectoryError(f"{flag}={directory} is a file; expected a directory")
        if not create:
            raise RunDirectoryError(f"{flag}: directory {directory} does not exist")
        existing = _nearest_existing(directory)
        if not os.path.isdir(existing):
            raise RunDirectoryError(f"{flag}={directory} cannot be created: {existing} is a "
                                    "file")
        directory = existing
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".bert_tf_write_probe_")
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise RunDirectoryError(f"{flag}: cannot write in {directory} ({e.strerror or e}); "
                                "choose a writable location") from None


def append_eval_only_results(directory, results):
    """Adds `results` (a JSON object: what a run that evaluated or predicted without training
    found) as one line of <directory>/eval_only_results.jsonl, written atomically with the
    earlier lines kept. Call while owning the directory. Returns the path."""
    results_path = path(directory, EVAL_ONLY_RESULTS_FILE)
    earlier = ""
    if fileio.isfile(results_path):
        with fileio.open_file(results_path, encoding="utf-8", errors="replace") as f:
            earlier = f.read()
    if earlier and not earlier.endswith("\n"):
        earlier += "\n"
    fileio.write_text_atomic(results_path, earlier + json.dumps(results, sort_keys=True) + "\n")
    return results_path


@contextlib.contextmanager
def writing_after_training(directory, file_path):
    """The body writes `file_path` (a path, or words naming several), a file of `directory`'s
    run once its training is done (a model, the results). A failure to write it (disk full,
    quota, permissions) becomes a TrainedFileError naming it: nothing was lost, the training
    is in the newest checkpoint, and the same command resumes there with nothing left to
    train and writes the run's files."""
    try:
        yield
    except fileio.TargetChangedError:
        raise  # another writer's file, named as such
    except _write_errors() as e:
        reason = fileio.failure_reason(e)
        names = checkpoint_names(directory)
        kept = (f"the checkpoint {path(directory, names[-1])}" if names
                else f"the checkpoints in {directory}")
        raise TrainedFileError(
            f"{file_path} cannot be written ({reason}); nothing was lost: training is saved in "
            f"{kept}. Free space (or fix the directory) and rerun the same command: it has "
            "nothing left to train and writes the run's models and results") from None


def _write_errors():
    """OSError and, once TensorFlow is loaded, its file-system errors (a gs:// write); this
    module imports no TensorFlow."""
    tf = sys.modules.get("tensorflow")
    return (OSError,) if tf is None else (OSError, tf.errors.OpError)
