"""TokenTagger: token tagging (NER, POS) on raw text."""

import numpy as np

from bert_tf.data.tasks import tagging_data
from bert_tf.modeling import BertTokenClassifier
from bert_tf.tasks import sources
from bert_tf.tasks.base import (TaskError, TextTask, as_texts, check_labels, check_not_empty,
                                check_positive_int, label_list, label_name, softmax,
                                validation_split_at)
from bert_tf.text import tokenization


def split_words(text):
    """The words of a text as a tagger reads them: (words, start offsets, end offsets).

    Whitespace separates words; each punctuation character and each CJK character is a word
    of its own (the basic tokenizer's words, and those bert-tf-export's tagging signature
    answers for). Offsets are characters of `text` (end exclusive); words keep their spelling.
    """
    words, starts, ends = [], [], []
    start = None
    for position, char in enumerate(text + " "):
        alone = tokenization.is_punctuation_char(char) or tokenization.is_cjk_char(ord(char))
        if tokenization.is_whitespace_char(char) or alone:
            if start is not None:
                words.append(text[start:position])
                starts.append(start)
                ends.append(position)
                start = None
            if alone:
                words.append(char)
                starts.append(position)
                ends.append(position + 1)
        elif start is None:
            start = position
    return words, starts, ends


class TokenTagger(TextTask):
    """A BertTokenClassifier with its tokenizer and tag names: texts in, words with tags out.

    A word's tag is predicted at its first piece, as bert-tf-tag trains and predicts; a text
    with more pieces than S holds is read in several windows of whole words, so every word gets
    a tag.

    Args:
      model: a BertTokenClassifier (C tags).
      tokenizer: a bert_tf.text Tokenizer, or a vocab.txt / tokenizer.json path.
      labels: the C tag names in the order of the logits (default "0" .. "C-1"; an int tag
        id i is the name str(i)).
      max_seq_length, do_lower_case, batch_size: see bert_tf.tasks.TextTask.

    Examples:

    >>> tagger = bert_tf.load_task("/tmp/ner_run")                   # doctest: +SKIP
    >>> tagger.predict("Alice flew to Paris.")                         # doctest: +SKIP
    [{'word': 'Alice', 'tag': 'B-PER', 'score': 0.98, 'start': 0, 'end': 5}, ...]
    """

    model_class = BertTokenClassifier
    task_name = "tagging"

    def __init__(self, model, tokenizer, labels=None, *, max_seq_length=128, do_lower_case=None,
                 batch_size=32):
        super().__init__(model, tokenizer, max_seq_length, do_lower_case, batch_size)
        num_classes = model.num_classes
        self.labels = check_labels([str(i) for i in range(num_classes)] if labels is None
                                   else labels, num_classes, "TokenTagger")

    @classmethod
    def from_pretrained(cls, path, labels, *, tokenizer=None, do_lower_case=None,
                        dropout_rate=None, **options):
        """A new tagging head on the encoder of any model bert_tf.load_model reads (see
        TextClassifier.from_pretrained). labels: the tag names (at least 2). The head is
        untrained: predict and save log a warning until `fit` has trained it."""
        if labels is not None:
            labels = label_list(labels, "TokenTagger.from_pretrained")
        if labels is None or len(labels) < 2:
            raise TaskError("TokenTagger.from_pretrained: give labels, the tag names (at least "
                            "2) in the order the head's logits take them")
        encoder, tokenizer = sources.pretrained_encoder(path, tokenizer, do_lower_case)
        model = BertTokenClassifier(encoder, len(labels), dropout_rate)
        task = cls(model, tokenizer, labels, **options)
        task.untrained_head = True
        return task

    def _windows(self, sentences):
        stats = {}
        windows = tagging_data.make_windows(sentences, self.tokenizer, self.max_seq_length, stats)
        if stats["truncated_words"]:
            self.log_truncated(stats["truncated_words"], sum(len(s.words) for s in sentences),
                               "words (with more pieces than one window holds)")
        rows = [{"input_word_ids": [self.tokenizer.cls_id, *w.piece_ids, self.tokenizer.sep_id],
                 "input_type_ids": [0] * (len(w.piece_ids) + 2)} for w in windows]
        return windows, rows

    def predict(self, texts, batch_size=None):
        """Each word of each text with its tag.

        Args:
          texts: a str, or a list of str (split into words by `split_words`).
          batch_size: windows per forward pass (default the task's).

        Returns:
          Per text (one list for a single str): a list of {"word", "tag", "score" (the tag's
          probability), "start", "end" (its characters in the text)}, in order.
        """
        texts, one = as_texts(texts)
        split = [split_words(text) for text in texts]
        sentences = [tagging_data.Sentence(words=tuple(words), tags=None)
                     for words, _, _ in split]
        windows, rows = self._windows(sentences)
        outputs = self.run(rows, batch_size)
        answers = [[None] * len(words) for words, _, _ in split]
        for window, logits in zip(windows, outputs):
            words, starts, ends = split[window.sentence]
            probabilities = softmax(logits[:len(window.piece_ids) + 2])
            for offset, position in enumerate(window.word_positions):
                word = window.first_word + offset
                best = int(np.argmax(probabilities[position]))
                answers[window.sentence][word] = {
                    "word": words[word], "tag": self.labels[best],
                    "score": float(probabilities[position, best]),
                    "start": starts[word], "end": ends[word]}
        return answers[0] if one else answers

    def _sentences(self, sentences, tags, name):
        if len(sentences) != len(tags):
            raise TaskError(f"{len(sentences)} sentences but {len(tags)} tag lists")
        known = set(self.labels)
        result = []
        for i, (sentence, sentence_tags) in enumerate(zip(sentences, tags)):
            words = split_words(sentence)[0] if isinstance(sentence, str) else list(sentence)
            if len(words) != len(sentence_tags):
                raise TaskError(f"{name}[{i}] has {len(words)} words but {len(sentence_tags)} "
                                "tags")
            sentence_tags = [label_name(tag) for tag in sentence_tags]
            for tag in sentence_tags:
                if tag not in known:
                    raise TaskError(f"{name}[{i}]: tag {tag!r} is not among the model's labels "
                                    f"{', '.join(self.labels)}")
            result.append(tagging_data.Sentence(words=tuple(as_texts(words, name)[0]),
                                                tags=tuple(sentence_tags)))
        return result

    def _batches(self, sentences, batch_size, shuffle):
        windows, rows = self._windows(sentences)
        features = list(tagging_data.tagging_features(windows, sentences, self.tokenizer,
                                                      self.max_seq_length, list(self.labels)))
        labels = np.array([f["label_ids"] for f in features], np.int32)
        weights = np.array([f["label_weights"] for f in features], np.float32)
        return self.keras_batches(rows, labels, batch_size, shuffle, sample_weights=weights)

    def fit(self, sentences, tags, *, validation_data=None, validation_split=None, epochs=3,
            batch_size=32, shuffle=True, learning_rate=5e-5, warmup_proportion=0.1,
            optimizer=None, verbose="auto", **fit_kwargs):
        """Fine-tunes the model on tagged sentences (Keras fit), as bert-tf-tag trains: the
        loss on each word's first piece.

        Args:
          sentences: per sentence, its words (a list of str, as a CoNLL file has them) or a
            str (split by `split_words`).
          tags: per sentence, one tag name per word (an int i for the name "i").
          validation_data: (sentences, tags), evaluated after every epoch.
          validation_split, epochs, batch_size, shuffle, learning_rate, warmup_proportion,
            optimizer, verbose, **fit_kwargs: as TextClassifier.fit (validation_split takes
            the last sentences).

        Returns:
          Keras' History (loss and accuracy over first pieces).
        """
        batch_size = check_positive_int("batch_size", batch_size)
        sentences = self._sentences(sentences, tags, "sentences")
        check_not_empty(len(sentences), "sentences", "sentences")
        split_at = validation_split_at(len(sentences), validation_split, validation_data,
                                       "sentences")
        validation = None
        if split_at is not None:
            validation = self._batches(sentences[split_at:], batch_size, False)
            sentences = sentences[:split_at]
        dataset = self._batches(sentences, batch_size, shuffle)
        if validation_data is not None:
            if not isinstance(validation_data, (list, tuple)) or len(validation_data) != 2:
                raise TaskError("validation_data: expected (sentences, tags)")
            v_sentences = self._sentences(*validation_data, "validation_data")
            check_not_empty(len(v_sentences), "validation_data", "sentences", "evaluate on")
            validation = self._batches(v_sentences, batch_size, False)
        return self.compile_and_fit(dataset, validation, epochs=epochs, optimizer=optimizer,
                                    learning_rate=learning_rate,
                                    warmup_proportion=warmup_proportion, verbose=verbose,
                                    **fit_kwargs)

    def task_info(self):
        return {"task": self.task_name, "labels": list(self.labels)}
