"""A run directory (--output_dir of a job that trains): its files, lock, run record and casing.

The one owner of what a run directory holds. Every job that trains (pre-training, fine-tuning,
embedding training, on any backend) and every reader of a run (fine-tuning and export from it,
warm starts, embedding, feature extraction, the output rule of the commands) names the files
through this module, holds the directory with `owned`, records itself with `write_record` and
checks a resume with `check_resume`; `recorded_casing` is the one reader of the casing a run
tokenized with.

A run directory holds (each job writes its part):

  bert_tf_run.json             the run record (RunRecord): what a resume must share with the run
  .bert_tf_run.lock            held by the run while it runs (one run per directory)
  ckpt-<step>.*, checkpoint    training checkpoints (step-exact resume)
  bert_config.json             the model config
  vocab.txt | tokenizer.json   the tokenizer (WordPiece | byte-level BPE)
  <command>.flags              the command line as a flagfile (run_pretraining.flags, ...)
  pretrainer.keras,            pre-training's models
    encoder.keras
  model.keras, task_info.json  a fine-tuned or embedding model and its serving settings
  best/, features/,            the best weights, cached feature records, TensorBoard scalars
    summaries/
  results.json,                metrics
    eval_results.txt|json
  eval_only_results.jsonl      what each run that evaluated or predicted without training
                               found, one JSON object a line (such a run writes nothing else
                               of the run's)

Runs written before the run record (bert_tf 0.1) are read through one legacy reader: their
finetuning_run.json, task_info.json or run_pretraining.flags (an absl flagfile) become the same
RunRecord. Imports no TensorFlow and no Keras (local paths use the Python built-ins, a path
with a scheme tf.io.gfile through bert_tf.fileio), so every backend's jobs use it.
"""

import contextlib
import dataclasses
import datetime
import fnmatch
import json
import os
import shutil
import socket
import tempfile
import threading
import time

from absl import logging

from bert_tf import fileio
from bert_tf.config import BertConfig, ConfigError

# The run record and the lock.
RECORD_FILE = "bert_tf_run.json"
LOCK_FILE = ".bert_tf_run.lock"
# The model and its tokenizer (the names of the original BERT release's files).
CONFIG_FILE = "bert_config.json"
VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
# Models saved at the end of a run.
PRETRAINER_FILE = "pretrainer.keras"
ENCODER_FILE = "encoder.keras"
MODEL_FILE = "model.keras"
# A directory gives its fine-tuned (or embedding) model first, then pre-training's.
MODEL_FILES = (MODEL_FILE, PRETRAINER_FILE, ENCODER_FILE)
TASK_INFO_FILE = "task_info.json"
# Training checkpoints: tf.train.CheckpointManager's prefix and state file.
CHECKPOINT_PREFIX = "ckpt"
# A checkpoint of the JAX step runner (training.jax_checkpoints): a ckpt-<step>.orbax
# directory (Orbax), or a ckpt-<step>.npz file of bert_tf before it (still read).
JAX_CHECKPOINT_SUFFIX = ".orbax"
JAX_NPZ_CHECKPOINT_SUFFIX = ".npz"
_JAX_CHECKPOINT_SUFFIXES = (JAX_CHECKPOINT_SUFFIX, JAX_NPZ_CHECKPOINT_SUFFIX)
CHECKPOINT_STATE_FILE = "checkpoint"
BEST_DIR = "best"
BEST_METRICS_FILE = "metrics.json"
SUMMARIES_DIR = "summaries"
FEATURES_DIR = "features"
SENTENCE_TRANSFORMERS_DIR = "sentence_transformers"
RESULTS_FILE = "results.json"
EVAL_RESULTS_TEXT_FILE = "eval_results.txt"
EVAL_RESULTS_JSON_FILE = "eval_results.json"
# Runs that evaluate or predict without training append their results here, beside the
# training run's own (results.json, eval_results.*), which they never write.
EVAL_ONLY_RESULTS_FILE = "eval_only_results.jsonl"
# What runs of bert_tf 0.1 recorded instead of the run record.
LEGACY_FINETUNING_RECORD = "finetuning_run.json"
PRETRAINING_COMMAND = "run_pretraining"
FINETUNING_COMMANDS = ("run_classifier", "run_squad", "run_tagging")
EMBEDDING_COMMAND = "bert-tf-embed"
# task_info.json's task of an embedding run.
EMBEDDING_TASK = "sentence_embedding"


def flags_file(command):
    """The flagfile a run of `command` ("run_pretraining", "run_classifier", ...) leaves."""
    return f"{command}.flags"


