"""What each model type computes when served: its token-id and raw-text signatures.

One class per task (ClassificationSignatures, ..., SentenceEmbeddingSignatures) wraps a Keras
model (and, for text, the in-graph tokenizer and packer):

  task            model                              text inputs          text outputs
  classification  BertClassifier (C >= 2)            text [, text_pair]   probabilities,
                                                                          label_names,
                                                                          predicted_label
  multi_label     BertClassifier (multi_label)       text [, text_pair]   probabilities,
                                                                          label_names,
                                                                          predicted
  regression      BertClassifier (C = 1)             text [, text_pair]   score
  squad           BertSpanLabeler                    question, context    answer_text,
                                                                          answer_start,
                                                                          answer_end, score
  tagging         BertTokenClassifier                text                 tokens, labels,
                                                                          scores, start_offsets,
                                                                          end_offsets,
                                                                          num_tokens
  fill_mask       BertPretrainer                     text                 mask_positions,
                                                                          top_k_ids,
                                                                          top_k_tokens,
                                                                          top_k_probabilities
  embedding       BertEncoder                        text                 pooled_output,
                                                                          mean_pooled_output
  sentence_       BertSentenceEmbedder               text                 embedding
    embedding

Every input and output is a dense tensor whose first dimension is the batch. Texts longer than
the sequence length are truncated; empty texts get an answer. Character offsets count code
points (Python `str` indices) of the input text.

The text signatures run the encoder at the request's length: texts are packed to S, then cut to
the smallest of the `length_buckets` that holds the batch's longest packed input (only padding
is cut, so outputs equal the full-length ones). No text output has a sequence dimension.
"""

import tensorflow as tf

from bert_tf.config import ENCODER_INPUTS
from bert_tf.data.tasks.length_buckets import parse_buckets
from bert_tf.modeling import (BertClassifier, BertEncoder, BertPretrainer,
                              BertSentenceEmbedder, BertSpanLabeler, BertTokenClassifier, Encoder,
                              ModernBertEncoder)
from bert_tf.serving.task_info import (DEFAULT_MULTI_LABEL_THRESHOLD,
                                      multi_label_threshold_problem, threshold_logit)
from bert_tf.text.input_packing import BertPackInputs, bucket_lengths
from bert_tf.text.layers import valid_utf8

IDS_SIGNATURE = "serving_default"
TEXT_SIGNATURE = "serve_text"
# SQuAD's text signatures run a long context's windows this many at a time, so that memory is
# bounded whatever the context's length (BERT-base at S=384: ~110 MB of attention scores).
WINDOW_BATCH = 16


def check_length_buckets(length_buckets, seq_length, max_position_embeddings):
    """The text signatures' bucket lengths, ending with `seq_length`.

    Args:
      length_buckets: increasing lengths (or a --length_buckets string), checked by
        bert_tf.data.tasks.length_buckets.parse_buckets (lengths above seq_length are left
        out); None: bert_tf.text.input_packing.bucket_lengths' fine steps (TF Serving runs the
        graph without XLA, where a length costs nothing), 128 -> (4, 8, 12, 16, 24, 32, 40, 48,
        56, 64, 80, 96, 112, 128); () or "off": always S.
      seq_length: S, the packed length.
      max_position_embeddings: of the model; no bucket may exceed it.

    Raises:
      ValueError: naming length_buckets and what was expected.
    """
    if length_buckets is None:
        return bucket_lengths(seq_length)
    buckets = parse_buckets(length_buckets if isinstance(length_buckets, str)
                            else list(length_buckets), seq_length, max_position_embeddings,
                            flag="length_buckets")
    return tuple(buckets) if buckets else (seq_length,)


def _assert_in_range(ids, limit, name, limit_name):
    """An Assert op: every element of int `ids` is in [0, limit)."""
    limit_text = limit_name if isinstance(limit, tf.Tensor) else f"{limit_name}={limit}"
    return tf.debugging.Assert(
        tf.reduce_all((ids >= 0) & (ids < limit)),
        [f"{IDS_SIGNATURE}: {name} must be in [0, {limit_text}); got values from",
         tf.reduce_min(ids), "to", tf.reduce_max(ids)])


