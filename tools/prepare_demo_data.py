"""A checkout's `bert-tf-prepare-demo-data`: runs bert_tf.cli.prepare_demo_data (see its --help)."""

import os
import sys

# A checkout that is not pip-installed still runs: put the repository root on the path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_tf.cli.prepare_demo_data import run  # noqa: E402

if __name__ == "__main__":
    run()
