"""Classification data: GLUE TSV and TFDS readers, user CSV/TSV/JSONL, features, pipelines."""

import csv
import json
import os
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.tasks import classifier_data, feature_records, glue
from bert_tf.data.tasks.task_errors import DataError
from bert_tf.text import WordpieceTokenizer

from glue_files import write_glue

# (task, directory, split) -> (number of examples, first example as (guid, a, b, label)).
EXPECTED = {
    ("cola", "CoLA", "train"): (2, ("train-0", "The dog barked at the moon.", None, "1")),
    ("cola", "CoLA", "test"): (2, ("0", "Books she reads.", None, None)),
    ("sst-2", "SST-2", "train"): (2, ("train-0", "a warm , funny film ", None, "1")),
    ("sst-2", "SST-2", "test"): (1, ("0", "a mess of a movie .", None, None)),
    ("mrpc", "MRPC", "train"): (2, ("train-0", 'He said " yes " .', 'He answered " yes " .',
                                    "1")),
    ("mrpc", "MRPC", "test"): (1, ("0", "A cat sat .", "A cat sat down .", None)),
    ("sts-b", "STS-B", "dev"): (1, ("dev-0", "Stocks fell.", "It snowed.", 0.2)),
    ("sts-b", "STS-B", "test"): (1, ("0", "A bird flies.", "A bird sings.", None)),
    ("qqp", "QQP", "train"): (1, ("train-0", "How do I learn?", "How can I learn?", "1")),
    ("qqp", "QQP", "test"): (1, ("0", "Why is the sky blue?", "What makes the sky blue?",
                                 None)),
    ("mnli", "MNLI", "train"): (2, ("train-0", "A man sleeps.", "A person rests.",
                                    "entailment")),
    ("mnli", "MNLI", "dev"): (1, ("dev-0", "It is late.", "It is Monday.", "neutral")),
    ("mnli", "MNLI", "test"): (1, ("0", "Rain fell.", "It was dry.", None)),
    ("mnli-mm", "MNLI", "dev"): (1, ("dev-0", "We won.", "We did win.", "entailment")),
    ("mnli-mm", "MNLI", "test"): (1, ("0", "Dear all.", "Hello.", None)),
    ("qnli", "QNLI", "dev"): (1, ("dev-0", "When?", "The sky is blue.", "not_entailment")),
    ("rte", "RTE", "train"): (1, ("train-0", "Ann won.", "Ann lost.", "not_entailment")),
    ("wnli", "WNLI", "test"): (1, ("0", "She left.", "She went.", None)),
}


def _as_tuple(example):
    return example.guid, example.text_a, example.text_b, example.label


@pytest.mark.parametrize("task_name,directory,split", sorted(EXPECTED))
def test_glue_tsv_layouts(tmp_path, task_name, directory, split):
    data_dir = write_glue(tmp_path, directory)
    examples = glue.read_glue_tsv(glue.glue_task(task_name), data_dir, split)
    count, first = EXPECTED[(task_name, directory, split)]
    assert len(examples) == count
    assert _as_tuple(examples[0]) == first


def test_glue_task_names_and_submission_format():
    assert glue.glue_task("SST2").name == "sst-2" and glue.glue_task("STS-B").is_regression
    assert glue.glue_task("mnli_mismatched").submission_name == "MNLI-mm"
    assert glue.glue_task("imdb") is None
    examples = [classifier_data.InputExample("3", "a"), classifier_data.InputExample("7", "b")]
    assert glue.submission_text(examples, ["entailment", "neutral"]) == (
        "index\tprediction\n3\tentailment\n7\tneutral\n")


