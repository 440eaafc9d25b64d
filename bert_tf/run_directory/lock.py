"""The run lock: one run per run directory (owned), and who holds it.

A run (its chief: the workers of a multi-worker run share the chief's ownership and take no
lock) holds <directory>/.bert_tf_run.lock while it runs. The file records who holds it:

    {"host": "trainer-3", "pid": 4242, "start_time": "2026-11-24T00:12:00Z",
     "heartbeat": "2026-11-24T00:14:00Z"}

On a local (or NFS) file system the lock is an advisory flock on that file: the kernel drops
it when its process dies however it dies (SIGKILL included), so a killed run's lock is taken
over at once and two runs can never both hold it. The file is opened without following a
symbolic link and must be a regular file of one name holding a lock record or nothing: a
link, a hard link or anything else in its place is refused, never written through (the
record is written into the file and emptied on release). Remote file systems (gs://, s3://, hdfs://,
ram://) have no locks: there the record itself is the lock, with a heartbeat rewritten every
heartbeat_seconds; a record whose process is gone (same host, pid not running) or whose
heartbeat is older than stale_after_seconds is taken over.
"""

import contextlib
import datetime
import json
import os
import socket
import threading
import time

from absl import logging

from bert_tf import fileio
from bert_tf.file_names import (BEST_DIR, BEST_METRICS_FILE, BEST_REPLACED_INFIX, LOCK_FILE,
                                is_best_aside, is_temporary, path)
from bert_tf.run_directory.errors import DirectoryInUseError, RunDirectoryError


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def describe_holder(record):
    """'host H, pid P, started T' from a lock record (dict)."""
    return (f"host {record.get('host', '?')}, pid {record.get('pid', '?')}, started "
            f"{record.get('start_time', '?')}")


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
    if record.get("host") == socket.gethostname() and not fileio.process_alive(record.get("pid")):
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
            return not fileio.process_alive(record.get("pid"))
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


def remove_stale_temp_files(directory):
    """Removes what a killed run left half-written in `directory` (file_names.is_temporary),
    once a best/ it left aside is put back.

    Call only while owning the directory: a live run's temporaries look the same.

    Returns:
      The paths removed.
    """
    directory = str(directory)
    if not fileio.isdir(directory):
        return []
    _recover_best(directory)
    removed = []
    for name in sorted(fileio.listdir(directory)):
        if not is_temporary(name.rstrip("/")):
            continue
        stale = path(directory, name.rstrip("/"))
        fileio.remove_tree(stale)
        removed.append(stale)
    if removed:
        logging.info("Removed temporary files a previous run left in %s: %s", directory,
                     ", ".join(os.path.basename(p) for p in removed))
    return removed


def _recover_best(directory):
    """Puts back the best weights a run killed while replacing them left aside: between its two
    renames best/ is missing and the previous best, whole, is best.old-<pid>."""
    best = path(directory, BEST_DIR)
    if fileio.is_remote(directory) or os.path.exists(best):
        return  # remote best/ is replaced in place (training.task_loop)
    replaced = [path(directory, name.rstrip("/")) for name in fileio.listdir(directory)
                if is_best_aside(name.rstrip("/"), BEST_REPLACED_INFIX)]
    replaced = [p for p in replaced if os.path.isfile(path(p, BEST_METRICS_FILE))]
    if not replaced:
        return
    newest = max(replaced, key=lambda p: os.path.getmtime(path(p, BEST_METRICS_FILE)))
    os.replace(newest, best)
    logging.warning("Put back %s from %s, where a run killed while replacing the best weights "
                    "left them", best, os.path.basename(newest))


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