PRETRAINING_FLAGS_FILE = flags_file(PRETRAINING_COMMAND)
# Files only a training run leaves: a directory holding one is a run's.
RUN_MARKERS = (CHECKPOINT_STATE_FILE, LOCK_FILE, RECORD_FILE, LEGACY_FINETUNING_RECORD,
               RESULTS_FILE, EVAL_ONLY_RESULTS_FILE, MODEL_FILE, TASK_INFO_FILE,
               PRETRAINING_FLAGS_FILE, *(flags_file(command) for command in FINETUNING_COMMANDS))


class RunDirectoryError(ValueError):
    """A run directory that cannot be used as asked: in use, another run's, unreadable."""


class DirectoryInUseError(RunDirectoryError):
    """Another live run owns the directory."""


class ResumeMismatchError(RunDirectoryError):
    """A run would resume checkpoints written with other settings."""


def path(directory, name, *names):
    """The path of `name` (a file name of this module) in a run directory."""
    return os.path.join(str(directory), name, *names)


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
    where = f"{flag}={location}" if flag else location
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


def checkpoint_prefixes(directory):
    """Prefixes of the ckpt-<step> training checkpoints in `directory`, oldest first."""
    directory = str(directory)
    if not fileio.isdir(directory):
        return []
    found = []
    for name in fileio.listdir(directory):
        step = name[len(CHECKPOINT_PREFIX) + 1:-len(".index")]
        if (name.startswith(CHECKPOINT_PREFIX + "-") and name.endswith(".index")
                and step.isdigit()):
            found.append((int(step), path(directory, name[:-len(".index")])))
    return [prefix for _, prefix in sorted(found)]


def jax_checkpoint_file(directory, step):
    """The path of the JAX step runner's checkpoint of `step` in `directory`: the Orbax
    directory, or a .npz file of an older bert_tf when only that exists."""
    orbax = path(directory, f"{CHECKPOINT_PREFIX}-{step}{JAX_CHECKPOINT_SUFFIX}")
    npz = path(directory, f"{CHECKPOINT_PREFIX}-{step}{JAX_NPZ_CHECKPOINT_SUFFIX}")
    return npz if not fileio.exists(orbax) and fileio.exists(npz) else orbax


def jax_checkpoint_steps(directory):
    """Steps of the JAX step runner's checkpoints in `directory` (ckpt-<step>.orbax, or an older
    bert_tf's ckpt-<step>.npz), oldest first."""
    directory = str(directory)
    if not fileio.isdir(directory):
        return []
    steps = set()
    for name in fileio.listdir(directory):
        name = name.rstrip("/")
        for suffix in _JAX_CHECKPOINT_SUFFIXES:
            step = name[len(CHECKPOINT_PREFIX) + 1:-len(suffix)]
            if (name.startswith(CHECKPOINT_PREFIX + "-") and name.endswith(suffix)
                    and step.isdigit()):
                steps.add(int(step))
    return sorted(steps)


def checkpoint_step(checkpoint):
    """The global step of a training checkpoint's path (ckpt-<step>, ckpt-<step>.orbax, ...)."""
    name = os.path.basename(str(checkpoint).rstrip("/"))
    for suffix in _JAX_CHECKPOINT_SUFFIXES:
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return int(name.rsplit("-", 1)[-1])


def checkpoint_names(directory):
    """The names of `directory`'s training checkpoints, oldest first: ckpt-<step> (TensorFlow's
    prefixes), then the JAX step runner's (ckpt-<step>.orbax, or .npz)."""
    return ([os.path.basename(prefix) for prefix in checkpoint_prefixes(directory)]
            + [os.path.basename(jax_checkpoint_file(directory, step))
               for step in jax_checkpoint_steps(directory)])


def checkpoint_backend(directory):
    """The Keras backend whose training loop wrote `directory`'s checkpoints: "tensorflow"
    (ckpt-<step>.index), "jax" (ckpt-<step>.orbax or .npz), or None when there is none."""
    if checkpoint_prefixes(directory):
        return "tensorflow"
    if jax_checkpoint_steps(directory):
        return "jax"
    return None


def has_checkpoint(directory):
    """True when `directory` holds a training checkpoint to resume from (ckpt-<step>.index,
    or the JAX step runner's ckpt-<step>.orbax / .npz)."""
    return checkpoint_backend(directory) is not None


def markers(directory):
    """The names in `directory` that mark a training run's directory (sorted), or []."""
    directory = str(directory)
    if not fileio.isdir(directory):
        return []
    names = set(fileio.listdir(directory))
    found = {name for name in RUN_MARKERS if name in names}
    found.update(name for name in names
                 if name.startswith(CHECKPOINT_PREFIX + "-")
                 and name.endswith((".index",) + _JAX_CHECKPOINT_SUFFIXES))
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