def test_glue_bad_rows(tmp_path, caplog):
    data_dir = write_glue(tmp_path, "RTE")
    task = glue.glue_task("rte")
    with open(os.path.join(data_dir, "train.tsv"), "a", encoding="utf-8") as f:
        f.write("1\tonly two fields\n2\t \tAnn slept.\tentailment\n3\tA.\tB.\tentailment\n")
    examples = glue.read_glue_tsv(task, data_dir, "train")
    # The malformed and the empty row are skipped and counted; the good one is kept.
    assert [e.text_a for e in examples] == ["Ann won.", "A."]
    assert "skipped 1 row(s): fewer than 4 fields" in caplog.text
    assert "skipped 1 row(s): empty text" in caplog.text
    with open(os.path.join(data_dir, "dev.tsv"), "a", encoding="utf-8") as f:
        f.write("1\tA.\tB.\tmaybe\n")
    with pytest.raises(DataError, match=r"dev.tsv:3 \(column -1\): label 'maybe' is not one "
                                        r"of entailment, not_entailment \(GLUE rte\)"):
        glue.read_glue_tsv(task, data_dir, "dev")
    with open(os.path.join(data_dir, "test.tsv"), "a", encoding="utf-8") as f:
        f.write("1\tno second text\n")
    with pytest.raises(DataError, match=r"test.tsv:3: 2 tab-separated fields, expected at "
                                        r"least 3"):
        glue.read_glue_tsv(task, data_dir, "test")
    with pytest.raises(DataError, match=r"no such file \(the dev split of GLUE rte"):
        glue.read_glue_tsv(task, str(tmp_path / "missing"), "dev")
    sts_dir = write_glue(tmp_path, "STS-B")
    with open(os.path.join(sts_dir, "dev.tsv"), "a", encoding="utf-8") as f:
        f.write("1\tg\tf\ty\t0\tn\tn\tA.\tB.\tfive\n")
    with pytest.raises(DataError, match=r"dev.tsv:3 \(column -1\): score 'five' is not a number"):
        glue.read_glue_tsv(glue.glue_task("sts-b"), sts_dir, "dev")


def _prepare_tfds(source_root, data_dir, builder_name):
    """Prepares TFDS glue/* in data_dir with the real builder, from local GLUE files: only
    the builder's download of the GLUE zip is replaced by the local directory."""
    import tensorflow_datasets as tfds

    builder = tfds.builder(builder_name, data_dir=str(data_dir))
    with mock.patch.object(tfds.download.DownloadManager, "download_and_extract",
                           lambda self, url: str(source_root)):
        builder.download_and_prepare()


def test_tfds_glue_reads_the_same_examples_as_the_tsv_files(tmp_path):
    source = tmp_path / "glue"
    write_glue(source, "MNLI")
    write_glue(source, "CoLA")
    tfds_dir = tmp_path / "tfds"
    _prepare_tfds(source, tfds_dir, "glue/mnli")
    _prepare_tfds(source, tfds_dir, "glue/cola")
    for task_name, directory in (("mnli", "MNLI"), ("mnli-mm", "MNLI"), ("cola", "CoLA")):
        task = glue.glue_task(task_name)
        for split in ("train", "dev", "test"):
            from_tsv = glue.read_glue_tsv(task, str(source / directory), split)
            from_tfds = glue.read_glue_tfds(task, str(tfds_dir), split)
            assert [_as_tuple(e) for e in from_tfds] == [_as_tuple(e) for e in from_tsv], (
                task_name, split)
    with pytest.raises(DataError, match=r"holds no prepared glue/rte .*nothing is downloaded"):
        glue.read_glue_tfds(glue.glue_task("rte"), str(tfds_dir), "train")


def _write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


def test_user_csv_tsv_jsonl(tmp_path):
    csv_path = _write(tmp_path / "train.csv",
                      'review,extra,stars\n"good, really ""good""",x,5\nbad,y,1\n  ,z,3\n')
    examples = classifier_data.read_table_examples(csv_path, text_a_column="review",
                                                   label_column="stars")
    assert [(e.guid, e.text_a, e.label) for e in examples] == [
        ("0", 'good, really "good"', "5"), ("1", "bad", "1")]
    assert examples[1].source.endswith("train.csv:3")
    tsv_path = _write(tmp_path / "pairs.tsv", "a\tb\tscore\nx y\tx z\t0.5\n")
    (example,) = classifier_data.read_table_examples(
        tsv_path, text_a_column="a", text_b_column="b", label_column="score",
        is_regression=True)
    assert (example.text_a, example.text_b, example.label) == ("x y", "x z", 0.5)
    jsonl_path = _write(tmp_path / "test.jsonl",
                        '{"text": "one", "label": 10}\n\n{"text": "", "label": 2}\n')
    examples = classifier_data.read_table_examples(jsonl_path, text_a_column="text",
                                                   label_column="label", require_labels=False,
                                                   keep_empty=True)
    assert [(e.guid, e.text_a, e.label) for e in examples] == [("0", "one", "10"),
                                                               ("1", "", "2")]
    assert classifier_data.infer_labels(
        [classifier_data.InputExample(str(i), "t", None, l) for i, l in
         enumerate(["10", "9", "10", "1"])]) == ["1", "9", "10"]


