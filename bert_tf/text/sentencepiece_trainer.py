"""Learning a SentencePiece model (ALBERT's kind of vocabulary) from plain-text files.

The SentencePiece library learns a unigram model from the text as `SentencePieceTokenizer`
prepares it (whitespace, quotes, accents dropped, the casing asked for), so every piece is one
the tokenizer can produce. Layout and settings of the result, as ALBERT's released models have
them: <pad> <unk> [CLS] [SEP] [MASK] get ids 0..4, then any extra reserved tokens (control
pieces, which the tokenizer splits out of the text as special tokens), then ALBERT's
user-defined pieces ( ) " - . and the en dash, pound and euro signs (always whole pieces), then
the learned pieces; 99.995% of the characters are covered.
"""

import io
import itertools

from absl import logging

from bert_tf import fileio
from bert_tf.text import corpus_files, sentencepiece, vocab_builder

# ALBERT's special pieces after <pad> (0) and <unk> (1).
CONTROL_PIECES = ("[CLS]", "[SEP]", "[MASK]")
# Pieces ALBERT's model always keeps whole (its spm_train settings): brackets, quotes, dashes,
# the full stop and two currency signs are never merged into a longer piece.
USER_DEFINED_PIECES = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")
# The share of characters the model covers (ALBERT's setting); rarer ones become <unk>.
CHARACTER_COVERAGE = 0.99995
SAMPLING_SEED = 12345


def build_sentencepiece_model(input_files, vocab_size, do_lower_case=True, *,
                              reserved_tokens=(), max_sentences=10_000_000):
    """Learns a unigram SentencePiece model from text files.

    Args:
      input_files: comma-separated globs (str) or a list of globs; UTF-8 text files, gzip or
        bzip2 compressed or not; each non-blank line is one sentence.
      vocab_size: int, the number of pieces (special and reserved ones included).
      do_lower_case: learn from lower-cased text (ALBERT's released models are uncased).
      reserved_tokens: extra control pieces right after [MASK].
      max_sentences: at most this many lines are sampled for learning (SentencePiece's
        input_sentence_size).

    Returns:
      bytes: the model file's content (`SentencePieceTokenizer` and the SentencePiece library
      read it).

    Raises:
      ValueError: a pattern matches no file, a file is binary or not UTF-8 (named), the files
        hold no text, or the library cannot reach `vocab_size` pieces on this text (its
        message says the largest size it can).
    """
    specials = list(CONTROL_PIECES) + [t for t in reserved_tokens if t not in CONTROL_PIECES]
    if vocab_size < len(specials) + 3:
        raise ValueError(f"vocab_size={vocab_size} leaves no room for pieces beside <pad>, "
                         f"<unk> and {len(specials)} special tokens.")
    files = vocab_builder.expand_input_files(input_files)
    for path in files:  # Refuse a binary or non-UTF-8 file before learning, not after.
        corpus_files.check_corpus_file(path)
    lines = _prepared_lines(files, do_lower_case)
    first = next(lines, None)
    if first is None:
        raise ValueError(f"The input files hold no text: {', '.join(files)}.")
    logging.info("Learning %d SentencePiece pieces from %d file(s).", vocab_size, len(files))
    library = sentencepiece.import_library()
    # The library samples max_sentences lines of a larger corpus: the same ones every run.
    library.set_random_generator_seed(SAMPLING_SEED)
    model = io.BytesIO()
    try:
        library.SentencePieceTrainer.train(
            sentence_iterator=itertools.chain([first], lines), model_writer=model,
            vocab_size=vocab_size, model_type="unigram", pad_id=0, unk_id=1, bos_id=-1,
            eos_id=-1, control_symbols=specials,
            user_defined_symbols=list(USER_DEFINED_PIECES),
            character_coverage=CHARACTER_COVERAGE,
            input_sentence_size=max_sentences, shuffle_input_sentence=True,
            # The tokenizer prepares text itself; the library's own NFKC folding stays, as in
            # ALBERT's models.
            normalization_rule_name="nmt_nfkc", minloglevel=2)
    except RuntimeError as e:
        detail = str(e).strip().splitlines()[-1] if str(e).strip() else "failed"
        raise ValueError(f"SentencePiece could not learn {vocab_size} pieces from "
                         f"{', '.join(files)}: {detail}") from None
    return model.getvalue()


def _prepared_lines(files, do_lower_case):
    """The files' non-blank lines as the tokenizer prepares them, read one at a time (a
    corpus need not fit in memory; the library keeps its sample): iterator of str."""
    for path in files:
        try:
            with corpus_files.open_corpus(path) as f:
                for raw in f:
                    line = sentencepiece.prepare_text(raw.decode("utf-8", "replace"),
                                                      do_lower_case)
                    if line:
                        yield line
        except corpus_files.READ_ERRORS as e:
            raise ValueError(f"{path}: cannot read the compressed file ({e}); it is truncated "
                             "or corrupt.") from None


def write_model(data, path, expected=fileio.NOT_CHECKED):
    """Writes a model file's bytes to `path`, atomically (an old file stays whole on error;
    `expected`: fileio.write_bytes_atomic's)."""
    fileio.write_bytes_atomic(path, data, expected)
