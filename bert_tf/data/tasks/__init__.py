"""Fine-tuning task data: readers, features and cached TFRecords of the tasks.

classifier_data.py (CSV / TSV / JSONL) and glue.py (GLUE TSV and TFDS glue/*) for
classification, tagging_data.py (CoNLL) for token tagging, squad.py and squad_postprocess.py
for SQuAD, feature_records.py (the cached TFRecords and their dataset), length_buckets.py
(batches padded to their bucket), task_errors.py (DataError and where in a file it is).
"""
