"""Data: what pre-training reads and what the fine-tuning tasks read.

  pretraining/   text -> masked-LM / next-sentence instances: create_pretraining_data (records,
                 local and Beam; instance making in instances.py), the masking recipe, row
                 packing, the TFRecord pipeline (record_dataset) and the raw-text pipeline that
                 masks on the fly (text_dataset), the demo corpus
  tasks/         GLUE / CSV / TSV / JSONL classification, CoNLL tagging and SQuAD readers and
                 features, their cached TFRecords, length buckets
  patterns.py    comma-separated globs -> files (both halves)

The two pre-training pipelines are exported here, imported when first used, so the
TensorFlow-free parts (record making, tfrecord_io, patterns) start without loading TensorFlow:
`from bert_tf.data import pretraining_dataset, text_pretraining_dataset`.
"""

from bert_tf import lazy_names

_LAZY = {
    "pretraining_dataset": "bert_tf.data.pretraining.record_dataset",
    "text_pretraining_dataset": "bert_tf.data.pretraining.text_dataset",
}


__getattr__ = lazy_names.module_getattr(__name__, _LAZY)


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = list(_LAZY)
