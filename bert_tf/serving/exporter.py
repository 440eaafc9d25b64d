"""SavedModel export for TF Serving: id, raw-text and tf.Example signatures for every model type.

`export(model, "EXPORT/1", vocab_file=...)` writes the versioned directory TF Serving loads
(saved_model.pb, variables/, assets/vocab.txt) with up to three signatures:

  serving_default  int32 input_word_ids, input_mask, input_type_ids [B, S'] (and
                   masked_lm_positions [B, P] for BertPretrainer) -> the model's outputs
  serve_text       tf.string [B] texts -> task-level outputs (see bert_tf.serving.task_signatures),
                   tokenization, packing and truncation inside the graph; the encoder runs
                   at the batch's longest input rounded up to one of `length_buckets`
  serve_examples   tf.string [B] serialized tf.Example with the text inputs as bytes
                   features -> the same outputs as serve_text

The text signatures use only TensorFlow and tensorflow-text ops with the vocabulary embedded
as graph constants (and copied to assets/ for reference), so the directory can be moved and
served by the stock model server. assets.extra/bert_tf_export.json records how it was made.
"""

import json
import os
import re

import tensorflow as tf

from bert_tf import fileio, model_directory
from bert_tf.fileio import write_bytes_atomic, write_text_atomic
from bert_tf.modeling import kernels
from bert_tf.modeling.token_ids import encoder_config
from bert_tf.serving import task_signatures
from bert_tf.serving.task_info import DEFAULT_MULTI_LABEL_THRESHOLD
from bert_tf.text.layers import BertTokenizerLayer
from bert_tf.text import tokenizer_files
from bert_tf.text.tokenizer_files import tokenizer_layer

SIGNATURE_KEYS = {"ids": "serving_default", "text": "serve_text", "examples": "serve_examples"}
EXPORT_INFO_FILE = "bert_tf_export.json"
# The original run_squad.py's --doc_stride (and bert-tf-squad's).
DEFAULT_DOC_STRIDE = 128
# What tf.saved_model.save and export() write: a directory of only these is an export.


class ExportWriteError(OSError):
    """An export that could not be written (disk full, a file size limit), naming its
    directory; nothing was written there."""


def write_failed(export_dir, what, error):
    """The ExportWriteError of `error` (an OSError or a TensorFlow write error) met while
    staging `what` ("the SavedModel") for `export_dir`: their messages name only a temporary
    file."""
    text = (getattr(error, "message", None) or getattr(error, "strerror", None)
            or str(error)).splitlines()[0]
    reason = re.sub(r"\s*\[Op:\w+\]$", "", text.rsplit("; ", 1)[-1])
    return ExportWriteError(f"{export_dir}: cannot write {what} ({reason}); nothing was "
                            "written there")


def export_tokenizer_layer(tokenizer, vocab_file, do_lower_case):
    """The in-graph tokenizer from `tokenizer` (a bert_tf.text.Tokenizer or its layer) or the
    vocabulary (a vocab.txt or its list of tokens, tokenized with do_lower_case)."""
    if tokenizer is not None:
        if vocab_file is not None:
            raise ValueError("export: pass tokenizer or vocab_file, not both.")
        try:
            return tokenizer_layer(tokenizer)
        except TypeError:
            raise TypeError(f"export: tokenizer must be a bert_tf.text tokenizer (WordPiece, "
                            f"byte-level BPE or SentencePiece) or its layer, got "
                            f"{type(tokenizer).__name__}.") from None
    if vocab_file is None:
        return None
    if isinstance(vocab_file, (str, os.PathLike)) and (
            tokenizer_files.is_tokenizer_json(vocab_file)
            or tokenizer_files.is_sentencepiece_model(vocab_file)):
        return tokenizer_layer(tokenizer_files.load_tokenizer(
            vocab_file, tokenizer_files.casing_to_load(vocab_file, do_lower_case)))
    return BertTokenizerLayer(vocab_file, do_lower_case=do_lower_case)


def check_labels(task_name, model, labels):
    """The label names to export: one distinct name per class of a classifier or tagger
    (default "0", "1", ...), none for other tasks; raises ValueError naming the problem."""
    if task_name in ("classification", "multi_label", "tagging"):
        num_classes = model.num_classes
        if labels is None:
            return [str(i) for i in range(num_classes)]
        labels = [str(l) for l in labels]
        if len(labels) != num_classes:
            raise ValueError(f"export: {len(labels)} labels for a {type(model).__name__} with "
                             f"num_classes={num_classes}; pass one name per class.")
        if len(set(labels)) != len(labels) or not all(labels):
            raise ValueError(f"export: labels must be distinct non-empty names, got {labels}.")
        return labels
    if labels:
        raise ValueError(f"export: a {task_name} model has no labels, got {list(labels)}.")
    return []


