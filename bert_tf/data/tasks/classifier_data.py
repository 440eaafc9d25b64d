"""Sentence(-pair) classification data: examples from CSV/TSV/JSONL, labels, fixed-length features.

Readers yield `InputExample`s (GLUE's own formats are in tasks.glue); `label_list` fixes
the label set (declared, or inferred from the training examples); `classifier_features` packs
each example as [CLS] A [SEP] (B [SEP]) with the Python WordPiece tokenizer, and
`classifier_records` caches them as TFRecords for feature_records.records_dataset.

Bad input is reported, not guessed around: a missing column or key, an empty label, a label
outside the declared set or a regression label that is not a number raises DataError naming the
file, line and column (a line that is not UTF-8, or a CSV quote left open, names its line);
rows whose text is empty are skipped (training and dev data) or kept (test data, where every
row needs a prediction), and counted in the log.
"""

import csv
import dataclasses
import hashlib
import io
import json
import os

from absl import logging

from bert_tf import fileio
from bert_tf.data.tasks.task_errors import DataError, decoded_lines, next_row, tsv_lines, where
from bert_tf.text import pack_inputs

FILE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
# Texts to predict, one per line (no columns, no labels).
TEXT_LINES_EXTENSION = ".txt"
# Log the location of this many skipped rows before summarising the rest as a count.
_LOGGED_SKIPS = 5


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One example: `guid` names it in prediction files (the test set's index for GLUE);
    `label` is a label name (str), a number (regression), a tuple of label names (multi-label;
    empty when none applies) or None when unlabelled; `source` is 'file:line' for messages."""

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | tuple | None = None
    source: str = ""


class SkipCounter:
    """Counts skipped rows per reason, logging the first few locations of each."""

    def __init__(self, name):
        self.name = name
        self.counts = {}

    def skip(self, reason, location):
        count = self.counts.get(reason, 0) + 1
        self.counts[reason] = count
        if count <= _LOGGED_SKIPS:
            logging.warning("Skipping %s: %s", location, reason)

    def log_summary(self):
        for reason, count in sorted(self.counts.items()):
            logging.warning("%s: skipped %d row(s): %s", self.name, count, reason)

    @property
    def total(self):
        return sum(self.counts.values())


def label_string(value):
    """A label value from a file as a label name: 1 -> '1', 1.0 -> '1', True -> 'true'."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def file_format(path, format_name=None):
    """'csv', 'tsv' or 'jsonl' from `format_name` or the file extension."""
    if format_name:
        return format_name
    extension = os.path.splitext(path)[1].lower()
    if extension not in FILE_FORMATS:
        if fileio.isdir(path):
            raise DataError(fileio.not_a_file(path))
        raise DataError(f"{path}: cannot tell the format from the extension {extension!r}; "
                        f"expected one of {', '.join(sorted(FILE_FORMATS))}")
    return FILE_FORMATS[extension]


def split_file(data_dir, split, extensions):
    """The one file `split` + extension in `data_dir`, or None if there is none.

    Raises:
      DataError: more than one, say train.csv and train.tsv (which one was meant is unknown).
    """
    import tensorflow as tf  # Only for tf.io.gfile (gs:// and other remote paths).

    found = [os.path.join(data_dir, split + extension) for extension in extensions
             if tf.io.gfile.exists(os.path.join(data_dir, split + extension))]
    if len(found) > 1:
        names = " and ".join(os.path.basename(path) for path in found)
        raise DataError(f"--data_dir={data_dir} holds {names}: ambiguous {split} data; remove "
                        f"all but one or give --{split}_file")
    return found[0] if found else None


def _open_text(path):
    problem = fileio.not_a_file(path)
    if problem:
        raise DataError(problem)
    return fileio.open_file(path, "rb")


def table_rows(path, fmt):
    """(line number, dict column -> value) of a CSV/TSV file with a header row, or JSONL.

    The line number is the row's first line (a quoted CSV field may span lines).
    """
    with _open_text(path) as binary:
        f = decoded_lines(binary, path)
        if fmt == "jsonl":
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"{where(path, number)}: not a JSON object ({e})") from None
                if not isinstance(row, dict):
                    raise DataError(f"{where(path, number)}: expected a JSON object, got "
                                    f"{type(row).__name__}")
                yield number, row
            return
        # TSV as most tools write it: tab-separated, no quoting; CSV with RFC 4180 quoting.
        if fmt == "tsv":
            reader = csv.reader(tsv_lines(f), delimiter="\t", quoting=csv.QUOTE_NONE)
        else:
            reader = csv.reader(f)
        header = next_row(reader, path)
        if header is None:
            return
        header = [name.lstrip("\ufeff").strip() for name in header]
        while True:
            first_line = reader.line_num + 1
            row = next_row(reader, path)
            if row is None:
                return
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                if reader.line_num > first_line and any("\n" in cell for cell in row):
                    # An unclosed quote swallows the following lines: name where it opened.
                    raise DataError(
                        f"{where(path, first_line)}: a quoted field opened on this line runs "
                        f"to line {reader.line_num} (an unbalanced '\"'?), making a row of "
                        f"{len(row)} fields; the header has {len(header)} "
                        f"({', '.join(header)})")
                raise DataError(f"{where(path, reader.line_num)}: {len(row)} fields, but the "
                                f"header has {len(header)} ({', '.join(header)})")
            yield first_line, dict(zip(header, row))


