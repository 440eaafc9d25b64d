"""A checkout's `bert-tf-embed`: runs bert_tf.cli.embed (see its --help)."""

import os
import sys

# A checkout that is not pip-installed still runs: put the repository root on the path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_tf.cli.embed import run  # noqa: E402

if __name__ == "__main__":
    run()