def assert_vector(x, signature, name, what):
    """An Assert op: `x` (declared [B]) is a vector at run time.

    Rank and shape of x are folded to the declared rank 1 by graph optimization, whatever is fed;
    the rank of a serialize/parse round trip (unknown shape) is not, so it sees the real rank.
    """
    rank = tf.rank(tf.io.parse_tensor(tf.io.serialize_tensor(x), x.dtype))
    return tf.debugging.Assert(tf.equal(rank, 1), [
        f"{signature}: {name} must be a vector of {what} [batch]; got shape", tf.shape(x)])


def _string_spec(name):
    return tf.TensorSpec([None], tf.string, name=name)


def _id_spec(name):
    return tf.TensorSpec([None, None], tf.int32, name=name)


def _at_least_one_column(x, pad_value):
    """x [B, N] -> [B, max(N, 1)]: a batch without any item still has one (padding) column."""
    pad = tf.fill([tf.shape(x)[0], 1], tf.constant(pad_value, x.dtype))
    return tf.concat([x, pad], axis=1)[:, :tf.maximum(tf.shape(x)[1], 1)]


def _segment_first_max(values, ids, segment_ids, num_segments):
    """Per segment, the largest of `values` and the smallest of `ids` that reaches it (the
    first of equals).

    Args: values: float; ids, segment_ids: int32; all of one shape.
    Returns: float [num_segments] and int32 [num_segments] (an empty segment: the lowest
      float and the largest int32).
    """
    best = tf.math.unsorted_segment_max(values, segment_ids, num_segments)
    reached = values >= tf.gather(best, segment_ids)
    return best, tf.math.unsorted_segment_min(tf.where(reached, ids, tf.int32.max),
                                              segment_ids, num_segments)


