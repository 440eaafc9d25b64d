"""SQuAD v1.1 / v2.0 question answering data: JSON -> examples -> windowed features -> tf.data.

Reproduces the original google-research/bert run_squad.py data path:

1. `read_squad_examples`: the context is split on whitespace into `doc_tokens` (words); an
   answer's character offset maps to word indices. For training, an answer whose words do not
   contain its text (`answer_start` not matching the context) is logged, skipped and counted,
   as the original does; v2.0 questions marked `is_impossible` have no answer.
2. `convert_examples_to_features`: the question is tokenized and cut to `max_query_length`;
   the context words are tokenized and covered by sliding windows of at
   most `max_seq_length - len(query) - 3` pieces, each starting `doc_stride` pieces after the
   previous one. Every window becomes `[CLS] query [SEP] window [SEP]` with
   `token_to_orig_map` (window position -> context word) and `token_is_max_context` (whether
   this window gives the piece the most context on both sides, so that a piece is scored in
   one window only). Training answers are narrowed to the pieces matching the answer text
   (`1895` inside `(1895-1943).`); a window that does not hold the whole answer, and an
   unanswerable question, point at position 0 ([CLS]).
   With a byte-level BPE tokenizer (a ModernBERT tokenizer.json) the question is encoded as a
   text and each context word as it encodes inside the space-joined context
   (`encode_word`: a BPE word after the first carries its leading space), so a
   window's ids are those of the context's words joined by single spaces.
3. `features_to_arrays` + `squad_dataset`: NumPy arrays and the tf.data pipeline of the
   feature dicts `input_word_ids`, `input_mask`, `input_type_ids` (int32 [B, S]) plus
   `start_positions`, `end_positions` (int32 [B]) for training or `example_weights`
   (float32 [B], 0 on padding rows) for prediction; every batch has the static shape
   [batch_size, max_seq_length].

Steps 1 and 2 import no TensorFlow (bert_tf.tasks answers questions with them on JAX alone);
the file reader and the pipeline import it when called.
"""

import dataclasses
import json

import numpy as np
from absl import logging

from bert_tf import fileio
from bert_tf.tf_data_options import without_autotuning


class SquadFormatError(ValueError):
    """A SQuAD JSON file that does not have the expected structure, with file and field."""


@dataclasses.dataclass
class SquadExample:
    """One question on one context.

    Attributes:
      qas_id: the question's id (str).
      question_text: the question.
      doc_tokens: the context split on whitespace (shared by the questions of a paragraph).
      orig_answer_text: the training answer text ("" when there is none).
      start_position, end_position: word indices of the training answer in doc_tokens
        (inclusive), -1 when there is none.
      is_impossible: v2.0 unanswerable question.
    """

    qas_id: str
    question_text: str
    doc_tokens: list
    orig_answer_text: str = ""
    start_position: int = -1
    end_position: int = -1
    is_impossible: bool = False


@dataclasses.dataclass
class SquadFeature:
    """One window of one example, as the model sees it.

    Attributes:
      example_index: index of the example in the list given to convert_examples_to_features.
      window_index: index of this window among the example's windows.
      tokens: `[CLS] query [SEP] window [SEP]` tokens (unpadded): WordPiece tokens, or
        byte-level BPE tokens ("Ġworld") with the tokenizer's own [CLS] / [SEP].
      input_word_ids: ids of `tokens`.
      segment_a_length: len(query) + 2, the [CLS] query [SEP] prefix (type id 0).
      token_to_orig_map: position in tokens -> index of its context word (window pieces only).
      token_is_max_context: position in tokens -> whether this window is the one with the
        most context for that piece.
      start_position, end_position: answer positions in tokens for training (0: no answer in
        this window); -1 for prediction features.
      is_impossible: the example is unanswerable.
      token_to_char_span: prediction features of a tokenizer with `subword_offsets`
        (WordPiece): position in tokens -> (start, end) characters of its context word the
        piece comes from (`piece_spans`), where answers are cut; else None.
    """

    example_index: int
    window_index: int
    tokens: list
    input_word_ids: list
    segment_a_length: int
    token_to_orig_map: dict
    token_is_max_context: dict
    start_position: int = -1
    end_position: int = -1
    is_impossible: bool = False
    token_to_char_span: dict = None


