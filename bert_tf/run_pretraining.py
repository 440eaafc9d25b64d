"""The original script name: runs bert_tf.cli.pretrain (see its --help)."""
from bert_tf.cli.pretrain import *  # noqa: F403
from bert_tf.cli.pretrain import run

if __name__ == "__main__":
    run()
