"""Learns a BERT WordPiece vocabulary (vocab.txt) from plain-text files.

Example:
  bert-tf-build-vocab --input_file='corpus/*.txt' --vocab_size=30522 \
      --do_lower_case=true --output_file=vocab.txt

The words are split exactly as the tokenizer splits them (see bert_tf.text.vocab_builder), and
[PAD] [UNK] [CLS] [SEP] [MASK] get ids 0..4.
"""

import os

from absl import app, flags, logging

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf import fileio
from bert_tf.text import vocab_builder

FLAGS = flags.FLAGS

def define_flags(flag_values=FLAGS):
    """Input text, vocabulary size, casing and the learner's limits."""
    return cli_flags.define_build_vocab_flags(flag_values)


def main(argv):
    del argv
    if FLAGS.vocab_size < 1:
        raise app.UsageError(f"--vocab_size={FLAGS.vocab_size} must be positive.")
    output_dir = os.path.dirname(fileio.abspath(FLAGS.output_file))
    # Object stores (gs://, s3://) have no directories to check.
    if not fileio.is_remote(output_dir) and not os.path.isdir(output_dir):
        raise app.UsageError(f"--output_file={FLAGS.output_file}: directory '{output_dir}' does "
                             "not exist.")
    try:
        tokens = vocab_builder.build_vocab(
            FLAGS.input_file, FLAGS.vocab_size, FLAGS.do_lower_case,
            max_input_chars_per_word=FLAGS.max_input_chars_per_word,
            reserved_tokens=FLAGS.reserved_tokens, max_unique_chars=FLAGS.max_unique_chars)
    except ValueError as e:
        raise app.UsageError(str(e)) from e
    vocab_builder.write_vocab(tokens, FLAGS.output_file)
    logging.info("Wrote %d tokens to %s.", len(tokens), FLAGS.output_file)


def run():
    """Console-script entry point (bert-tf-build-vocab)."""
    cli.run(main, required=["input_file", "vocab_size", "output_file"],
            define_flags=define_flags)


if __name__ == "__main__":
    run()
