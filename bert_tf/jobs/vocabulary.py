"""The job that learns a tokenizer file from text: a WordPiece vocab.txt, a byte-level BPE
tokenizer.json or a SentencePiece model.

`build_vocabulary(VocabularyConfig(input_file=..., vocab_size=..., output_file=...))` is what
`bert-tf-build-vocab` (bert_tf.cli.build_vocab) runs; the learners are
bert_tf.text.vocab_builder, bert_tf.text.bpe_trainer and bert_tf.text.sentencepiece_trainer.
Imports no TensorFlow.
"""

import dataclasses
import os

from absl import logging

from bert_tf import fileio
from bert_tf.text import bpe_trainer, sentencepiece_trainer, tokenizer_files, vocab_builder

# The options only one learner takes, by --tokenizer.
LEARNER_OPTIONS = {"wordpiece": ("max_input_chars_per_word", "max_unique_chars"),
                   "bpe": ("min_frequency",), "sentencepiece": ()}


@dataclasses.dataclass
class VocabularyConfig:
    """What a vocabulary run is told; field names are the flags' (`bert-tf-build-vocab
    --help`). None means "not given": do_lower_case then is true for WordPiece (uncased BERT)
    and SentencePiece (ALBERT's models are uncased) and false for byte-level BPE; a learner's
    option takes the learner's default."""

    input_file: str | None = None
    vocab_size: int | None = None
    do_lower_case: bool | None = None
    output_file: str | None = None
    tokenizer: str = "wordpiece"
    max_input_chars_per_word: int | None = None
    reserved_tokens: list = dataclasses.field(default_factory=list)
    max_unique_chars: int | None = None
    min_frequency: int | None = None

    @property
    def bpe(self):
        return self.tokenizer == "bpe"

    def learner_options(self, tokenizer):
        """{name: value} of the options only the learner `tokenizer` takes that are given; the
        learner's defaults stand for the rest."""
        return {name: getattr(self, name) for name in LEARNER_OPTIONS[tokenizer]
                if getattr(self, name) is not None}

    def validate(self):
        """Raises ValueError naming the flag: a size below 1, an output directory that does
        not exist, an option of the other learner, an output name of the other kind."""
        if self.vocab_size is None or self.vocab_size < 1:
            raise ValueError(f"--vocab_size={self.vocab_size} must be positive.")
        output_dir = os.path.dirname(fileio.abspath(self.output_file))
        # Object stores (gs://, s3://) have no directories to check.
        if not fileio.is_remote(output_dir) and not os.path.isdir(output_dir):
            raise ValueError(f"--output_file={self.output_file}: directory '{output_dir}' does "
                             "not exist.")
        if self.tokenizer not in LEARNER_OPTIONS:
            raise ValueError(f"--tokenizer={self.tokenizer}: expected one of "
                             f"{', '.join(LEARNER_OPTIONS)}.")
        # A learner's option given to another learner would be ignored: say so instead.
        for other in LEARNER_OPTIONS:
            given = [f"--{name}" for name in self.learner_options(other)]
            if other != self.tokenizer and given:
                raise ValueError(f"{', '.join(given)} only applies to --tokenizer={other}, not "
                                 f"--tokenizer={self.tokenizer}.")
        problem = tokenizer_files.output_name_problem(self.output_file, self.tokenizer)
        if problem:
            raise ValueError(f"--output_file={self.output_file}: --tokenizer={self.tokenizer} "
                             f"{problem}, which is how the other commands tell them apart.")
        if self.bpe and self.min_frequency is not None and self.min_frequency < 1:
            raise ValueError(f"--min_frequency={self.min_frequency} must be positive.")


def build_vocabulary(config, expected=fileio.NOT_CHECKED):
    """Learns the tokenizer file the config asks for and writes it (atomically: on any error an
    old file stays whole); returns the number of tokens.

    Args:
      expected: fileio.state(--output_file) when the command checked it: the write refuses
        (fileio.TargetChangedError) when the file appeared or changed since.

    Raises:
      ValueError: a bad setting or input (naming the flag or file).
      OSError: --output_file could not be written (the message names it).
    """
    config.validate()
    # Unset: BERT's WordPiece vocabularies are usually uncased, byte-level BPE ones cased.
    do_lower_case = config.do_lower_case if config.do_lower_case is not None else not config.bpe
    options = config.learner_options(config.tokenizer)
    if config.tokenizer == "bpe":
        data = bpe_trainer.build_bpe_tokenizer(
            config.input_file, config.vocab_size, do_lower_case,
            reserved_tokens=config.reserved_tokens, **options)
        size = len(data["model"]["vocab"])
    elif config.tokenizer == "sentencepiece":
        data = sentencepiece_trainer.build_sentencepiece_model(
            config.input_file, config.vocab_size, do_lower_case,
            reserved_tokens=config.reserved_tokens)
        size = config.vocab_size
    else:
        tokens = vocab_builder.build_vocab(
            config.input_file, config.vocab_size, do_lower_case,
            reserved_tokens=config.reserved_tokens, **options)
        size = len(tokens)
    try:
        if config.tokenizer == "bpe":
            bpe_trainer.write_tokenizer_json(data, config.output_file, expected)
        elif config.tokenizer == "sentencepiece":
            sentencepiece_trainer.write_model(data, config.output_file, expected)
        else:
            vocab_builder.write_vocab(tokens, config.output_file, expected)
    except fileio.TargetChangedError:
        raise
    except OSError as e:  # e.g. the disk filled up
        raise OSError(f"--output_file={config.output_file} could not be written: "
                      f"{e.strerror or e}") from None
    logging.info("Wrote %d tokens to %s.", size, config.output_file)
    return size
