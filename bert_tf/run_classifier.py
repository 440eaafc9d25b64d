"""The original script name: runs bert_tf.cli.classify (see its --help)."""
from bert_tf.cli.classify import *  # noqa: F403
from bert_tf.cli.classify import run

if __name__ == "__main__":
    run()
