r"""Creates masked-LM / next-sentence pre-training TFRecords from text (the original's flags).

Input: one sentence per line, a blank line between documents. Output: tf.train.Example
records for `python -m bert_tf.run_pretraining --input_file=...`.

Local (streaming, multi-process; output identical for any --num_workers):
  bert-tf-create-pretraining-data --input_file='corpus/*.txt' \
    --output_file=out/train-0.tfrecord,out/train-1.tfrecord --vocab_file=vocab.txt \
    --do_lower_case --max_seq_length=128 --max_predictions_per_seq=20 --num_workers=8

ALBERT's sentence-order prediction and n-gram masking, SpanBERT's span masking (records gain
span boundaries):
  bert-tf-create-pretraining-data --sentence_order_prediction --ngram_mask=3 ...
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

from absl import flags
from absl import logging

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs
from bert_tf.jobs.pretraining_data import PretrainingDataConfig, make_pretraining_data

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The original create_pretraining_data.py's flags (same names and defaults) and bert_tf's."""
    return cli_flags.define_create_pretraining_data_flags(flag_values)


def pretraining_data_config(flag_values=FLAGS):
    """The PretrainingDataConfig of the parsed flags; --do_lower_case and
    --max_predictions_per_seq left unset are None (the tokenizer file's casing; 20, or the
    packed rows' default)."""
    return cli_flags.to_config(PretrainingDataConfig, flag_values,
                               unset=("do_lower_case", "max_predictions_per_seq"))


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
    del argv
    try:
        config = pretraining_data_config()
        files = {"--output_file": config.output_file}
        outputs.check_not_inputs(files, {"--input_file": config.input_file,
                                         "--vocab_file": config.vocab_file})
        for flag, path in outputs.output_paths(files):
            outputs.check_not_inside_a_model_dir(flag, path)
        if not config.beam:
            _keep_freed_memory()
        make_pretraining_data(config)
    except (ValueError, OSError) as e:
        # Bad input or flags, or a file that cannot be read or written: the message names the
        # culprit (OS errors carry the path); a traceback adds nothing.
        sys.exit(f"create_pretraining_data: error: {e}")
    except Exception as e:  # noqa: BLE001 - only TensorFlow's file errors are handled here
        if not isinstance(e, _tf_file_error_type()):
            raise
        sys.exit(f"create_pretraining_data: error: {e.message}")
    logging.info("Done.")


def run():
    """Console-script entry point (bert-tf-create-pretraining-data)."""
    cli.run(main, required=["input_file", "output_file", "vocab_file"],
            define_flags=define_flags)


if __name__ == "__main__":
    run()