def is_whitespace(char):
    """The original's word separators: space, tab, CR, LF and U+202F (narrow no-break space)."""
    return char in " \t\r\n" or ord(char) == 0x202F


def whitespace_split(text):
    """(words, char_to_word): the words of `text` and, per character, its word index.

    A whitespace character maps to the word before it (-1 before the first word).
    """
    words, char_to_word = [], []
    previous_is_space = True
    for char in text:
        if is_whitespace(char):
            previous_is_space = True
        else:
            if previous_is_space:
                words.append(char)
            else:
                words[-1] += char
            previous_is_space = False
        char_to_word.append(len(words) - 1)
    return words, char_to_word


def load_squad_json(input_file):
    """Reads a SQuAD JSON file and returns its `data` list.

    Raises:
      SquadFormatError: the file is missing, is not JSON, or has no `data` list.
    """
    import tensorflow as tf

    problem = fileio.not_a_file(input_file)
    if problem:
        raise SquadFormatError(problem)
    try:
        with tf.io.gfile.GFile(input_file, "r") as f:
            content = json.load(f)
    except tf.errors.NotFoundError:
        raise SquadFormatError(f"{input_file}: no such file") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise SquadFormatError(f"{input_file}: not valid JSON: {e}") from None
    if not isinstance(content, dict) or not isinstance(content.get("data"), list):
        raise SquadFormatError(f"{input_file}: expected a JSON object with a 'data' list of "
                               "articles (the SQuAD format)")
    return content["data"]


def _field(obj, key, kind, where, source):
    """obj[key], checked to be of `kind`; SquadFormatError naming the file and field if not."""
    if not isinstance(obj, dict):
        raise SquadFormatError(f"{source}: {where}: expected a JSON object, got "
                               f"{type(obj).__name__}")
    if key not in obj:
        raise SquadFormatError(f"{source}: {where}: missing field '{key}'")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise SquadFormatError(f"{source}: {where}.{key}: expected {names}, got "
                               f"{type(value).__name__}")
    return value


def check_squad_data(dataset, source, version_2_with_negative):
    """Checks the structure of a SQuAD `data` list (articles, paragraphs, questions, answers).

    Returns:
      True if every question carries gold answers the official evaluation can score (v1.1: a
      non-empty `answers` list; v2.0: an `answers` list, empty for unanswerable questions).

    Raises:
      SquadFormatError naming `source` and the faulty field (or a repeated question id).
    """
    has_gold = True
    # Predictions are keyed by question id: a repeated id would silently merge two questions.
    first_seen = {}
    for i, article in enumerate(dataset):
        paragraphs = _field(article, "paragraphs", list, f"data[{i}]", source)
        for j, paragraph in enumerate(paragraphs):
            where = f"data[{i}].paragraphs[{j}]"
            _field(paragraph, "context", str, where, source)
            for k, qa in enumerate(_field(paragraph, "qas", list, where, source)):
                qa_where = f"{where}.qas[{k}]"
                qas_id = str(_field(qa, "id", (str, int), qa_where, source))
                if qas_id in first_seen:
                    raise SquadFormatError(f"{source}: {qa_where}.id: question id {qas_id!r} "
                                           f"is also the id of {first_seen[qas_id]}; question "
                                           "ids must be unique (predictions are keyed by id)")
                first_seen[qas_id] = qa_where
                _field(qa, "question", str, qa_where, source)
                if not isinstance(qa, dict) or "answers" not in qa:
                    has_gold = False
                    continue
                answers = _field(qa, "answers", list, qa_where, source)
                if not answers and not version_2_with_negative:
                    has_gold = False
                for n, answer in enumerate(answers):
                    _field(answer, "text", str, f"{qa_where}.answers[{n}]", source)
                    _field(answer, "answer_start", int, f"{qa_where}.answers[{n}]", source)
    return has_gold


