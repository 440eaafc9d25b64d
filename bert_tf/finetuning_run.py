"""Old name of bert_tf.jobs.finetuning, the fine-tuning driver; kept for imports."""
from bert_tf.jobs.finetuning import *  # noqa: F403
