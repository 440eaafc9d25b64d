"""Token tagging data (NER): CoNLL-2003-style files, first-piece labels, windows, predictions.

A CoNLL file has one token per line with whitespace-separated columns (CoNLL-2003:
`EU NNP B-NP B-ORG`; two-column `token tag` files work too), a blank line after each sentence
and `-DOCSTART-` lines between documents. The token is column 0 and the tag the last column
unless told otherwise.

Each word is split into WordPiece pieces; its tag is learned and predicted on its first piece
only (`label_weights` 1 there, 0 on continuation pieces, [CLS], [SEP] and padding), as in the
BERT paper's NER set-up. A sentence with more pieces than fit between [CLS] and [SEP] is split
into consecutive windows of whole words, so that every word still gets a prediction; a single
word with more pieces than a whole window keeps only the pieces that fit. Both are counted and
logged.
"""

import dataclasses

from absl import logging

from bert_tf import fileio
from bert_tf.data.tasks.task_errors import DataError, decoded_lines, where

DOCSTART = "-DOCSTART-"
OUTSIDE = "O"


@dataclasses.dataclass(frozen=True)
class Sentence:
    """Words of one sentence, their tags (None when the file has none), and the file and
    line of its first word (its words are on consecutive lines)."""

    words: tuple
    tags: tuple | None
    path: str = ""
    line: int = 0


def read_conll(path, *, token_column=0, tag_column=-1, require_tags=True):
    """Sentences of a CoNLL-style file.

    Args:
      path: the file (local or tf.io.gfile URL).
      token_column, tag_column: column positions (negative counts from the end).
      require_tags: False for unlabelled test files: lines may carry the token alone.

    Returns:
      list of Sentence (empty sentences and -DOCSTART- lines left out).

    Raises:
      DataError naming the file and line of a line without the needed columns, or of a
      sentence that has tags on some lines only.
    """
    problem = fileio.not_a_file(path)
    if problem:
        raise DataError(problem)
    sentences = []
    words, tags, first_line = [], [], 0

    def close():
        if words:
            if tags and len(tags) != len(words):
                raise DataError(f"{where(path, first_line)}: this sentence has tags on only "
                                f"{len(tags)} of its {len(words)} lines")
            sentences.append(Sentence(tuple(words), tuple(tags) if tags else None, path,
                                      first_line))
        words.clear()
        tags.clear()

    with fileio.open_file(path, "rb") as f:
        for number, line in enumerate(decoded_lines(f, path), start=1):
            fields = line.split()
            if not fields:
                close()
                continue
            if fields[0] == DOCSTART:
                close()
                continue
            if not words:
                first_line = number
            try:
                words.append(fields[token_column])
            except IndexError:
                raise DataError(f"{where(path, number)}: no token column {token_column} in "
                                f"{line.rstrip()!r}") from None
            if len(fields) > 1 and -len(fields) <= tag_column < len(fields):
                tags.append(fields[tag_column])
            elif require_tags:
                raise DataError(f"{where(path, number)}: no tag column {tag_column} in "
                                f"{line.rstrip()!r}; expected 'token ... tag'")
        close()
    return sentences


def infer_tags(sentences):
    """The tag set of tagged sentences: 'O' first (when present), then the others sorted."""
    tags = {tag for s in sentences if s.tags for tag in s.tags}
    return ([OUTSIDE] if OUTSIDE in tags else []) + sorted(tags - {OUTSIDE})


def check_tags(sentences, labels, split_name):
    """Raises DataError at the first sentence with a tag outside `labels`."""
    known = set(labels)
    for sentence in sentences:
        for offset, tag in enumerate(sentence.tags or ()):
            if tag not in known:
                location = where(sentence.path, sentence.line + offset)
                raise DataError(f"{location}: tag {tag!r} of the {split_name} data is not "
                                f"among the labels {', '.join(labels)}")


@dataclasses.dataclass(frozen=True)
class Window:
    """A run of whole words of one sentence that fits one input sequence.

    sentence: index of the sentence; first_word: index of its first word in the sentence;
    piece_ids: WordPiece ids (no [CLS]/[SEP]); word_positions: input position of each word's
    first piece (1-based because of [CLS]).
    """

    sentence: int
    first_word: int
    piece_ids: tuple
    word_positions: tuple


