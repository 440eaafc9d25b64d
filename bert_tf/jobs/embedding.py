"""The sentence-embedding job: contrastive fine-tuning of a sentence embedder, and encoding.

`train(EmbeddingConfig(...))` is what `bert-tf-embed --train_file` (bert_tf.cli.embed) runs,
`encode(EmbeddingConfig(...))` what `bert-tf-embed --input_file` runs; the command's module
doc describes both. An EmbeddingConfig (bert_tf.jobs.embedding_config) holds a task section
(EmbeddingTask: the model, the pairs and the loss, the texts to encode), a trainer section
(EmbeddingTrainerConfig) and a runtime section (bert_tf.jobs.sections), with --output_dir and
--sentence_transformers_dir beside them; every field's name is its flag's, so every error names
the flag. Build one as that module shows or, from the flags' flat names,
`bert_tf.jobs.sections.from_flat(EmbeddingConfig, init_checkpoint=..., train_file=...,
num_train_epochs=2, output_dir=...)`.

A training run's --output_dir is a bert_tf.run_directory: the run holds its lock while it
trains, and a rerun resumes its checkpoints only with the model, tokenizer, casing, pooling,
normalisation, sequence length and batch size its run record holds. It receives ckpt-<step>
checkpoints, best/, summaries/, bert_tf_run.json, and at the end model.keras, the tokenizer
file (vocab.txt, or tokenizer.json for byte-level BPE), task_info.json, eval_results.json and
sentence_transformers/ (a directory sentence-transformers loads).
"""

import functools
import io
import json
import os

import numpy as np
from absl import logging

from bert_tf import fileio, progress, run_directory
from bert_tf.data.tasks import classifier_data, length_buckets
from bert_tf.data.tasks.pairs import read_pairs, read_scored_pairs
from bert_tf.data.tasks.task_errors import DataError
from bert_tf.fileio import write_bytes_atomic, write_text_atomic
from bert_tf.interop.sentence_transformers import (layout_problem, load_embedder,
                                                   save_sentence_transformers)
from bert_tf.jobs import runtime_setup, tokenizer_setup
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.jobs.embedding_config import check_encoding, check_training
from bert_tf.serving.task_info import write_task_info
from bert_tf.tasks.base import TextTask
from bert_tf.text import tokenizer_files
from bert_tf.training import contrastive
from bert_tf.training.checkpointing import save_keras_model
from bert_tf.training.bulk_embedder import BulkEmbedder


def _buckets(value, max_seq_length, max_positions, coarse):
    """The bucket lengths of --length_buckets=`value` (off: one, max_seq_length)."""
    try:
        return length_buckets.parse_buckets(value, max_seq_length, max_positions,
                                            coarse=coarse) or [max_seq_length]
    except length_buckets.BucketError as e:
        raise FlagValueError(str(e)) from None


def _load(task):
    """The embedder of the task's --init_checkpoint with its model settings."""
    tokenizer_setup.check_vocab_file_beside(task.vocab_file, task.init_checkpoint)
    return load_embedder(task.init_checkpoint, pooling=task.pooling,
                         normalize=task.normalize, vocab_file=task.vocab_file,
                         do_lower_case=task.do_lower_case,
                         max_seq_length=task.max_seq_length)


def _pair_columns(task):
    """The pair files' columns the flags name (None: the usual names)."""
    return dict(anchor=task.text_a_column, positive=task.text_b_column,
                negative=task.negative_column)


def _read_texts(task):
    """The texts of --input_file: one per line, or the --text_a_column of a CSV, TSV or JSONL
    file."""
    path = task.input_file
    if os.path.splitext(path)[1].lower() not in classifier_data.FILE_FORMATS:
        return _read_lines(path)
    if not task.text_a_column:
        raise FlagValueError(f"--input_file={path}: give --text_a_column, the column (JSONL "
                             "key) of the texts (a .txt file holds one text per line)")
    return [example.text_a for example in classifier_data.read_table_examples(
        path, text_a_column=task.text_a_column, require_labels=False, keep_empty=True)]


