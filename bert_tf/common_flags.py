"""Old name of bert_tf.jobs.run_setup (the flags are in bert_tf.cli.flags); kept for imports."""
from bert_tf.jobs.run_setup import *  # noqa: F403
