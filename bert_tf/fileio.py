"""File access for local paths and any tf.io.gfile file system (gs://, s3://, hdfs://, ram://).

Atomic writes: a reader (or a crash) never sees a half-written output file.
- Local paths: a temporary file in the same directory, fsync'ed, then os.replace.
- Object stores (gs://, s3://): a rename there is a copy plus a delete, and an object becomes
  visible only once its upload completes, so the object is written in place.
- Other file systems (hdfs://, ram://, ...): a temporary file beside the target, then
  tf.io.gfile.rename(overwrite=True).

Publishing against a concurrent writer: a command takes `state(path)` of each output when it
checks it, and its final move (`write_bytes_atomic(..., expected=...)`, `publish_file`,
`publish_dir`) refuses with TargetChangedError, naming the path, when what is there is no
longer that: a target that did not exist is never replaced by one that appeared meanwhile.

Local paths use the Python built-ins (fast, no TensorFlow import); TensorFlow is imported only
when a path has a scheme, so TF-free tools (create_pretraining_data) stay TF-free for local files.
"""

import contextlib
import errno
import hashlib
import io
import os
import re
import shutil
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


# `expected` when the caller does not compare the target with an earlier state.
NOT_CHECKED = object()


class TargetChangedError(OSError):
    """An output's target appeared or changed after the command checked it (another writer)."""


def _changed(path):
    return TargetChangedError(
        f"{path} appeared or changed after this command checked it (another command writing "
        "there?); nothing there was replaced: rerun once it is free, or choose another output")


def state(path):
    """What is at `path` now, as publishing compares it: None when nothing is there; else the
    kind ("file" or "dir") and (relative name, size, modification time in ns) of every file
    under it."""
    path = str(path)
    if is_remote(path):
        if not gfile().exists(path):
            return None
        if not gfile().isdir(path):
            stat = gfile().stat(path)
            return ("file", (("", stat.length, stat.mtime_nsec),))
        entries = []
        for directory, _, names in gfile().walk(path):
            for name in names:
                stat = gfile().stat(f"{directory.rstrip('/')}/{name}")
                relative = f"{directory.rstrip('/')}/{name}"[len(path.rstrip("/")) + 1:]
                entries.append((relative, stat.length, stat.mtime_nsec))
        return ("dir", tuple(sorted(entries)))
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    if not os.path.isdir(path):
        return ("file", (("", stat.st_size, stat.st_mtime_ns),))
    entries = []
    for directory, dirs, names in os.walk(path):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            full = os.path.join(directory, name)
            try:
                stat = os.lstat(full)
            except FileNotFoundError:
                continue
            entries.append((os.path.relpath(full, path), stat.st_size, stat.st_mtime_ns))
    return ("dir", tuple(sorted(entries)))


def _empty(snapshot):
    return snapshot is None or snapshot == ("dir", ())


def check_unchanged(path, expected):
    """Raises TargetChangedError naming `path` when state(path) is no longer `expected`."""
    if expected is not NOT_CHECKED and state(path) != expected:
        raise _changed(path)


def write_bytes_atomic(path, data, expected=NOT_CHECKED):
    """Writes `data` (bytes) to `path` so that `path` holds either the old or the new content.

    Args:
      expected: state(path) when the command checked it: the write refuses
        (TargetChangedError) when the target is no longer that (NOT_CHECKED: no comparison).
    """
    path = str(path)
    if is_remote(path):
        check_unchanged(path, expected)
        _commit_remote(path, lambda target: _write_gfile(target, data),
                       replace=not _empty(expected) or expected is NOT_CHECKED)
    else:
        _write_local_atomic(path, data, expected)


def _write_gfile(path, data):
    with gfile().GFile(path, "wb") as f:
        f.write(data)


def _commit_remote(path, write, replace=True):
    """Calls write(target) so that `path` appears whole: target is `path` itself on object
    stores, else a temporary name beside it that is then renamed over `path` (with `replace`
    False, a rename that fails when `path` exists)."""
    if path.startswith(_OBJECT_STORES):
        write(path)
        return
    directory, name = path.rsplit("/", 1)
    tmp = f"{directory}/.tmp_{uuid.uuid4().hex[:8]}_{name}"
    try:
        write(tmp)
        _rename_remote(tmp, path, replace)
    except BaseException:
        if gfile().exists(tmp):
            gfile().remove(tmp)
        raise