class ServingSignatures:
    """A model's serving computations. Subclasses set the text inputs and outputs.

    Args:
      model: the Keras model.
      tokenizer: a `BertTokenizerLayer`, or None for a model served by token ids only.
      seq_length: S, the packed length of the text signatures.

    Attributes:
      length_buckets: the lengths the text signatures run the encoder at (see
        `check_length_buckets`); default bert_tf.text.input_packing.bucket_lengths.
    """

    name = None
    text_inputs = ("text",)
    # Text inputs a client may leave empty (and a tf.Example may lack): "" means absent.
    optional_text_inputs = ()

    def __init__(self, model, tokenizer, seq_length):
        self.model = model
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        self.length_buckets = bucket_lengths(seq_length)
        self.pack = None
        if tokenizer is not None:
            self.pack = BertPackInputs(seq_length, cls_id=tokenizer.cls_id,
                                       sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id)

    def ids_signature(self):
        """Specs of the token-id inputs: int32 [B, S'] each (S' may be any length)."""
        return {name: _id_spec(name) for name in ENCODER_INPUTS}

    def ids(self, features):
        """The model's outputs on token ids: dict of float32 tensors."""
        raise NotImplementedError

    def checked_ids(self, features):
        """`features` after in-graph checks that ids index the model's tables.

        The embedding lookups would wrap a negative id or fail obscurely past the tables, so
        a bad request fails here with an InvalidArgumentError naming the input and its range.
        """
        config = (self.model if isinstance(self.model, Encoder)
                  else self.model.encoder).config
        word_ids = features["input_word_ids"]
        checks = [_assert_in_range(word_ids, config.vocab_size, "input_word_ids", "vocab_size")]
        if config.type_vocab_size:  # 0: no segment embeddings, input_type_ids is ignored.
            checks.append(_assert_in_range(features["input_type_ids"], config.type_vocab_size,
                                           "input_type_ids", "type_vocab_size"))
        for name in ("input_mask", "input_type_ids"):
            checks.append(tf.debugging.Assert(
                tf.reduce_all(tf.equal(tf.shape(features[name]), tf.shape(word_ids))),
                [f"{IDS_SIGNATURE}: {name} must have the shape of input_word_ids; got",
                 tf.shape(features[name]), "and", tf.shape(word_ids)]))
        # A mask of 2 would weigh a token twice in the attention bias and the pooling.
        mask = features["input_mask"]
        checks.append(tf.debugging.Assert(
            tf.reduce_all((mask >= 0) & (mask <= 1)),
            [f"{IDS_SIGNATURE}: input_mask must be 0 (padding) or 1 (token); got values from",
             tf.reduce_min(mask), "to", tf.reduce_max(mask)]))
        # The [CLS] output reads position 0: without it a slice fails deep in the model.
        checks.append(tf.debugging.Assert(
            tf.shape(word_ids)[1] > 0,
            [f"{IDS_SIGNATURE}: input_word_ids must hold at least one token ([CLS]) per row; "
             "got shape", tf.shape(word_ids)]))
        if config.position_embedding_type in ("learned", "rotary"):
            checks.append(tf.debugging.Assert(
                tf.shape(word_ids)[1] <= config.max_position_embeddings,
                [f"{IDS_SIGNATURE}: input_word_ids may have at most max_position_embeddings="
                 f"{config.max_position_embeddings} tokens; got", tf.shape(word_ids)[1]]))
        if "masked_lm_positions" in features:
            positions = features["masked_lm_positions"]
            checks.append(tf.debugging.Assert(
                tf.equal(tf.shape(positions)[0], tf.shape(word_ids)[0]),
                [f"{IDS_SIGNATURE}: masked_lm_positions must have the batch size of "
                 "input_word_ids; got", tf.shape(positions)[0], "and", tf.shape(word_ids)[0]]))
            checks.append(_assert_in_range(positions, tf.shape(word_ids)[1],
                                           "masked_lm_positions", "the number of tokens"))
        with tf.control_dependencies(checks):
            return {name: tf.identity(value) for name, value in features.items()}

    def checked_text(self, inputs):
        """`inputs` after in-graph checks: each a vector [B], all with the same B.

        The signature declares [B], but a loaded signature (and a model server) runs on a
        scalar too, failing inside the tokenizer; and a second input with another batch size
        would shift rows silently. These fail here, naming the input.
        """
        names = list(self.text_inputs)
        checks = [assert_vector(inputs[name], TEXT_SIGNATURE, name, "texts") for name in names]
        checks += [tf.debugging.Assert(
            tf.equal(tf.size(inputs[name]), tf.size(inputs[names[0]])),
            [f"{TEXT_SIGNATURE}: {name} and {names[0]} must have the same batch size; got",
             tf.size(inputs[name]), "and", tf.size(inputs[names[0]])]) for name in names[1:]]
        with tf.control_dependencies(checks):
            return {name: tf.identity(value) for name, value in inputs.items()}

    def text_signature(self):
        return {name: _string_spec(name) for name in self.text_inputs}

    def text(self, inputs):
        """Task-level outputs on raw text: dict of dense tensors [B, ...]."""
        raise NotImplementedError

    def _encode(self, texts):
        """Tokenizes and packs one or two tf.string [B] -> the encoder's three int32 [B, L]
        (L: see `_packed`)."""
        batch = tf.shape(texts[0])[0]
        # One tokenizer call for both segments keeps one copy of its tables in the graph.
        ids = self.tokenizer(tf.concat(texts, axis=0))  # [B * len(texts), (T)]
        return self._packed([ids[i * batch:(i + 1) * batch] for i in range(len(texts))])

    def _packed(self, segments):
        """Packs ragged int [B, (T)] segments to [B, S], cut to [B, L]: L the smallest bucket
        that holds the batch's longest packed input (the first bucket for an empty batch).

        Only padding is cut, and padding is masked out of attention, so the model's outputs at
        the real positions are those at S. L is computed in-graph (no retracing, no Python
        control flow); the encoder then does the work of L positions, not S.
        """
        features = self.pack(segments)
        longest = tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=1))
        buckets = tf.constant(self.length_buckets, tf.int32)
        length = tf.reduce_min(tf.where(buckets >= longest, buckets, self.seq_length))
        return {name: value[:, :length] for name, value in features.items()}

    def _encoder_features(self, features):
        return {name: features[name] for name in ENCODER_INPUTS}


class ClassificationSignatures(ServingSignatures):
    """BertClassifier with C >= 2 classes: class probabilities and names.

    Args:
      labels: the C class names in logit order.
      text_pair: the text signature also takes `text_pair` (sentence-pair tasks; an empty
        `text_pair` packs `text` alone).
    """

    name = "classification"

    def __init__(self, model, tokenizer, seq_length, labels, text_pair):
        super().__init__(model, tokenizer, seq_length)
        self.labels = list(labels)
        self.text_inputs = ("text", "text_pair") if text_pair else ("text",)
        self.optional_text_inputs = ("text_pair",) if text_pair else ()

    def ids(self, features):
        return {"logits": self.model(self._encoder_features(features), training=False)}

    def text(self, inputs):
        logits_bc = self.model(self._encode([inputs[n] for n in self.text_inputs]),
                               training=False)
        probabilities_bc = tf.nn.softmax(logits_bc, axis=-1)
        labels = tf.constant(self.labels)
        batch = tf.shape(logits_bc)[0]
        return {
            "probabilities": probabilities_bc,
            "label_names": tf.tile(labels[tf.newaxis], [batch, 1]),
            "predicted_label": tf.gather(labels, tf.argmax(logits_bc, axis=-1)),
        }