def test_a_carriage_return_is_kept_in_a_text_and_ends_a_line_only_without_newlines(tmp_path):
    # tf.io.gfile's line iterator drops every \r: "while\rstatement" read as one word.
    from bert_tf.data.tasks import tagging_data

    quoted = tmp_path / "quoted.csv"
    quoted.write_bytes(b'text,label\r\n"while\rstatement",a\r\nplain text,b\r\n')
    examples = classifier_data.read_table_examples(str(quoted), text_a_column="text",
                                                   label_column="label")
    assert [(e.text_a, e.source[-1]) for e in examples] == [("while\rstatement", "2"),
                                                           ("plain text", "3")]
    lines = tmp_path / "predict.txt"
    lines.write_bytes(b"one\r\ntwo\rthree\n\xc3\xa9\n")
    assert [e.text_a for e in classifier_data.read_text_lines(str(lines))] == [
        "one", "two\rthree", "\u00e9"]
    # A classic Mac file (no \n at all): its lines end at \r.
    mac = tmp_path / "mac.csv"
    mac.write_bytes(b"text,label\rhello there,a\rworld peace,b\r")
    assert [(e.text_a, e.label) for e in classifier_data.read_table_examples(
        str(mac), text_a_column="text", label_column="label")] == [("hello there", "a"),
                                                                   ("world peace", "b")]
    conll = tmp_path / "mac.conll"
    conll.write_bytes(b"EU B-ORG\rrejects O\r\rPeter B-PER\r")
    assert [s.words for s in tagging_data.read_conll(str(conll))] == [("EU", "rejects"),
                                                                     ("Peter",)]
    # A TSV cannot quote one: a space (GLUE's files read so before, tf.io.gfile dropping it).
    bare_tsv = tmp_path / "bare.tsv"
    bare_tsv.write_bytes(b"text\tlabel\r\nwhile\rstatement\ta\r\n")
    assert [(e.text_a, e.label) for e in classifier_data.read_table_examples(
        str(bare_tsv), text_a_column="text", label_column="label")] == [("while statement", "a")]
    # Outside a CSV's quotes the csv module cannot read one: refused naming the line.
    bare_csv = tmp_path / "bare.csv"
    bare_csv.write_bytes(b"text,label\nok,a\nwhile\rstatement,a\n")
    with pytest.raises(DataError) as error:
        classifier_data.read_table_examples(str(bare_csv), text_a_column="text",
                                            label_column="label")
    assert str(error.value) == (f"{bare_csv}:3: a carriage return (\\r) inside a field that "
                                "is not quoted: quote the field or remove it")
    # predictions.tsv quotes it: a reader gets the text back in one row.
    examples = classifier_data.read_table_examples(str(quoted), text_a_column="text",
                                                   label_column="label")
    text = classifier_data.predictions_text(examples, ["a", "b"], [0.75, 0.5])
    (tmp_path / "predictions.tsv").write_text(text, encoding="utf-8", newline="")
    with open(tmp_path / "predictions.tsv", encoding="utf-8", newline="") as f:
        assert list(csv.reader(f, delimiter="\t")) == [
            ["index", "text", "prediction", "score"], ["0", "while\rstatement", "a", "0.750000"],
            ["1", "plain text", "b", "0.500000"]]


def test_user_file_errors_name_file_line_and_column(tmp_path):
    path = _write(tmp_path / "d.csv", "text,label\nfine,pos\n")
    with pytest.raises(DataError, match=r"d.csv:2 \(column 'sentence'\): no such column; this "
                                        r"row has text, label"):
        classifier_data.read_table_examples(path, text_a_column="sentence", label_column="label")
    with pytest.raises(DataError, match=r"d.csv:2 \(column 'label'\): regression label 'pos' "
                                        "is not a number"):
        classifier_data.read_table_examples(path, text_a_column="text", label_column="label",
                                            is_regression=True)
    bad_jsonl = _write(tmp_path / "d.jsonl", '{"text": "a", "label": "x"}\n[1, 2]\n')
    with pytest.raises(DataError, match=r"d.jsonl:2: expected a JSON object, got list"):
        classifier_data.read_table_examples(bad_jsonl, text_a_column="text",
                                            label_column="label")
    ragged = _write(tmp_path / "r.tsv", "text\tlabel\na\tb\tc\n")
    with pytest.raises(DataError, match=r"r.tsv:2: 3 fields, but the header has 2"):
        classifier_data.read_table_examples(ragged, text_a_column="text", label_column="label")
    with pytest.raises(DataError, match=r"cannot tell the format from the extension '.txt'"):
        classifier_data.read_table_examples(str(tmp_path / "x.txt"), text_a_column="a",
                                            label_column="b")
    examples = classifier_data.read_table_examples(path, text_a_column="text",
                                                   label_column="label")
    with pytest.raises(DataError, match=r"d.csv:2: label 'pos' of the dev data is not among "
                                        "the labels neg, neutral"):
        classifier_data.check_labels(examples, ["neg", "neutral"], "dev")