def read_table_examples(path, *, text_a_column, text_b_column=None, label_column=None,
                        is_regression=False, require_labels=True, keep_empty=False,
                        format_name=None, label_separator=None):
    """Examples of a user CSV/TSV (with a header row) or JSONL file.

    Args:
      path: the file.
      text_a_column, text_b_column: columns (JSONL keys) of the first and optional second text.
      label_column: the label's column; needed when `require_labels`.
      is_regression: labels are numbers (kept as float) rather than names.
      require_labels: False for test files: a missing label column is fine.
      keep_empty: keep rows whose text is empty (test files); else skip and count them.
      format_name: 'csv', 'tsv' or 'jsonl' (default: from the extension).
      label_separator: multi-label data: the label cell holds any number of label names
        joined by this string (a JSONL value may also be a list of names); an empty cell is
        an example no label applies to.

    Returns:
      list of InputExample with guid = the row's 0-based index among data rows.

    Raises:
      DataError: a named column is missing, a label is empty (when `require_labels`), a
        regression label is not a number, a line is not UTF-8, or a CSV quote is not closed.
    """
    fmt = file_format(path, format_name)
    columns = [c for c in (text_a_column, text_b_column) if c]
    if require_labels:
        if not label_column:
            raise DataError(f"{path}: a label column is needed (--label_column)")
        columns.append(label_column)
    skips = SkipCounter(path)
    examples = []
    for index, (number, row) in enumerate(table_rows(path, fmt)):
        missing = [c for c in columns if c not in row]
        if missing:
            available = ", ".join(map(str, row)) or "none"
            raise DataError(f"{where(path, number, missing[0])}: no such column; this row "
                            f"has {available}")
        text_a = _text(row[text_a_column])
        text_b = _text(row[text_b_column]) if text_b_column else None
        if not keep_empty and (not text_a.strip() or (text_b is not None and not text_b.strip())):
            skips.skip("empty text", where(path, number))
            continue
        label = None
        if label_column and label_column in row and label_separator is not None:
            label = _label_set(row[label_column], label_separator, path, number, label_column)
        elif label_column and label_column in row:
            value = row[label_column]
            if value is None or not str(value).strip():
                # Test files may leave labels blank; in training data a blank would become a
                # class of its own and fail only after training.
                if require_labels:
                    raise DataError(f"{where(path, number, label_column)}: empty label; every "
                                    "training and evaluation row needs one")
            else:
                label = _label_value(value, is_regression, path, number, label_column)
        examples.append(InputExample(str(index), text_a, text_b, label, where(path, number)))
    skips.log_summary()
    return examples


def _text(value):
    return "" if value is None else str(value)