def make_windows(sentences, tokenizer, max_seq_length, stats):
    """Splits sentences into windows of at most max_seq_length - 2 pieces.

    Args:
      sentences: Sentences.
      tokenizer: a bert_tf.text.WordpieceTokenizer or BpeTokenizer.
      max_seq_length: S.
      stats: dict receiving counts: split_sentences, truncated_words, empty_words (words the
        tokenizer maps to nothing, given one [UNK] piece so they keep a position).

    Returns:
      list of Window, sentence by sentence in order.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for a token between "
                         "[CLS] and [SEP]")
    capacity = max_seq_length - 2
    windows = []
    stats.update(split_sentences=0, truncated_words=0, empty_words=0)
    for index, sentence in enumerate(sentences):
        pieces, positions, first_word = [], [], 0
        num_windows = 0
        for w, word in enumerate(sentence.words):
            # Byte-level BPE needs to know where a word stands (the first has no space before).
            ids = tokenizer.encode_word(word, first=w == 0)
            if not ids:
                ids = [tokenizer.unk_id]
                stats["empty_words"] += 1
            if len(ids) > capacity:
                ids = ids[:capacity]
                stats["truncated_words"] += 1
            if pieces and len(pieces) + len(ids) > capacity:
                windows.append(Window(index, first_word, tuple(pieces), tuple(positions)))
                num_windows += 1
                pieces, positions, first_word = [], [], w
            positions.append(len(pieces) + 1)
            pieces.extend(ids)
        windows.append(Window(index, first_word, tuple(pieces), tuple(positions)))
        if num_windows:
            stats["split_sentences"] += 1
    return windows


def log_window_stats(name, stats, num_sentences, max_seq_length):
    if stats.get("split_sentences"):
        logging.info("%s: %d of %d sentences have more pieces than --max_seq_length=%d holds "
                     "and were split into several windows", name, stats["split_sentences"],
                     num_sentences, max_seq_length)
    if stats.get("truncated_words"):
        logging.warning("%s: %d words have more pieces than one window and were truncated",
                        name, stats["truncated_words"])
    if stats.get("empty_words"):
        logging.warning("%s: %d words have no WordPiece (e.g. only control characters) and "
                        "stand as [UNK]", name, stats["empty_words"])


def tagging_spec(max_seq_length):
    """Feature spec of tagging records (see feature_records.write_records)."""
    sequence = (max_seq_length,)
    return {"input_word_ids": (sequence, "int32"), "input_mask": (sequence, "int32"),
            "input_type_ids": (sequence, "int32"), "label_ids": (sequence, "int32"),
            "label_weights": (sequence, "float32")}


def tagging_features(windows, sentences, tokenizer, max_seq_length, labels):
    """Yields the fixed-length features of each window.

    label_ids carry the tag index of each word at its first piece and label_weights 1 there
    (0 everywhere for untagged sentences).
    """
    tag_ids = {tag: i for i, tag in enumerate(labels)}
    for window in windows:
        word_ids = [tokenizer.cls_id, *window.piece_ids, tokenizer.sep_id]
        num_pad = max_seq_length - len(word_ids)
        label_ids = [0] * max_seq_length
        label_weights = [0.0] * max_seq_length
        tags = sentences[window.sentence].tags
        if tags is not None:
            for offset, position in enumerate(window.word_positions):
                label_ids[position] = tag_ids[tags[window.first_word + offset]]
                label_weights[position] = 1.0
        yield {"input_word_ids": word_ids + [tokenizer.pad_id] * num_pad,
               "input_mask": [1] * len(word_ids) + [0] * num_pad,
               "input_type_ids": [0] * max_seq_length,
               "label_ids": label_ids, "label_weights": label_weights}


def tagging_records(directory, name, sentences, tokenizer, max_seq_length, labels):
    """Windows of `sentences` and their cached TFRecords.

    Returns:
      (windows, path, meta); meta has num_examples (windows) and the window counts.
    """
    from bert_tf.data.tasks import feature_records

    stats = {}
    windows = make_windows(sentences, tokenizer, max_seq_length, stats)
    log_window_stats(name, stats, len(sentences), max_seq_length)
    parts = {"sentences": [[s.words, s.tags] for s in sentences],
             "tokenizer": tokenizer.fingerprint(),
             "max_seq_length": max_seq_length, "labels": labels}
    path, meta = feature_records.cached_records(
        directory, name, parts, tagging_spec(max_seq_length),
        lambda: (tagging_features(windows, sentences, tokenizer, max_seq_length, labels),
                 dict(stats)))
    return windows, path, meta


def word_predictions(windows, sentences, predicted_ids_ws, labels):
    """Each sentence's predicted tag per word, read at the words' first pieces.

    Args:
      windows: the windows the predictions were made on, in order.
      sentences: the Sentences.
      predicted_ids_ws: int array [num_windows (or more, padding), S] of tag indices.
      labels: tag names by index.

    Returns:
      list (sentences) of lists of tag names, as long as each sentence.
    """
    predictions = [[None] * len(s.words) for s in sentences]
    for row, window in enumerate(windows):
        for offset, position in enumerate(window.word_positions):
            predictions[window.sentence][window.first_word + offset] = (
                labels[int(predicted_ids_ws[row, position])])
    return predictions


def conll_text(sentences, predictions):
    """CoNLL-format predictions: 'token gold predicted' per line ('token predicted' without
    gold tags), a blank line after each sentence, as conlleval reads them."""
    lines = []
    for sentence, predicted in zip(sentences, predictions):
        for i, word in enumerate(sentence.words):
            gold = f" {sentence.tags[i]}" if sentence.tags is not None else ""
            lines.append(f"{word}{gold} {predicted[i]}")
        lines.append("")
    return "\n".join(lines) + ("\n" if lines else "")
