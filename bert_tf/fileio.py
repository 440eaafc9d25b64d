"""Atomic file writes: a reader (or a crash) never sees a half-written output file."""

import os
import tempfile


def write_bytes_atomic(path, data):
    """Writes `data` (bytes) to `path` via a temporary file and a rename in the same directory."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp_", suffix="_" + os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # mkstemp creates 0600; give the file the mode a plain open() would have.
        os.chmod(tmp, 0o666 & ~_current_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path, text):
    """Writes `text` as UTF-8 to `path` atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))