class MultiLabelSignatures(ClassificationSignatures):
    """BertClassifier with `multi_label`: each label's own probability (its sigmoid) and
    whether it applies (probability above `threshold`, default 0.5), any number per text."""

    name = "multi_label"

    def __init__(self, model, tokenizer, seq_length, labels, text_pair,
                 threshold=DEFAULT_MULTI_LABEL_THRESHOLD):
        super().__init__(model, tokenizer, seq_length, labels, text_pair)
        problem = multi_label_threshold_problem(threshold)
        if problem:
            raise ValueError(f"export: multi_label_threshold={problem}.")
        self.threshold = float(threshold)
        # The decision on logits: the default decides exactly as `logits > 0`.
        self.threshold_logit = threshold_logit(threshold)

    def text(self, inputs):
        logits_bc = self.model(self._encode([inputs[n] for n in self.text_inputs]),
                               training=False)
        labels = tf.constant(self.labels)
        batch = tf.shape(logits_bc)[0]
        return {
            "probabilities": tf.sigmoid(logits_bc),
            "label_names": tf.tile(labels[tf.newaxis], [batch, 1]),
            "predicted": logits_bc > self.threshold_logit,  # bool [B, C]
        }


class RegressionSignatures(ClassificationSignatures):
    """BertClassifier with one output: the regression score (e.g. STS-B similarity)."""

    name = "regression"

    def __init__(self, model, tokenizer, seq_length, text_pair):
        super().__init__(model, tokenizer, seq_length, labels=(), text_pair=text_pair)

    def text(self, inputs):
        logits_b1 = self.model(self._encode([inputs[n] for n in self.text_inputs]),
                               training=False)
        return {"score": logits_b1[:, 0]}


