"""A run directory (--output_dir of a job that trains): its files, lock, run record and casing.

The one owner of what a run directory holds, one module per concern: its file names
(bert_tf.file_names, a leaf below text/ and training/, which name its files too; re-exported
here), checkpoints (the training checkpoints it holds), contents (its model file, the names
that mark a run's directory, eval-only results, the writability probe), lock (owned and the
RunDirectoryLock), record (the RunRecord, its legacy reader and recorded_casing), resume
(check_resume) and errors. Every job that trains (pre-training, fine-tuning,
embedding training, on any backend) and every reader of a run (fine-tuning and export from it,
warm starts, embedding, feature extraction, the output rule of the commands) names the files
through this module, holds the directory with `owned`, records itself with `write_record` and
checks a resume with `check_resume`; `recorded_casing` is the one reader of the casing a run
tokenized with.

A run directory holds (each job writes its part):

  bert_tf_run.json             the run record (RunRecord): what a resume must share with the run
  .bert_tf_run.lock            held by the run while it runs (one run per directory)
  ckpt-<step>.*, checkpoint    training checkpoints (step-exact resume)
  bert_config.json             the model config
  vocab.txt | tokenizer.json   the tokenizer (WordPiece | byte-level BPE)
  <command>.flags              the command line as a flagfile (run_pretraining.flags, ...)
  pretrainer.keras,            pre-training's models
    encoder.keras
  model.keras, task_info.json  a fine-tuned or embedding model and its serving settings
  best/, features/,            the best weights, cached feature records, TensorBoard scalars
    summaries/
  results.json,                metrics
    eval_results.txt|json
  eval_only_results.jsonl      what each run that evaluated or predicted without training
                               found, one JSON object a line (such a run writes nothing else
                               of the run's)

Runs written before the run record (bert_tf 0.1) are read through one legacy reader: their
finetuning_run.json, task_info.json or run_pretraining.flags (an absl flagfile) become the same
RunRecord (record). Imports no TensorFlow and no Keras (local paths use the Python built-ins,
a path with a scheme tf.io.gfile through bert_tf.fileio), so every backend's jobs use it.
"""

from bert_tf.file_names import (BEST_DIR, BEST_METRICS_FILE, CHECKPOINT_PREFIX,
                                CHECKPOINT_STATE_FILE, CONFIG_FILE, EMBEDDING_COMMAND,
                                EMBEDDING_TASK, ENCODER_FILE, EVAL_ONLY_RESULTS_FILE,
                                EVAL_RESULTS_JSON_FILE, EVAL_RESULTS_TEXT_FILE, FEATURES_DIR,
                                FINETUNING_COMMANDS, JAX_CHECKPOINT_SUFFIX,
                                JAX_CHECKPOINT_SUFFIXES, JAX_NPZ_CHECKPOINT_SUFFIX,
                                LEGACY_FINETUNING_RECORD, LOCK_FILE, MODEL_FILE, MODEL_FILES,
                                PRETRAINER_FILE, PRETRAINING_COMMAND, PRETRAINING_FLAGS_FILE,
                                RECORD_FILE, RESULTS_FILE, RUN_MARKERS, SENTENCE_TRANSFORMERS_DIR,
                                SUMMARIES_DIR, TASK_INFO_FILE, TEMPORARY_PATTERNS, TOKENIZER_FILE,
                                VOCAB_FILE, checkpoint_name, checkpoint_name_step, checkpoint_step,
                                flags_file, is_checkpoint_file, is_temporary, path)
from bert_tf.run_directory.errors import (DirectoryInUseError, ResumeMismatchError,
                                          RunDirectoryError, TrainedFileError)
from bert_tf.run_directory.checkpoints import (checkpoint_backend, checkpoint_names,
                                               checkpoint_prefixes, has_checkpoint,
                                               jax_checkpoint_file, jax_checkpoint_steps)
from bert_tf.run_directory.contents import (append_eval_only_results, check_writable, markers,
                                            model_file, model_runs, writing_after_training)
from bert_tf.run_directory.lock import (RunDirectoryLock, describe_holder, lock_holder, owned,
                                        remove_stale_temp_files)
from bert_tf.run_directory.record import (JOBS, RECORD_FORMAT, RunRecord, read_flagfile,
                                          read_record, recorded_casing, recorded_command,
                                          tokenizer_digest, write_record)
from bert_tf.run_directory.resume import (check_checkpoints_backend, check_resume, resume_problems)

__all__ = [
    "BEST_DIR",
    "BEST_METRICS_FILE",
    "CHECKPOINT_PREFIX",
    "CHECKPOINT_STATE_FILE",
    "CONFIG_FILE",
    "EMBEDDING_COMMAND",
    "EMBEDDING_TASK",
    "ENCODER_FILE",
    "EVAL_ONLY_RESULTS_FILE",
    "EVAL_RESULTS_JSON_FILE",
    "EVAL_RESULTS_TEXT_FILE",
    "FEATURES_DIR",
    "FINETUNING_COMMANDS",
    "JAX_CHECKPOINT_SUFFIX",
    "JAX_CHECKPOINT_SUFFIXES",
    "JAX_NPZ_CHECKPOINT_SUFFIX",
    "LEGACY_FINETUNING_RECORD",
    "LOCK_FILE",
    "MODEL_FILE",
    "MODEL_FILES",
    "PRETRAINER_FILE",
    "PRETRAINING_COMMAND",
    "PRETRAINING_FLAGS_FILE",
    "RECORD_FILE",
    "RESULTS_FILE",
    "RUN_MARKERS",
    "SENTENCE_TRANSFORMERS_DIR",
    "SUMMARIES_DIR",
    "TASK_INFO_FILE",
    "TEMPORARY_PATTERNS",
    "TOKENIZER_FILE",
    "VOCAB_FILE",
    "checkpoint_name",
    "checkpoint_name_step",
    "checkpoint_step",
    "flags_file",
    "is_checkpoint_file",
    "is_temporary",
    "path",
    "DirectoryInUseError",
    "ResumeMismatchError",
    "RunDirectoryError",
    "TrainedFileError",
    "checkpoint_backend",
    "checkpoint_names",
    "checkpoint_prefixes",
    "has_checkpoint",
    "jax_checkpoint_file",
    "jax_checkpoint_steps",
    "append_eval_only_results",
    "check_writable",
    "markers",
    "model_file",
    "model_runs",
    "writing_after_training",
    "RunDirectoryLock",
    "describe_holder",
    "lock_holder",
    "owned",
    "remove_stale_temp_files",
    "JOBS",
    "RECORD_FORMAT",
    "RunRecord",
    "read_flagfile",
    "read_record",
    "recorded_casing",
    "recorded_command",
    "tokenizer_digest",
    "write_record",
    "check_checkpoints_backend",
    "check_resume",
    "resume_problems",
]