def test_multi_label_cells_lists_and_their_records(tmp_path):
    """--multi_label: names joined by the separator (spaces around them dropped; an empty
    cell: no label applies), JSONL lists; the label set is every name seen; records hold a
    multi-hot float32 [C] that the pipeline reads back."""
    path = _write(tmp_path / "t.csv", 'text,topics\none,"sport, politics"\ntwo,\n'
                                      "three,music\n")
    examples = classifier_data.read_table_examples(path, text_a_column="text",
                                                   label_column="topics", label_separator=",")
    assert [e.label for e in examples] == [("sport", "politics"), (), ("music",)]
    lines = _write(tmp_path / "t.jsonl", '{"text": "a", "topics": ["x", 2]}\n'
                                         '{"text": "b", "topics": "x|y"}\n'
                                         '{"text": "c", "topics": []}\n')
    examples = classifier_data.read_table_examples(lines, text_a_column="text",
                                                   label_column="topics", label_separator="|")
    assert [e.label for e in examples] == [("x", "2"), ("x", "y"), ()]
    assert classifier_data.infer_labels(examples) == ["2", "x", "y"]
    with pytest.raises(DataError, match=r"t.jsonl:1: label 'x' of the dev data is not among "
                                        "the labels 2, y"):
        classifier_data.check_labels(examples, ["2", "y"], "dev")
    twice = _write(tmp_path / "d.csv", 'text,topics\na,"x,x"\n')
    with pytest.raises(DataError, match=r"d.csv:2 \(column 'topics'\): label 'x,x' names "
                                        "'x' twice"):
        classifier_data.read_table_examples(twice, text_a_column="text", label_column="topics",
                                            label_separator=",")
    number = _write(tmp_path / "n.jsonl", '{"text": "a", "topics": 3}\n')
    with pytest.raises(DataError, match=r"n.jsonl:1 \(column 'topics'\): multi-label value 3 "
                                        "is neither label names joined by ',' nor a list"):
        classifier_data.read_table_examples(number, text_a_column="text",
                                            label_column="topics", label_separator=",")

    nested = _write(tmp_path / "l.jsonl", '{"text": "a", "topics": ["x", null]}\n')
    with pytest.raises(DataError, match=r"l.jsonl:1 \(column 'topics'\): multi-label list "
                                        r"\['x', None\] holds None; expected label names"):
        classifier_data.read_table_examples(nested, text_a_column="text",
                                            label_column="topics", label_separator=",")

    tokenizer = WordpieceTokenizer(VOCAB)
    path, meta = classifier_data.classifier_records(
        str(tmp_path / "cache"), "train", examples, tokenizer, 8, ["2", "x", "y"],
        multi_label=True)
    dataset = feature_records.records_dataset(
        path, classifier_data.classifier_spec(8, False, 3), batch_size=3, is_training=False,
        num_examples=meta["num_examples"])
    batch = next(iter(dataset))
    np.testing.assert_array_equal(batch["label_ids"].numpy(),
                                  [[1, 1, 0], [0, 1, 1], [0, 0, 0]])
    assert batch["label_ids"].dtype == tf.float32


