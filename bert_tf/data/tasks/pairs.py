"""Text pairs and triplets for contrastive training, and scored pairs for evaluation.

Files are CSV or TSV with a header row, or JSON lines (format from the extension, as the
classifier data): the columns / keys name the sides.

  pairs      anchor, positive            (aliases: query | sentence1 | text1, and
                                          passage | document | sentence2 | text2)
  triplets   anchor, positive, negative  (negative alias: hard_negative)
  scored     sentence1, sentence2, score (a similarity; any real number, e.g. STS-B's 0-5)

Other column names are given per side (`columns`: bert-tf-embed's --text_a_column,
--text_b_column, --negative_column, --label_column). Every row of a file has the same sides: a
triplet file's row without a negative, or any empty side, is an error naming file:line and the
column, raised before any training.
"""

import dataclasses
import math

from bert_tf.data.tasks.classifier_data import table_rows, file_format
from bert_tf.data.tasks.task_errors import DataError, where

_ALIASES = {
    "anchor": ("anchor", "query", "sentence1", "text1"),
    "positive": ("positive", "passage", "document", "sentence2", "text2"),
    "negative": ("negative", "hard_negative"),
    "score": ("score", "label", "similarity"),
}


@dataclasses.dataclass
class TextPairs:
    """Pairs (negatives None) or triplets read from `path`; lists of equal length."""

    path: str
    anchors: list
    positives: list
    negatives: list = None

    def __len__(self):
        return len(self.anchors)


@dataclasses.dataclass
class ScoredPairs:
    """Text pairs with a similarity score each, from `path`."""

    path: str
    texts_a: list
    texts_b: list
    scores: list


def _columns(path, row, sides, optional=(), given=None):
    """{side: the row's key for it} for the sides a file has; DataError for a missing one.

    `given`: {side: column name} chosen by the caller instead of the aliases (a given optional
    side must be there too)."""
    given = {side: name for side, name in (given or {}).items() if name}
    found = {}
    for side in sides + tuple(optional):
        if side in given:
            if given[side] not in row:
                raise DataError(f"{path}: no column {given[side]!r} (the {side}); the columns "
                                f"are {', '.join(map(str, row))}")
            found[side] = given[side]
            continue
        names = [name for name in _ALIASES[side] if name in row]
        if names:
            found[side] = names[0]
        elif side in sides:
            raise DataError(f"{path}: no {side} column; expected one of "
                            f"{', '.join(_ALIASES[side])} (columns: {', '.join(row)})")
    return found


def _text(path, number, row, side, column):
    value = row.get(column)
    if value is None:
        raise DataError(f"{where(path, number, column)}: the {side} is missing (every row of the "
                        f"file needs one, as the first row has)")
    if not isinstance(value, str):
        raise DataError(f"{where(path, number, column)}: the {side} must be a string, got "
                        f"{type(value).__name__}")
    if not value.strip():
        raise DataError(f"{where(path, number, column)}: the {side} is empty")
    return value.strip()


def read_pairs(path, format_name=None, columns=None):
    """Reads an (anchor, positive) or (anchor, positive, negative) file.

    Triplets when the header (or the first JSON object) has a negative column. `columns`:
    {"anchor" | "positive" | "negative": column name} where the file names them otherwise.

    Raises:
      DataError: no such file, a missing column, an empty side or a row without the negative
        of a triplet file (naming file:line and the column), or no rows.
    """
    fmt = file_format(path, format_name)
    pairs, found = None, None
    for number, row in table_rows(path, fmt):
        if found is None:
            found = _columns(path, row, ("anchor", "positive"), optional=("negative",),
                             given=columns)
            pairs = TextPairs(path, [], [], [] if "negative" in found else None)
        pairs.anchors.append(_text(path, number, row, "anchor", found["anchor"]))
        pairs.positives.append(_text(path, number, row, "positive", found["positive"]))
        if pairs.negatives is not None:
            pairs.negatives.append(_text(path, number, row, "negative", found["negative"]))
    if not pairs:
        raise DataError(f"{path}: no pairs (expected a header row and one row per pair)")
    return pairs


def read_scored_pairs(path, format_name=None, columns=None):
    """Reads a (sentence1, sentence2, score) file; `columns`: {"anchor" (the first text) |
    "positive" (the second) | "score": column name} where the file names them otherwise.

    Raises:
      DataError: as read_pairs, and a score that is not a finite number.
    """
    fmt = file_format(path, format_name)
    data, found = ScoredPairs(path, [], [], []), None
    for number, row in table_rows(path, fmt):
        if found is None:
            found = _columns(path, row, ("anchor", "positive", "score"), given=columns)
        data.texts_a.append(_text(path, number, row, "first text", found["anchor"]))
        data.texts_b.append(_text(path, number, row, "second text", found["positive"]))
        value = row.get(found["score"])
        try:
            score = float(value)
        except (TypeError, ValueError):
            score = math.nan
        if not math.isfinite(score):
            raise DataError(f"{where(path, number, found['score'])}: score {value!r} is not a "
                            "finite number")
        data.scores.append(score)
    if len(data.scores) < 2:
        raise DataError(f"{path}: {len(data.scores)} scored pairs; a rank correlation needs at "
                        "least 2")
    return data
