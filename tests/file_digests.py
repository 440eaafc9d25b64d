"""What a test hashes to show that nothing a command could lose was changed."""

import hashlib
import os


def digest(path):
    """{relative path: sha256} of every file under the directory `path` (of the file `path`:
    {"": sha256})."""
    path = str(path)
    if os.path.isfile(path):
        with open(path, "rb") as f:
            return {"": hashlib.sha256(f.read()).hexdigest()}
    found = {}
    for directory, _, names in os.walk(path):
        for name in names:
            full = os.path.join(directory, name)
            with open(full, "rb") as f:
                found[os.path.relpath(full, path)] = hashlib.sha256(f.read()).hexdigest()
    return found