class SpanSignatures(ServingSignatures):
    """BertSpanLabeler: the answer span in the context, as the original SQuAD post-processing.

    The question keeps its first `max_query_length` tokens; the context is covered by sliding
    windows as bert-tf-squad covers it (`bert_tf.data.tasks.squad.doc_windows`): each holds at
    most R = S - 3 - (question tokens) context tokens ([CLS] question [SEP] window [SEP]) and
    starts `doc_stride` tokens after the previous one (at most R), until one reaches the end.
    The windows run WINDOW_BATCH at a time (memory bounded for any context). A window scores
    the spans of its context tokens i <= j with j - i + 1 <= max_answer_length whose start it
    gives the most context (the original's max-context rule, so each start is scored in one
    window only) by start_logits[i] + end_logits[j]; the answer is the best span of all
    windows (the first window on a tie), its text the context from the start of token i to
    the end of token j.
    With `version_2_with_negative`, the answer is empty when the smallest [CLS] score of the
    windows, start_logits[0] + end_logits[0], beats the best span by more than
    `null_score_diff_threshold`. A context without tokens answers "" with offsets 0, 0 and
    score 0.

    Args:
      max_query_length: question tokens kept.
      max_answer_length: longest answer, in tokens.
      doc_stride: tokens between the starts of consecutive windows.
      version_2_with_negative: allow "no answer" (SQuAD 2.0).
      null_score_diff_threshold: the original's threshold for "no answer".
    """

    name = "squad"
    text_inputs = ("question", "context")

    def __init__(self, model, tokenizer, seq_length, max_query_length, max_answer_length,
                 doc_stride, version_2_with_negative=False, null_score_diff_threshold=0.0):
        super().__init__(model, tokenizer, seq_length)
        self.max_query_length = max_query_length
        self.max_answer_length = max_answer_length
        self.doc_stride = doc_stride
        self.version_2_with_negative = version_2_with_negative
        self.null_score_diff_threshold = null_score_diff_threshold

    def ids(self, features):
        outputs = self.model(self._encoder_features(features), training=False)
        return {"start_logits": outputs["start_logits"], "end_logits": outputs["end_logits"]}

    def text(self, inputs):
        batch = tf.shape(inputs["question"])[0]
        question, ids, starts, ends = self.tokenizer.tokenize_question_and_context(
            inputs["question"], inputs["context"])  # [B, (Q')] and [B, (W), (P)]
        question = tf.cast(question, tf.int32)[:, :self.max_query_length]  # [B, (Q)]
        context_ids = ids.merge_dims(1, 2)  # [B, (T)]
        windows = self._windows(question, context_ids)
        features = self._packed([tf.gather(question, windows["example"]), windows["ids"]])
        start_ws, end_ws = self._window_logits(features)  # [W, L] each

        seq = tf.shape(start_ws)[1]
        positions = tf.range(seq)
        first = windows["first"]  # [W], where the window starts: [CLS] question [SEP] window
        offset_wl = positions[tf.newaxis] - first[:, tf.newaxis]  # context token - window start
        in_window = (offset_wl >= 0) & (offset_wl < windows["length"][:, tf.newaxis])  # [W, L]
        starts_here = self._max_context(windows, offset_wl, in_window,
                                        tf.shape(context_ids.flat_values)[0])
        # Span (i, j = i + k) for k < A = max_answer_length: the end logits and the in-window
        # flags at i + k, read past the window's end as -inf and False.
        answer = self.max_answer_length
        windows_count = tf.shape(start_ws)[0]
        end_at_la = tf.expand_dims(positions, 1) + tf.range(answer)[tf.newaxis]  # [L, A]
        end_wla = tf.gather(tf.concat(
            [end_ws, tf.fill([windows_count, answer], float("-inf"))], axis=1), end_at_la,
            axis=1)
        end_ok_wla = tf.gather(tf.concat(
            [in_window, tf.zeros([windows_count, answer], tf.bool)], axis=1), end_at_la, axis=1)
        scores_wn = tf.reshape(
            tf.where(starts_here[:, :, tf.newaxis] & end_ok_wla,
                     start_ws[:, :, tf.newaxis] + end_wla, float("-inf")),
            [windows_count, seq * answer])
        best_w = tf.argmax(scores_wn, axis=-1, output_type=tf.int32)  # [W], i * A + k
        # A window without a span (an empty context's) scores the lowest float, not -inf: the
        # segment max below starts from that value, and its windows must still compare equal.
        score_w = tf.maximum(tf.reduce_max(scores_wn, axis=-1), tf.float32.min)
        # Each question's best window (the first of equals, as the original's stable sort).
        example = windows["example"]
        score, chosen = _segment_first_max(score_w, tf.range(tf.shape(example)[0]), example,
                                           batch)  # [B] each
        best = tf.gather(best_w, chosen)
        # Start/end as context tokens: window position p is context token p - first + start.
        shift = tf.gather(windows["context_start"] - first, chosen)
        context_len = tf.cast(context_ids.row_lengths(), tf.int32)
        has_answer = context_len > 0
        if self.version_2_with_negative:
            null_score = tf.math.unsorted_segment_min(start_ws[:, 0] + end_ws[:, 0], example,
                                                      batch)
            has_answer &= ~(null_score - score > self.null_score_diff_threshold)
            score = tf.where(context_len > 0, tf.where(has_answer, score, null_score), score)

        start_token = tf.maximum(best // answer + shift, 0)
        end_token = tf.maximum(best // answer + best % answer + shift, 0)
        starts = starts.merge_dims(1, 2).to_tensor(default_value=0)  # [B, T]
        ends = ends.merge_dims(1, 2).to_tensor(default_value=0)
        starts = _at_least_one_column(starts, 0)
        ends = _at_least_one_column(ends, 0)
        answer_start = tf.where(has_answer, tf.cast(
            tf.gather(starts, start_token, batch_dims=1), tf.int32), 0)
        answer_end = tf.where(has_answer, tf.cast(
            tf.gather(ends, end_token, batch_dims=1), tf.int32), 0)
        answer_text = tf.strings.substr(valid_utf8(inputs["context"]), answer_start,
                                        answer_end - answer_start, unit="UTF8_CHAR")
        return {"answer_text": answer_text, "answer_start": answer_start,
                "answer_end": answer_end,
                "score": tf.where(context_len > 0, score, 0.0)}


    def _window_logits(self, features):
        """The model's float32 start and end logits [W, L] on the packed windows (int32
        [W, L] each), WINDOW_BATCH windows per call (one call for an empty batch)."""
        total = tf.shape(features["input_word_ids"])[0]

        def body(i, starts, ends):
            logits = self.model({k: v[i:i + WINDOW_BATCH] for k, v in features.items()},
                                training=False)
            k = i // WINDOW_BATCH
            return (i + WINDOW_BATCH,
                    starts.write(k, tf.cast(logits["start_logits"], tf.float32)),
                    ends.write(k, tf.cast(logits["end_logits"], tf.float32)))

        def logits_array():
            return tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                                  element_shape=tf.TensorShape([None, None]))

        _, starts, ends = tf.while_loop(
            lambda i, *_: (i < total) | tf.equal(i, 0), body,
            (tf.constant(0), logits_array(), logits_array()))
        return starts.concat(), ends.concat()

    def _windows(self, question, context_ids):
        """Every question's context windows, in order (see the class doc).

        Args: question: int [B, (Q)]; context_ids: int [B, (T)].
        Returns: dict of int32 [W]: "example" (the question of each window), "context_start"
          (its first context token), "flat_start" (that token's index in
          context_ids.flat_values), "length" (its context tokens), "first" (where they start
          in the packed window: Q + 2); and "ids", the windows' context tokens [W, (length)].
          A context without tokens has one empty window.
        """
        query_len = tf.cast(question.row_lengths(), tf.int32)  # [B]
        context_len = tf.cast(context_ids.row_lengths(), tf.int32)
        room = self.seq_length - 3 - query_len  # >= 1 (max_query_length <= S - 4)
        step = tf.minimum(room, self.doc_stride)
        count = tf.where(context_len <= room, 1, (context_len - room + step - 1) // step + 1)
        example = tf.repeat(tf.range(tf.shape(count)[0]), count)  # [W]
        context_start = tf.ragged.range(count).flat_values * tf.gather(step, example)
        length = tf.minimum(tf.gather(context_len, example) - context_start,
                            tf.gather(room, example))
        flat_start = (tf.cast(tf.gather(context_ids.row_starts(), example), tf.int32)
                      + context_start)
        pieces = tf.ragged.range(flat_start, flat_start + length)  # [W, (length)]
        return dict(example=example, context_start=context_start, flat_start=flat_start,
                    length=length, first=tf.gather(query_len, example) + 2,
                    ids=pieces.with_flat_values(tf.gather(context_ids.flat_values,
                                                          pieces.flat_values)))

    @staticmethod
    def _max_context(windows, offset_wl, in_window, num_tokens):
        """bool [W, L]: position l of window w holds a context token to which this window gives
        the most context of all windows: min(tokens left, tokens right) + 0.01 x the window's
        length, the first window on a tie (`bert_tf.data.tasks.squad.max_context_windows`).

        Args: offset_wl: int32 [W, L], position - where the window's context starts;
          in_window: bool [W, L]; num_tokens: context tokens of the whole batch.
        """
        length = windows["length"][:, tf.newaxis]
        # float64, as Python computes it: two windows of lengths 100 apart can tie exactly, and
        # float32 rounding would then pick the other one.
        score_wl = (tf.cast(tf.minimum(offset_wl, length - 1 - offset_wl), tf.float64)
                    + 0.01 * tf.cast(length, tf.float64))
        # One segment per context token of the batch, and one more for positions in no window.
        token_wl = tf.where(in_window, windows["flat_start"][:, tf.newaxis] + offset_wl,
                            num_tokens)
        window_wl = tf.broadcast_to(tf.range(tf.shape(length)[0])[:, tf.newaxis],
                                    tf.shape(token_wl))
        _, owner = _segment_first_max(score_wl, window_wl, token_wl, num_tokens + 1)
        return in_window & tf.equal(tf.gather(owner, token_wl), window_wl)


class TaggingSignatures(ServingSignatures):
    """BertTokenClassifier: a label for every word, predicted at its first piece.

    Words are the tagger's (`tokenize_with_word_spans`): with WordPiece those of
    `bert_tf.tasks.token_tagger.split_words` (whitespace apart, each punctuation and CJK
    character a word; a word's offsets take all its characters, those the tokenizer deletes
    too), as the tagging data's words are tokenized one by one; with byte-level BPE the GPT-2
    pattern's words without their space (also punctuation apart), each tokenized as after a
    space but the first (`BpeTokenizerLayer.tokenize_with_offsets`), as bert-tf-tag tokenizes
    CoNLL words. Words whose first piece does not fit in the sequence are left out. Outputs
    are padded to the batch's most words (at least 1): tokens and labels with "", scores with
    0, offsets with -1; `num_tokens` says how many are real.

    Args:
      labels: the tag names in logit order.
    """

    name = "tagging"

    def __init__(self, model, tokenizer, seq_length, labels):
        super().__init__(model, tokenizer, seq_length)
        self.labels = list(labels)

    def ids(self, features):
        return {"logits": self.model(self._encoder_features(features), training=False)}

    def text(self, inputs):
        text = inputs["text"]
        # ids [B, (W), (P)]; each word's span [B, (W)], all its characters.
        ids, word_starts, word_ends = self.tokenizer.tokenize_with_word_spans(text)
        features = self._packed([ids.merge_dims(1, 2)])
        probabilities_bsc = tf.nn.softmax(self.model(features, training=False), axis=-1)

        pieces = ids.values  # [N, (P)], one row per word
        word_row = ids.value_rowids()  # [N]
        pieces_per_word = pieces.row_lengths()
        before = tf.cumsum(pieces_per_word, exclusive=True)  # pieces before each word (flat)
        first_piece = before - tf.gather(before, tf.gather(ids.row_starts(), word_row))  # [N]
        kept = first_piece < self.seq_length - 2  # [N]: the word's first piece is packed
        # Kept words' first pieces are within the bucket; the others are dropped below.
        last = tf.cast(tf.shape(probabilities_bsc)[1], tf.int64) - 1
        word_probabilities = tf.gather_nd(probabilities_bsc, tf.stack(
            [word_row, tf.minimum(first_piece + 1, last)], axis=1))  # [N, C]
        word_start, word_end = word_starts.flat_values, word_ends.flat_values  # [N]
        words_text = tf.strings.substr(
            tf.gather(valid_utf8(text), word_row), tf.cast(word_start, tf.int32),
            tf.cast(word_end - word_start, tf.int32), unit="UTF8_CHAR")
        values = {
            "tokens": (words_text, ""),
            "labels": (tf.gather(tf.constant(self.labels),
                                 tf.argmax(word_probabilities, axis=-1)), ""),
            "scores": (tf.reduce_max(word_probabilities, axis=-1), 0.0),
            "start_offsets": (tf.cast(word_start, tf.int32), -1),
            "end_offsets": (tf.cast(word_end, tf.int32), -1),
        }
        kept_rows = tf.boolean_mask(word_row, kept)
        outputs = {}
        for name, (value, pad) in values.items():
            rows = tf.RaggedTensor.from_value_rowids(tf.boolean_mask(value, kept), kept_rows,
                                                     nrows=tf.shape(text, tf.int64)[0],
                                                     validate=False)
            outputs[name] = _at_least_one_column(rows.to_tensor(default_value=pad), pad)
        outputs["num_tokens"] = tf.math.bincount(
            tf.cast(kept_rows, tf.int32), minlength=tf.shape(text)[0],
            maxlength=tf.shape(text)[0])
        return outputs


class FillMaskSignatures(ServingSignatures):
    """BertPretrainer: the top-k tokens for every mask token written in the text.

    WordPiece: the text is split at the literal "[MASK]" and the parts tokenized as usual, with
    the mask token between them. Byte-level BPE: the mask token is one of the tokenizer.json's
    added tokens ("[MASK]" for ModernBERT, "<mask>" for RoBERTa), found in the text with its
    flags (ModernBERT's takes the space before it) exactly as the Python tokenizer and
    Hugging Face `tokenizers` find it. Outputs are per mask, in order, padded to the batch's
    most masks (at least 1): positions and ids with -1, tokens with "", probabilities with 0.
    A mask cut off by truncation has no prediction.

    Args:
      vocabulary: what to answer for each id, id = index (the tokenizer's `token_texts()`).
      top_k: predictions per mask.
    """

    name = "fill_mask"

    def __init__(self, model, tokenizer, seq_length, vocabulary, top_k):
        super().__init__(model, tokenizer, seq_length)
        self.vocabulary = list(vocabulary)
        self.top_k = top_k
        if tokenizer is not None:
            tokenizer.check_masks_in_text()

    def ids_signature(self):
        return dict(super().ids_signature(),
                    masked_lm_positions=_id_spec("masked_lm_positions"))

    def ids(self, features):
        outputs = self.model(dict(self._encoder_features(features),
                                  masked_lm_positions=features["masked_lm_positions"]),
                             training=False)
        return dict(outputs)

    def text(self, inputs):
        features = self._packed([self.tokenizer.tokenize_with_masks(inputs["text"])])
        word_ids = features["input_word_ids"]
        positions_bs = tf.broadcast_to(tf.range(tf.shape(word_ids)[1]), tf.shape(word_ids))
        positions = tf.ragged.boolean_mask(positions_bs,
                                           tf.equal(word_ids, self.tokenizer.mask_id))
        positions = _at_least_one_column(positions.to_tensor(default_value=-1), -1)  # [B, P]
        logits_bpv = self.model(dict(features, masked_lm_positions=tf.maximum(positions, 0)),
                                training=False)["mlm_logits"]
        # Rows past the vocabulary (a padded vocab_size) are no token: rank the real ones only.
        logits_bpv = logits_bpv[:, :, :len(self.vocabulary)]
        top = tf.math.top_k(tf.nn.softmax(logits_bpv, axis=-1), k=self.top_k)
        real = (positions >= 0)[:, :, tf.newaxis]  # [B, P, 1]
        return {
            "mask_positions": positions,
            "top_k_ids": tf.where(real, top.indices, -1),
            "top_k_tokens": tf.where(real, tf.gather(tf.constant(self.vocabulary), top.indices),
                                     ""),
            "top_k_probabilities": tf.where(real, top.values, 0.0),
        }


class EmbeddingSignatures(ServingSignatures):
    """BertEncoder: sentence embeddings.

    `pooled_output` is the encoder's tanh-pooled [CLS] vector; `mean_pooled_output` the mean of
    sequence_output over the real tokens ([CLS] and [SEP] included, padding excluded).
    """

    name = "embedding"

    def ids(self, features):
        outputs = self.model(self._encoder_features(features), training=False)
        return {"sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
                "pooled_output": tf.cast(outputs["pooled_output"], tf.float32)}

    def text(self, inputs):
        features = self._encode([inputs["text"]])
        outputs = self.ids(features)
        mask_bs1 = tf.cast(features["input_mask"], tf.float32)[:, :, tf.newaxis]
        summed_bh = tf.reduce_sum(outputs["sequence_output"] * mask_bs1, axis=1)
        return {"pooled_output": outputs["pooled_output"],
                "mean_pooled_output": summed_bh / tf.reduce_sum(mask_bs1, axis=1)}


class SentenceEmbeddingSignatures(ServingSignatures):
    """BertSentenceEmbedder: its pooled (and, when it normalises, unit-length) vectors.

    Both signatures return `embedding` float32 [B, D]; the text one tokenises and packs in the
    graph and runs the encoder at the request's length bucket, so its vectors equal the
    model's on the same texts.
    """

    name = "sentence_embedding"

    def ids(self, features):
        return {"embedding": tf.cast(self.model(self._encoder_features(features),
                                                training=False), tf.float32)}

    def text(self, inputs):
        return self.ids(self._encode([inputs["text"]]))


MODEL_TYPES = (BertClassifier, BertSpanLabeler, BertTokenClassifier, BertPretrainer,
               BertEncoder, ModernBertEncoder, BertSentenceEmbedder)


def task_name_of(model):
    """The serving task of a model: classification, multi_label, regression, squad, tagging,
    fill_mask, embedding or sentence_embedding.

    Raises:
      TypeError: for a model that is none of `MODEL_TYPES`.
    """
    if isinstance(model, BertClassifier):
        if model.num_classes == 1:
            return "regression"
        return "multi_label" if getattr(model, "multi_label", False) else "classification"
    if isinstance(model, BertSpanLabeler):
        return "squad"
    if isinstance(model, BertTokenClassifier):
        return "tagging"
    if isinstance(model, BertPretrainer):
        return "fill_mask"
    if isinstance(model, Encoder):
        return "embedding"
    if isinstance(model, BertSentenceEmbedder):
        return "sentence_embedding"
    raise TypeError(f"Cannot export a {type(model).__name__}: expected one of "
                    f"{', '.join(t.__name__ for t in MODEL_TYPES)}.")
