"""Pre-training input pipelines: TFRecords of masked examples, or raw text masked on the fly."""

from bert_tf.data.dynamic_masking import text_pretraining_dataset
from bert_tf.data.pretraining_dataset import pretraining_dataset

__all__ = ["pretraining_dataset", "text_pretraining_dataset"]