def split_label_cell(text, separator):
    """The label names of a multi-label cell: `text` split at `separator`, each stripped, the
    empty ones dropped (an empty cell: no label applies)."""
    return [name for name in (n.strip() for n in str(text).split(separator)) if name]


def _label_set(value, separator, path, number, column):
    """A multi-label cell as a tuple of distinct label names, in the order written."""
    if isinstance(value, (list, tuple)):
        bad = [v for v in value if v is None or isinstance(v, (list, tuple, dict))]
        if bad:
            raise DataError(f"{where(path, number, column)}: multi-label list {value!r} holds "
                            f"{bad[0]!r}; expected label names (strings or numbers)")
        names = [label_string(v) for v in value]
    elif value is None:
        names = []
    elif isinstance(value, (dict, bool, int, float)):
        raise DataError(f"{where(path, number, column)}: multi-label value {value!r} is "
                        f"neither label names joined by {separator!r} nor a list of them")
    else:
        names = split_label_cell(value, separator)
    names = [n for n in names if n]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise DataError(f"{where(path, number, column)}: label {value!r} names {twice!r} "
                        "twice")
    return tuple(names)


def _label_value(value, is_regression, path, number, column):
    if not is_regression:
        return label_string(value)
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise DataError(f"{where(path, number, column)}: regression label {value!r} is not "
                        "a number") from None
    if score != score or score in (float("inf"), float("-inf")):
        raise DataError(f"{where(path, number, column)}: regression label {value!r} is not "
                        "a finite number")
    return score


def is_text_lines(path):
    """True for a file of texts to predict, one per line (a .txt file)."""
    return bool(path) and os.path.splitext(str(path))[1].lower() == TEXT_LINES_EXTENSION


def read_text_lines(path):
    """Examples to predict from a text file: one text per line (an empty line is an empty
    text: every line gets a prediction), guid = the line's 0-based index.

    Raises:
      DataError: a line that is not UTF-8, naming it; a path that is not a file.
    """
    examples = []
    with _open_text(path) as binary:
        for number, line in enumerate(decoded_lines(binary, path), start=1):
            examples.append(InputExample(str(number - 1), line.rstrip("\r\n"),
                                         source=where(path, number)))
    return examples


