"""Learning a WordPiece vocabulary from plain-text files.

Text is split into words by the same basic tokenization the tokenizer uses (`basic_tokenize`:
cleanup, CJK splitting, optional lower-casing and accent stripping, punctuation splitting), so
every learned piece is one `WordpieceTokenizer` can produce. The word counts go to
tensorflow_text's WordPiece learner (the one behind `bert_vocab_from_dataset`), which keeps every
character it sees (up to `max_unique_chars`) as a word-initial piece and as a "##" piece, then
adds the most useful longer pieces until the vocabulary reaches `vocab_size`. The learner is
read from its file (`wordpiece_learner`), so learning a vocabulary imports no TensorFlow.

Layout of the result: the special tokens [PAD] [UNK] [CLS] [SEP] [MASK] get ids 0..4, then
any extra `reserved_tokens`, then the single characters, then the learned pieces by frequency.
(Google's released vocabularies use other ids, [PAD]=0 [UNK]=100 [CLS]=101 [SEP]=102
[MASK]=103; bert_tf always looks the ids up, so both layouts work.)
"""

import collections
import glob
import importlib
import importlib.util
import os
import sys

from absl import logging

from bert_tf import fileio
from bert_tf.text import corpus_files, tokenization


def expand_input_files(input_files):
    """Expands comma-separated globs (str) or a list of globs into a sorted list of files.

    Raises:
      ValueError: if a pattern matches no file (the message names the pattern).
    """
    if isinstance(input_files, str):
        patterns = [p.strip() for p in input_files.split(",") if p.strip()]
    else:
        patterns = list(input_files)
    if not patterns:
        raise ValueError("No input files given: expected comma-separated file patterns.")
    files = []
    for pattern in patterns:
        matched = sorted(p for p in (fileio.gfile().glob(pattern) if fileio.is_remote(pattern)
                                     else glob.glob(pattern)) if fileio.isfile(p))
        if not matched and fileio.isdir(pattern):
            raise ValueError(f"Input '{pattern}' is a directory; expected a file or a glob of "
                             f"files (e.g. '{pattern.rstrip('/')}/*').")
        if not matched:
            raise ValueError(f"Input pattern '{pattern}' matches no file.")
        files.extend(matched)
    return files


def read_text(path):
    """File contents as str; undecodable bytes become U+FFFD with a warning (WordPiece's
    cleanup then drops them; a byte-level BPE vocabulary counts them as the character).

    gzip and bzip2 files are decompressed; a damaged one raises ValueError naming it.
    """
    try:
        with corpus_files.open_corpus(path) as f:
            data = f.read()
    except corpus_files.READ_ERRORS as e:
        raise ValueError(f"{path}: cannot read the compressed file ({e}); it is truncated or "
                         "corrupt.") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        logging.warning("%s is not valid UTF-8 (first bad byte at offset %d); undecodable bytes "
                        "are replaced by U+FFFD.", path, e.start)
        return data.decode("utf-8", errors="replace")


def count_words(files, do_lower_case, max_input_chars_per_word=200):
    """Counts basic-tokenized words over `files`.

    Words longer than `max_input_chars_per_word` characters (200 by default, the limit of
    `WordpieceTokenizer` and of the original) are skipped: the tokenizer maps them to [UNK]
    whatever the vocabulary holds.

    Returns:
      collections.Counter word (str) -> count.
    """
    counts = collections.Counter()
    for path in files:
        for line in read_text(path).split("\n"):
            counts.update(tokenization.basic_tokenize(line, do_lower_case))
    for word in [w for w in counts if len(w) > max_input_chars_per_word]:
        del counts[word]
    return counts


# TensorFlow Text's learner module: plain Python and numpy, in a package whose import loads
# TensorFlow (~6 s of a ~10 s bert-tf-prepare-demo-data on a 2-core CPU).
_LEARNER_PARTS = ("tools", "wordpiece_vocab", "wordpiece_tokenizer_learner_lib.py")
_LEARNER_MODULE = "tensorflow_text." + ".".join(_LEARNER_PARTS)[:-len(".py")]


def wordpiece_learner():
    """TensorFlow Text's WordPiece learner module (the code behind its bert_vocab_from_dataset),
    read from its file without importing tensorflow_text, so learning a vocabulary needs no
    TensorFlow; the module itself when tensorflow_text is loaded already, or when the file is
    not where TensorFlow Text 2.x keeps it."""
    if "tensorflow_text" in sys.modules:
        return importlib.import_module(_LEARNER_MODULE)
    name = "bert_tf.text._wordpiece_learner"
    if name not in sys.modules:
        package = importlib.util.find_spec("tensorflow_text")
        locations = list(package.submodule_search_locations or []) if package else []
        path = os.path.join(locations[0], *_LEARNER_PARTS) if locations else None
        if path is None or not os.path.isfile(path):  # the import names what is missing
            return importlib.import_module(_LEARNER_MODULE)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