def _read_lines(path):
    try:
        text = fileio.read_utf8(path)
    except fileio.NotUtf8Error as e:
        raise DataError(f"{path}:{e.line}: not UTF-8") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def encode(job):
    """Encode mode: the texts of --input_file (one per line, or the --text_a_column of a CSV,
    TSV or JSONL file) -> float32 [N, D] vectors in input order in --output_file (.npy or
    .jsonl). Returns the number of texts.

    Reads the job's task section (an EmbeddingConfig's). The command checks --output_file
    against the output rule first (bert_tf.cli.outputs).
    """
    task = job.task
    check_encoding(task)
    extension = os.path.splitext(task.output_file)[1].lower()
    expected = fileio.state(task.output_file)
    texts = _read_texts(task)
    loaded = _load(task)
    config = loaded.model.encoder.config
    embedder = BulkEmbedder(loaded.model, loaded.tokenizer, loaded.do_lower_case,
                            loaded.max_seq_length, batch_size=task.batch_size,
                            buckets=_buckets(task.length_buckets, loaded.max_seq_length,
                                             config.max_position_embeddings, coarse=False))
    ids_list, truncated = embedder.tokenize(texts)
    TextTask.log_truncated(truncated, len(texts))
    bar = progress.progress_bar(len(texts), "text")
    vectors = embedder.embed_ids(ids_list, progress=bar.update)
    if extension == ".npy":
        buffer = io.BytesIO()
        np.save(buffer, vectors)
        write_bytes_atomic(task.output_file, buffer.getvalue(), expected)
    else:
        write_text_atomic(task.output_file, "".join(
            json.dumps({"index": i, "embedding": [float(x) for x in v]}) + "\n"
            for i, v in enumerate(vectors)), expected)
    return len(texts)


def contrastive_config(job, train_buckets):
    """The ContrastiveConfig (bert_tf.training.contrastive) of the job: its trainer section's
    batch, schedule and cadence, its task's loss, its runtime's compilation and seed, and
    --output_dir; `train_buckets` are the lengths a batch side is padded to."""
    task, trainer, job_runtime = job.task, job.trainer, job.runtime
    try:
        return contrastive.ContrastiveConfig(
            output_dir=job.output_dir, train_batch_size=trainer.train_batch_size,
            num_train_epochs=trainer.num_train_epochs, learning_rate=trainer.learning_rate,
            warmup_proportion=trainer.warmup_proportion,
            weight_decay_rate=trainer.weight_decay_rate, scale=task.scale,
            symmetric_loss=task.symmetric_loss, length_buckets=tuple(train_buckets),
            save_checkpoints_steps=trainer.save_checkpoints_steps,
            steps_per_loop=runtime_setup.steps_per_loop(trainer), log_steps=trainer.log_steps,
            jit_compile=job_runtime.jit_compile, seed=job_runtime.seed)
    except ValueError as e:
        raise FlagValueError(str(e)) from None


def run_record(job, loaded):
    """The RunRecord of a training run (bert_tf.run_directory): what a resume of --output_dir
    must share with it, read from the loaded model (a sentence-transformers directory brings
    its own pooling and normalisation), the trainer's batch size and the task's
    --init_checkpoint."""
    return run_directory.RunRecord(
        job="embedding", command=run_directory.EMBEDDING_COMMAND,
        model_config=loaded.model.encoder.config.to_dict(),
        tokenizer_sha256=loaded.tokenizer.digest(),
        do_lower_case=bool(loaded.do_lower_case),
        settings={"max_seq_length": int(loaded.max_seq_length),
                  "pooling": list(loaded.model.pooling),
                  "normalize": bool(loaded.model.normalize),
                  "train_batch_size": job.trainer.train_batch_size},
        init_checkpoint=job.task.init_checkpoint)