# --- The lock -------------------------------------------------------------------------------
#
# A run (its chief: the workers of a multi-worker run share the chief's ownership and take no
# lock) holds <directory>/.bert_tf_run.lock while it runs. The file records who holds it:
#
#     {"host": "trainer-3", "pid": 4242, "start_time": "2026-11-24T00:12:00Z",
#      "heartbeat": "2026-11-24T00:14:00Z"}
#
# On a local (or NFS) file system the lock is an advisory flock on that file: the kernel drops
# it when its process dies however it dies (SIGKILL included), so a killed run's lock is taken
# over at once and two runs can never both hold it. The file is opened without following a
# symbolic link and must be a regular file of one name holding a lock record or nothing: a
# link, a hard link or anything else in its place is refused, never written through (the
# record is written into the file and emptied on release). Remote file systems (gs://, s3://, hdfs://,
# ram://) have no locks: there the record itself is the lock, with a heartbeat rewritten every
# heartbeat_seconds; a record whose process is gone (same host, pid not running) or whose
# heartbeat is older than stale_after_seconds is taken over.


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def describe_holder(record):
    """'host H, pid P, started T' from a lock record (dict)."""
    return (f"host {record.get('host', '?')}, pid {record.get('pid', '?')}, started "
            f"{record.get('start_time', '?')}")


def _pid_alive(pid):
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError):
        return True  # exists under another user, or unreadable: assume alive
    return True


def _parse_lock_record(text):
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def lock_holder(directory):
    """The lock record of a run that holds `directory` now, else None.

    Read without locking (a reader must not make a starting run see the lock taken): a
    released lock is empty; a killed run's names a process gone from this host.
    """
    lock_path = path(directory, LOCK_FILE)
    if not fileio.is_remote(lock_path) and (os.path.islink(lock_path)
                                            or not os.path.isfile(lock_path)):
        return None  # no lock, or not one (refused by the run that would take it)
    try:
        with fileio.open_file(lock_path, encoding="utf-8", errors="replace") as f:
            record = _parse_lock_record(f.read())
    except OSError:
        return None
    if not record:
        return None
    if record.get("host") == socket.gethostname() and not _pid_alive(record.get("pid")):
        return None
    return record


def _not_a_lock_file(fd):
    """Why the file open at `fd` is not a lock file a run may write (None when it is one): not
    a regular file, or a file of several names (a hard link)."""
    import stat

    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        return "is not a regular file"
    if status.st_nlink > 1:
        return f"is a hard link (one of {status.st_nlink} names of one file)"
    return None


