r"""Sentence embeddings: contrastive fine-tuning, and encoding texts to vectors.

Fine-tune (pairs or triplets -> a bert_tf run and a sentence-transformers directory):

    bert-tf-embed --init_checkpoint=all-MiniLM-L6-v2/ --train_file=pairs.tsv \
        --dev_file=dev_pairs.tsv --output_dir=runs/search [--dev_scored_file=sts_dev.tsv] \
        [--train_batch_size=32 --num_train_epochs=1 --learning_rate=2e-5 --scale=20 \
         --symmetric_loss]

Encode (one text per line -> float32 [N, D] in input order, .npy or .jsonl):

    bert-tf-embed --init_checkpoint=runs/search --input_file=texts.txt \
        --output_file=vectors.npy

--init_checkpoint: a sentence-transformers directory (modules.json: Transformer, Pooling,
Normalize), a bert_tf embedding run (its output_dir) or any encoder checkpoint bert_tf reads
(original TF1, Hugging Face BERT or ModernBERT, keras-hub, a pre-training or converted run),
pooled by --pooling. Its tokenizer is the vocab.txt beside it, or its tokenizer.json (byte-level
BPE, e.g. ModernBERT's; --do_lower_case unset takes the file's casing); --vocab_file overrides.

Training files are CSV/TSV with a header or JSON lines: columns anchor, positive[, negative]
(bert_tf.data.tasks.pairs names the aliases). The loss is the multiple-negatives ranking loss with
in-batch negatives (bert_tf.training.contrastive), so --train_batch_size must be >= 2. The dev
file's anchors are queries over the corpus of its positives: recall@1/10, MRR@10 and nDCG@10
are computed after every --save_checkpoints_steps (default: an epoch), and the best nDCG@10
(or Spearman on --dev_scored_file when there is no --dev_file) is kept. The run writes
output_dir/model.keras, vocab.txt (or tokenizer.json), task_info.json, eval_results.json and
output_dir/sentence_transformers/ (a directory sentence-transformers loads).
"""

import json
import os
import sys
import keras
import numpy as np
import tensorflow as tf
from absl import flags, logging

from bert_tf import cli, fileio
from bert_tf.cli import outputs
from bert_tf.cli import flags as cli_flags
from bert_tf.jobs import run_setup
from bert_tf.jobs.run_setup import FlagValueError
from bert_tf.data.tasks import length_buckets
from bert_tf.data.tasks.pairs import read_pairs, read_scored_pairs
from bert_tf.data.tasks.task_errors import DataError
from bert_tf.fileio import write_bytes_atomic, write_text_atomic
from bert_tf.interop.sentence_transformers import load_embedder, save_sentence_transformers
from bert_tf.interop.weights import InteropError
from bert_tf.serving.task_info import write_task_info
from bert_tf.text.tokenizer_files import write_tokenizer_file
from bert_tf.training import contrastive
from bert_tf.training.checkpointing import (CheckpointError, check_writable_dir,
                                            save_keras_model)
from bert_tf.training.text_encoder import TextEncoder

FLAGS = flags.FLAGS
PROGRAM = "embed"
TASK = "sentence_embedding"


def define_flags(flag_values=FLAGS):
    """The command's flags (bert_tf.cli.flags' embed group); called when it runs."""
    return cli_flags.define_embed_flags(flag_values)


def _check_file(flag, path):
    if path and not tf.io.gfile.exists(path):
        raise FlagValueError(f"--{flag}={path}: no such file")


def _buckets(options, max_seq_length, max_positions, coarse):
    try:
        return length_buckets.parse_buckets(options.length_buckets, max_seq_length,
                                            max_positions, coarse=coarse) or [max_seq_length]
    except length_buckets.BucketError as e:
        raise FlagValueError(str(e)) from None


def _load(options):
    return load_embedder(options.init_checkpoint, pooling=options.pooling,
                         normalize=options.normalize, vocab_file=options.vocab_file,
                         do_lower_case=options.do_lower_case,
                         max_seq_length=options.max_seq_length)


