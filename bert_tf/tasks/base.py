"""TextTask: what every task of bert_tf.tasks shares, a Keras model with its tokenizer.

A task holds `model` (the Keras model a run saves: BertClassifier, BertSpanLabeler, ...),
`tokenizer` (a bert_tf.text Tokenizer: WordPiece or byte-level BPE, in Python, so it runs on
JAX without TensorFlow) and `max_seq_length`. Its `predict` tokenizes raw text in Python, packs
it as the commands do, and runs the model on length-sorted batches cut to the smallest length
bucket that holds each batch (bert_tf.text.input_packing: only padding is cut, so an answer
does not depend on its batch). `fit` trains the model on text with Keras' fit, in batches of
one length bucket each (bert_tf.data.tasks.length_buckets.keras_dataset, a tf.data pipeline:
TensorFlow must be installed to train, also on JAX). `save(directory)` writes what
bert_tf.load_task, bert-tf-export and --init_checkpoint read back.
"""

import functools
import math
import numbers
import os

import keras
import numpy as np
from absl import logging

from bert_tf import file_names, fileio, model_directory, progress
from bert_tf.config import ENCODER_INPUTS
from bert_tf.serving.task_info import (TaskInfoError, is_finite_number,
                                       label_names_problem, read_task_info,
                                       write_task_info)
from bert_tf.text import tokenizer_files
from bert_tf.text.input_packing import bucket_lengths, length_sorted_batches, pack_inputs


class TaskError(ValueError):
    """Bad input to a task: text that is not text, labels that do not fit the model."""


def as_texts(texts, name="texts"):
    """(list of str, one): `texts` as strings, and whether a single text was given.

    A str is one text; bytes are decoded as UTF-8 with undecodable bytes replaced by U+FFFD (as
    the exported text signatures read them). Anything else is refused naming its position.
    """
    one = isinstance(texts, (str, bytes))
    items = [texts] if one else texts
    if isinstance(items, np.ndarray):
        items = items.tolist()
    if not isinstance(items, (list, tuple)):
        raise TaskError(f"{name} must be a str or a list of str, got {type(texts).__name__}")
    result = []
    for i, item in enumerate(items):
        if isinstance(item, bytes):
            item = item.decode("utf-8", "replace")
        elif not isinstance(item, str):
            raise TaskError(f"{name}[{i}] is {type(item).__name__}, not text (str or UTF-8 "
                            "bytes)")
        result.append(item)
    return result, one


def label_name(label):
    """A label as the name it stands for: an int (a class id, not a bool) is the name str(int),
    as the default names "0" .. "C-1" are; anything else as given."""
    if isinstance(label, numbers.Integral) and not isinstance(label, (bool, np.bool_)):
        return str(int(label))
    return label


def label_list(labels, what):
    """`labels` (a list of names or int class ids) as a tuple of names (label_name); one str
    is refused, which would otherwise be read as a list of its characters."""
    if isinstance(labels, (str, bytes)):
        raise TaskError(f"{what}: labels must be a list of names, not the str {labels!r}")
    if isinstance(labels, np.ndarray):
        labels = labels.tolist()
    return tuple(label_name(label) for label in labels)


def check_labels(labels, num_classes, what):
    """The label names as a tuple (int class ids as their names, label_name); refused when
    they do not fit a head of num_classes."""
    labels = label_list(labels, what)
    if len(labels) != num_classes:
        raise TaskError(f"{what}: {len(labels)} label names for a head of {num_classes} "
                        "classes; give one name per class, in the order of its logits")
    problem = label_names_problem(labels)
    if problem:
        raise TaskError(f"{what}: {problem}")
    return labels