class RunDirectoryLock:
    """The lock of one run directory; acquire() before writing there, release() at the end.

    Args:
      directory: the run directory (local path or a tf.io.gfile URL).
      flag: the flag named in errors.
      heartbeat_seconds: remote file systems: how often the record's heartbeat is rewritten.
      stale_after_seconds: remote file systems: a record whose heartbeat is older is taken
        over (a run on another host that died).
    """

    def __init__(self, directory, flag="--output_dir", heartbeat_seconds=60,
                 stale_after_seconds=600):
        self.directory = str(directory)
        self.path = path(directory, LOCK_FILE)
        self.flag = flag
        self._local = not fileio.is_remote(self.directory)
        self._heartbeat_seconds = heartbeat_seconds
        self._stale_after = stale_after_seconds
        self._record = None
        self._fd = None
        self._stop = None
        self._thread = None

    def _new_record(self):
        now = _now()
        return {"host": socket.gethostname(), "pid": os.getpid(), "start_time": now,
                "heartbeat": now}

    def _refuse(self, record):
        raise DirectoryInUseError(
            f"{self.flag}={self.directory} is in use by another run ({describe_holder(record)}; "
            f"lock file {self.path}): wait for it to end, stop it, or choose another "
            f"{self.flag}")

    def _refuse_foreign(self, problem):
        raise RunDirectoryError(
            f"{self.flag}={self.directory}: its lock file {self.path} {problem}; a run locks a "
            "file of its own and never writes through another: remove it (what it names is "
            "left as it is), or choose another " + self.flag)

    def acquire(self):
        """Takes the lock (making the directory) or raises DirectoryInUseError naming the
        holder. Returns self."""
        fileio.makedirs(self.directory)
        if self._local:
            self._acquire_local()
        else:
            self._acquire_remote()
        logging.info("%s owns %s (lock file %s)", describe_holder(self._record), self.directory,
                     self.path)
        return self

    def _acquire_local(self):
        import fcntl

        while True:
            try:
                # O_NONBLOCK: a FIFO in the lock's place must not hang the open.
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK,
                             0o644)
            except OSError:
                if os.path.islink(self.path):
                    self._refuse_foreign(f"is a symbolic link (to {os.readlink(self.path)})")
                if os.path.isdir(self.path):
                    self._refuse_foreign("is a directory")
                raise
            problem = _not_a_lock_file(fd)
            if problem:
                os.close(fd)
                self._refuse_foreign(problem)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                text = os.pread(fd, 1 << 16, 0).decode("utf-8", "replace")
                os.close(fd)
                self._refuse(_parse_lock_record(text) or {})
            # A run that gave up an untouched directory removes the lock file (release); one
            # that opened the file before that holds a lock on a name that is gone: try again.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        text = os.pread(fd, 1 << 16, 0).decode("utf-8", "replace")
        previous = _parse_lock_record(text)
        if text.strip() and previous is None:
            os.close(fd)
            self._refuse_foreign("holds something other than a lock record")
        if previous:
            logging.warning("Taking over %s from a run that ended without releasing it (%s)",
                            self.path, describe_holder(previous))
        self._record = self._new_record()
        data = json.dumps(self._record).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
        self._fd = fd

    def _stale(self, record):
        if record.get("host") == socket.gethostname():
            return not _pid_alive(record.get("pid"))
        try:
            age = time.time() - _parse_time(record["heartbeat"])
        except (KeyError, ValueError, TypeError):
            return True
        return age > self._stale_after

    def _read_remote(self):
        try:
            with fileio.open_file(self.path, encoding="utf-8") as f:
                return _parse_lock_record(f.read())
        except FileNotFoundError:
            return None

    def _write_remote(self):
        # Written aside and renamed over: a reader never sees half a record (and some file
        # systems, ram:// among them, append on reopening a file for writing).
        tmp = f"{self.path}.tmp-{socket.gethostname()}-{os.getpid()}"
        with fileio.gfile().GFile(tmp, "w") as f:
            f.write(json.dumps(self._record))
        fileio.gfile().rename(tmp, self.path, overwrite=True)

    def _acquire_remote(self):
        previous = self._read_remote()
        if previous:
            if not self._stale(previous):
                self._refuse(previous)
            logging.warning("Taking over %s from a run that is gone (%s)", self.path,
                            describe_holder(previous))
        self._record = self._new_record()
        self._write_remote()
        # Object stores have no exclusive create: of two runs racing, the last writer wins,
        # and the other sees a record not its own here.
        if self._read_remote() != self._record:
            self._refuse(self._read_remote() or {})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._heartbeat, name="run-dir-heartbeat",
                                        daemon=True)
        self._thread.start()

    def _heartbeat(self):
        while not self._stop.wait(self._heartbeat_seconds):
            self._record["heartbeat"] = _now()
            try:
                self._write_remote()
            except Exception as e:  # noqa: BLE001 - any file-system error: keep running
                logging.warning("Could not renew the lock %s: %s", self.path, e)

    def release(self, remove=False):
        """Gives the directory up.

        Args:
          remove: remove the lock file too (a run that wrote nothing else leaves nothing).
            Otherwise it stays, emptied, on local file systems: removing it while another run
            may have it open is safe only because acquire() checks that the file it locked is
            still the one under the name.
        """
        if self._fd is not None:
            if remove:
                os.remove(self.path)
            else:
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            if self._read_remote() == self._record:
                fileio.gfile().remove(self.path)
        self._record = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


# What a killed process leaves half-written: bert_tf's atomic-write temporaries (.tmp_*),
# TensorFlow's checkpoint temporaries (ckpt-<n>_temp/ shard directories, checkpoint.tmp<hex>
# state files).
_TEMPORARY_PATTERNS = (".tmp_*", f"{CHECKPOINT_PREFIX}-*_temp", f"{CHECKPOINT_STATE_FILE}.tmp*")


def remove_stale_temp_files(directory):
    """Removes what a killed run left half-written in `directory` (see _TEMPORARY_PATTERNS).

    Call only while owning the directory: a live run's temporaries look the same.

    Returns:
      The paths removed.
    """
    directory = str(directory)
    if not fileio.isdir(directory):
        return []
    removed = []
    for name in sorted(fileio.listdir(directory)):
        if not any(fnmatch.fnmatchcase(name.rstrip("/"), p) for p in _TEMPORARY_PATTERNS):
            continue
        stale = path(directory, name.rstrip("/"))
        if fileio.is_remote(stale):
            if fileio.gfile().isdir(stale):
                fileio.gfile().rmtree(stale)
            else:
                fileio.gfile().remove(stale)
        elif os.path.isdir(stale) and not os.path.islink(stale):
            shutil.rmtree(stale)
        else:
            os.remove(stale)
        removed.append(stale)
    if removed:
        logging.info("Removed temporary files a previous run left in %s: %s", directory,
                     ", ".join(os.path.basename(p) for p in removed))
    return removed