def _make_task(model, tokenizer, max_seq_length, labels, text_pair, top_k, max_query_length,
               max_answer_length, doc_stride, version_2_with_negative,
               null_score_diff_threshold, multi_label_threshold):
    task_name = task_signatures.task_name_of(model)
    labels = check_labels(task_name, model, labels)
    if task_name == "classification":
        return task_signatures.ClassificationSignatures(model, tokenizer, max_seq_length, labels,
                                                        text_pair)
    if task_name == "multi_label":
        return task_signatures.MultiLabelSignatures(model, tokenizer, max_seq_length, labels,
                                                    text_pair, multi_label_threshold)
    if task_name == "regression":
        return task_signatures.RegressionSignatures(model, tokenizer, max_seq_length, text_pair)
    if task_name == "squad":
        if max_query_length is None:
            max_query_length = min(64, (max_seq_length - 3) // 2)
        # A window holds [CLS] question [SEP] at least one context token [SEP].
        if not 1 <= max_query_length <= max_seq_length - 4:
            raise ValueError(f"export: max_query_length={max_query_length} must be in "
                             f"[1, max_seq_length - 4 = {max_seq_length - 4}].")
        if max_answer_length < 1:
            raise ValueError(f"export: max_answer_length={max_answer_length} must be >= 1.")
        room = max_seq_length - 3 - max_query_length
        if doc_stride is None:
            doc_stride = min(DEFAULT_DOC_STRIDE, room)
        if not 1 <= doc_stride <= room:
            raise ValueError(
                f"export: doc_stride={doc_stride} must be in [1, {room}]: a window holds {room} "
                f"context tokens (max_seq_length={max_seq_length} minus max_query_length="
                f"{max_query_length} minus 3), and a larger stride would skip context between "
                "windows.")
        return task_signatures.SpanSignatures(model, tokenizer, max_seq_length, max_query_length,
                              max_answer_length, doc_stride, version_2_with_negative,
                              null_score_diff_threshold)
    if task_name == "tagging":
        return task_signatures.TaggingSignatures(model, tokenizer, max_seq_length, labels)
    if task_name == "fill_mask":
        vocabulary = tokenizer.token_texts() if tokenizer is not None else []
        if tokenizer is not None and not 1 <= top_k <= len(vocabulary):
            raise ValueError(f"export: top_k={top_k} must be in [1, {len(vocabulary)}] (the "
                             "vocabulary size).")
        return task_signatures.FillMaskSignatures(model, tokenizer, max_seq_length, vocabulary,
                                                  top_k)
    if task_name == "sentence_embedding":
        return task_signatures.SentenceEmbeddingSignatures(model, tokenizer, max_seq_length)
    return task_signatures.EmbeddingSignatures(model, tokenizer, max_seq_length)


class _ServingModule(tf.Module):
    """What tf.saved_model.save writes: the model's variables, the tokenizer, the signatures.

    Only the variables are tracked (not the Keras model, whose optimizer state a served model
    does not need).
    """

    def __init__(self, task, vocab_path):
        super().__init__(name="bert_tf_serving")
        self.model_variables = [v.value if hasattr(v, "value") else v
                                for v in task.model.variables]
        self.tokenizer = task.tokenizer
        self.vocab_file = tf.saved_model.Asset(vocab_path) if vocab_path else None
        self._task = task
        # No Python control flow depends on tensors here, so AutoGraph (seconds of source
        # rewriting per export) is off.
        self.serve_ids = tf.function(self._ids, input_signature=[task.ids_signature()],
                                     autograph=False)
        if task.tokenizer is not None:
            self.serve_text = tf.function(self._text, input_signature=[task.text_signature()],
                                          autograph=False)
            self.serve_examples = tf.function(
                self._examples, autograph=False,
                input_signature=[tf.TensorSpec([None], tf.string, name="examples")])

    def _ids(self, features):
        return self._task.ids(self._task.checked_ids(features))

    def _text(self, inputs):
        return self._task.text(self._task.checked_text(inputs))

    def _examples(self, examples):
        with tf.control_dependencies([task_signatures.assert_vector(
                examples, SIGNATURE_KEYS["examples"], "examples", "serialized tf.Examples")]):
            examples = tf.identity(examples)
        spec = {name: tf.io.FixedLenFeature(
            [], tf.string, default_value="" if name in self._task.optional_text_inputs else None)
            for name in self._task.text_inputs}
        return self.serve_text(tf.io.parse_example(examples, spec))


def export(model, export_dir, *, vocab_file=None, tokenizer=None, do_lower_case=True,
           max_seq_length=128, labels=None, signatures=("ids", "text", "examples"),
           text_pair=False, top_k=5, max_query_length=None, max_answer_length=30,
           doc_stride=None, version_2_with_negative=False, null_score_diff_threshold=0.0,
           multi_label_threshold=DEFAULT_MULTI_LABEL_THRESHOLD, length_buckets=None,
           overwrite=False, expected=fileio.NOT_CHECKED):
    """Writes `model` as a SavedModel that TF Serving can serve, with the chosen signatures.

    Args:
      model: a BertClassifier, BertSpanLabeler, BertTokenClassifier, BertPretrainer
        (fill-mask), BertEncoder (embeddings) or BertSentenceEmbedder (pooled sentence
        vectors).
      export_dir: the version directory to write, e.g. "EXPORT/1" (TF Serving's
        --model_base_path is then EXPORT). Written to a temporary sibling and renamed, so a
        server watching EXPORT never sees half a model.
      vocab_file: the model's vocab.txt, or its list of tokens; needed for "text"/"examples".
      tokenizer: instead of vocab_file/do_lower_case, a BertTokenizerLayer or a
        WordpieceTokenizer; or a BpeTokenizer / BpeTokenizerLayer (byte-level BPE from a
        tokenizer.json) for classification (multi-label too), regression and embedding
        models.
      do_lower_case: the casing the model was trained with.
      max_seq_length: S of the text signatures; longer inputs are truncated. (The id
        signature takes any length up to the model's max_position_embeddings.)
      labels: class names (BertClassifier) or tag names (BertTokenClassifier) in logit order;
        default "0", "1", ...
      signatures: any of "ids" (serving_default), "text" (serve_text) and "examples"
        (serve_examples).
      text_pair: BertClassifier only: the text signatures also take `text_pair`.
      top_k: BertPretrainer: predictions per [MASK].
      max_query_length: BertSpanLabeler: question tokens kept; default 64 (the original's),
        at most half of max_seq_length - 3.
      max_answer_length, version_2_with_negative, null_score_diff_threshold:
        BertSpanLabeler, as in the original run_squad.py (a SQuAD 2.0 model answers "" when
        the null score beats the best span by more than the threshold).
      multi_label_threshold: a multi-label BertClassifier's labels apply where their
        probability is above it (serve_text's `predicted`), in (0, 1).
      doc_stride: BertSpanLabeler: context tokens between the starts of the sliding windows
        a long context is answered in (bert-tf-squad's --doc_stride); default 128 (the
        original's), or the tokens a window holds if fewer.
      length_buckets: the lengths the text signatures run the encoder at: each request runs
        at the smallest one that holds its batch's longest packed input. Strictly increasing,
        at most max_seq_length (which is added as the last). Default:
        bert_tf.text.input_packing.bucket_lengths (128 -> 4, 8, 12, 16, 24, ..., 112, 128); ()
        runs every request at max_seq_length.
      overwrite: replace an existing export in export_dir (never a directory holding
        anything but an export).
      expected: fileio.state(export_dir) when the caller checked it (default: taken here,
        before the model is traced): the final move refuses (fileio.TargetChangedError) when
        export_dir no longer holds that, so two exports to one directory never both succeed.

    Returns:
      export_dir.

    Raises:
      TypeError: the model is not one of the six types.
      ValueError: an argument does not fit the model (naming it), or "text"/"examples" without
        a vocabulary.
      FileExistsError: export_dir is a file, or exists and is not empty without overwrite,
        or holds something other than an export.
      fileio.TargetChangedError: export_dir appeared or changed while the export was made.

    The exported signatures check their inputs in-graph (InvalidArgumentError naming the input
    and what was expected): ids outside the model's tables, more ids than
    max_position_embeddings, text inputs that are not [B] vectors or differ in batch size.
    """
    unknown = [s for s in signatures if s not in SIGNATURE_KEYS]
    if unknown or not signatures:
        raise ValueError(f"export: signatures={list(signatures)!r}; choose from "
                         f"{', '.join(SIGNATURE_KEYS)}.")
    task_signatures.task_name_of(model)  # A TypeError for models that cannot be served.
    tokenizer = export_tokenizer_layer(tokenizer, vocab_file, do_lower_case)
    wants_text = "text" in signatures or "examples" in signatures
    if wants_text and tokenizer is None:
        raise ValueError("export: the text and examples signatures need vocab_file (or "
                         "tokenizer); pass signatures=('ids',) to export without one.")
    config = encoder_config(model)
    # The id signature takes any length; S is the text signatures' packed length.
    if wants_text and not 3 <= max_seq_length <= config.max_position_embeddings:
        raise ValueError(f"export: max_seq_length={max_seq_length} must be in [3, "
                         f"max_position_embeddings={config.max_position_embeddings}].")
    # A larger vocab_size is fine (rows padded for speed, as demo_tiny.json's 4096 over a
    # 3.4k-token vocabulary); a smaller one would send ids past the embedding table.
    if tokenizer is not None and tokenizer.vocab_size > config.vocab_size:
        raise ValueError(f"export: the vocabulary has {tokenizer.vocab_size} tokens but the "
                         f"model's vocab_size is only {config.vocab_size}.")
    task = _make_task(model, tokenizer if wants_text else None, max_seq_length, labels,
                      text_pair, top_k, max_query_length, max_answer_length, doc_stride,
                      version_2_with_negative, null_score_diff_threshold,
                      multi_label_threshold)
    if wants_text:
        task.length_buckets = task_signatures.check_length_buckets(length_buckets, max_seq_length,
                                                         config.max_position_embeddings)

    export_dir = fileio.abspath(export_dir)
    if expected is fileio.NOT_CHECKED:
        expected = fileio.state(export_dir)
    else:
        fileio.check_unchanged(export_dir, expected)
    if fileio.exists(export_dir) and not fileio.isdir(export_dir):
        # Even with overwrite: replacing a file by a SavedModel is never what was meant.
        raise FileExistsError(f"export: {export_dir} is a file; expected a new or empty "
                              "version directory, e.g. EXPORT/1.")
    existing = set(fileio.listdir(export_dir)) if fileio.exists(export_dir) else set()
    if existing and not overwrite:
        raise FileExistsError(f"export: {export_dir} exists and is not empty; pass "
                              "overwrite=True (--overwrite) or choose a new version number.")
    if existing and not model_directory.holds_only(export_dir, model_directory.SAVED_MODEL):
        # overwrite replaces an export, never a run directory or anything else.
        raise FileExistsError(f"export: {export_dir} is not a SavedModel export (it holds "
                              f"{', '.join(sorted(existing)[:4])}); overwrite replaces only an "
                              "export: choose a new directory.")
    fileio.makedirs(os.path.dirname(export_dir))
    # Remote exports are staged on local disk and uploaded (fileio.publish_dir).
    with fileio.staging_dir(export_dir, ".tmp_export_") as staging:
        saved = os.path.join(staging, "saved_model")
        try:
            vocab_path = None
            if task.tokenizer is not None:
                name, content = task.tokenizer.asset()
                vocab_path = os.path.join(staging, name)
                # A SentencePiece model is bytes; a vocab.txt or tokenizer.json is text.
                if isinstance(content, bytes):
                    write_bytes_atomic(vocab_path, content)
                else:
                    write_text_atomic(vocab_path, content)
            module = _ServingModule(task, vocab_path)
            functions = {"ids": module.serve_ids}
            if task.tokenizer is not None:
                functions.update(text=module.serve_text, examples=module.serve_examples)
            # Traced without the training kernels' custom gradients: a server takes no
            # gradient, and a SavedModel cannot save their Python functions (it warns on load).
            with kernels.export_tracing(leaves_tensorflow=False):
                tf.saved_model.save(module, saved, signatures={
                    SIGNATURE_KEYS[s]: functions[s] for s in signatures})
            os.makedirs(os.path.join(saved, "assets.extra"))
            write_text_atomic(
                os.path.join(saved, "assets.extra", EXPORT_INFO_FILE),
                json.dumps(_export_info(task, model, signatures, max_seq_length), indent=2)
                + "\n")
        except (tf.errors.OpError, OSError) as e:
            raise write_failed(export_dir, "the SavedModel", e) from None
        fileio.publish_dir(saved, export_dir, expected, prefix=".tmp_old_export_")
    return export_dir


def _export_info(task, model, signatures, max_seq_length):
    info = {"model": type(model).__name__, "task": task.name,
            "signatures": {SIGNATURE_KEYS[s]: _signature_inputs(task, s) for s in signatures}}
    if getattr(task, "labels", None):
        info["labels"] = task.labels
    if task.tokenizer is not None:
        info["max_seq_length"] = max_seq_length
        info["length_buckets"] = list(task.length_buckets)
        info.update(task.tokenizer.export_info())
        if isinstance(task, task_signatures.SpanSignatures):
            info.update(max_query_length=task.max_query_length,
                        max_answer_length=task.max_answer_length, doc_stride=task.doc_stride,
                        version_2_with_negative=task.version_2_with_negative,
                        null_score_diff_threshold=task.null_score_diff_threshold)
        if isinstance(task, task_signatures.MultiLabelSignatures):
            info["multi_label_threshold"] = task.threshold
    return info


def _signature_inputs(task, signature):
    if signature == "ids":
        return sorted(task.ids_signature())
    if signature == "text":
        return list(task.text_inputs)
    return ["examples"]
