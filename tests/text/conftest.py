"""Fixtures shared by the bert_tf.text tests."""

import pytest


@pytest.fixture
def write_vocab_file(tmp_path):
    """Writes a list of tokens to a vocab file under tmp_path and returns its path."""

    def write(tokens, name="vocab.txt"):
        path = tmp_path / name
        path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
        return str(path)

    return write
