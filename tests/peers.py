"""The peers' interpreter: a Python with PyTorch, transformers, sentence-transformers, onnx and
onnxruntime, in which parity tests run the reference implementations bert_tf is compared with.

It comes from the environment variable BERT_TF_PEERS_PYTHON (docs/design.md, "Parity with the
peers"); a test that needs it is skipped, naming the variable, where it is unset. CI sets
none: the parity tests against committed fixtures run there instead.
"""

import os

import pytest

ENV = "BERT_TF_PEERS_PYTHON"


def python():
    """The peers' interpreter, or None when BERT_TF_PEERS_PYTHON is unset.

    Raises:
      pytest's failure when the variable names no executable file: a set variable means the
      parity tests were meant to run.
    """
    path = os.environ.get(ENV)
    if not path:
        return None
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"{ENV}={path}: no such executable file (expected the peers' Python)")
    return path


def needs(what):
    """A skipif marker for tests that run `what` (e.g. "transformers") in the peers' Python."""
    return pytest.mark.skipif(not os.environ.get(ENV),
                              reason=f"set {ENV} to a Python with {what} to run it")