@contextlib.contextmanager
def owned(directory, chief=True, flag="--output_dir"):
    """Holds `directory`'s RunDirectoryLock for the body when `chief` (workers of a
    multi-worker run share the chief's ownership and take none), after clearing temporary
    files a killed run left there. Raises DirectoryInUseError naming the holder, before
    anything is written.

    Take it when the work starts, after every check that can refuse: a body that ends having
    written nothing (a failure before the first file) leaves no lock file it made, and no
    directory when the lock made it.
    """
    if not chief:
        yield
        return
    directory = str(directory)
    made = not fileio.exists(directory)
    lock_made = not fileio.exists(path(directory, LOCK_FILE))
    lock = RunDirectoryLock(directory, flag=flag).acquire()
    remove, before = False, None
    try:
        remove_stale_temp_files(directory)
        before = set(fileio.listdir(directory))
        yield
    finally:
        if lock._local:
            after = set(fileio.listdir(directory))
            remove = after == {LOCK_FILE} or (lock_made and after == before)
        lock.release(remove=remove)
        if remove and made:
            with contextlib.suppress(OSError):
                os.rmdir(directory)


# --- The run record ----------------------------------------------------------------------------

RECORD_FORMAT = 1
JOBS = ("pretraining", "finetuning", "embedding")


@dataclasses.dataclass
class RunRecord:
    """What a training run is, as far as a resume must share it: bert_tf_run.json.

    Attributes:
      job: "pretraining", "finetuning" or "embedding".
      command: the command that trains it ("run_pretraining", "run_classifier", "run_squad",
        "run_tagging", "bert-tf-embed"); None when a legacy file does not say.
      model_config: the model config (BertConfig.to_dict()).
      tokenizer_sha256: hex SHA-256 of what the tokenizer's ids depend on
        (the Tokenizer's digest()).
      do_lower_case: the casing the run tokenized with; None: not known (pre-training records
        made by create_pretraining_data with no --do_lower_case given to the run).
      task, labels: a fine-tuning run's task ("sst-2", "tagging", "squad") and its label
        names in logit order (None: no label set).
      settings: the other flags that shape the checkpoints, by flag name: sequence length,
        batch size, objectives, pooling, optimizer, ... (each job says which).
      init_checkpoint: what the run started from (not compared: a resume reads the run's own
        checkpoints).
      source: the file the record was read from (not written).
      accepts_file_sha256: a finetuning_run.json written before token digests may hold the
        tokenizer file's own SHA-256 (not written).
    """

    job: str
    command: str | None = None
    model_config: dict | None = None
    tokenizer_sha256: str | None = None
    do_lower_case: bool | None = None
    task: str | None = None
    labels: list | None = None
    settings: dict = dataclasses.field(default_factory=dict)
    init_checkpoint: str | None = None
    source: str | None = dataclasses.field(default=None, compare=False)
    accepts_file_sha256: bool = dataclasses.field(default=False, compare=False)

    def to_dict(self):
        """The JSON object of bert_tf_run.json (as read back: lists, not tuples)."""
        values = {"format": RECORD_FORMAT, "job": self.job, "command": self.command,
                  "model_config": self.model_config, "tokenizer_sha256": self.tokenizer_sha256,
                  "do_lower_case": self.do_lower_case, "task": self.task,
                  "labels": None if self.labels is None else list(self.labels),
                  "settings": dict(self.settings), "init_checkpoint": self.init_checkpoint}
        return json.loads(json.dumps(values))

    @classmethod
    def from_dict(cls, values, source):
        """The record of a bert_tf_run.json object; raises RunDirectoryError naming `source`."""
        if not isinstance(values, dict) or values.get("job") not in JOBS:
            raise RunDirectoryError(f"{source}: not a bert_tf run record (expected a JSON "
                                    f"object with job one of {', '.join(JOBS)})")
        version = values.get("format", RECORD_FORMAT)
        if not isinstance(version, int) or version > RECORD_FORMAT:
            raise RunDirectoryError(f"{source}: format={version!r} was written by a newer "
                                    "bert_tf (or is not a format number); upgrade to read "
                                    "this run")
        settings = values.get("settings") or {}
        if not isinstance(settings, dict):
            raise RunDirectoryError(f"{source}: settings must be a JSON object")
        return cls(job=values["job"], command=values.get("command"),
                   model_config=values.get("model_config"),
                   tokenizer_sha256=values.get("tokenizer_sha256"),
                   do_lower_case=values.get("do_lower_case"), task=values.get("task"),
                   labels=values.get("labels"), settings=settings,
                   init_checkpoint=values.get("init_checkpoint"), source=source)