def _rename_remote(source, path, replace):
    """Renames `source` to `path` on a remote file system; with `replace` False, one that finds
    `path` there raises TargetChangedError naming it."""
    try:
        gfile().rename(source, path, overwrite=replace)
    except Exception as e:  # noqa: BLE001 - tf.errors.AlreadyExistsError, imported lazily
        if not replace and type(e).__name__ == "AlreadyExistsError":
            raise _changed(path) from None
        raise


def temp_file_beside(path):
    """A new, empty local file beside `path` to write it in before it is moved into place:
    its name is mkstemp's (O_EXCL: never a file or link already there, so a write never goes
    through a link into another file), its mode the one a plain open() gives (not 0600)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tmp_",
                               suffix="_" + os.path.basename(path))
    os.close(fd)
    os.chmod(tmp, 0o666 & ~current_umask())
    return tmp


def _write_local_atomic(path, data, expected=NOT_CHECKED):
    tmp = temp_file_beside(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            # Without this a power loss after the rename can leave an empty file under `path`.
            os.fsync(f.fileno())
        _move_local_file(tmp, path, expected)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _move_local_file(tmp, path, expected):
    if expected is NOT_CHECKED or not _empty(expected):
        check_unchanged(path, expected)
        os.replace(tmp, path)
        return
    if os.path.isdir(path):
        raise _changed(path)
    try:
        # A hard link fails when the name exists: a file that appeared since the check stays.
        os.link(tmp, path)
    except FileExistsError:
        raise _changed(path) from None
    except OSError:
        # File systems without hard links: the narrow window of a check and a rename.
        check_unchanged(path, expected)
        os.replace(tmp, path)
        return
    os.remove(tmp)


def publish_file(local_file, path, expected=NOT_CHECKED):
    """Moves the finished file `local_file` to `path` (a rename on one file system; a local
    file to a remote `path` is copied), refusing with TargetChangedError naming `path` when what is
    there is no longer `expected` (state(path) taken when the command checked it)."""
    path = str(path)
    if is_remote(path):
        check_unchanged(path, expected)
        replace = expected is NOT_CHECKED or not _empty(expected)
        if is_remote(local_file):  # written beside `path` on its file system
            _rename_remote(local_file, path, replace)
            return
        _commit_remote(path, lambda target: gfile().copy(local_file, target, overwrite=True),
                       replace=replace)
        os.remove(local_file)
        return
    fsync_file(local_file)
    _move_local_file(local_file, path, expected)


@contextlib.contextmanager
def staging_dir(path, prefix):
    """A new empty local directory (yielded) to build the output directory `path` in before
    publish_dir moves it there; removed, with whatever is left in it, at exit.

    For a local `path` it is made beside the directory `path` names (through symbolic links),
    so that publishing is a rename; a remote `path` is staged in the local temporary
    directory. Its mode is the one a new directory gets (0777 less the umask), not mkdtemp's
    0700: what is published is readable as any directory the user makes.
    """
    path = str(path)
    parent = None
    if not is_remote(path):
        parent = os.path.dirname(os.path.realpath(path))
        os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(dir=parent, prefix=prefix)
    try:
        os.chmod(staging, 0o777 & ~current_umask())
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def publish_dir(staging, path, expected=NOT_CHECKED, prefix=".tmp_old_"):
    """Moves the finished local directory `staging` to `path`, replacing what was there.

    Local: `staging` (made by staging_dir) is renamed into place: into the directory a
    symbolic link `path` names, which stays a link. When `expected` is a
    directory with files (an earlier output being replaced), it is renamed aside first and
    compared there: a target another writer changed is put back and TargetChangedError names
    it. When nothing (or an empty directory) was there, the rename fails rather than replace
    what appeared since. Remote: compared, then the files are uploaded (the target removed
    first), saved_model.pb last so that a server polling for it never loads half a model.
    """
    path = str(path)
    if is_remote(path):
        check_unchanged(path, expected)
        _upload_dir(staging, path)
        return
    path = os.path.realpath(path)
    if expected is NOT_CHECKED or not _empty(expected):
        if os.path.exists(path):
            # A fresh name: a sibling the user keeps (EXPORT/1.old) is never removed.
            old = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=prefix)
            os.rmdir(old)
            os.rename(path, old)
            if expected is not NOT_CHECKED and state(old) != expected:
                try:
                    os.rename(old, path)
                except OSError:
                    raise TargetChangedError(
                        f"{path} changed after this command checked it (another command "
                        f"writing there?); what was there is kept at {old}") from None
                raise _changed(path)
            try:
                os.rename(staging, path)
            except OSError:
                raise TargetChangedError(
                    f"{path} appeared while this command replaced it (another command writing "
                    f"there?); what was there is kept at {old}") from None
            shutil.rmtree(old, ignore_errors=True)
            return
        if expected is not NOT_CHECKED:
            raise _changed(path)
    try:
        # Replaces an empty directory; fails (ENOTEMPTY, ENOTDIR) on anything else.
        os.rename(staging, path)
    except (FileExistsError, NotADirectoryError, IsADirectoryError):
        raise _changed(path) from None
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise _changed(path) from None
        raise


def _upload_dir(source, target):
    if gfile().exists(target):
        gfile().rmtree(target)
    files = []
    for directory, _, names in os.walk(source):
        files.extend(os.path.join(directory, name) for name in names)
    files.sort(key=lambda path: os.path.basename(path) == "saved_model.pb")
    for path in files:
        destination = "/".join([target, *os.path.relpath(path, source).split(os.sep)])
        gfile().makedirs(destination.rsplit("/", 1)[0])
        gfile().copy(path, destination, overwrite=True)


def fsync_file(path):
    """Flushes a finished local file to disk, before it is renamed into place."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def current_umask():
    """The process's umask (read by setting it and setting it back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path, text, expected=NOT_CHECKED):
    """Writes `text` as UTF-8 to `path` atomically (write_bytes_atomic)."""
    write_bytes_atomic(path, text.encode("utf-8"), expected)


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


class NotUtf8Error(ValueError):
    """A file that is not UTF-8 text: `line` (1-based) holds its first undecodable byte,
    `byte` (its value)."""

    def __init__(self, path, line, byte):
        super().__init__(f"{path}:{line}: not UTF-8 (byte 0x{byte:02x})")
        self.path, self.line, self.byte = path, line, byte


def read_utf8(path):
    """The text of the file `path`, decoded as UTF-8 (newlines kept as written).

    Raises:
      NotUtf8Error naming the first line that is not UTF-8.
    """
    with open_file(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NotUtf8Error(path, data[:e.start].count(b"\n") + 1, data[e.start]) from None


def named(path, flag):
    """How a message names `path`: as the flag it came from gave it (--init_checkpoint=PATH),
    or alone where a Python caller passed it (flag None)."""
    return f"{flag}={path}" if flag else str(path)


def not_a_file(path, named=None):
    """None when `path` is a file, else why not in a message that starts with `named` (the
    path, or "--flag=path"): "... is a directory; expected a file", "... is a symbolic link
    that loops", "... is a broken symbolic link (to x)" or "...: no such file"."""
    path, named = str(path), named or str(path)
    if isfile(path):
        return None
    if isdir(path):
        return f"{named} is a directory; expected a file"
    if not is_remote(path) and os.path.islink(path):
        try:
            os.stat(path)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return f"{named} is a symbolic link that loops (it leads back to itself)"
        return f"{named} is a broken symbolic link (to {os.readlink(path)}, which does not exist)"
    return f"{named}: no such file"


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


