r"""Creates masked-LM / next-sentence pre-training TFRecords from text (the original's flags).

Input: one sentence per line, a blank line between documents. Output: tf.train.Example
records for `python -m bert_tf.run_pretraining --input_file=...`.

Local (streaming, multi-process; output identical for any --num_workers):
  bert-tf-create-pretraining-data --input_file='corpus/*.txt' \
    --output_file=out/train-0.tfrecord,out/train-1.tfrecord --vocab_file=vocab.txt \
    --do_lower_case --max_seq_length=128 --max_predictions_per_seq=20 --num_workers=8

ALBERT's sentence-order prediction, SpanBERT's span masking (records gain span boundaries):
  bert-tf-create-pretraining-data --sentence_order_prediction ...
  bert-tf-create-pretraining-data --do_span_mask ...

Packed rows (several whole instances per row, much less padding; docs/packing.md):
  bert-tf-create-pretraining-data --pack_sequences --max_seq_length=512 ...

Apache Beam (same set of records; shards out/train-SSSSS-of-NNNNN):
  bert-tf-create-pretraining-data --use_beam --output_file=out/train ...
  bert-tf-create-pretraining-data --runner=DataflowRunner \
    --beam_pipeline_option=--project=my-project --beam_pipeline_option=--region=us-central1 ...
"""

import ctypes
import sys

from absl import app
from absl import flags
from absl import logging

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs
from bert_tf.data.pretraining import create_pretraining_data as cpd
from bert_tf.data.pretraining import row_packing

FLAGS = flags.FLAGS

def define_flags(flag_values=FLAGS):
    """The original create_pretraining_data.py's flags (same names and defaults) and bert_tf's."""
    return cli_flags.define_create_pretraining_data_flags(flag_values)


def _keep_freed_memory():
    """Tells glibc's allocator to keep up to 64 MB of freed memory in the process.

    By default it returns a freed block of a few MB to the kernel at once, so the per-chunk
    numpy arrays of create_pretraining_data were mapped and page-faulted in again for every
    chunk: about a tenth of a run's CPU time, spent in the kernel. Forked workers inherit the
    setting. Does nothing where the C library is not glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def _tf_file_error_type():
    # TensorFlow is loaded only for remote paths (gs://...); its file errors can only have
    # come from there, and a local run must not pay TensorFlow's start-up to catch them.
    tf = sys.modules.get("tensorflow")
    return tf.errors.OpError if tf is not None else ()


def main(argv):
    try:
        _run(argv)
    except (ValueError, OSError) as e:
        # Bad input or flags, or a file that cannot be read or written: the message names the
        # culprit (OS errors carry the path); a traceback adds nothing.
        sys.exit(f"create_pretraining_data: error: {e}")
    except Exception as e:  # noqa: BLE001 - only TensorFlow's file errors are handled here
        if not isinstance(e, _tf_file_error_type()):
            raise
        sys.exit(f"create_pretraining_data: error: {e.message}")


def _run(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    outputs.check_not_inputs({"--output_file": FLAGS.output_file},
                             {"--input_file": FLAGS.input_file, "--vocab_file": FLAGS.vocab_file})
    max_predictions = FLAGS.max_predictions_per_seq
    if FLAGS.pack_sequences and not FLAGS["max_predictions_per_seq"].present:
        max_predictions = row_packing.default_max_predictions_per_row(
            FLAGS.max_seq_length, FLAGS.masked_lm_prob,
            FLAGS.max_instances_per_row
            or row_packing.default_max_instances_per_row(FLAGS.max_seq_length))
        logging.info("--pack_sequences: %d masked positions per row "
                     "(--max_predictions_per_seq).", max_predictions)
    if FLAGS.max_instances_per_row and not FLAGS.pack_sequences:
        raise app.UsageError("--max_instances_per_row needs --pack_sequences.")
    options = cpd.PretrainingDataOptions(
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=max_predictions,
        masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
        dupe_factor=FLAGS.dupe_factor,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        random_seed=FLAGS.random_seed,
        feature_names=FLAGS.feature_names,
        documents_per_chunk=FLAGS.documents_per_chunk,
        sentence_order_prediction=FLAGS.sentence_order_prediction,
        do_span_mask=FLAGS.do_span_mask,
        span_geometric_p=FLAGS.span_geometric_p,
        max_span_length=FLAGS.max_span_length,
        pack_sequences=FLAGS.pack_sequences,
        max_instances_per_row=FLAGS.max_instances_per_row)
    compression = "GZIP" if FLAGS.gzip else ""
    # Unset: a tokenizer.json's own casing (a vocab.txt: True).
    do_lower_case = FLAGS.do_lower_case if FLAGS["do_lower_case"].present else None
    if FLAGS.use_beam or FLAGS.runner:
        from bert_tf.data.pretraining import beam_pipeline  # only this path needs apache-beam

        if "," in FLAGS.output_file:
            raise app.UsageError(
                f"--output_file={FLAGS.output_file}: with Beam give one shard prefix "
                "(shards are named <prefix>-SSSSS-of-NNNNN); set --beam_num_shards instead.")
        beam_pipeline.run_beam_pipeline(
            FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_file,
            do_lower_case=do_lower_case, options=options,
            num_shards=FLAGS.beam_num_shards, compression=compression,
            runner=FLAGS.runner or "DirectRunner", pipeline_args=FLAGS.beam_pipeline_option)
    else:
        _keep_freed_memory()
        cpd.create_pretraining_data(
            FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_file,
            do_lower_case=do_lower_case, options=options,
            num_workers=FLAGS.num_workers, compression=compression,
            shuffle_buffer_size=FLAGS.shuffle_buffer_size)
    logging.info("Done.")


def run():
    """Console-script entry point (bert-tf-create-pretraining-data)."""
    cli.run(main, required=["input_file", "output_file", "vocab_file"],
            define_flags=define_flags)


if __name__ == "__main__":
    run()
