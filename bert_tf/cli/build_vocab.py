r"""Learns a vocab.txt, a byte-level BPE tokenizer.json or a SentencePiece model from text.

Examples:
  bert-tf-build-vocab --input_file='corpus/*.txt' --vocab_size=30522 \
      --do_lower_case=true --output_file=vocab.txt
  bert-tf-build-vocab --tokenizer=bpe --input_file='corpus/*.txt' --vocab_size=50368 \
      --output_file=tokenizer.json
  bert-tf-build-vocab --tokenizer=sentencepiece --input_file='corpus/*.txt' \
      --vocab_size=30000 --output_file=spiece.model

The words are split exactly as the tokenizer splits them (see bert_tf.text.vocab_builder,
bert_tf.text.bpe_trainer and bert_tf.text.sentencepiece_trainer), and [PAD] [UNK] [CLS] [SEP]
[MASK] get ids 0..4 (<pad> <unk> [CLS] [SEP] [MASK] in a SentencePiece model, as ALBERT's).
"""

from absl import flags

from bert_tf import cli, fileio
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs
from bert_tf.jobs.vocabulary import VocabularyConfig, build_vocabulary

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """Input text, vocabulary size, casing and the learner's limits."""
    return cli_flags.define_build_vocab_flags(flag_values)


def vocabulary_config(flag_values=FLAGS):
    """The VocabularyConfig of the parsed flags; a learner's option left unset is None (the
    learner's default), so one given to the other learner is refused."""
    return cli_flags.to_config(VocabularyConfig, flag_values,
                               unset=("max_input_chars_per_word", "max_unique_chars",
                                      "min_frequency"))


def main(argv):
    del argv
    config = vocabulary_config()
    config.validate()
    outputs.check_output_files({"--output_file": config.output_file},
                               {"--input_file": config.input_file})
    build_vocabulary(config, expected=fileio.state(config.output_file))


def run():
    """Console-script entry point (bert-tf-build-vocab)."""
    # A bad flag or input (ValueError, OutputError among them) is one line naming it.
    cli.run(main, "build_vocab", required=["input_file", "vocab_size", "output_file"],
            define_flags=define_flags, errors=(ValueError,))


if __name__ == "__main__":
    run()