def test_multi_label_labels_are_not_cut_to_a_length_bucket_where_c_equals_s(tmp_path):
    """Eight labels at --max_seq_length=8: label_ids [8] looks like a sequence feature, but is
    per example; records and Keras batches cut only the inputs to the bucket."""
    from bert_tf.data.tasks import length_buckets

    names = [f"l{i}" for i in range(8)]
    examples = [classifier_data.InputExample(str(i), "a b", None, (names[i], names[7]))
                for i in range(4)]
    path, meta = classifier_data.classifier_records(
        str(tmp_path), "dev", examples, WordpieceTokenizer(VOCAB), 8, names, multi_label=True)
    batch = next(iter(feature_records.records_dataset(
        path, classifier_data.classifier_spec(8, False, 8), batch_size=4, is_training=False,
        num_examples=meta["num_examples"], length_buckets=[4, 8],
        per_example=("label_ids",))))
    assert batch["input_word_ids"].shape == (4, 4) and batch["label_ids"].shape == (4, 8)
    np.testing.assert_array_equal(batch["label_ids"].numpy()[:, 7], [1, 1, 1, 1])
    ids = np.array([[2, 5, 6, 3, 0, 0, 0, 0]] * 4, np.int32)
    features = {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                "input_type_ids": np.zeros_like(ids)}
    labels = np.eye(8, dtype=np.float32)[:4]
    x, y = next(iter(length_buckets.keras_dataset(features, labels, batch_size=4,
                                                  buckets=[4, 8], cut_labels=False)))
    assert x["input_word_ids"].shape == (4, 4) and y.shape == (4, 8)


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e"]


def test_features_truncate_and_pack_pairs():
    tokenizer = WordpieceTokenizer(VOCAB)
    examples = [classifier_data.InputExample("0", "a b", "c", "y"),
                classifier_data.InputExample("1", "a b c d e", "e d c", None)]
    stats = {}
    features = list(classifier_data.classifier_features(examples, tokenizer, 8, ["x", "y"],
                                                        stats))
    assert features[0] == {"input_word_ids": [2, 5, 6, 3, 7, 3, 0, 0],
                           "input_mask": [1, 1, 1, 1, 1, 1, 0, 0],
                           "input_type_ids": [0, 0, 0, 0, 1, 1, 0, 0], "label_ids": 1}
    # 8 positions leave 5 for the pair: longest-first truncation keeps a b c | e d.
    assert features[1]["input_word_ids"] == [2, 5, 6, 7, 3, 9, 8, 3]
    assert features[1]["label_ids"] == 0 and stats == {"truncated": 1}


def test_records_cache_and_pipelines(tmp_path):
    tokenizer = WordpieceTokenizer(VOCAB)
    examples = [classifier_data.InputExample(str(i), "a b" if i % 2 else "c", None,
                                             "y" if i % 2 else "x") for i in range(5)]
    path, meta = classifier_data.classifier_records(str(tmp_path), "dev", examples, tokenizer,
                                                    6, ["x", "y"])
    assert meta == {"num_examples": 5, "truncated": 0}
    again, _ = classifier_data.classifier_records(str(tmp_path), "dev", examples, tokenizer, 6,
                                                  ["x", "y"])
    other, _ = classifier_data.classifier_records(str(tmp_path), "dev", examples, tokenizer, 7,
                                                  ["x", "y"])
    assert again == path and other != path
    spec = classifier_data.classifier_spec(6, False)
    batches = list(feature_records.records_dataset(path, spec, batch_size=4, is_training=False,
                                                   num_examples=5))
    # Nothing dropped: the last batch is filled with zero-weight padding examples.
    assert [b["input_word_ids"].shape.as_list() for b in batches] == [[4, 6], [4, 6]]
    np.testing.assert_array_equal(np.concatenate([b["example_weights"] for b in batches]),
                                  [1, 1, 1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(batches[0]["label_ids"], [0, 1, 0, 1])
    assert batches[0]["label_ids"].dtype == tf.int32
    train = feature_records.records_dataset(path, spec, batch_size=2, is_training=True, seed=0)
    assert train.element_spec["input_word_ids"].shape.as_list() == [2, 6]
    assert len(list(train.take(7))) == 7  # repeats
    with open(path[:-len(".tf_record")] + ".json") as f:
        assert json.load(f)["num_examples"] == 5


def test_a_lone_surrogate_in_a_jsonl_file_is_read_and_cached(tmp_path):
    """POOR: a "\\ud800" escape in a JSONL training line crashed the feature cache's digest
    with a raw UnicodeEncodeError."""
    lines = [{"text": "good film", "label": "1"}, {"text": "bad \ud800 film", "label": "0"}]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    examples = classifier_data.read_table_examples(str(path), text_a_column="text",
                                                   label_column="label")
    assert any("\ud800" in e.text_a for e in examples)
    digest = classifier_data.examples_digest(examples)
    assert len(digest) == 64
    assert digest != classifier_data.examples_digest(examples[:1])