def build_vocab(input_files, vocab_size, do_lower_case, *, max_input_chars_per_word=200,
                reserved_tokens=(), max_unique_chars=1000, num_iterations=4,
                slack_ratio=0.05, max_token_length=50):
    """Learns a WordPiece vocabulary from text files.

    Args:
      input_files: comma-separated globs (str) or a list of globs; UTF-8 text files, gzip or
        bzip2 compressed or not.
      vocab_size: int, the target size; the result has between `(1 - slack_ratio) * vocab_size`
        and `vocab_size` tokens unless the corpus is too small to fill it.
      do_lower_case: learn pieces of lower-cased, accent-stripped text (uncased model).
      max_input_chars_per_word: words longer than this (in characters) are not counted; keep
        it equal to the tokenizer's limit (200, as the original).
      reserved_tokens: extra tokens (e.g. "[unused0]") placed right after the special tokens.
      max_unique_chars: alphabet size cap; words with rarer characters are not counted.
      num_iterations: refinement iterations of the learner.
      slack_ratio: accepted relative shortfall from `vocab_size`.
      max_token_length: longest piece (in characters) the learner considers.

    Returns:
      list of str tokens; the token's index is its id.

    Raises:
      ValueError: a pattern matches no file, a file is binary or mostly not UTF-8 (named), the
        files hold no words, or `vocab_size` is too small.
    """
    reserved = list(tokenization.SPECIAL_TOKENS) + [
        t for t in reserved_tokens if t not in tokenization.SPECIAL_TOKENS]
    if vocab_size <= len(reserved):
        raise ValueError(f"vocab_size={vocab_size} leaves no room beside the {len(reserved)} "
                         "reserved tokens.")
    files = expand_input_files(input_files)
    # Refuse a binary or non-UTF-8 file before hours of counting, not after.
    for path in files:
        corpus_files.check_corpus_file(path)
    counts = count_words(files, do_lower_case, max_input_chars_per_word)
    if not counts:
        raise ValueError(f"The input files hold no words: {', '.join(files)}.")
    logging.info("Counted %d distinct words (%d in all) in %d file(s).", len(counts),
                 sum(counts.values()), len(files))
    vocab = wordpiece_learner().learn(
        counts, vocab_size, reserved, upper_thresh=None, lower_thresh=1,
        num_iterations=num_iterations, max_input_tokens=-1, max_token_length=max_token_length,
        max_unique_chars=max_unique_chars, slack_ratio=slack_ratio,
        include_joiner_token=True, joiner="##")
    logging.info("Learned a vocabulary of %d tokens (target %d).", len(vocab), vocab_size)
    return _trim_to_size(vocab, vocab_size, reserved)


def _trim_to_size(vocab, vocab_size, reserved):
    """Drops the rarest learned pieces until `vocab` fits `vocab_size`.

    The learner's threshold search moves in integer count steps and can overshoot the target on
    small corpora. Reserved tokens and the single-character pieces (word-initial and "##") are
    always kept: without them some words could only become [UNK].
    """
    if len(vocab) <= vocab_size:
        return vocab
    protected = set(reserved)
    protected.update(t for t in vocab if len(t) == 1 or (t.startswith("##") and len(t) == 3))
    num_protected = sum(t in protected for t in vocab)
    if num_protected > vocab_size:
        raise ValueError(f"vocab_size={vocab_size} is smaller than the {num_protected} reserved "
                         "and single-character tokens the corpus needs; raise vocab_size or "
                         "lower max_unique_chars.")
    # The learner lists learned pieces from most to least frequent, so keep the first ones.
    room = vocab_size - num_protected
    kept = []
    for token in vocab:
        if token in protected:
            kept.append(token)
        elif room > 0:
            kept.append(token)
            room -= 1
    logging.info("Dropped the %d rarest learned pieces to fit vocab_size=%d.",
                 len(vocab) - len(kept), vocab_size)
    return kept


def write_vocab(tokens, path, expected=fileio.NOT_CHECKED):
    """Writes `tokens` one per line (id = line number - 1) to `path`, atomically (`expected`:
    fileio.write_bytes_atomic's).

    Raises:
      ValueError: a token is empty, holds whitespace or repeats, or a special token is missing.
      FileNotFoundError: the output directory does not exist.
    """
    for index, token in enumerate(tokens):
        if not token or token != token.strip() or any(c.isspace() for c in token):
            raise ValueError(f"Token {index} ({token!r}) is empty or contains whitespace; it "
                             "could not be read back from a vocabulary file.")
    tokenization.vocab_from_tokens(list(tokens))
    directory = os.path.dirname(fileio.abspath(path))
    # Object stores (gs://, s3://) have no directories to check.
    if not fileio.is_remote(path) and not os.path.isdir(directory):
        raise FileNotFoundError(f"Output directory '{directory}' of '{path}' does not exist.")
    fileio.write_text_atomic(path, "".join(t + "\n" for t in tokens), expected)
