"""Pair, triplet and scored-pair files: CSV, TSV and JSONL, and the errors for bad rows."""

import json

import pytest

from bert_tf.data.tasks.pairs import read_pairs, read_scored_pairs
from bert_tf.data.tasks.task_errors import DataError


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_pairs_triplets_and_aliases_in_every_format(tmp_path):
    tsv = _write(tmp_path / "p.tsv", "query\tpassage\nwho is alice\talice is a person\n"
                                     "where is rome\trome is in italy\n")
    pairs = read_pairs(tsv)
    assert (pairs.anchors, pairs.positives, pairs.negatives) == (
        ["who is alice", "where is rome"], ["alice is a person", "rome is in italy"], None)
    csv = _write(tmp_path / "t.csv", 'anchor,positive,negative\n"a, quoted",b,c\nd,e,f\n')
    triplets = read_pairs(csv)
    assert triplets.anchors == ["a, quoted", "d"] and triplets.negatives == ["c", "f"]
    jsonl = _write(tmp_path / "p.jsonl", "".join(json.dumps(row) + "\n" for row in [
        {"anchor": "x", "positive": "y"}, {"anchor": "z", "positive": "w"}]))
    assert read_pairs(jsonl).positives == ["y", "w"]
    scored = read_scored_pairs(_write(tmp_path / "s.tsv", "sentence1\tsentence2\tscore\n"
                                                          "a\tb\t4.5\nc\td\t0\n"))
    assert scored.scores == [4.5, 0.0] and scored.texts_b == ["b", "d"]


@pytest.mark.parametrize("name,text,message", [
    ("empty.tsv", "anchor\tpositive\na\tb\nc\t \n",
     r"empty.tsv:3 \(column 'positive'\): the positive is empty$"),
    ("missing.jsonl", '{"anchor": "a", "positive": "b", "negative": "c"}\n'
                      '{"anchor": "d", "positive": "e"}\n',
     r"missing.jsonl:2 \(column 'negative'\): the negative is missing \(every row of the file "
     r"needs one, as the first row has\)$"),
    ("short.tsv", "anchor\tpositive\tnegative\na\tb\tc\nd\te\n",
     r"short.tsv:3: 2 fields, but the header has 3 \(anchor, positive, negative\)$"),
    ("nocol.csv", "question,answer\na,b\n",
     r"nocol.csv: no anchor column; expected one of anchor, query, sentence1, text1 "
     r"\(columns: question, answer\)$"),
    ("header.tsv", "anchor\tpositive\n", r"header.tsv: no pairs"),
])
def test_bad_rows_name_file_line_and_column(tmp_path, name, text, message):
    with pytest.raises(DataError, match=message):
        read_pairs(_write(tmp_path / name, text))


def test_bad_score_is_named(tmp_path):
    with pytest.raises(DataError, match=r"s.tsv:3 \(column 'score'\): score 'high' is not a "
                                        r"finite number$"):
        read_scored_pairs(_write(tmp_path / "s.tsv", "sentence1\tsentence2\tscore\n"
                                                     "a\tb\t1\nc\td\thigh\n"))


def test_columns_named_by_the_caller(tmp_path):
    """bert-tf-embed's --text_a_column, --text_b_column, --negative_column, --label_column."""
    path = _write(tmp_path / "qa.csv", "question,answer,wrong\nwho,alice,bob\nwhere,rome,oslo\n")
    columns = {"anchor": "question", "positive": "answer", "negative": "wrong"}
    triplets = read_pairs(path, columns=columns)
    assert (triplets.anchors, triplets.positives, triplets.negatives) == (
        ["who", "where"], ["alice", "rome"], ["bob", "oslo"])
    # Without the negative column named, the file's pairs alone (its third column unknown).
    assert read_pairs(path, columns=dict(columns, negative=None)).negatives is None
    rows = [{"q": "a", "p": "b", "sim": 1}, {"q": "c", "p": "d", "sim": 2}]
    scored = read_scored_pairs(
        _write(tmp_path / "s.jsonl", "".join(json.dumps(row) + "\n" for row in rows)),
        columns={"anchor": "q", "positive": "p", "score": "sim"})
    assert scored.texts_a == ["a", "c"] and scored.scores == [1.0, 2.0]
    with pytest.raises(DataError, match=r"qa.csv: no column 'query' \(the anchor\); the columns "
                                        r"are question, answer, wrong$"):
        read_pairs(path, columns={"anchor": "query"})
