"""The tokenizer a job uses: read from its file with --do_lower_case checked, and a
--vocab_file given beside a model checked against the model's own tokenizer file.
"""

import os

from bert_tf import fileio
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.text import tokenizer_files


def check_vocab_file_exists(vocab_file):
    """A --vocab_file (a tokenizer file or a directory holding one) that is not there is
    refused by name before anything reads it; a broken or looping link is named by the reader.

    Raises:
      FlagValueError: "--vocab_file=X: tokenizer file 'X' does not exist (expected ...)".
    """
    if not vocab_file:
        return
    if fileio.exists(vocab_file) if fileio.is_remote(vocab_file) else os.path.lexists(vocab_file):
        return
    try:
        tokenizer_files.find_tokenizer_file(vocab_file)
    except FileNotFoundError as e:
        raise FlagValueError(f"--vocab_file={vocab_file}: {e}") from None


def check_tokenizer_matches(flag_value, vocab_file, model_vocab, model_flag):
    """A --vocab_file given for a model that carries its own tokenizer file must tokenize as
    that one does (tokenizer_files.tokenizer_difference): the model's embeddings are indexed by
    it.

    Args:
      flag_value: --vocab_file as given; vocab_file: the file it resolved to.
      model_vocab: the tokenizer file beside the model.
      model_flag: "--init_checkpoint=DIR" or "--model_dir=DIR", named in the message.

    Raises:
      FlagValueError naming both files and the first difference.
    """
    if fileio.abspath(model_vocab) == fileio.abspath(vocab_file):
        return
    try:
        problem = tokenizer_files.tokenizer_difference(model_vocab, vocab_file)
    except (OSError, ValueError) as e:
        raise FlagValueError(f"--vocab_file={vocab_file}: {e}") from None
    if problem:
        raise FlagValueError(
            f"--vocab_file={flag_value} differs from {model_vocab} beside {model_flag}: "
            f"{problem}; the model's embeddings are indexed by that vocabulary (leave "
            "--vocab_file out to use it)")


def check_vocab_file_beside(vocab_file, model, model_flag="--init_checkpoint"):
    """A --vocab_file given with a model (a directory, checkpoint prefix or model file) that
    has a tokenizer file beside it must tokenize as that one does (check_tokenizer_matches);
    nothing to check when either is missing.

    Raises:
      FlagValueError naming both files and the first difference.
    """
    if not vocab_file or not model:
        return
    directory = model if fileio.isdir(model) else os.path.dirname(model)
    if not directory or not fileio.isdir(directory):
        return
    model_vocab = tokenizer_files.model_tokenizer_file(directory)
    if not model_vocab:
        return
    resolved = (tokenizer_files.model_tokenizer_file(vocab_file) if fileio.isdir(vocab_file)
                else vocab_file)
    if resolved:
        check_tokenizer_matches(vocab_file, resolved, model_vocab, f"{model_flag}={model}")


def load_tokenizer(vocab_file, do_lower_case):
    """The tokenizer of a resolved tokenizer file, with --do_lower_case checked against it.

    A vocab.txt tokenizes as --do_lower_case (`do_lower_case`) says (None, unset: True, the
    original's default). A tokenizer.json records its own casing: unset takes it, a
    contradicting value is an error.

    Returns:
      (WordpieceTokenizer or BpeTokenizer, the casing in force: bool).

    Raises:
      FlagValueError naming --vocab_file (and --do_lower_case when they disagree).
    """
    try:
        tokenizer = tokenizer_files.load_tokenizer(vocab_file, do_lower_case)
    except tokenizer_files.CasingMismatch as e:
        raise FlagValueError(
            f"--do_lower_case={bool(do_lower_case)} contradicts --vocab_file="
            f"{vocab_file}, which {'lower-cases' if e.file_casing else 'keeps case'} (a "
            "tokenizer.json records its casing); leave --do_lower_case out to use the "
            "file's") from None
    except (OSError, ValueError) as e:
        raise FlagValueError(f"--vocab_file={vocab_file}: {e}") from None
    missing = tokenizer_files.missing_roles(tokenizer)
    if missing:
        raise FlagValueError(f"--vocab_file={vocab_file} has no {'/'.join(missing)} token "
                             "(inputs are packed as [CLS] text [SEP] and padded)")
    return tokenizer, bool(tokenizer.do_lower_case)