def train(job):
    """Training mode: contrastive fine-tuning of --init_checkpoint on --train_file.

    Every check that can refuse the run (settings, data, the model, a resume of
    --output_dir's checkpoints) runs before --output_dir is taken: a refused run leaves
    nothing behind. The command checks --output_dir against the output rule first
    (bert_tf.cli.outputs).

    Args:
      job: an EmbeddingConfig.

    Returns:
      the run's results (also written to eval_results.json).

    Raises:
      FlagValueError, DataError, InteropError naming the flag or file at fault;
      bert_tf.run_directory.ResumeMismatchError naming every difference from the run whose
      checkpoints --output_dir holds; DirectoryInUseError while another run holds it.
    """
    task, trainer = job.task, job.trainer
    check_training(job)
    train_pairs = read_pairs(task.train_file, columns=_pair_columns(task))
    if len(train_pairs) < trainer.train_batch_size:
        raise FlagValueError(f"--train_batch_size={trainer.train_batch_size} exceeds the "
                             f"{len(train_pairs)} pairs of --train_file={task.train_file}")
    retrieval = (contrastive.RetrievalSet.from_pairs(
        read_pairs(task.dev_file, columns=_pair_columns(task)))
        if task.dev_file else None)
    scored = (read_scored_pairs(task.dev_scored_file, columns=dict(
        anchor=task.text_a_column, positive=task.text_b_column,
        score=task.label_column)) if task.dev_scored_file else None)
    run_directory.check_writable(job.output_dir)
    st_dir = _sentence_transformers_dir(job.sentence_transformers_dir, job.output_dir)
    # An explicit directory outside the run is published only if it stays as checked.
    st_expected = (fileio.NOT_CHECKED if st_dir is None or _in_run(job.output_dir, st_dir)
                   else fileio.state(st_dir))

    runtime_setup.check_backend(job.runtime)
    job_runtime = runtime_setup.make_runtime(
        job.runtime, {"train_batch_size": trainer.train_batch_size},
        varying_shapes=task.length_buckets not in ("off", None))
    with job_runtime.scope():
        loaded = _load(task)
    problem = st_dir and layout_problem(loaded.model)
    if problem and job.sentence_transformers_dir:
        raise FlagValueError(f"--sentence_transformers_dir={job.sentence_transformers_dir}: "
                             f"cannot hold this model ({problem}); pass "
                             "--sentence_transformers_dir=- to write none")
    if problem:  # The default place: the run keeps its model.keras without one.
        logging.warning("No sentence-transformers directory: %s", problem)
        st_dir = None
    record = run_record(job, loaded)
    run_directory.check_resume(job.output_dir, record, loaded.vocab_file)
    config = loaded.model.encoder.config
    embedder = BulkEmbedder(loaded.model, loaded.tokenizer, loaded.do_lower_case,
                            loaded.max_seq_length,
                            buckets=_buckets(task.length_buckets, loaded.max_seq_length,
                                             config.max_position_embeddings, coarse=False))
    train_buckets = _buckets(task.length_buckets, loaded.max_seq_length,
                             config.max_position_embeddings, coarse=True)
    settings = contrastive_config(job, train_buckets)
    chief = job_runtime.chief
    with run_directory.owned(job.output_dir, chief):
        # Again, now that no other run can change the record meanwhile.
        run_directory.check_resume(job.output_dir, record, loaded.vocab_file)
        if chief:
            run_directory.write_record(job.output_dir, record)
        summary = contrastive.train_embedder(settings, loaded.model, embedder, train_pairs,
                                             job_runtime, retrieval=retrieval, scored=scored)
        if chief:
            _write_run(job.output_dir, loaded, summary, st_dir, st_expected)
    best = summary["best"]
    if best:
        logging.info("Best %s=%.4f at step %d", best["metric"], best["metrics"][best["metric"]],
                     best["step"])
    return summary


def _sentence_transformers_dir(sentence_transformers_dir, output_dir):
    """Where the sentence-transformers directory goes: --sentence_transformers_dir, else
    output_dir/sentence_transformers; None for "-" (none)."""
    if sentence_transformers_dir == "-":
        return None
    return sentence_transformers_dir or run_directory.path(
        output_dir, run_directory.SENTENCE_TRANSFORMERS_DIR)


def _in_run(output_dir, path):
    root = os.path.realpath(output_dir).rstrip("/") + "/"
    return not fileio.is_remote(path) and os.path.realpath(path).startswith(root)


def _write_run(output_dir, loaded, summary, st_dir, st_expected):
    """model.keras, the tokenizer file (vocab.txt, or tokenizer.json for byte-level BPE),
    task_info.json, eval_results.json and the sentence-transformers directory of the final
    (best) model, each written atomically into `output_dir`; the sentence-transformers
    directory is made beside its place and moved there whole (fileio.publish_dir, compared
    with `st_expected`). A file that cannot be written (a full disk) loses no training: the
    same command resumes with nothing left to train and writes them
    (run_directory.writing_after_training)."""
    output = functools.partial(run_directory.path, output_dir)
    model_file = output(run_directory.MODEL_FILE)
    with run_directory.writing_after_training(output_dir, model_file):
        save_keras_model(loaded.model, model_file)
    files = (f"the run's files in {output_dir} (the tokenizer file, "
             f"{run_directory.TASK_INFO_FILE}, {run_directory.EVAL_RESULTS_JSON_FILE})")
    with run_directory.writing_after_training(output_dir, files):
        tokenizer_files.write_tokenizer_file(output_dir, loaded.tokenizer, loaded.vocab_file)
        write_task_info(output_dir, run_directory.EMBEDDING_TASK,
                        do_lower_case=bool(loaded.do_lower_case),
                        max_seq_length=int(loaded.max_seq_length))
        write_text_atomic(output(run_directory.EVAL_RESULTS_JSON_FILE),
                          json.dumps(summary, indent=2, sort_keys=True) + "\n")
    if st_dir is None:
        return
    with run_directory.writing_after_training(output_dir, st_dir):
        fileio.makedirs(os.path.dirname(fileio.abspath(st_dir)))
        with fileio.staging_dir(st_dir, ".tmp_sentence_transformers_") as staging:
            save_sentence_transformers(loaded.model, staging, loaded.vocab_file,
                                       loaded.do_lower_case, loaded.max_seq_length)
            fileio.publish_dir(staging, st_dir, st_expected,
                               prefix=".tmp_old_sentence_transformers_")
