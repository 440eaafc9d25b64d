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
BPE, e.g. ModernBERT's); --vocab_file overrides. --do_lower_case unset takes the casing the
checkpoint records (a bert_tf run's, a Hugging Face tokenizer_config.json), else the tokenizer
file's (a tokenizer.json records it; a vocab.txt: lower-cased).

Training files are CSV/TSV with a header or JSON lines: columns anchor, positive[, negative]
(bert_tf.data.tasks.pairs names the aliases). The loss is the multiple-negatives ranking loss with
in-batch negatives (bert_tf.training.contrastive), so --train_batch_size must be >= 2. The dev
file's anchors are queries over the corpus of its positives: recall@1/10, MRR@10 and nDCG@10
are computed after every --save_checkpoints_steps (default: an epoch), and the best nDCG@10
(or Spearman on --dev_scored_file when there is no --dev_file) is kept. The run writes
output_dir/model.keras, vocab.txt (or tokenizer.json), task_info.json, eval_results.json and
output_dir/sentence_transformers/ (a directory sentence-transformers loads). The training run
holds --output_dir's lock; a rerun resumes its checkpoints only with the model, tokenizer,
casing, pooling, normalisation, sequence length and batch size it recorded (bert_tf_run.json).
The job itself is bert_tf.jobs.embedding (train, encode); its config bert_tf.jobs.embedding_config.
"""

import sys

from absl import flags

from bert_tf import cli, file_names, fileio
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs

FLAGS = flags.FLAGS
PROGRAM = "embed"


def define_flags(flag_values=FLAGS):
    """The command's flags (bert_tf.cli.flags' embed group); called when it runs."""
    return cli_flags.define_embed_flags(flag_values)


def embedding_config(flag_values=FLAGS):
    """The EmbeddingConfig (task, trainer and runtime sections) of the parsed flags;
    --pooling and --normalize left unset are None (the model's own, or mean and true for an
    encoder checkpoint)."""
    from bert_tf.jobs.embedding_config import EmbeddingConfig

    return cli_flags.to_config(EmbeddingConfig, flag_values,
                               unset=("pooling", "normalize"),
                               backend=cli.requested_backend(flag_values))


def check_outputs(job):
    """The output rule (bert_tf.cli.outputs) of an EmbeddingConfig: --output_file is none of
    the inputs (nor a file read beside --init_checkpoint) and not inside a model directory; a
    training --output_dir is this command's own run or new, never another command's run,
    another kind of model directory, nor a directory holding this run's inputs;
    --sentence_transformers_dir is new or empty (or inside --output_dir, the run's own), never
    an input nor a model directory.

    Raises:
      FlagValueError naming the flags.
    """
    from bert_tf.jobs.flag_checks import FlagValueError

    task = job.task
    model_inputs = {"--init_checkpoint": task.init_checkpoint,
                    "--vocab_file": task.vocab_file}
    try:
        if task.input_file and task.output_file:
            outputs.check_output_files({"--output_file": task.output_file},
                                       {"--input_file": task.input_file, **model_inputs},
                                       beside={"--init_checkpoint": task.init_checkpoint})
        if task.train_file and job.output_dir:
            inputs = {**model_inputs, "--train_file": task.train_file,
                      "--dev_file": task.dev_file, "--dev_scored_file": task.dev_scored_file}
            outputs.check_dir_clear_of_inputs("--output_dir", job.output_dir, inputs)
            outputs.check_training_output_dir(
                job.output_dir, "embedding training",
                outputs.other_commands_records(job.output_dir,
                                               file_names.EMBEDDING_COMMAND))
            st_dir = job.sentence_transformers_dir
            if st_dir and st_dir != "-":
                check_sentence_transformers_dir(st_dir, job.output_dir, inputs)
    except outputs.OutputError as e:
        raise FlagValueError(str(e)) from None


def check_sentence_transformers_dir(st_dir, output_dir, inputs):
    """--sentence_transformers_dir: inside --output_dir it is the run's own; elsewhere new or
    empty, holding no input and not --output_dir itself.

    Raises:
      OutputError naming the flag.
    """
    flag = "--sentence_transformers_dir"
    outputs.check_dir_clear_of_inputs(flag, st_dir, {**inputs, "--output_dir": output_dir},
                                      role="which this run reads or writes")
    if outputs.resolve(st_dir).startswith(outputs.resolve(output_dir).rstrip("/") + "/"):
        return
    outputs.check_not_a_model_dir(flag, st_dir)
    if fileio.exists(st_dir) and not fileio.isdir(st_dir):
        raise outputs.OutputError(f"{flag}={st_dir} is a file; expected a new or empty "
                                  "directory")
    if fileio.isdir(st_dir) and fileio.listdir(st_dir):
        raise outputs.OutputError(f"{flag}={st_dir} exists and is not empty; choose a new or "
                                  "empty directory")
    outputs.check_writable_dir(flag, st_dir)


def main(argv):
    del argv
    # First: Keras fixes its backend when it is imported, and importing TensorFlow (which a
    # remote path's check does) imports it.
    cli.use_keras_backend(cli.requested_backend(), "bert_tf.cli.embed")
    from bert_tf.jobs.embedding_config import check_settings

    job = embedding_config()
    # Before TensorFlow loads (seconds): a mistyped flag or path is refused at once.
    check_settings(job)
    check_outputs(job)

    from bert_tf.jobs import embedding

    if job.task.train_file:
        embedding.train(job)
        print(f"Wrote {job.output_dir}", file=sys.stderr)
    else:
        count = embedding.encode(job)
        print(f"Wrote {count} vectors to {job.task.output_file}", file=sys.stderr)


def errors():
    """What the command reports in one line (InteropError is a CheckpointError). None of these
    modules loads TensorFlow: a flag refused before the job loads it stays quick."""
    from bert_tf.data.tasks.task_errors import DataError
    from bert_tf.jobs.flag_checks import FlagValueError
    from bert_tf.training.step_runner import CheckpointError

    return (FlagValueError, DataError, CheckpointError, OSError)


def run():
    """Console-script entry point (bert-tf-embed)."""
    cli.run(main, program=PROGRAM, define_flags=define_flags, required=["init_checkpoint"],
            errors=errors)


if __name__ == "__main__":
    run()