def write_record(directory, record):
    """Writes `record` to <directory>/bert_tf_run.json atomically; returns the path."""
    record_path = path(directory, RECORD_FILE)
    fileio.write_text_atomic(record_path,
                             json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n")
    return record_path


def _read_json(json_path):
    try:
        with fileio.open_file(json_path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise RunDirectoryError(f"{json_path}: not valid JSON ({e})") from None


def read_record(directory):
    """The RunRecord of a run directory, or None when it holds none.

    bert_tf_run.json, else what a run of bert_tf 0.1 recorded (the legacy reader):
    finetuning_run.json (a fine-tuning run that trained), task_info.json (a fine-tuning or
    embedding run), run_pretraining.flags (with bert_config.json and the tokenizer file
    beside it).

    Raises:
      RunDirectoryError: a record that cannot be read, naming the file.
    """
    directory = str(directory)
    record_path = path(directory, RECORD_FILE)
    if fileio.isfile(record_path):
        return RunRecord.from_dict(_read_json(record_path), record_path)
    return _read_legacy_record(directory)


def _read_legacy_record(directory):
    legacy = path(directory, LEGACY_FINETUNING_RECORD)
    if fileio.isfile(legacy):
        values = _read_json(legacy)
        if not isinstance(values, dict):
            raise RunDirectoryError(f"{legacy}: expected a JSON object")
        # Fields a record lacks (train_batch_size came later) are not compared.
        settings = {name: values[name] for name in
                    ("max_seq_length", "trainable_encoder", "optimizer", "train_batch_size")
                    if name in values}
        return RunRecord(job="finetuning", command=values.get("cli"),
                         model_config=values.get("bert_config"),
                         tokenizer_sha256=values.get("vocab_sha256"),
                         do_lower_case=values.get("do_lower_case"), task=values.get("task"),
                         labels=values.get("labels"), settings=settings, source=legacy,
                         accepts_file_sha256=True)
    info_path = path(directory, TASK_INFO_FILE)
    if fileio.isfile(info_path):
        values = _read_json(info_path)
        if not isinstance(values, dict):
            raise RunDirectoryError(f"{info_path}: expected a JSON object")
        embedding = values.get("task") == EMBEDDING_TASK
        casing = values.get("do_lower_case")
        return RunRecord(job="embedding" if embedding else "finetuning",
                         command=EMBEDDING_COMMAND if embedding else None,
                         do_lower_case=casing if isinstance(casing, bool) else None,
                         settings={"max_seq_length": values["max_seq_length"]}
                         if "max_seq_length" in values else {},
                         source=info_path)
    flags_path = path(directory, PRETRAINING_FLAGS_FILE)
    if fileio.isfile(flags_path):
        return _read_pretraining_flags(directory, flags_path)
    return None


def read_flagfile(flagfile, names):
    """The values of `names` in an absl flagfile (one --flag=value per line).

    Booleans may be written --flag, --noflag or --flag=true/false; the last occurrence wins.

    Returns:
      {name: str}: the names present, booleans as "true" / "false".
    """
    values = {}
    with fileio.open_file(flagfile, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("--"):
                continue
            name, has_value, value = line[2:].partition("=")
            if name in names:
                values[name] = value if has_value else "true"
            elif not has_value and name.startswith("no") and name[2:] in names:
                values[name[2:]] = "false"
    return values


def _flag_bool(flagfile, name, text):
    lowered = text.lower()
    if lowered not in ("true", "false", "1", "0"):
        raise RunDirectoryError(f"{flagfile}: --{name}={text} is not a boolean")
    return lowered in ("true", "1")


def _flag_int(flagfile, name, text):
    try:
        return int(text)
    except ValueError:
        raise RunDirectoryError(f"{flagfile}: --{name}={text} is not an integer") from None


# The flags of run_pretraining.flags a resume must share, by type.
_PRETRAINING_INTS = ("max_seq_length", "max_predictions_per_seq", "train_batch_size",
                     "gradient_accumulation_steps")
_PRETRAINING_BOOLS = ("use_next_sentence_label", "sentence_order_prediction",
                      "span_boundary_objective", "full_sentences", "pack_sequences")
_PRETRAINING_STRINGS = ("optimizer",)
_PRETRAINING_INPUTS = ("input_file", "input_text_file", "input_tfds")


def _read_pretraining_flags(directory, flagfile):
    """The RunRecord of a pre-training run of bert_tf 0.1: its flagfile, bert_config.json and
    tokenizer file."""
    values = read_flagfile(flagfile, ("do_lower_case", *_PRETRAINING_INTS, *_PRETRAINING_BOOLS,
                                      *_PRETRAINING_STRINGS, *_PRETRAINING_INPUTS,
                                      "init_checkpoint"))
    settings = {name: _flag_int(flagfile, name, values[name])
                for name in _PRETRAINING_INTS if name in values}
    settings.update({name: _flag_bool(flagfile, name, values[name])
                     for name in _PRETRAINING_BOOLS if name in values})
    settings.update({name: values[name] for name in _PRETRAINING_STRINGS if name in values})
    casing = None
    if "do_lower_case" in values:
        casing = _flag_bool(flagfile, "do_lower_case", values["do_lower_case"])
        # Records were tokenized by create_pretraining_data: the run's --do_lower_case (true
        # by default) says how only when it was given against the default.
        if values.get("input_file") and not (values.get("input_text_file")
                                             or values.get("input_tfds")) and casing:
            casing = None
    config_path = path(directory, CONFIG_FILE)
    model_config = None
    if fileio.isfile(config_path):
        try:
            model_config = BertConfig.from_json_file(config_path).to_dict()
        except ConfigError as e:
            raise RunDirectoryError(str(e)) from None
    from bert_tf.text import tokenizer_files

    recorded_tokenizer = tokenizer_files.model_tokenizer_file(directory)
    return RunRecord(job="pretraining", command=PRETRAINING_COMMAND, model_config=model_config,
                     tokenizer_sha256=(tokenizer_digest(recorded_tokenizer)
                                       if recorded_tokenizer else None),
                     do_lower_case=casing, settings=settings,
                     init_checkpoint=values.get("init_checkpoint") or None, source=flagfile)


def tokenizer_digest(tokenizer_path):
    """Hex SHA-256 of what the ids of the tokenizer file at `tokenizer_path` depend on."""
    from bert_tf.text import tokenizer_files

    return tokenizer_files.load_tokenizer(tokenizer_path).digest()


def recorded_command(directory):
    """The command whose run `directory` holds by its record ("run_classifier", ...), or None
    (no record, or one that does not say)."""
    try:
        record = read_record(directory)
    except RunDirectoryError:
        return None
    return record.command if record is not None else None


def recorded_casing(directory):
    """(do_lower_case, where) the run in `directory` tokenized with, else (None, None).

    The one reader of a run's casing: its run record, else a bert_tf 0.1 run's
    finetuning_run.json, task_info.json or run_pretraining.flags (for records, only a
    --do_lower_case=false given against the default says how they were tokenized).
    """
    try:
        record = read_record(directory)
    except RunDirectoryError:
        return None, None
    if record is None or record.do_lower_case is None:
        return None, None
    name = os.path.basename(record.source)
    field = "--do_lower_case" if name.endswith(".flags") else "do_lower_case"
    return bool(record.do_lower_case), f"{name} {field}"


def _as_list(value):
    # Lists and tuples compare as lists (a record read back holds lists).
    return list(value) if isinstance(value, (list, tuple)) else value


def _show(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_show(v) for v in value)
    return "unset" if value is None else str(value)


def resume_problems(recorded, wanted, tokenizer_path=None):
    """What differs between the record of the run that wrote the checkpoints and this run's.

    Compared: the command, task and labels, the model config, the tokenizer digest, the casing
    and every setting both records hold; a field either side does not know is not compared.

    Args:
      recorded, wanted: RunRecords.
      tokenizer_path: this run's tokenizer file (for a legacy record holding its SHA-256).

    Returns:
      list of str, one per difference, each naming the flag or field with both values.
    """
    problems = []
    if recorded.job != wanted.job or (recorded.command and wanted.command
                                      and recorded.command != wanted.command):
        problems.append(f"a {recorded.command or recorded.job} run then, "
                        f"{wanted.command or wanted.job} now")
    for name in ("task", "labels"):
        before, now = getattr(recorded, name), getattr(wanted, name)
        if before is not None and now is not None and _as_list(before) != _as_list(now):
            problems.append(f"{name}={_show(before)} then, {_show(now)} now")
    if recorded.model_config is not None and wanted.model_config is not None:
        before, now = recorded.model_config, wanted.model_config
        problems += [f"bert_config {key}={before.get(key)!r} then, {now.get(key)!r} now"
                     for key in sorted(set(before) | set(now)) if before.get(key) != now.get(key)]
    if recorded.tokenizer_sha256 and wanted.tokenizer_sha256 and (
            recorded.tokenizer_sha256 != wanted.tokenizer_sha256):
        if not (recorded.accepts_file_sha256 and tokenizer_path
                and recorded.tokenizer_sha256 == fileio.sha256(tokenizer_path)):
            where = f": --vocab_file={tokenizer_path}" if tokenizer_path else ""
            problems.append(f"the tokenizer differs (sha256 {recorded.tokenizer_sha256:.16} "
                            f"then, {wanted.tokenizer_sha256:.16} now{where})")
    if (recorded.do_lower_case is not None and wanted.do_lower_case is not None
            and recorded.do_lower_case != wanted.do_lower_case):
        problems.append(f"--do_lower_case={_show(recorded.do_lower_case)} then, "
                        f"{_show(wanted.do_lower_case)} now")
    for name in sorted(set(recorded.settings) & set(wanted.settings)):
        before, now = recorded.settings[name], wanted.settings[name]
        if before is not None and now is not None and _as_list(before) != _as_list(now):
            problems.append(f"--{name}={_show(before)} then, {_show(now)} now")
    return problems


_BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX"}


def check_checkpoints_backend(directory, backend, flag="--output_dir", evaluating=False):
    """The training checkpoints in `directory` (if any) must be of `backend`'s loop ("tensorflow"
    or "jax"): each loop reads only its own. `evaluating`: for a run that evaluates them
    (--do_eval without --do_train), which is told so, else for one that resumes them.

    Raises:
      ResumeMismatchError naming both backends and the flag to rerun with.
    """
    directory = str(directory)
    written_by = checkpoint_backend(directory)
    if written_by is None or written_by == backend:
        return
    then, now = _BACKEND_NAMES[written_by], _BACKEND_NAMES[backend]
    if evaluating:
        raise ResumeMismatchError(
            f"{flag}={directory} holds checkpoints of a run on the {then} backend; this "
            f"evaluation is on {now} (--backend={backend}), which cannot read them. Rerun with "
            f"--backend={written_by} to evaluate them (--init_checkpoint is not read while "
            f"{flag} holds the run's own checkpoints)")
    raise ResumeMismatchError(
        f"{flag}={directory} holds checkpoints of a run on the {then} backend; this run is on "
        f"{now} (--backend={backend}), whose loop cannot resume them. Rerun with "
        f"--backend={written_by} to resume it, or choose a new {flag} (--init_checkpoint="
        f"{directory} starts from its weights on either backend)")


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


def check_resume(directory, wanted, tokenizer_path=None, flag="--output_dir", backend=None):
    """A run about to train in `directory` must be the run whose checkpoints are there.

    When `directory` holds a checkpoint and a record (bert_tf_run.json, or a bert_tf 0.1 run's
    files: read_record), compares it with `wanted` (resume_problems). Reads only: a refusal
    leaves the directory unchanged. A different --init_checkpoint is not a difference: it is
    logged that the run's own checkpoint is resumed. With `backend` ("tensorflow" or "jax"),
    checkpoints another backend's loop wrote are refused too: each loop reads only its own.

    Raises:
      ResumeMismatchError naming every difference, each with its flag and both values.
    """
    directory = str(directory)
    if not has_checkpoint(directory):
        return
    if backend is not None:
        check_checkpoints_backend(directory, backend, flag)
    recorded = read_record(directory)
    if recorded is None:
        return
    problems = resume_problems(recorded, wanted, tokenizer_path)
    if problems:
        raise ResumeMismatchError(
            f"{flag}={directory} holds checkpoints of a run with other settings "
            f"({recorded.source}); resuming would mix them: {'; '.join(problems)}. Rerun with "
            f"the run's settings to resume it, or choose a new {flag} (--init_checkpoint="
            f"{directory} starts from its weights)")
    # A bert_tf 0.1 record may not say where its run started.
    said = recorded.init_checkpoint or os.path.basename(recorded.source) == RECORD_FILE
    if wanted.init_checkpoint and said and wanted.init_checkpoint != recorded.init_checkpoint:
        logging.warning("--init_checkpoint=%s is not read: %s=%s holds this run's own "
                        "checkpoints (it started from %s), which are resumed",
                        wanted.init_checkpoint, flag, directory,
                        recorded.init_checkpoint or "a new model")
