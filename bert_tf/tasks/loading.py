"""bert_tf.load_task: the task of a fine-tuned run (or a saved task), answering raw text."""

from bert_tf import model_directory, saving
from bert_tf.modeling import (BertClassifier, BertPretrainer, BertSentenceEmbedder,
                              BertSpanLabeler, BertTokenClassifier, Encoder)
from bert_tf.tasks.base import TaskError
from bert_tf.tasks.fill_mask import FillMask
from bert_tf.tasks.question_answerer import QuestionAnswerer
from bert_tf.tasks.text_classifier import TextClassifier
from bert_tf.tasks.text_embedder import TextEmbedder
from bert_tf.tasks.token_tagger import TokenTagger


def _options(found, **defaults):
    """Keyword settings of a task from what its directory recorded (those of `defaults`)."""
    info = found.task_info
    options = dict(defaults)
    if found.max_seq_length:
        options["max_seq_length"] = found.max_seq_length
    if info is not None:
        # A setting a file written before it was recorded lacks keeps the task's default.
        for name in ("max_query_length", "max_answer_length", "doc_stride",
                     "version_2_with_negative", "null_score_diff_threshold", "n_best_size",
                     "text_pair", "multi_label_threshold"):
            if getattr(info, name, None) is not None and name in defaults:
                options[name] = getattr(info, name)
    return options


def load_task(path, batch_size=32):
    """The model of a run directory with its tokenizer, label names and settings: raw text in.

    Args:
      path: the output directory of bert-tf-classify (a TextClassifier: classification,
        sentence pairs, regression), bert-tf-squad (QuestionAnswerer), bert-tf-tag
        (TokenTagger), bert-tf-embed (TextEmbedder) or bert-tf-pretrain (FillMask: the
        masked-LM head); a directory a task's `save` wrote; a sentence-transformers directory
        (TextEmbedder); a Hugging Face directory of a transformers task model (its head, its
        id2label as the labels); or a .keras file with its tokenizer file beside it.
      batch_size: texts per forward pass in `predict`.

    Returns:
      A TextClassifier, QuestionAnswerer, TokenTagger, FillMask or TextEmbedder.

    Raises:
      TaskError: no tokenizer file beside the model, or a model without a task head (an
        encoder: the message names the `from_pretrained` that builds one).
      FileNotFoundError / ValueError: as bert_tf.load_model.

    Examples:

    >>> classifier = bert_tf.load_task("/tmp/my_classifier")        # doctest: +SKIP
    >>> classifier.predict(["The cat sat on the mat."])               # doctest: +SKIP
    [{'label': 'statement', 'score': 0.98, 'scores': {'statement': 0.98, 'type': 0.02}}]
    """
    path = str(path)
    found_dir = model_directory.recognise(path)
    if found_dir is not None and found_dir.kind == model_directory.SENTENCE_TRANSFORMERS:
        return TextEmbedder.from_pretrained(path, batch_size=batch_size)
    found = saving.load_model_dir(path)
    model = found.model
    if found.vocab_file is None:
        raise TaskError(f"{path}: no vocab.txt, tokenizer.json or spiece.model beside "
                        f"{found.model_file}; "
                        "build the task with its tokenizer: bert_tf.tasks."
                        f"{model.text_task}(model, tokenizer, ...)")
    info = found.task_info
    labels = list(info.labels) if info is not None and info.labels else None
    common = dict(do_lower_case=found.do_lower_case, batch_size=batch_size)
    tokenizer = found.vocab_file
    if isinstance(model, BertClassifier):
        return TextClassifier(model, tokenizer, labels if model.num_classes > 1 else None,
                              **_options(found, text_pair=False, multi_label_threshold=None),
                              **common)
    if isinstance(model, BertSpanLabeler):
        return QuestionAnswerer(model, tokenizer, **_options(
            found, max_query_length=64, max_answer_length=30, doc_stride=128,
            version_2_with_negative=False, null_score_diff_threshold=0.0, n_best_size=20),
            **common)
    if isinstance(model, BertTokenClassifier):
        return TokenTagger(model, tokenizer, labels, **_options(found), **common)
    if isinstance(model, BertPretrainer):
        return FillMask(model, tokenizer, **_options(found), **common)
    if isinstance(model, BertSentenceEmbedder):
        return TextEmbedder(model, tokenizer, **_options(found), **common)
    if isinstance(model, Encoder):
        raise TaskError(f"{path} holds a {type(model).__name__} without a task head; build one "
                        f"on it: bert_tf.tasks.TextClassifier.from_pretrained({path!r}, "
                        "labels=[...]) (or TokenTagger, QuestionAnswerer, TextEmbedder)")
    raise TaskError(f"{path}: a {type(model).__name__} is not a task bert_tf.tasks answers")