def check_positive_int(name, value, owner=None):
    """`value` of setting `name` (batch_size, top_k, ...) as an int >= 1 (NumPy's ints
    included, not a bool); refused in one line naming it (and `owner`, the class) otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise TaskError(f"{f'{owner}: ' if owner else ''}{name}={value!r} must be an integer "
                        ">= 1")
    return int(value)


def check_finite_number(name, value, owner=None):
    """`value` of setting `name` as a float, refused in one line naming it (and `owner`) unless
    it is a finite number (serving.task_info.is_finite_number, task_info.json's rule)."""
    if not is_finite_number(value):
        raise TaskError(f"{f'{owner}: ' if owner else ''}{name}={value!r} must be a finite "
                        "number")
    return float(value)


def check_not_empty(count, name, what, purpose="train on"):
    """Refuses no `what` (texts, sentences, questions) at all in argument `name`."""
    if not count:
        raise TaskError(f"{name}: no {what} to {purpose}")


def validation_split_at(count, validation_split, validation_data, what="texts"):
    """Where fit's `validation_split` cuts `count` inputs: the first split_at train, the rest
    (the last fraction, as Keras' fit takes it, before any shuffling) validate; None for no
    split.

    Raises:
      TaskError: a fraction outside (0, 1), one given with validation_data, or one that leaves
        no input on either side.
    """
    if validation_split is None or validation_split == 0:
        return None
    if (isinstance(validation_split, bool) or not isinstance(validation_split, numbers.Real)
            or not 0 < validation_split < 1):
        raise TaskError(f"validation_split={validation_split!r} must be a fraction in (0, 1)")
    if validation_data is not None:
        raise TaskError("give validation_data or validation_split, not both")
    split_at = int(math.floor(count * (1 - validation_split)))
    if split_at in (0, count):
        raise TaskError(f"validation_split={validation_split} of {count} {what} leaves none to "
                        f"{'train on' if split_at == 0 else 'evaluate on'}")
    return split_at


def softmax(logits):
    """Softmax over the last axis, float32."""
    logits = np.asarray(logits, np.float32)
    exps = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exps / exps.sum(axis=-1, keepdims=True)


def sigmoid(logits):
    """Element-wise sigmoid, float32 (multi-label probabilities), no overflow."""
    return np.exp(-np.logaddexp(0.0, -np.asarray(logits, np.float32)))


def _run_model(model, inputs):
    return model(inputs, training=False)


class TextTask:
    """A Keras model, its tokenizer and sequence length: the base of the text tasks.

    Args:
      model: the Keras model (the class each task names in `model_class`).
      tokenizer: a bert_tf.text Tokenizer (`load_tokenizer`), or the path of a vocab.txt or
        tokenizer.json (or a directory holding one).
      max_seq_length: S, the longest packed input ([CLS] and [SEP] included); longer texts are
        truncated as the commands truncate them.
      do_lower_case: a vocab.txt's casing when `tokenizer` is a path (default True; a
        tokenizer.json records its own).
      batch_size: texts per forward pass in `predict`.

    Raises:
      TypeError: a model of another class.
      TaskError: a tokenizer without [CLS]/[SEP]/[PAD], with more tokens than the model's
        vocabulary, or max_seq_length outside [3, max_position_embeddings].
    """

    model_class = None
    # task_info.json's task of a saved task.
    task_name = None
    # The model file a saved task holds.
    model_file = file_names.MODEL_FILE

    def __init__(self, model, tokenizer, max_seq_length=128, do_lower_case=None, batch_size=32):
        owner = type(self).__name__
        if not isinstance(model, self.model_class):
            raise TypeError(f"{owner}: model must be a {self.model_class.__name__}, got "
                            f"{type(model).__name__}")
        self.model = model
        self.tokenizer_file = None
        if isinstance(tokenizer, (str, os.PathLike)):
            self.tokenizer_file = tokenizer_files.find_tokenizer_file(tokenizer)
            tokenizer = tokenizer_files.load_tokenizer(self.tokenizer_file, do_lower_case)
        missing = tokenizer_files.missing_roles(tokenizer)
        if missing:
            raise TaskError(f"{owner}: the tokenizer has no {'/'.join(missing)} token (texts "
                            "are packed as [CLS] text [SEP] and padded)")
        self.tokenizer = tokenizer
        config = self.encoder.config
        if tokenizer.vocab_size > config.vocab_size:
            raise TaskError(f"{owner}: the tokenizer has {tokenizer.vocab_size} tokens but the "
                            f"model's vocab_size is {config.vocab_size}")
        if not 3 <= int(max_seq_length) <= config.max_position_embeddings:
            raise TaskError(f"{owner}: max_seq_length={max_seq_length} must be in [3, "
                            f"max_position_embeddings={config.max_position_embeddings}]")
        self.max_seq_length = int(max_seq_length)
        self.batch_size = check_positive_int("batch_size", batch_size, owner)
        # Fine steps where a new length costs nothing (TensorFlow without XLA); coarse ones on
        # JAX, where each length is one more compiled program.
        self.buckets = bucket_lengths(self.max_seq_length,
                                      coarse=keras.backend.backend() == "jax")
        self._forward_functions = {}
        # A head `from_pretrained` made and no fit has trained yet: its answers are random
        # (the commands refuse them without --allow_untrained_head); warned once per action.
        self.untrained_head = False
        self._warned_untrained = set()

    @property
    def encoder(self):
        """The model's encoder (a BertEncoder or ModernBertEncoder)."""
        return self.model.encoder

    @property
    def do_lower_case(self):
        return self.tokenizer.do_lower_case

    def __repr__(self):
        return (f"{type(self).__name__}({type(self.model).__name__}, "
                f"{self.tokenizer.kind} tokenizer, max_seq_length={self.max_seq_length})")

    def warn_if_untrained(self, action):
        """Logs once per `action` ("predicts", "saves") that the head is untrained."""
        if self.untrained_head and action not in self._warned_untrained:
            self._warned_untrained.add(action)
            logging.warning("%s %s with the untrained head from_pretrained put on the encoder "
                            "(random weights, random answers); fit it first", type(self).__name__,
                            action)

    # -- prediction -------------------------------------------------------------------------

    def pack(self, ids_a, ids_b=None):
        """One row's encoder inputs, unpadded: dict of int lists ([CLS] A [SEP] (B [SEP]))
        truncated longest-first to max_seq_length, and whether anything was cut."""
        tokenizer = self.tokenizer
        room = self.max_seq_length - (3 if ids_b else 2)
        truncated = len(ids_a) + len(ids_b or ()) > room
        features = pack_inputs(ids_a, ids_b, max_seq_length=self.max_seq_length,
                               cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                               pad_id=tokenizer.pad_id)
        length = sum(features["input_mask"])
        return {name: features[name][:length] for name in ENCODER_INPUTS}, truncated

    def run(self, rows, batch_size=None):
        """The model's outputs of each row, run in length-sorted, bucket-cut batches.

        Args:
          rows: list of dicts of int lists, one per input: input_word_ids and input_type_ids
            (unpadded; input_mask is made here) and any other per-row list (the pre-trainer's
            masked_lm_positions), padded with 0 to the batch's longest (at least 1).
          batch_size: rows per forward pass (default the task's).

        Returns:
          list (per row) of the model's outputs for that row: NumPy float32 arrays (or a dict
          of them), sequence axes as long as the row's batch (read the row's own positions).
        """
        batch_size = (self.batch_size if batch_size is None
                      else check_positive_int("batch_size", batch_size))
        self.warn_if_untrained("predicts")
        lengths = [len(row["input_word_ids"]) for row in rows]
        results = [None] * len(rows)
        bar = progress.progress_bar(len(rows), "row") if len(rows) > 50 * batch_size else None
        done = 0
        for positions, width in length_sorted_batches(lengths, self.buckets, batch_size):
            features = {}
            for name in rows[positions[0]]:
                if name == "input_mask":
                    continue
                size = width if name in ENCODER_INPUTS else max(
                    1, max(len(rows[i][name]) for i in positions))
                pad = self.tokenizer.pad_id if name == "input_word_ids" else 0
                array = np.full((len(positions), size), pad, np.int32)
                for j, i in enumerate(positions):
                    array[j, :len(rows[i][name])] = rows[i][name]
                features[name] = array
            mask = np.zeros((len(positions), width), np.int32)
            for j, i in enumerate(positions):
                mask[j, :lengths[i]] = 1
            features["input_mask"] = mask
            outputs = self._forward(features)
            for j, i in enumerate(positions):
                results[i] = keras.tree.map_structure(lambda array, j=j: array[j], outputs)
            done += len(positions)
            if bar is not None:
                bar.update(done)
        return results

    def _forward(self, features):
        """The model on a batch of int32 [b, L] arrays: its outputs as float32 NumPy."""
        if keras.backend.backend() == "tensorflow":
            key = tuple(sorted(features))
            function = self._forward_functions.get(key)
            if function is None:
                import tensorflow as tf

                # One trace for every batch and bucket length. A partial (not a lambda):
                # TensorFlow counts the traces of one code object together, and each task
                # traces once.
                function = tf.function(
                    functools.partial(_run_model, self.model), autograph=False,
                    input_signature=[{name: tf.TensorSpec([None, None], tf.int32)
                                      for name in key}])
                self._forward_functions[key] = function
            outputs = function(features)
        else:  # Keras' compiled predict step (jax.jit), one program per bucket length.
            outputs = self.model.predict_on_batch(features)
        return keras.tree.map_structure(
            lambda t: np.asarray(keras.ops.convert_to_numpy(t), np.float32), outputs)

    @staticmethod
    def log_truncated(count, total, what="texts"):
        if count:
            logging.warning("%d of %d %s were longer than max_seq_length allows and were "
                            "truncated", count, total, what)

    # -- training ---------------------------------------------------------------------------

    def compile_and_fit(self, dataset, validation, *, epochs, optimizer, learning_rate,
                        warmup_proportion, verbose, **fit_kwargs):
        """Compiles the model (its default loss and metrics; `optimizer`, else BERT's AdamW
        with a linear warmup and decay over this fit's steps) and runs Keras' fit.

        `dataset` shuffles itself (keras_batches), so Keras' shuffle is off; the tasks' fit
        takes `shuffle` and `validation_split` before batching."""
        if optimizer is None:
            from bert_tf.training.optimization import create_optimizer

            steps = max(1, int(dataset.cardinality()) * epochs)
            optimizer = create_optimizer(learning_rate, num_train_steps=steps,
                                         num_warmup_steps=int(steps * warmup_proportion))
        self.model.compile(optimizer=optimizer)
        history = self.model.fit(
            dataset, validation_data=validation, epochs=epochs, shuffle=False,
            verbose=progress.keras_verbose() if verbose == "auto" else verbose, **fit_kwargs)
        self.untrained_head = False
        return history

    def keras_batches(self, features, labels, batch_size, shuffle, sample_weights=None,
                      cut_labels=True):
        """bert_tf.data.tasks.length_buckets.keras_dataset of rows (dicts of unpadded int lists
        input_word_ids and input_type_ids, as `run` takes them; padded here to
        max_seq_length), in coarse buckets as the commands train; `cut_labels`: labels [N, S]
        are per token (False: per example, whatever their width)."""
        from bert_tf.data.tasks import length_buckets

        arrays = {name: np.zeros((len(features), self.max_seq_length), np.int32)
                  for name in ENCODER_INPUTS}
        arrays["input_word_ids"][:] = self.tokenizer.pad_id
        for i, row in enumerate(features):
            length = len(row["input_word_ids"])
            arrays["input_word_ids"][i, :length] = row["input_word_ids"]
            arrays["input_type_ids"][i, :length] = row["input_type_ids"]
            arrays["input_mask"][i, :length] = 1
        return length_buckets.keras_dataset(
            arrays, labels, batch_size=batch_size, shuffle=shuffle,
            buckets=bucket_lengths(self.max_seq_length, coarse=True),
            sample_weights=sample_weights, cut_labels=cut_labels)

    # -- saving -----------------------------------------------------------------------------

    def task_info(self):
        """The task_info.json fields of this task: dict (task, labels, options)."""
        return {"task": self.task_name}

    def save(self, directory):
        """Writes the task to `directory` (made if missing): the model (model.keras, or
        pretrainer.keras for fill-mask), its tokenizer file, bert_config.json and
        task_info.json. bert_tf.load_task reads it back; bert-tf-export --model_dir exports
        it (text signatures included); --init_checkpoint warm-starts from it.

        Returns:
          The directory.

        Raises:
          TaskError: `directory` holds another model (a training run's, a conversion's, a
            Hugging Face model, ...) or the save of a task load_task builds another class
            from, or is inside a model directory; an earlier save of a task of this class
            (for a TextClassifier: classification, multi-label or regression) is replaced.
        """
        directory = str(directory)
        self.check_save_directory(directory)
        self.warn_if_untrained("saves")
        fileio.makedirs(directory)
        self.model.save(file_names.path(directory, self.model_file))
        # None: a tokenizer built in memory, written as what it holds.
        source = self.tokenizer_file or getattr(self.tokenizer, "vocab_file", None)
        tokenizer_files.write_tokenizer_file(directory, self.tokenizer, source)
        self.encoder.config.to_json_file(file_names.path(directory, file_names.CONFIG_FILE))
        info = self.task_info()
        write_task_info(directory, info.pop("task"), do_lower_case=self.do_lower_case,
                        max_seq_length=self.max_seq_length, **info)
        return directory

    @property
    def saved_tasks(self):
        """The task_info.json tasks whose save this task replaces: those load_task builds this
        class from (its own task_name; a TextClassifier's classification, multi_label and
        regression)."""
        return (self.task_name,)

    def check_save_directory(self, directory):
        """Refuses a `directory` that save would mix with another model, as the commands' output
        rule does (bert_tf.model_directory): one holding a model (a training run's markers, an
        export, a Hugging Face model, ...) other than an earlier save of a task load_task builds
        this class from (only model.keras or pretrainer.keras and task_info.json, whose task is
        one of saved_tasks), or one inside a model directory (a run's best/, ...)."""
        if fileio.exists(directory) and not fileio.isdir(directory):
            raise TaskError(f"save: {directory} is a file; expected a directory")
        saved = {file_names.MODEL_FILE, file_names.TASK_INFO_FILE}
        for found in model_directory.models_in(directory):
            if (found.kind == model_directory.RUN and set(found.names) <= saved
                    and file_names.TASK_INFO_FILE in found.names):
                continue
            raise TaskError(f"save: {directory} holds {found}; a task is saved into a new or "
                            "empty directory, or over an earlier save: choose another directory")
        found = model_directory.enclosing(directory, through_links=True)
        if found is not None:
            raise TaskError(f"save: {directory} is inside {found.path}, which holds {found}; a "
                            "task is never saved inside a model directory: choose another "
                            "location")
        owner = type(self).__name__
        if fileio.exists(file_names.path(directory, file_names.TASK_INFO_FILE)):
            try:
                task = read_task_info(directory).task
            except TaskInfoError as e:
                raise TaskError(f"save: {e}; choose another directory") from None
            if task not in self.saved_tasks:
                raise TaskError(f"save: {directory} holds the save of a {task!r} task "
                                f"({file_names.TASK_INFO_FILE}), which a {owner} "
                                f"({self.task_name!r}) does not replace: choose another "
                                "directory")
        other = (file_names.PRETRAINER_FILE if self.model_file == file_names.MODEL_FILE
                 else file_names.MODEL_FILE)
        if fileio.exists(file_names.path(directory, other)):
            raise TaskError(f"save: {directory} holds {other}, the save of another kind of task "
                            f"than {owner}: choose another directory")
