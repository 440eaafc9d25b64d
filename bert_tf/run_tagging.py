"""The original script name: runs bert_tf.cli.tag (see its --help)."""
from bert_tf.cli.tag import *  # noqa: F403
from bert_tf.cli.tag import run

if __name__ == "__main__":
    run()
