"""Learns a WordPiece vocab.txt or a byte-level BPE tokenizer.json from plain-text files.

Examples:
  bert-tf-build-vocab --input_file='corpus/*.txt' --vocab_size=30522 \
      --do_lower_case=true --output_file=vocab.txt
  bert-tf-build-vocab --tokenizer=bpe --input_file='corpus/*.txt' --vocab_size=50368 \
      --output_file=tokenizer.json

The words are split exactly as the tokenizer splits them (see bert_tf.text.vocab_builder and
bert_tf.text.bpe_trainer), and [PAD] [UNK] [CLS] [SEP] [MASK] get ids 0..4.
"""

import os
import sys

from absl import app, flags, logging

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf import fileio
from bert_tf.cli import outputs
from bert_tf.text import bpe_trainer, vocab_builder

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
        outputs.check_output_files({"--output_file": FLAGS.output_file},
                                   {"--input_file": FLAGS.input_file})
    except outputs.OutputError as e:
        sys.exit(f"build_vocab: error: {e}")
    bpe = FLAGS.tokenizer == "bpe"
    # A learner's option given to the other learner would be ignored: say so instead.
    other = (("max_input_chars_per_word", "max_unique_chars") if bpe else ("min_frequency",))
    given = [f"--{name}" for name in other if FLAGS[name].present]
    if given:
        raise app.UsageError(f"{', '.join(given)} only applies to --tokenizer="
                             f"{'wordpiece' if bpe else 'bpe'}, not --tokenizer={FLAGS.tokenizer}.")
    # Commands tell a tokenizer.json from a vocab.txt by the name's ".json".
    if bpe != FLAGS.output_file.endswith(".json"):
        expected = "a .json name (e.g. tokenizer.json)" if bpe else "a name not ending in .json"
        raise app.UsageError(f"--output_file={FLAGS.output_file}: --tokenizer={FLAGS.tokenizer} "
                             f"writes {'a tokenizer.json' if bpe else 'a vocab.txt'}; expected "
                             f"{expected}, which is how the other commands tell them apart.")
    if bpe and FLAGS.min_frequency < 1:
        raise app.UsageError(f"--min_frequency={FLAGS.min_frequency} must be positive.")
    # Unset: BERT's WordPiece vocabularies are usually uncased, byte-level BPE ones cased.
    do_lower_case = FLAGS.do_lower_case if FLAGS.do_lower_case is not None else not bpe
    try:
        if bpe:
            data = bpe_trainer.build_bpe_tokenizer(
                FLAGS.input_file, FLAGS.vocab_size, do_lower_case,
                reserved_tokens=FLAGS.reserved_tokens, min_frequency=FLAGS.min_frequency)
            size = len(data["model"]["vocab"])
        else:
            tokens = vocab_builder.build_vocab(
                FLAGS.input_file, FLAGS.vocab_size, do_lower_case,
                max_input_chars_per_word=FLAGS.max_input_chars_per_word,
                reserved_tokens=FLAGS.reserved_tokens, max_unique_chars=FLAGS.max_unique_chars)
            size = len(tokens)
    except ValueError as e:
        raise app.UsageError(str(e)) from e
    try:
        if bpe:
            bpe_trainer.write_tokenizer_json(data, FLAGS.output_file)
        else:
            vocab_builder.write_vocab(tokens, FLAGS.output_file)
    except OSError as e:  # e.g. the disk filled up: the old file, if any, is left whole
        sys.exit(f"build_vocab: error: --output_file={FLAGS.output_file} could not be written: "
                 f"{e.strerror or e}")
    logging.info("Wrote %d tokens to %s.", size, FLAGS.output_file)


def run():
    """Console-script entry point (bert-tf-build-vocab)."""
    cli.run(main, required=["input_file", "vocab_size", "output_file"],
            define_flags=define_flags)


if __name__ == "__main__":
    run()
