"""File access for local paths and any tf.io.gfile file system (gs://, s3://, hdfs://, ram://).

Atomic writes: a reader (or a crash) never sees a half-written output file.
- Local paths: a temporary file in the same directory, fsync'ed, then os.replace.
- Object stores (gs://, s3://): a rename there is a copy plus a delete, and an object becomes
  visible only once its upload completes, so the object is written in place.
- Other file systems (hdfs://, ram://, ...): a temporary file beside the target, then
  tf.io.gfile.rename(overwrite=True).

Local paths use the Python built-ins (fast, no TensorFlow import); TensorFlow is imported only
when a path has a scheme, so TF-free tools (create_pretraining_data) stay TF-free for local files.
"""

import errno
import hashlib
import io
import os
import tempfile
import uuid

# Rename is a server-side copy plus delete on these; a single upload is already atomic.
_OBJECT_STORES = ("gs://", "s3://")


def is_remote(path):
    """True for a path with a scheme ("gs://bucket/x", "ram://run"), handled by tf.io.gfile."""
    return "://" in str(path)


def gfile():
    """tf.io.gfile, imported on first use (only remote paths need it)."""
    import tensorflow as tf

    return tf.io.gfile


def write_bytes_atomic(path, data):
    """Writes `data` (bytes) to `path` so that `path` holds either the old or the new content."""
    path = str(path)
    if is_remote(path):
        _commit_remote(path, lambda target: _write_gfile(target, data))
    else:
        _write_local_atomic(path, data)


def upload_atomic(local_file, path):
    """Moves the finished local file `local_file` to the remote `path` (atomically as above)."""
    _commit_remote(str(path), lambda target: gfile().copy(local_file, target, overwrite=True))
    os.remove(local_file)


def _write_gfile(path, data):
    with gfile().GFile(path, "wb") as f:
        f.write(data)


def _commit_remote(path, write):
    """Calls write(target) so that `path` appears whole: target is `path` itself on object
    stores, else a temporary name beside it that is then renamed over `path`."""
    if path.startswith(_OBJECT_STORES):
        write(path)
        return
    directory, name = path.rsplit("/", 1)
    tmp = f"{directory}/.tmp_{uuid.uuid4().hex[:8]}_{name}"
    try:
        write(tmp)
        gfile().rename(tmp, path, overwrite=True)
    except BaseException:
        if gfile().exists(tmp):
            gfile().remove(tmp)
        raise


def _write_local_atomic(path, data):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp_", suffix="_" + os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            # Without this a power loss after the rename can leave an empty file under `path`.
            os.fsync(f.fileno())
        # mkstemp creates 0600; give the file the mode a plain open() would have.
        os.chmod(tmp, 0o666 & ~_current_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def fsync_file(path):
    """Flushes a finished local file to disk, before it is renamed into place."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path, text):
    """Writes `text` as UTF-8 to `path` atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))


def open_file(path, mode="r", encoding=None, errors=None, newline=None):
    """Opens `path` for reading ("r" or "rb"), as the built-in open() does, on any file system.

    Writes go through write_bytes_atomic / write_text_atomic instead.
    """
    path = str(path)
    if not is_remote(path):
        return open(path, mode, encoding=encoding, errors=errors, newline=newline)
    if mode not in ("r", "rb"):
        raise ValueError(f"open_file reads only (mode 'r' or 'rb'), got mode={mode!r} "
                         f"for {path}")
    # As open() does, so callers' `except FileNotFoundError` holds (GFile opens lazily).
    if not gfile().exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    if gfile().isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    raw = io.BufferedReader(_GFileReader(gfile().GFile(path, "rb")))
    if mode == "rb":
        return raw
    return io.TextIOWrapper(raw, encoding=encoding or "utf-8", errors=errors, newline=newline)


class _GFileReader(io.RawIOBase):
    """A tf.io.gfile.GFile as a raw binary stream (GFile lacks readable()/readinto())."""

    def __init__(self, handle):
        self._handle = handle

    def readable(self):
        return True

    def readinto(self, buffer):
        data = self._handle.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self):
        if not self.closed:
            self._handle.close()
        super().close()


def exists(path):
    """os.path.exists for any file system."""
    return gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isdir(path):
    """os.path.isdir for any file system."""
    path = str(path)
    if not is_remote(path):
        return os.path.isdir(path)
    if not gfile().isdir(path):
        return False
    parent, _, name = path.rstrip("/").rpartition("/")
    if path.startswith("ram://") and name and not parent.endswith(":/"):
        # ram:// calls any prefix of a file name a directory (a checkpoint prefix "ckpt-6" of
        # "ckpt-6.index"). A real one has an entry under "<path>/" (glob is exact there), or
        # was made empty by makedirs (then its parent's listing names it).
        return bool(gfile().glob(path.rstrip("/") + "/*")) or name in gfile().listdir(parent)
    return True


def isfile(path):
    """os.path.isfile for any file system (an existing path that is not a directory)."""
    if is_remote(path):
        return gfile().exists(path) and not gfile().isdir(path)
    return os.path.isfile(path)


def getsize(path):
    """os.path.getsize for any file system."""
    return gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def listdir(path):
    """os.listdir for any file system."""
    return gfile().listdir(path) if is_remote(path) else os.listdir(path)


def makedirs(path):
    """os.makedirs(path, exist_ok=True) for any file system."""
    if is_remote(path):
        gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def sha256(path):
    """Hex SHA-256 of a file's bytes, on any file system (read in 1 MB blocks)."""
    digest = hashlib.sha256()
    with open_file(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def abspath(path):
    """os.path.abspath for local paths; a path with a scheme is already absolute."""
    return path if is_remote(path) else os.path.abspath(path)


def checkpoint_reader(path):
    """tf.train.load_checkpoint(path) for a checkpoint prefix or a directory, on any file system.

    TensorFlow's own treats `path` as a directory when the file system says it is one, and
    ram:// says so of every prefix of a file name ("ckpt-6" of "ckpt-6.index").
    """
    import tensorflow as tf

    if isdir(path):
        return tf.train.load_checkpoint(path)
    return tf.compat.v1.train.NewCheckpointReader(str(path))


def list_checkpoint_variables(path):
    """tf.train.list_variables(path) through checkpoint_reader: sorted (name, shape) pairs."""
    return sorted(checkpoint_reader(path).get_variable_to_shape_map().items())