def read_squad_examples(dataset, source, *, is_training, version_2_with_negative):
    """Builds SquadExamples from a SQuAD `data` list (see load_squad_json).

    Args:
      dataset: the `data` list.
      source: the file name, for messages.
      is_training: attach answers (word positions); answers whose text is not found at
        `answer_start` are skipped and counted.
      version_2_with_negative: questions may be unanswerable (`is_impossible`, or no answer).

    Returns:
      (examples, num_skipped): the examples in file order and the number of training
      questions skipped because their answer did not match the context.

    Raises:
      SquadFormatError: a malformed file, or (v1.1 training) a question without an answer.
    """
    check_squad_data(dataset, source, version_2_with_negative)
    examples, num_skipped = [], 0
    for i, article in enumerate(dataset):
        for j, paragraph in enumerate(article["paragraphs"]):
            doc_tokens, char_to_word = whitespace_split(paragraph["context"])
            for k, qa in enumerate(paragraph["qas"]):
                example = SquadExample(qas_id=str(qa["id"]), question_text=qa["question"],
                                       doc_tokens=doc_tokens)
                if is_training:
                    where = f"{source}: data[{i}].paragraphs[{j}].qas[{k}] (id {example.qas_id})"
                    answers = qa.get("answers", [])
                    impossible = version_2_with_negative and qa.get("is_impossible", not answers)
                    if impossible:
                        example.is_impossible = True
                    elif not answers:
                        raise SquadFormatError(
                            f"{where}: no answer; every training question needs one (or pass "
                            "--version_2_with_negative for unanswerable questions)")
                    elif not _attach_answer(example, answers[0], char_to_word, where):
                        num_skipped += 1
                        continue
                examples.append(example)
    return examples, num_skipped


def _attach_answer(example, answer, char_to_word, where):
    """Sets the answer's word span on `example`; False (logged) if the text does not match."""
    text, start = answer["text"], answer["answer_start"]
    end = start + len(text) - 1
    if not text.strip() or not 0 <= start <= end < len(char_to_word) \
            or char_to_word[start] < 0:
        logging.warning("%s: answer %r at answer_start=%d is outside the context; skipped",
                        where, text, start)
        return False
    first, last = char_to_word[start], char_to_word[end]
    # The original's check: the answer's words must contain the whitespace-normalised answer.
    # It fails when answer_start is off, and on some unusual Unicode.
    actual = " ".join(example.doc_tokens[first:last + 1])
    cleaned = " ".join(text.split())
    if cleaned not in actual:
        logging.warning("%s: answer %r does not match the context at answer_start=%d "
                        "(found %r); skipped", where, cleaned, start, actual)
        return False
    example.orig_answer_text = text
    example.start_position, example.end_position = first, last
    return True


def max_doc_tokens(max_seq_length, num_query_tokens):
    """Context pieces a window holds next to a query of `num_query_tokens` ([CLS], 2x [SEP])."""
    return max_seq_length - num_query_tokens - 3


def check_window_sizes(max_seq_length, max_query_length, doc_stride):
    """Raises ValueError (naming the flags) unless every window holds >= 1 context piece and
    consecutive windows leave no piece out."""
    room = max_doc_tokens(max_seq_length, max_query_length)
    if max_query_length < 1:
        raise ValueError(f"--max_query_length={max_query_length} must be >= 1")
    if room < 1:
        raise ValueError(
            f"--max_seq_length={max_seq_length} leaves no room for the context after a "
            f"question of --max_query_length={max_query_length} pieces plus [CLS] and two "
            f"[SEP]; it must be at least {max_query_length + 4}")
    if not 1 <= doc_stride <= room:
        raise ValueError(
            f"--doc_stride={doc_stride} must be in [1, {room}]: a window holds "
            f"{room} context pieces (--max_seq_length={max_seq_length} minus "
            f"--max_query_length={max_query_length} minus 3), and a larger stride would skip "
            "context between windows")


