"""What a task starts from on disk: a model, the tokenizer beside it, and their settings.

A run directory's model with what it records is bert_tf.saving.load_model_dir's
(bert_tf.load_task reads it). `pretrained(path)` / `pretrained_encoder(path)`: the model (or
its encoder) and tokenizer of any model source bert_tf.load_model reads, for the tasks'
`from_pretrained`. A bert_tf run or .keras file is read without TensorFlow (JAX alone will
do); the other formats' readers (bert_tf.interop) use it.
"""

import os

from bert_tf import fileio, model_directory, run_directory, saving
from bert_tf.tasks.base import TaskError
from bert_tf.text import tokenizer_files


def _directory_of(path):
    path = str(path)
    if fileio.isdir(path):
        return path
    return os.path.dirname(fileio.abspath(path))


def _recorded_casing(path, directory):
    """The casing a vocab.txt beside `path` tokenizes with when none is given: what the source
    records (a bert_tf run's record; a Hugging Face or keras-hub tokenizer config, a TF1
    checkpoint's directory name), else None (the tokenizer's default, lower case)."""
    found = model_directory.recognise(directory)
    if found is not None and found.kind in (model_directory.RUN, model_directory.BERT_TF_MODEL):
        return run_directory.recorded_casing(directory)[0]
    from bert_tf import interop

    return interop.checkpoint_casing(path)[0]


def pretrained(path, tokenizer=None, do_lower_case=None):
    """(model, tokenizer) of any model source bert_tf.load_model reads.

    Args:
      path: a run directory, .keras file, checkpoint, Hugging Face, sentence-transformers or
        keras-hub directory.
      tokenizer: a Tokenizer or tokenizer file to use; default the vocab.txt / tokenizer.json
        beside the model.
      do_lower_case: a vocab.txt's casing, where the source does not record it.

    Returns:
      The Keras model bert_tf.load_model gives (its `.encoder` for a new head) and the
      tokenizer.

    Raises:
      TaskError: no tokenizer beside the model and none given.
    """
    model = saving.load_model(path)
    if tokenizer is None or isinstance(tokenizer, (str, os.PathLike)):
        directory = _directory_of(path)
        tokenizer_file = (tokenizer_files.find_tokenizer_file(tokenizer) if tokenizer
                          else tokenizer_files.model_tokenizer_file(directory))
        if tokenizer_file is None:
            raise TaskError(f"{path}: no vocab.txt, tokenizer.json or spiece.model beside the "
                            "model; pass "
                            "tokenizer= (a vocab.txt, tokenizer.json or SentencePiece .model)")
        casing = tokenizer_files.casing_to_load(
            tokenizer_file, do_lower_case, lambda: _recorded_casing(path, directory))
        tokenizer = tokenizer_files.load_tokenizer(tokenizer_file, casing)
    return model, tokenizer


def pretrained_encoder(path, tokenizer=None, do_lower_case=None):
    """(encoder, tokenizer) of any model source bert_tf.load_model reads (see `pretrained`)."""
    model, tokenizer = pretrained(path, tokenizer, do_lower_case)
    return getattr(model, "encoder", model), tokenizer