def predictions_text(examples, predictions, scores=None):
    """predictions.tsv of your own data: a header, then per example its index, its text (and
    second text), the prediction (a label name, a score for regression, the predicted label
    names joined by the separator for multi-label) and, for single-label classes, the
    predicted label's probability. Tab-separated; a field holding a tab, newline, carriage
    return or quote is quoted as CSV quotes it."""
    pair = any(e.text_b is not None for e in examples)
    header = ["index", "text", *(["text_pair"] if pair else []), "prediction",
              *(["score"] if scores is not None else [])]
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    # csv quotes only the line terminator's characters: a bare \r would end the row for a
    # reader. A row holding one is written with every field quoted.
    quoting_all = csv.writer(out, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(header)
    for i, (example, prediction) in enumerate(zip(examples, predictions)):
        row = [example.guid, example.text_a, *([example.text_b or ""] if pair else []),
               prediction]
        if scores is not None:
            row.append(f"{scores[i]:.6f}")
        (quoting_all if any("\r" in field for field in row) else writer).writerow(row)
    return out.getvalue()


def infer_labels(examples):
    """The sorted label names of labelled examples (numerically when all are integers); for
    multi-label examples, every name any example has."""
    names = set()
    for example in examples:
        if isinstance(example.label, tuple):
            names.update(example.label)
        elif example.label is not None:
            names.add(example.label)
    if all(_is_int(n) for n in names):
        return sorted(names, key=int)
    return sorted(names)


def _is_int(text):
    try:
        int(text)
    except ValueError:
        return False
    return True


def check_labels(examples, labels, split_name):
    """Raises DataError at the first example whose label is not in `labels`."""
    known = set(labels)
    for example in examples:
        names = example.label if isinstance(example.label, tuple) else (
            () if example.label is None else (example.label,))
        for name in names:
            if name not in known:
                raise DataError(f"{example.source}: label {name!r} of the {split_name} data "
                                f"is not among the labels {', '.join(labels)}")


def classifier_spec(max_seq_length, is_regression, multi_label_classes=None):
    """Feature spec of classification records (see feature_records.write_records); with
    `multi_label_classes` C, label_ids is a multi-hot float32 [C]."""
    if multi_label_classes:
        label = ((multi_label_classes,), "float32")
    else:
        label = ((), "float32" if is_regression else "int32")
    return {"input_word_ids": ((max_seq_length,), "int32"),
            "input_mask": ((max_seq_length,), "int32"),
            "input_type_ids": ((max_seq_length,), "int32"),
            "label_ids": label}


def classifier_features(examples, tokenizer, max_seq_length, labels, stats, multi_label=False):
    """Yields the fixed-length features of each example.

    Args:
      examples: InputExamples.
      tokenizer: a bert_tf.text.WordpieceTokenizer.
      max_seq_length: S.
      labels: the label names (class i = labels[i]); None for regression.
      stats: dict that receives `truncated` (examples cut to fit S).
      multi_label: the labels are tuples of names: label_ids is multi-hot [C].

    Yields:
      dict of input_word_ids, input_mask, input_type_ids (lists of S ints) and label_ids
      (class index, 0 when unlabelled; the score for regression; multi-hot floats [C] for
      multi-label, zeros when unlabelled).
    """
    label_ids = {name: i for i, name in enumerate(labels)} if labels is not None else None
    budget_pair, budget_single = max_seq_length - 3, max_seq_length - 2
    stats["truncated"] = 0
    for example in examples:
        ids_a = tokenizer.encode(example.text_a)
        ids_b = tokenizer.encode(example.text_b) if example.text_b is not None else None
        budget = budget_pair if ids_b else budget_single
        if len(ids_a) + len(ids_b or ()) > budget:
            stats["truncated"] += 1
        features = pack_inputs(ids_a, ids_b, max_seq_length=max_seq_length,
                               cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                               pad_id=tokenizer.pad_id)
        if multi_label:
            hot = [0.0] * len(labels)
            for name in example.label or ():
                hot[label_ids[name]] = 1.0
            features["label_ids"] = hot
        elif label_ids is None:
            features["label_ids"] = 0.0 if example.label is None else float(example.label)
        else:
            features["label_ids"] = 0 if example.label is None else label_ids[example.label]
        yield features


def examples_digest(examples):
    """A hex digest of the examples' content (texts, labels, guids), for cache keys."""
    digest = hashlib.sha256()
    for example in examples:
        # surrogatepass: a lone surrogate ("\ud800" escaped in a JSON line) is text too.
        digest.update(json.dumps([example.guid, example.text_a, example.text_b, example.label],
                                 ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def classifier_records(directory, name, examples, tokenizer, max_seq_length, labels,
                       multi_label=False):
    """Cached TFRecords of `examples` (see feature_records.cached_records).

    The cache key covers the examples' content, the tokenizer (vocabulary, casing), S and the
    labels, so any change converts afresh.

    Args:
      directory: the cache directory.
      name: the split ("train", "dev", "test").
      examples, tokenizer, max_seq_length, labels, multi_label: as in classifier_features.

    Returns:
      (path, meta); meta has num_examples and truncated.
    """
    from bert_tf.data.tasks import feature_records

    spec = classifier_spec(max_seq_length, labels is None,
                           len(labels) if multi_label else None)
    parts = {"examples": examples_digest(examples),
             "tokenizer": tokenizer.fingerprint(),
             "max_seq_length": max_seq_length, "labels": labels}
    if multi_label:
        parts["multi_label"] = True

    def make():
        stats = {}
        return classifier_features(examples, tokenizer, max_seq_length, labels, stats,
                                   multi_label), stats

    path, meta = feature_records.cached_records(directory, name, parts, spec, make)
    if meta.get("truncated"):
        logging.info("%s: %d of %d examples were longer than --max_seq_length=%d and were "
                     "truncated", name, meta["truncated"], meta["num_examples"], max_seq_length)
    return path, meta