def remove(path):
    """os.remove for any file system."""
    if is_remote(path):
        gfile().remove(path)
    else:
        os.remove(path)


def remove_tree(path):
    """Removes a file, or a directory with everything in it, on any file system (a symbolic
    link is removed, not what it names)."""
    if is_remote(path):
        if gfile().isdir(path):
            gfile().rmtree(path)
        else:
            gfile().remove(path)
    elif os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def rename(source, target):
    """Renames a file over `target` (os.replace; on object stores a copy, then a delete)."""
    if is_remote(source):
        gfile().rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


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


def resolve(path):
    """`path` as outputs and inputs are compared: absolute with symlinks followed; a remote URL
    with `/./` and trailing slashes folded."""
    path = str(path)
    if is_remote(path):
        scheme, rest = path.split("://", 1)
        return f"{scheme}://{os.path.normpath('/' + rest).lstrip('/')}"
    return os.path.realpath(os.path.expanduser(path))


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


def failure_reason(error):
    """What a failed read or write says, in a few words (every message that names one reads
    alike): an OSError's own text (`No space left on device`), the OS error's text where the
    error ends in one (Orbax's TensorStore errors bury `No space left on device
    [os_error_code='28']` at the end of a line of paths), else its first line (TensorFlow's
    errors: their message)."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    text = str(getattr(error, "message", None) or error)
    code = re.search(r"\[os_error_code='?([0-9]+)'?\]", text)
    if code:
        return os.strerror(int(code.group(1)))
    return text.splitlines()[0][:300] if text else type(error).__name__


def process_alive(pid):
    """Whether the process `pid` of this host is running, what tells the files a killed process
    left from a live one's: one of another user's counts as running, and so does a pid that
    cannot be read (whose it is cannot be told)."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError):
        return True
    return True