def _read_lines(path):
    with fileio.open_file(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not UTF-8") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def encode(options):
    """Encode mode: --input_file -> --output_file. Returns the number of texts."""
    if not options.output_file:
        raise FlagValueError("--output_file is required with --input_file")
    extension = os.path.splitext(options.output_file)[1].lower()
    if extension not in (".npy", ".jsonl"):
        raise FlagValueError(f"--output_file={options.output_file}: expected a .npy or .jsonl "
                             "file")
    if options.batch_size < 1:
        raise FlagValueError(f"--batch_size={options.batch_size} must be >= 1")
    _check_file("input_file", options.input_file)
    try:
        outputs.check_output_files({"--output_file": options.output_file},
                                   {"--input_file": options.input_file,
                                    "--init_checkpoint": options.init_checkpoint})
    except outputs.OutputError as e:
        raise FlagValueError(str(e)) from None
    texts = _read_lines(options.input_file)
    loaded = _load(options)
    config = loaded.model.encoder.config
    encoder = TextEncoder(loaded.model, loaded.tokenizer, loaded.do_lower_case,
                          loaded.max_seq_length, batch_size=options.batch_size,
                          buckets=_buckets(options, loaded.max_seq_length,
                                           config.max_position_embeddings, coarse=False))
    bar = keras.utils.Progbar(len(texts), unit_name="text")
    vectors = encoder.encode(texts, progress=bar.update)
    if extension == ".npy":
        import io

        buffer = io.BytesIO()
        np.save(buffer, vectors)
        write_bytes_atomic(options.output_file, buffer.getvalue())
    else:
        write_text_atomic(options.output_file, "".join(
            json.dumps({"index": i, "embedding": [float(x) for x in v]}) + "\n"
            for i, v in enumerate(vectors)))
    return len(texts)


def _check_training_flags(options):
    if not options.output_dir:
        raise FlagValueError("--output_dir is required with --train_file")
    if options.train_batch_size < 2:
        raise FlagValueError(f"--train_batch_size={options.train_batch_size}: in-batch "
                             "negatives need at least 2 rows per batch")
    run_setup.check_numeric_flags(options)
    if not options.scale > 0 or not np.isfinite(options.scale):
        raise FlagValueError(f"--scale={options.scale} must be > 0 and finite")
    if options.save_checkpoints_steps is not None and options.save_checkpoints_steps < 1:
        raise FlagValueError(f"--save_checkpoints_steps={options.save_checkpoints_steps} must "
                             "be >= 1")
    for flag in ("train_file", "dev_file", "dev_scored_file"):
        _check_file(flag, getattr(options, flag))
    _check_output_dir(options)


def _check_output_dir(options):
    """The output rule (bert_tf.cli.outputs): --output_dir is this command's own run or new,
    never another command's run nor a directory holding this run's inputs."""
    inputs = {f"--{flag}": getattr(options, flag)
              for flag in ("init_checkpoint", "train_file", "dev_file", "dev_scored_file")}
    try:
        outputs.check_dir_clear_of_inputs("--output_dir", options.output_dir, inputs)
        others = outputs.other_commands_records(options.output_dir, "bert-tf-embed")
        if others:
            raise outputs.OutputError(
                f"--output_dir={options.output_dir} holds a run of another command "
                f"({', '.join(others)}); embedding training there would replace its model "
                "and files: choose a new --output_dir")
    except outputs.OutputError as e:
        raise FlagValueError(str(e)) from None


def contrastive_config(options, length_buckets):
    """The ContrastiveConfig of the training flags (the one place they are read)."""
    try:
        return contrastive.ContrastiveConfig(
            output_dir=options.output_dir, train_batch_size=options.train_batch_size,
            num_train_epochs=options.num_train_epochs, learning_rate=options.learning_rate,
            warmup_proportion=options.warmup_proportion,
            weight_decay_rate=options.weight_decay_rate, scale=options.scale,
            symmetric_loss=options.symmetric_loss, length_buckets=tuple(length_buckets),
            save_checkpoints_steps=options.save_checkpoints_steps,
            steps_per_loop=run_setup.steps_per_loop(options), log_steps=options.log_steps,
            jit_compile=options.jit_compile, seed=options.seed)
    except ValueError as e:
        raise FlagValueError(str(e)) from None


def train(options):
    """Training mode. Returns the run's results (also written to eval_results.json)."""
    _check_training_flags(options)
    train_pairs = read_pairs(options.train_file)
    if len(train_pairs) < options.train_batch_size:
        raise FlagValueError(f"--train_batch_size={options.train_batch_size} exceeds the "
                             f"{len(train_pairs)} pairs of --train_file={options.train_file}")
    retrieval = (contrastive.RetrievalSet.from_pairs(read_pairs(options.dev_file))
                 if options.dev_file else None)
    scored = read_scored_pairs(options.dev_scored_file) if options.dev_scored_file else None
    check_writable_dir(options.output_dir)

    strategy = run_setup.make_strategy(options, ("train_batch_size",))
    run_setup.set_seed_and_policy(options, strategy)
    with strategy.scope():
        loaded = _load(options)
    config = loaded.model.encoder.config
    text_encoder = TextEncoder(loaded.model, loaded.tokenizer, loaded.do_lower_case,
                               loaded.max_seq_length,
                               buckets=_buckets(options, loaded.max_seq_length,
                                                config.max_position_embeddings, coarse=False))
    train_buckets = _buckets(options, loaded.max_seq_length, config.max_position_embeddings,
                             coarse=True)
    summary = contrastive.train_embedder(
        contrastive_config(options, train_buckets), loaded.model, text_encoder, train_pairs,
        strategy, retrieval=retrieval, scored=scored)
    _write_run(options, loaded, summary)
    return summary


def _write_run(options, loaded, summary):
    """model.keras, the tokenizer file (vocab.txt, or tokenizer.json for byte-level BPE),
    task_info.json, eval_results.json and the sentence-transformers directory of the final
    (best) model, each written atomically."""
    output_dir = options.output_dir
    model_file, st_dir = contrastive.checkpoint_paths(output_dir)
    save_keras_model(loaded.model, model_file)
    write_tokenizer_file(output_dir, loaded.tokenizer, loaded.vocab_file)
    write_task_info(output_dir, TASK, do_lower_case=bool(loaded.do_lower_case),
                    max_seq_length=int(loaded.max_seq_length))
    write_text_atomic(os.path.join(output_dir, "eval_results.json"),
                      json.dumps(summary, indent=2, sort_keys=True) + "\n")
    if options.sentence_transformers_dir != "-":
        save_sentence_transformers(loaded.model, options.sentence_transformers_dir or st_dir,
                                   loaded.vocab_file, loaded.do_lower_case,
                                   loaded.max_seq_length)


def main(argv):
    del argv
    options = FLAGS
    if options.train_file and options.input_file:
        raise FlagValueError("give --train_file (fine-tune) or --input_file (encode), not both")
    if options.train_file:
        summary = train(options)
        best = summary["best"]
        if best:
            logging.info("Best %s=%.4f at step %d", best["metric"],
                         best["metrics"][best["metric"]], best["step"])
        print(f"Wrote {options.output_dir}", file=sys.stderr)
    elif options.input_file:
        count = encode(options)
        print(f"Wrote {count} vectors to {options.output_file}", file=sys.stderr)
    else:
        raise FlagValueError("give --train_file (fine-tune) or --input_file (encode)")


def run():
    """Console-script entry point (bert-tf-embed)."""
    cli.run(main, program=PROGRAM, define_flags=define_flags, required=["init_checkpoint"],
            errors=(FlagValueError, DataError, InteropError, CheckpointError, OSError))


if __name__ == "__main__":
    run()
