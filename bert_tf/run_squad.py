"""The original script name: runs bert_tf.cli.squad (see its --help)."""
from bert_tf.cli.squad import *  # noqa: F403
from bert_tf.cli.squad import run

if __name__ == "__main__":
    run()