def doc_windows(num_doc_tokens, max_tokens_per_window, doc_stride):
    """(start, length) of the sliding windows over `num_doc_tokens` context pieces."""
    windows = []
    start = 0
    while start < num_doc_tokens:
        length = min(num_doc_tokens - start, max_tokens_per_window)
        windows.append((start, length))
        if start + length == num_doc_tokens:
            break
        start += min(length, doc_stride)
    return windows


def max_context_windows(windows, num_pieces):
    """For every piece, the window that gives it the most balanced context.

    A piece's score in a window is min(pieces left of it, pieces right of it) plus 0.01 x the
    window length; the first window with the highest score wins (the original's rule, which
    lets each piece be scored in one window only).

    Returns:
      list of window indices, one per piece (-1 for a piece in no window).
    """
    best_scores, owners = [None] * num_pieces, [-1] * num_pieces
    for index, (start, length) in enumerate(windows):
        end = start + length - 1
        for position in range(start, end + 1):
            score = min(position - start, end - position) + 0.01 * length
            if best_scores[position] is None or score > best_scores[position]:
                best_scores[position], owners[position] = score, index
    return owners


def improve_answer_span(doc_pieces, start, end, tokenizer, answer_text):
    """The sub-span of pieces [start, end] whose tokens equal the tokenized answer, if any.

    Word-level answer spans may carry extra pieces (`(1895-1943).` for the answer `1895`);
    the first (then longest) matching sub-span is returned, else (start, end) unchanged.
    """
    answers = tokenizer.span_forms(answer_text)
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(doc_pieces[new_start:new_end + 1]) in answers:
                return new_start, new_end
    return start, end


def _encode(tokenizer, text, first_word=None):
    """(tokens, ids) of `text`: the question (first_word None) or one context word, encoded as
    it reads inside the space-joined context (`first_word`: the context's first word)."""
    ids = tokenizer.encode(text) if first_word is None else tokenizer.encode_word(text,
                                                                                  first_word)
    return tokenizer.convert_ids_to_tokens(ids), ids


def _cls_sep(tokenizer):
    """([CLS] token, [SEP] token) and their ids: ((str, str), (int, int))."""
    if tokenizer.cls_id is None or tokenizer.sep_id is None:
        raise ValueError(f"the {tokenizer.kind} tokenizer has no [CLS]/[SEP] tokens (no "
                         "post-processor and no token named [CLS]/<s> and [SEP]/</s>).")
    ids = (tokenizer.cls_id, tokenizer.sep_id)
    return tuple(tokenizer.convert_ids_to_tokens(ids)), ids


