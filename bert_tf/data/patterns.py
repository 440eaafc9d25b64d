"""Expands comma-separated input globs into file lists, without importing TensorFlow.

Local paths use Python's glob; paths with a scheme (gs://, s3://, ...) need a TensorFlow file
system, so only those import TensorFlow, and only when one is given.
"""

import glob as pyglob
import os


def has_scheme(path):
    """True for a path on a non-local file system ("gs://bucket/x"), False for a local path."""
    return "://" in path


def expand_input_patterns(input_patterns):
    """Expands comma-separated / listed glob patterns into a sorted, de-duplicated file list.

    Args:
      input_patterns: a str (one pattern or several separated by commas) or a list of str.

    Returns:
      list of file paths, sorted within each pattern, in pattern order.

    Raises:
      ValueError: a pattern matches no file (the pattern is named), or no pattern is given.
    """
    if isinstance(input_patterns, (str, bytes)):
        input_patterns = [input_patterns]
    patterns = []
    for entry in input_patterns:
        entry = entry.decode() if isinstance(entry, bytes) else entry
        patterns.extend(p.strip() for p in entry.split(",") if p.strip())
    if not patterns:
        raise ValueError(f"No input pattern given (got {input_patterns!r}).")
    files, seen = [], set()
    for pattern in patterns:
        # A plain path matches itself if it exists, so a missing file is reported the same way
        # as an empty glob.
        if has_scheme(pattern):
            import tensorflow as tf  # only remote file systems need it

            matched = sorted(tf.io.gfile.glob(pattern))
        else:
            if not pyglob.has_magic(pattern) and os.path.isdir(pattern):
                raise ValueError(f'Input "{pattern}" is a directory; expected a file or a glob '
                                 f'of files (e.g. "{os.path.join(pattern, "*")}").')
            matched = sorted(path for path in pyglob.glob(pattern) if not os.path.isdir(path))
        if not matched:
            raise ValueError(f'No files match input pattern "{pattern}".')
        for path in matched:
            if path not in seen:
                seen.add(path)
                files.append(path)
    return files
