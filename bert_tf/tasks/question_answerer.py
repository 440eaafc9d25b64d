"""QuestionAnswerer: span question answering (SQuAD) on raw questions and contexts."""

import numbers

import numpy as np

from bert_tf.data.tasks import squad, squad_postprocess
from bert_tf.modeling import BertSpanLabeler
from bert_tf.tasks import sources
from bert_tf.tasks.base import (TaskError, TextTask, as_texts, check_finite_number,
                                check_not_empty, check_positive_int, validation_split_at)


def _word_starts(context):
    """Character offset of each whitespace-separated word of `context` (SQuAD's words)."""
    words, char_to_word = squad.whitespace_split(context)
    starts = [0] * len(words)
    previous = -1
    for position, word in enumerate(char_to_word):
        if word != previous and word >= 0:
            starts[word] = position
            previous = word
    return words, starts


class QuestionAnswerer(TextTask):
    """A BertSpanLabeler with its tokenizer: questions and contexts in, answer spans out.

    Answers as bert-tf-squad predicts: the context is read in windows of S tokens
    (`doc_stride` apart), candidate spans are ranked by start + end logit over all windows, and
    the answer is cut from the context in its own spelling (the original run_squad.py
    post-processing, bert_tf.data.tasks.squad_postprocess).

    Args:
      model: a BertSpanLabeler.
      tokenizer: a bert_tf.text Tokenizer, or a vocab.txt / tokenizer.json path.
      max_seq_length: S of a window.
      max_query_length: question tokens kept.
      doc_stride: tokens between the starts of a long context's windows.
      max_answer_length: longest answer, in tokens.
      version_2_with_negative: answer "" when the no-answer score wins (SQuAD 2.0).
      null_score_diff_threshold: how much the no-answer score must win by (a finite number).
      n_best_size: candidate starts and ends considered per window.
      do_lower_case, batch_size: see bert_tf.tasks.TextTask.

    `save` records every setting but batch_size in task_info.json; load_task reads them back
    (a file without null_score_diff_threshold or n_best_size, written before they were
    recorded, gives the defaults).

    Examples:

    >>> reader = bert_tf.load_task("/tmp/squad_run")                         # doctest: +SKIP
    >>> reader.predict(["Where does the Seine flow?"],
    ...                ["The Seine flows through Paris."])                     # doctest: +SKIP
    [{'answer': 'through Paris', 'start': 17, 'end': 30, 'score': 0.82}]
    """

    model_class = BertSpanLabeler
    task_name = "squad"

    def __init__(self, model, tokenizer, *, max_seq_length=384, max_query_length=64,
                 doc_stride=128, max_answer_length=30, version_2_with_negative=False,
                 null_score_diff_threshold=0.0, n_best_size=20, do_lower_case=None,
                 batch_size=32):
        super().__init__(model, tokenizer, max_seq_length, do_lower_case, batch_size)
        try:
            squad.check_window_sizes(self.max_seq_length, max_query_length, doc_stride)
        except ValueError as e:
            raise TaskError(f"QuestionAnswerer: {e}") from None
        owner = "QuestionAnswerer"
        self.max_query_length = int(max_query_length)
        self.doc_stride = int(doc_stride)
        self.max_answer_length = check_positive_int("max_answer_length", max_answer_length,
                                                    owner)
        self.version_2_with_negative = bool(version_2_with_negative)
        self.null_score_diff_threshold = check_finite_number(
            "null_score_diff_threshold", null_score_diff_threshold, owner)
        self.n_best_size = check_positive_int("n_best_size", n_best_size, owner)

    @classmethod
    def from_pretrained(cls, path, *, tokenizer=None, do_lower_case=None, dropout_rate=0.0,
                        **options):
        """A new span head on the encoder of any model bert_tf.load_model reads (see
        TextClassifier.from_pretrained); **options: the class's settings. The head is
        untrained: predict and save log a warning until `fit` has trained it."""
        encoder, tokenizer = sources.pretrained_encoder(path, tokenizer, do_lower_case)
        task = cls(BertSpanLabeler(encoder, dropout_rate), tokenizer, **options)
        task.untrained_head = True
        return task

    def _examples(self, questions, contexts):
        questions, one = as_texts(questions, "questions")
        contexts, _ = as_texts(contexts, "contexts")
        if len(questions) != len(contexts):
            raise TaskError(f"{len(questions)} questions for {len(contexts)} contexts; give one "
                            "context per question")
        examples, starts = [], []
        for i, (question, context) in enumerate(zip(questions, contexts)):
            words, word_starts = _word_starts(context)
            examples.append(squad.SquadExample(qas_id=str(i), question_text=question,
                                               doc_tokens=words))
            starts.append(word_starts)
        return examples, starts, contexts, one

    def _windows(self, examples, is_training):
        return list(squad.convert_examples_to_features(
            examples, self.tokenizer, max_seq_length=self.max_seq_length,
            doc_stride=self.doc_stride, max_query_length=self.max_query_length,
            is_training=is_training))

    @staticmethod
    def _row(feature):
        length = len(feature.input_word_ids)
        return {"input_word_ids": feature.input_word_ids,
                "input_type_ids": ([0] * feature.segment_a_length
                                   + [1] * (length - feature.segment_a_length))}

    def predict(self, questions, contexts, batch_size=None):
        """The answer to each question in its context.

        Args:
          questions, contexts: a str each, or lists of str of one length (a long context is
            read in windows; an empty one has no answer).
          batch_size: windows per forward pass (default the task's).

        Returns:
          Per question (a single dict for a single str): {"answer": the text, "start", "end":
          its characters in the context (context[start:end] == answer; 0, 0 for no answer),
          "score": its probability among the n-best candidates}.
        """
        examples, starts, contexts, one = self._examples(questions, contexts)
        features = self._windows(examples, is_training=False)
        outputs = self.run([self._row(f) for f in features], batch_size)
        by_example = [[] for _ in examples]
        for feature, output in zip(features, outputs):
            by_example[feature.example_index].append((feature, output))
        answers = []
        for example, windows, word_starts, context in zip(examples, by_example, starts,
                                                           contexts):
            lengths = [len(f.input_word_ids) for f, _ in windows]
            text, nbest, _ = squad_postprocess.predict_example(
                example, [f for f, _ in windows],
                [o["start_logits"][:n] for (_, o), n in zip(windows, lengths)],
                [o["end_logits"][:n] for (_, o), n in zip(windows, lengths)],
                n_best_size=self.n_best_size, max_answer_length=self.max_answer_length,
                do_lower_case=self.do_lower_case,
                version_2_with_negative=self.version_2_with_negative,
                null_score_diff_threshold=self.null_score_diff_threshold,
                whole_words=not self.tokenizer.subword_offsets, spans=True)
            best = next(entry for entry in nbest if entry["text"] == text)
            if not text or best["word"] < 0:
                answers.append({"answer": "", "start": 0, "end": 0,
                                "score": float(best["probability"]) if not text else 0.0})
                continue
            start = _context_offset(example.doc_tokens, word_starts, best["word"],
                                    best["offset"])
            end = _context_offset(example.doc_tokens, word_starts, best["word"],
                                  best["offset"] + len(text) - 1) + 1
            answers.append({"answer": context[start:end], "start": start, "end": end,
                            "score": float(best["probability"])})
        return answers[0] if one else answers

    def fit(self, questions, contexts, answers, *, validation_data=None, validation_split=None,
            epochs=2, batch_size=32, shuffle=True, learning_rate=5e-5, warmup_proportion=0.1,
            optimizer=None, verbose="auto", **fit_kwargs):
        """Fine-tunes the model on questions, contexts and answers (Keras fit), as
        bert-tf-squad trains: windows of long contexts, the answer's tokens as targets (windows
        without the answer point at [CLS]).

        Args:
          questions, contexts: lists of str of one length.
          answers: per question, (answer text, its start character in the context), or None
            for no answer (SQuAD 2.0: version_2_with_negative). An answer that does not match
            the context at its start is skipped, with a warning.
          validation_data: (questions, contexts, answers), its loss after every epoch.
          validation_split, epochs, batch_size, shuffle, learning_rate, warmup_proportion,
            optimizer, verbose, **fit_kwargs: as TextClassifier.fit (validation_split takes
            the last questions).

        Returns:
          Keras' History.
        """
        batch_size = check_positive_int("batch_size", batch_size)
        questions, contexts, answers = self._training_examples(questions, contexts, answers)
        check_not_empty(len(questions), "questions", "questions")
        split_at = validation_split_at(len(questions), validation_split, validation_data,
                                       "questions")
        validation = None
        if split_at is not None:
            validation = self._training_batches(questions[split_at:], contexts[split_at:],
                                                answers[split_at:], batch_size, False)
            questions, contexts, answers = (questions[:split_at], contexts[:split_at],
                                            answers[:split_at])
        dataset = self._training_batches(questions, contexts, answers, batch_size, shuffle)
        if validation_data is not None:
            if not isinstance(validation_data, (list, tuple)) or len(validation_data) != 3:
                raise TaskError("validation_data: expected (questions, contexts, answers)")
            v_questions, v_contexts, v_answers = self._training_examples(*validation_data)
            check_not_empty(len(v_questions), "validation_data", "questions", "evaluate on")
            validation = self._training_batches(v_questions, v_contexts, v_answers, batch_size,
                                                False)
        return self.compile_and_fit(dataset, validation, epochs=epochs, optimizer=optimizer,
                                    learning_rate=learning_rate,
                                    warmup_proportion=warmup_proportion, verbose=verbose,
                                    **fit_kwargs)

    @staticmethod
    def _training_examples(questions, contexts, answers):
        """(questions, contexts, answers) as lists of one length."""
        questions, _ = as_texts(questions, "questions")
        contexts, _ = as_texts(contexts, "contexts")
        if isinstance(answers, np.ndarray):
            answers = answers.tolist()
        if not isinstance(answers, (list, tuple)):
            raise TaskError("answers must be a list of (answer text, start character) or None, "
                            f"got {type(answers).__name__}")
        if not len(questions) == len(contexts) == len(answers):
            raise TaskError(f"{len(questions)} questions, {len(contexts)} contexts and "
                            f"{len(answers)} answers; give one of each per question")
        return questions, contexts, list(answers)

    def _training_batches(self, questions, contexts, answers, batch_size, shuffle):
        qas = []
        for i, (question, answer) in enumerate(zip(questions, answers)):
            if answer is None:
                if not self.version_2_with_negative:
                    raise TaskError(f"answers[{i}] is None: questions without an answer need "
                                    "version_2_with_negative=True")
                qas.append({"id": str(i), "question": question, "answers": []})
                continue
            if (not isinstance(answer, (list, tuple)) or len(answer) != 2
                    or not isinstance(answer[0], str) or isinstance(answer[1], (bool, np.bool_))
                    or not isinstance(answer[1], numbers.Integral)):
                raise TaskError(f"answers[{i}]={answer!r}: expected (answer text, its start "
                                "character in the context)")
            qas.append({"id": str(i), "question": question,
                        "answers": [{"text": answer[0], "answer_start": int(answer[1])}]})
        data = [{"paragraphs": [{"context": context, "qas": [qa]}]}
                for context, qa in zip(contexts, qas)]
        examples, skipped = squad.read_squad_examples(
            data, "answers", is_training=True,
            version_2_with_negative=self.version_2_with_negative)
        if not examples:
            raise TaskError(f"none of the {len(qas)} answers matches its context")
        features = self._windows(examples, is_training=True)
        targets = {"start_logits": np.array([f.start_position for f in features], np.int32),
                   "end_logits": np.array([f.end_position for f in features], np.int32)}
        return self.keras_batches([self._row(f) for f in features], targets, batch_size,
                                  shuffle)

    def task_info(self):
        return {"task": self.task_name, "max_query_length": self.max_query_length,
                "max_answer_length": self.max_answer_length, "doc_stride": self.doc_stride,
                "version_2_with_negative": self.version_2_with_negative,
                "null_score_diff_threshold": self.null_score_diff_threshold,
                "n_best_size": self.n_best_size}


def _context_offset(words, word_starts, first_word, offset):
    """The context character at `offset` of the words from `first_word` on, joined by single
    spaces (squad_postprocess's answer offsets)."""
    word = first_word
    while word < len(words) - 1 and offset >= len(words[word]) + 1:
        offset -= len(words[word]) + 1
        word += 1
    return word_starts[word] + min(offset, len(words[word]) - 1)
