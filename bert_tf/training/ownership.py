"""One run per output directory: a lock file naming the run that owns it.

Two runs writing one --output_dir interleave checkpoints, flags and results. A run (its chief:
the workers of a multi-worker run share the chief's ownership and take no lock) holds
`<output_dir>/.bert_tf_run.lock` while it runs. The file records who holds it:

    {"host": "trainer-3", "pid": 4242, "start_time": "2026-11-24T00:12:00Z",
     "heartbeat": "2026-11-24T00:14:00Z"}

On a local (or NFS) file system the lock is an advisory `flock` on that file: the kernel drops
it when its process dies however it dies (SIGKILL included), so a killed run's lock is taken
over at once and two runs can never both hold it. Remote file systems (gs://, s3://, hdfs://,
ram://) have no locks: there the record itself is the lock, through tf.io.gfile, with a
heartbeat rewritten every `heartbeat_seconds`; a record whose process is gone (same host, pid
not running) or whose heartbeat is older than `stale_after_seconds` is taken over.
"""

import contextlib
import datetime
import json
import os
import socket
import threading
import time

import tensorflow as tf
from absl import logging

from bert_tf.training.checkpointing import CheckpointError, remove_stale_temp_files

LOCK_NAME = ".bert_tf_run.lock"


class DirectoryInUseError(CheckpointError):
    """Another live run owns the output directory."""


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


def _parse_record(text):
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


class RunDirectoryLock:
    """The lock of one output directory; acquire() before writing there, release() at the end.

    Args:
      directory: the output directory (local path or a tf.io.gfile URL).
      flag: the flag named in errors.
      heartbeat_seconds: remote file systems: how often the record's heartbeat is rewritten.
      stale_after_seconds: remote file systems: a record whose heartbeat is older is taken
        over (a run on another host that died).
    """

    def __init__(self, directory, flag="--output_dir", heartbeat_seconds=60,
                 stale_after_seconds=600):
        self.directory = directory
        self.path = os.path.join(directory, LOCK_NAME)
        self.flag = flag
        self._local = "://" not in directory
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

    def acquire(self):
        """Takes the lock or raises DirectoryInUseError naming the holder. Returns self."""
        tf.io.gfile.makedirs(self.directory)
        if self._local:
            self._acquire_local()
        else:
            self._acquire_remote()
        logging.info("%s owns %s (lock file %s)", describe_holder(self._record), self.directory,
                     self.path)
        return self

    def _acquire_local(self):
        import fcntl
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            text = os.pread(fd, 1 << 16, 0).decode("utf-8", "replace")
            os.close(fd)
            self._refuse(_parse_record(text) or {})
        previous = _parse_record(os.pread(fd, 1 << 16, 0).decode("utf-8", "replace"))
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
            with tf.io.gfile.GFile(self.path, "r") as f:
                return _parse_record(f.read())
        except tf.errors.NotFoundError:
            return None

    def _write_remote(self):
        # Written aside and renamed over: a reader never sees half a record (and some file
        # systems, ram:// among them, append on reopening a file for writing).
        tmp = f"{self.path}.tmp-{socket.gethostname()}-{os.getpid()}"
        with tf.io.gfile.GFile(tmp, "w") as f:
            f.write(json.dumps(self._record))
        tf.io.gfile.rename(tmp, self.path, overwrite=True)

    def _acquire_remote(self):
        previous = self._read_remote() if tf.io.gfile.exists(self.path) else None
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
            except (tf.errors.OpError, OSError) as e:
                logging.warning("Could not renew the lock %s: %s", self.path, e)

    def release(self):
        """Gives the directory up (the lock file stays, emptied, on local file systems)."""
        if self._fd is not None:
            # Emptied, not removed: removing would let a run that opened the old file and a
            # run that creates a new one both hold "the" lock.
            os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            if self._read_remote() == self._record:
                tf.io.gfile.remove(self.path)
        self._record = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


@contextlib.contextmanager
def owned_directory(directory, chief, flag="--output_dir"):
    """Holds `directory`'s RunDirectoryLock for the body when `chief` (workers of a
    multi-worker run share the chief's ownership and take none), after clearing temporary files
    a killed run left there. Raises DirectoryInUseError naming the holder, before anything is
    written.
    """
    lock = RunDirectoryLock(directory, flag=flag) if chief else None
    if lock:
        lock.acquire()
    try:
        if lock:
            remove_stale_temp_files(directory)
        yield
    finally:
        if lock:
            lock.release()