def convert_examples_to_features(examples, tokenizer, *, max_seq_length, doc_stride,
                                 max_query_length, is_training):
    """Yields the SquadFeatures (windows) of `examples`, example by example.

    Args:
      examples: list of SquadExample.
      tokenizer: a bert_tf.text.WordpieceTokenizer or BpeTokenizer.
      max_seq_length, doc_stride, max_query_length: window geometry (see module doc).
      is_training: set start/end positions (0 when the window misses the answer).

    Yields:
      SquadFeature, in example order, windows left to right.
    """
    check_window_sizes(max_seq_length, max_query_length, doc_stride)
    (cls_token, sep_token), (cls_id, sep_id) = _cls_sep(tokenizer)
    cached_doc = None
    for example_index, example in enumerate(examples):
        query, query_ids = _encode(tokenizer, example.question_text)
        query, query_ids = query[:max_query_length], query_ids[:max_query_length]
        # Questions on one paragraph share its doc_tokens list: tokenize it once, and find
        # the max-context windows once per window layout (it depends on the query length).
        if example.doc_tokens is not cached_doc:
            cached_doc = example.doc_tokens
            pieces, piece_ids, piece_to_word, word_to_piece, piece_spans = _doc_pieces(
                example.doc_tokens, tokenizer,
                spans=not is_training and tokenizer.subword_offsets)
            owners_by_layout = {}

        answer_start = answer_end = -1
        if is_training and not example.is_impossible:
            answer_start = word_to_piece[example.start_position]
            if example.end_position < len(example.doc_tokens) - 1:
                answer_end = word_to_piece[example.end_position + 1] - 1
            else:
                answer_end = len(pieces) - 1
            answer_start, answer_end = improve_answer_span(
                pieces, answer_start, answer_end, tokenizer, example.orig_answer_text)

        segment_a_length = len(query) + 2
        windows = doc_windows(len(pieces), max_doc_tokens(max_seq_length, len(query)),
                              doc_stride)
        layout = tuple(windows)
        if layout not in owners_by_layout:
            owners_by_layout[layout] = max_context_windows(windows, len(pieces))
        owners = owners_by_layout[layout]
        for window_index, (window_start, window_length) in enumerate(windows):
            tokens = [cls_token, *query, sep_token]
            token_to_orig_map, token_is_max_context = {}, {}
            for piece in range(window_start, window_start + window_length):
                token_to_orig_map[len(tokens)] = piece_to_word[piece]
                token_is_max_context[len(tokens)] = owners[piece] == window_index
                tokens.append(pieces[piece])
            tokens.append(sep_token)
            feature = SquadFeature(
                example_index=example_index, window_index=window_index, tokens=tokens,
                input_word_ids=[cls_id, *query_ids, sep_id,
                                *piece_ids[window_start:window_start + window_length], sep_id],
                segment_a_length=segment_a_length, token_to_orig_map=token_to_orig_map,
                token_is_max_context=token_is_max_context,
                is_impossible=example.is_impossible)
            if piece_spans is not None:
                feature.token_to_char_span = {
                    position: piece_spans[position - segment_a_length + window_start]
                    for position in token_to_orig_map}
            if is_training:
                window_end = window_start + window_length - 1
                if (example.is_impossible
                        or not window_start <= answer_start <= answer_end <= window_end):
                    feature.start_position = feature.end_position = 0
                else:
                    offset = segment_a_length - window_start
                    feature.start_position = answer_start + offset
                    feature.end_position = answer_end + offset
            yield feature


def _doc_pieces(doc_tokens, tokenizer, spans=False):
    """(pieces, piece_ids, piece_to_word, word_to_piece, piece_spans) of a context's words;
    piece_spans (each piece's characters in its word) only when `spans`, else None."""
    pieces, piece_ids, piece_to_word, word_to_piece = [], [], [], []
    piece_spans = [] if spans else None
    for word_index, word in enumerate(doc_tokens):
        word_to_piece.append(len(pieces))
        tokens, ids = _encode(tokenizer, word, first_word=word_index == 0)
        piece_to_word.extend([word_index] * len(tokens))
        pieces.extend(tokens)
        piece_ids.extend(ids)
        if spans:
            piece_spans.extend(tokenizer.piece_spans(word))
    return pieces, piece_ids, piece_to_word, word_to_piece, piece_spans


def features_to_arrays(features, max_seq_length, is_training):
    """Stacks features into NumPy arrays for `squad_dataset`.

    Masks and type ids are rebuilt from lengths in the pipeline, which keeps a large training
    set (SQuAD: ~88k windows) at one int32 [N, S] array in memory.

    Args:
      features: iterable of SquadFeature (consumed once; training features need not be kept).
      max_seq_length: S.
      is_training: include start_positions / end_positions.

    Returns:
      dict of arrays: input_word_ids int32 [N, S] (0-padded), num_tokens int32 [N],
      segment_a_length int32 [N], and for training start_positions, end_positions int32 [N].
    """
    rows, lengths, segment_a, starts, ends = [], [], [], [], []
    for feature in features:
        rows.append(feature.input_word_ids)
        lengths.append(len(feature.input_word_ids))
        segment_a.append(feature.segment_a_length)
        starts.append(feature.start_position)
        ends.append(feature.end_position)
    ids = np.zeros((len(rows), max_seq_length), np.int32)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
    arrays = {"input_word_ids": ids, "num_tokens": np.array(lengths, np.int32),
              "segment_a_length": np.array(segment_a, np.int32)}
    if is_training:
        arrays["start_positions"] = np.array(starts, np.int32)
        arrays["end_positions"] = np.array(ends, np.int32)
    return arrays


