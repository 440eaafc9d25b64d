"""TextClassifier: sentence (pair) classification (one label, or any number) or regression on
raw text."""

import numpy as np

from bert_tf.modeling import BertClassifier
from bert_tf.serving.task_info import (CLASSIFIER_TASKS, DEFAULT_MULTI_LABEL_THRESHOLD,
                                      multi_label_threshold_problem, threshold_logit)
from bert_tf.tasks import sources
from bert_tf.tasks.base import (TaskError, TextTask, as_texts, check_labels, check_not_empty,
                                check_positive_int, label_list, label_name, sigmoid, softmax,
                                validation_split_at)


class TextClassifier(TextTask):
    """A BertClassifier with its tokenizer and label names: texts in, labels and scores out.

    What bert-tf-classify fine-tunes (classification, multi-label, sentence pairs,
    regression); a run's directory loads as one with `bert_tf.load_task(run_dir)`.

    Args:
      model: a BertClassifier (num_classes C; 1 for regression).
      tokenizer: a bert_tf.text Tokenizer, or the path of a vocab.txt / tokenizer.json.
      labels: the C class names in the order of the logits (default "0" .. "C-1"; an int
        class id i is the name str(i)); none for regression.
      max_seq_length: S, the longest packed input; longer texts (pairs) are truncated
        longest-first, as the command does.
      text_pair: the model was trained on sentence pairs (recorded by `save` for the export's
        text signature; `predict` takes `text_pairs` either way).
      multi_label_threshold: a multi-label head's labels apply where their probability is
        above it, in (0, 1) (default 0.5; `save` records it for load_task and the exports).
      do_lower_case, batch_size: see bert_tf.tasks.TextTask.

    Raises:
      TaskError: labels whose number differs from the head's classes (naming both), labels
        for a regression head, one str as labels, a multi_label_threshold outside (0, 1) or
        for a head that is not multi-label.

    Examples:

    >>> classifier = bert_tf.load_task("/tmp/my_classifier")     # doctest: +SKIP
    >>> classifier.predict(["a gripping film", "a dull plot"])    # doctest: +SKIP
    [{'label': 'positive', 'score': 0.97, 'scores': {...}}, {'label': 'negative', ...}]
    >>> classifier = TextClassifier.from_pretrained(               # doctest: +SKIP
    ...     "/tmp/bert_tf_demo/pretraining_output", labels=["negative", "positive"])
    >>> classifier.fit(train_texts, train_labels, epochs=3)         # doctest: +SKIP
    """

    model_class = BertClassifier

    def __init__(self, model, tokenizer, labels=None, *, max_seq_length=128, text_pair=False,
                 multi_label_threshold=None, do_lower_case=None, batch_size=32):
        super().__init__(model, tokenizer, max_seq_length, do_lower_case, batch_size)
        num_classes = model.num_classes
        if num_classes == 1:
            if labels is not None and label_list(labels, "TextClassifier"):
                raise TaskError(f"TextClassifier: {len(labels)} label names for a regression "
                                "head (1 output, a score); give no labels")
            self.labels = ()
        else:
            self.labels = check_labels([str(i) for i in range(num_classes)] if labels is None
                                       else labels, num_classes, "TextClassifier")
        self.text_pair = bool(text_pair)
        self._threshold = DEFAULT_MULTI_LABEL_THRESHOLD
        if multi_label_threshold is not None:
            self.multi_label_threshold = multi_label_threshold

    @property
    def multi_label_threshold(self):
        """Multi-label: a label applies where its probability is above this (None for other
        heads); settable, in (0, 1)."""
        return self._threshold if self.multi_label else None

    @multi_label_threshold.setter
    def multi_label_threshold(self, value):
        if not self.multi_label:
            raise TaskError(f"TextClassifier: multi_label_threshold={value} applies to a "
                            f"multi-label head; this one is {self.task_name}")
        problem = multi_label_threshold_problem(value)
        if problem:
            raise TaskError(f"TextClassifier: multi_label_threshold={problem}")
        self._threshold = float(value)

    @property
    def regression(self):
        """True for a regression head (one output, a score)."""
        return self.model.num_classes == 1

    @property
    def multi_label(self):
        """True for a multi-label head (a sigmoid per label; any number apply to a text)."""
        return bool(getattr(self.model, "multi_label", False))

    @property
    def task_name(self):
        if self.regression:
            return "regression"
        return "multi_label" if self.multi_label else "classification"

    @property
    def saved_tasks(self):
        return CLASSIFIER_TASKS

    @classmethod
    def from_pretrained(cls, path, labels=None, *, regression=False, multi_label=False,
                        max_seq_length=128, text_pair=False, multi_label_threshold=None,
                        dropout_rate=None, tokenizer=None, do_lower_case=None, batch_size=32):
        """A new classifier head on the encoder of any model bert_tf.load_model reads.

        Args:
          path: a pre-training run, an original TF1 checkpoint, a Hugging Face,
            sentence-transformers or keras-hub directory, a .keras file (bert_tf.load_model);
            its vocab.txt / tokenizer.json comes along.
          labels: the class names (at least 2; int class ids i name "i"), in the order the
            head's logits take them.
          regression: one output, a score, instead of classes.
          multi_label: any number of the labels may apply to a text (a sigmoid per label).
          max_seq_length, text_pair, multi_label_threshold, batch_size: see the class.
          dropout_rate: the head's dropout (default the config's hidden_dropout_prob).
          tokenizer: a Tokenizer or tokenizer file, where the model directory has none.
          do_lower_case: the casing, where the source does not record it.

        The head is untrained: predict and save log a warning until `fit` has trained it.
        """
        if labels is not None:
            labels = label_list(labels, "TextClassifier.from_pretrained")
        if regression and labels:
            raise TaskError("TextClassifier.from_pretrained: regression=True takes no labels")
        if regression and multi_label:
            raise TaskError("TextClassifier.from_pretrained: regression and multi_label "
                            "exclude each other")
        if not regression and (labels is None or len(labels) < 2):
            raise TaskError("TextClassifier.from_pretrained: give labels, the class names (at "
                            "least 2) in the order the head's logits take them, or "
                            "regression=True for a score")
        encoder, tokenizer = sources.pretrained_encoder(path, tokenizer, do_lower_case)
        model = BertClassifier(encoder, 1 if regression else len(labels), dropout_rate,
                               multi_label=multi_label)
        task = cls(model, tokenizer, labels, max_seq_length=max_seq_length,
                   text_pair=text_pair, multi_label_threshold=multi_label_threshold,
                   batch_size=batch_size)
        task.untrained_head = True
        return task

    def _rows(self, texts, text_pairs):
        texts, one = as_texts(texts)
        pairs = None
        if text_pairs is not None:
            pairs, _ = as_texts(text_pairs, "text_pairs")
            if len(pairs) != len(texts):
                raise TaskError(f"text_pairs has {len(pairs)} texts for {len(texts)} texts")
        rows, truncated = [], 0
        encode = self.tokenizer.encode
        for i, text in enumerate(texts):
            # An empty second text packs the first alone, as the commands and exports do.
            ids_b = encode(pairs[i]) if pairs is not None else None
            row, cut = self.pack(encode(text), ids_b)
            rows.append(row)
            truncated += cut
        self.log_truncated(truncated, len(rows))
        return rows, one

    def predict(self, texts, text_pairs=None, batch_size=None):
        """Labels and scores of raw texts.

        Args:
          texts: a str, or a list of str (or UTF-8 bytes); any length, empty included.
          text_pairs: the second texts of sentence pairs, one per text (or None).
          batch_size: texts per forward pass (default the task's).

        Returns:
          Per text (a single dict for a single str): classification {"label": the likeliest
          class's name, "score": its probability, "scores": {name: probability}};
          multi-label {"labels": the names whose probability is above
          `multi_label_threshold` (0.5), most probable first, "scores": {name: probability}};
          regression {"score": the predicted value}.
        """
        rows, one = self._rows(texts, text_pairs)
        logits = self.run(rows, batch_size)
        if self.regression:
            answers = [{"score": float(row[0])} for row in logits]
        elif self.multi_label:
            answers = []
            # On logits, as the command and the exports decide.
            above = threshold_logit(self.multi_label_threshold)
            for row in logits:
                probabilities = sigmoid(row)
                order = np.argsort(-row, kind="stable")
                answers.append({"labels": [self.labels[i] for i in order if row[i] > above],
                                "scores": {name: float(p)
                                           for name, p in zip(self.labels, probabilities)}})
        else:
            answers = []
            for row in logits:
                probabilities = softmax(row)
                best = int(np.argmax(probabilities))
                answers.append({"label": self.labels[best], "score": float(probabilities[best]),
                                "scores": {name: float(p)
                                           for name, p in zip(self.labels, probabilities)}})
        return answers[0] if one else answers

    def _targets(self, labels, count):
        if self.multi_label and isinstance(labels, np.ndarray) and labels.ndim == 2:
            return self._multi_hot_array(labels, count)
        if isinstance(labels, np.ndarray):
            labels = labels.tolist()
        if not isinstance(labels, (list, tuple)) or len(labels) != count:
            raise TaskError(f"labels: expected {count} labels, one per text, got "
                            f"{len(labels) if isinstance(labels, (list, tuple)) else labels!r}")
        if self.regression:
            try:
                targets = np.array([float(value) for value in labels], np.float32)
            except (TypeError, ValueError):
                bad = next(i for i, v in enumerate(labels) if not _is_number(v))
                raise TaskError(f"labels[{bad}]={labels[bad]!r} is not a number (a regression "
                                "score)") from None
            # NaN (a missing pandas or NumPy cell) or inf would make every weight NaN.
            bad = np.flatnonzero(~np.isfinite(targets))
            if bad.size:
                raise TaskError(f"labels[{bad[0]}]={labels[bad[0]]!r} is not a finite number "
                                "(a regression score)")
            return targets
        index = {name: i for i, name in enumerate(self.labels)}
        if self.multi_label:
            return self._multi_hot(labels, index)
        targets = []
        for i, label in enumerate(labels):
            label = label_name(label)
            if label not in index:
                raise TaskError(f"labels[{i}]={label!r} is not among the model's labels "
                                f"{', '.join(self.labels)}")
            targets.append(index[label])
        return np.array(targets, np.int32)

    def _multi_hot_array(self, labels, count):
        expected = (count, len(self.labels))
        if labels.shape != expected or not np.isin(labels, (0, 1)).all():
            raise TaskError(f"labels: a multi-hot array must be {list(expected)} (texts, "
                            f"labels) of 0 and 1, got shape {list(labels.shape)}")
        return labels.astype(np.float32)

    def _multi_hot(self, labels, index):
        targets = np.zeros([len(labels), len(self.labels)], np.float32)
        for i, names in enumerate(labels):
            if isinstance(names, str) or not isinstance(names, (list, tuple, set, frozenset)):
                raise TaskError(f"labels[{i}]={names!r}: a multi-label classifier takes a list "
                                "of label names per text (empty when none applies)")
            for name in names:
                if not isinstance(name, str):
                    # A row of 0/1 (df.values.tolist()) read as class ids would name every
                    # label; a multi-hot matrix is an np.ndarray.
                    raise TaskError(f"labels[{i}]={list(names)!r}: a multi-label row lists "
                                    f"label names (str), not {type(name).__name__}; a "
                                    "multi-hot matrix [N, C] goes as an np.ndarray")
                if name not in index:
                    raise TaskError(f"labels[{i}]: {name!r} is not among the model's labels "
                                    f"{', '.join(self.labels)}")
                targets[i, index[name]] = 1.0
        return targets

    def fit(self, texts, labels, text_pairs=None, *, validation_data=None,
            validation_split=None, epochs=3, batch_size=32, shuffle=True, learning_rate=5e-5,
            warmup_proportion=0.1, optimizer=None, verbose="auto", **fit_kwargs):
        """Fine-tunes the model on raw texts and their labels (Keras fit).

        Batches hold texts of one length bucket, cut to it (as bert-tf-classify trains).

        Args:
          texts: list of str; text_pairs: their second texts, or None.
          labels: one label name per text (an int i for the name "i"; a finite number for
            regression; for multi-label a list of names (str), empty when none applies, or a
            multi-hot np.ndarray [N, C] of 0 and 1).
          validation_data: (texts, labels) or (texts, text_pairs, labels), evaluated after
            every epoch.
          validation_split: a fraction in (0, 1): the last texts of that share (as Keras'
            fit takes them, before shuffling) are the validation data instead.
          epochs, batch_size: as Keras' fit.
          shuffle: reshuffle the texts every epoch (False: the same batches in the same
            order every epoch).
          learning_rate, warmup_proportion: BERT's AdamW with linear warmup and decay over
            the steps of this fit (bert_tf.training.optimization.create_optimizer).
          optimizer: a Keras optimizer instead.
          verbose: Keras' verbose; "auto": the live bar on a terminal or in a notebook, one
            line per epoch in a log.
          **fit_kwargs: more of Keras' fit (callbacks, ...).

        Returns:
          Keras' History (loss and accuracy per epoch: for multi-label the fraction of
          yes/no label decisions right; mean squared error for regression).
        """
        batch_size = check_positive_int("batch_size", batch_size)
        rows, _ = self._rows(texts, text_pairs)
        check_not_empty(len(rows), "texts", "texts")
        targets = self._targets(labels, len(rows))
        split_at = validation_split_at(len(rows), validation_split, validation_data)
        validation = None
        if split_at is not None:
            validation = self.keras_batches(rows[split_at:], targets[split_at:], batch_size,
                                            shuffle=False, cut_labels=False)
            rows, targets = rows[:split_at], targets[:split_at]
        dataset = self.keras_batches(rows, targets, batch_size, shuffle=shuffle,
                                     cut_labels=False)
        if validation_data is not None:
            if not isinstance(validation_data, (list, tuple)) or len(validation_data) not in (
                    2, 3):
                raise TaskError("validation_data: expected (texts, labels) or (texts, "
                                "text_pairs, labels)")
            v_texts, *v_pairs, v_labels = validation_data
            v_rows, _ = self._rows(v_texts, v_pairs[0] if v_pairs else None)
            check_not_empty(len(v_rows), "validation_data", "texts", "evaluate on")
            validation = self.keras_batches(v_rows, self._targets(v_labels, len(v_rows)),
                                            batch_size, shuffle=False, cut_labels=False)
        return self.compile_and_fit(dataset, validation, epochs=epochs, optimizer=optimizer,
                                    learning_rate=learning_rate,
                                    warmup_proportion=warmup_proportion, verbose=verbose,
                                    **fit_kwargs)

    def task_info(self):
        return {"task": self.task_name, "labels": list(self.labels),
                "text_pair": self.text_pair,
                "multi_label_threshold": self.multi_label_threshold}


def _is_number(value):
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