def num_rows(arrays):
    """Number of features N in a features_to_arrays dict."""
    return len(arrays["input_word_ids"])


def _expand_lengths(batch):
    """num_tokens / segment_a_length [B] -> input_mask / input_type_ids int32 [B, S]."""
    import tensorflow as tf

    batch = dict(batch)
    seq_length = tf.shape(batch["input_word_ids"])[1]
    positions_1s = tf.range(seq_length)[tf.newaxis, :]
    mask_bs = positions_1s < batch.pop("num_tokens")[:, tf.newaxis]
    second_bs = positions_1s >= batch.pop("segment_a_length")[:, tf.newaxis]
    batch["input_mask"] = tf.cast(mask_bs, tf.int32)
    batch["input_type_ids"] = tf.cast(mask_bs & second_bs, tf.int32)
    return batch


def _expand_example(example):
    """_expand_lengths of one example ([S] features)."""
    import tensorflow as tf

    batch = _expand_lengths(tf.nest.map_structure(lambda t: t[tf.newaxis], example))
    return tf.nest.map_structure(lambda t: t[0], batch)


def squad_dataset(arrays, *, batch_size, is_training, seed=None, input_context=None,
                  length_buckets=None):
    """tf.data pipeline of SQuAD feature dicts with static [batch_size, S] shapes.

    Args:
      arrays: from features_to_arrays.
      batch_size: per-replica batch size.
      is_training: shard by input pipeline, shuffle (all rows), repeat, drop the remainder.
        Otherwise the rows are padded to a multiple of batch_size with example_weights 0 and
        read once in order (the first `num_rows(arrays)` predictions are the real ones).
      seed: shuffle seed (training).
      input_context: tf.distribute.InputContext (training).
      length_buckets: increasing bucket lengths ending with S (see
        bert_tf.data.tasks.length_buckets), or None for full-length batches. With buckets, each
        batch holds windows of one bucket cut to its length ([B, None] in the element spec);
        prediction batches carry `example_index` (task_loop.predict restores the order).

    Returns:
      tf.data.Dataset of dicts: input_word_ids, input_mask, input_type_ids int32 [B, S] plus
      start_positions, end_positions int32 [B] (training) or example_weights float32 [B].
    """
    import tensorflow as tf

    count = num_rows(arrays)
    if count == 0:
        raise ValueError("no SQuAD features to read")
    arrays = dict(arrays)
    if length_buckets is not None:
        return _bucketed_squad_dataset(arrays, batch_size, is_training, seed, input_context,
                                       length_buckets)
    if not is_training:
        padding = -count % batch_size
        arrays = {k: np.concatenate([v, np.zeros((padding,) + v.shape[1:], v.dtype)])
                  for k, v in arrays.items()}
        arrays["example_weights"] = np.concatenate(
            [np.ones(count, np.float32), np.zeros(padding, np.float32)])
    dataset = tf.data.Dataset.from_tensor_slices(arrays)
    if is_training:
        if input_context and input_context.num_input_pipelines > 1:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        dataset = dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True).repeat()
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.map(_expand_lengths, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def _bucketed_squad_dataset(arrays, batch_size, is_training, seed, input_context, buckets):
    import tensorflow as tf

    from bert_tf.data.tasks import length_buckets

    count = num_rows(arrays)
    dataset = tf.data.Dataset.from_tensor_slices(arrays)
    names = ["input_mask", "input_type_ids", "input_word_ids"]
    if is_training:
        if input_context and input_context.num_input_pipelines > 1:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        dataset = dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True).repeat()
        dataset = dataset.map(_expand_example, num_parallel_calls=tf.data.AUTOTUNE)
        dataset = length_buckets.training_batches(dataset, buckets, batch_size, names)
    else:
        dataset = dataset.map(lambda example: dict(_expand_example(example),
                                                   example_weights=tf.constant(1.0)))
        dataset = length_buckets.evaluation_batches(dataset, buckets, batch_size, names)
        return without_autotuning(dataset.prefetch(1))
    return dataset.prefetch(tf.data.AUTOTUNE)
