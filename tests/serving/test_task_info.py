"""Tests for task_info.json: the writer the fine-tuning CLIs use and the reader the export uses."""

import json
import os

import pytest

from bert_tf.serving import TaskInfo, TaskInfoError, read_task_info, write_task_info


def test_round_trip_of_every_task(tmp_path):
    cases = [
        dict(task="classification", do_lower_case=True, max_seq_length=128,
             labels=["entailment", "neutral", "contradiction"], text_pair=True),
        dict(task="regression", do_lower_case=False, max_seq_length=64),
        dict(task="squad", do_lower_case=True, max_seq_length=384, max_query_length=64,
             max_answer_length=30, doc_stride=128, version_2_with_negative=True,
             null_score_diff_threshold=-1.25, n_best_size=5),
        dict(task="tagging", do_lower_case=False, max_seq_length=128,
             labels=["O", "B-PER", "I-PER"]),
        dict(task="multi_label", do_lower_case=True, max_seq_length=64,
             labels=["sports", "politics"], text_pair=False, label_separator="|",
             multi_label_threshold=0.35),
    ]
    for values in cases:
        directory = tmp_path / values["task"]
        directory.mkdir()
        path = write_task_info(str(directory), **values)
        assert path == str(directory / "task_info.json")
        with open(path, encoding="utf-8") as f:
            written = json.load(f)
        assert written == values
        info = read_task_info(str(directory))  # The directory or the file.
        assert info == read_task_info(path)
        assert info.task == values["task"] and info.labels == tuple(values.get("labels", ()))
        assert info.to_dict() == values


def test_reader_keeps_unknown_fields_and_reads_what_run_squad_writes(tmp_path):
    path = tmp_path / "task_info.json"
    path.write_text(json.dumps({"task": "squad", "do_lower_case": True, "max_seq_length": 384,
                                "doc_stride": 128, "max_query_length": 64,
                                "max_answer_length": 30, "version_2_with_negative": False,
                                "note": "from a newer writer"}))
    info = read_task_info(str(path))
    assert info == TaskInfo(task="squad", do_lower_case=True, max_seq_length=384,
                            doc_stride=128, max_query_length=64, max_answer_length=30,
                            version_2_with_negative=False, extra={"note": "from a newer writer"})


@pytest.mark.parametrize("values, message", [
    ({"do_lower_case": True, "max_seq_length": 8}, "missing field(s) task"),
    ({"task": "ner", "do_lower_case": True, "max_seq_length": 8},
     "task='ner' is not one of classification, multi_label, regression, squad, tagging, "
     "sentence_embedding, fill_mask"),
    ({"task": "regression", "do_lower_case": "yes", "max_seq_length": 8},
     "do_lower_case='yes' must be true or false"),
    ({"task": "regression", "do_lower_case": True, "max_seq_length": 2},
     "max_seq_length=2 must be an integer >= 3"),
    ({"task": "classification", "do_lower_case": True, "max_seq_length": 8},
     "task='classification' needs labels, a list of at least 2 names in logit order; got []"),
    ({"task": "tagging", "do_lower_case": True, "max_seq_length": 8, "labels": ["O", "O"]},
     "labels repeat O"),
    ({"task": "tagging", "do_lower_case": True, "max_seq_length": 8, "labels": ["O", ""]},
     "labels must be non-empty strings, got ''"),
    ({"task": "squad", "do_lower_case": True, "max_seq_length": 8, "labels": ["a", "b"]},
     "task='squad' has no labels, got ['a', 'b']"),
    ({"task": "squad", "do_lower_case": True, "max_seq_length": 8, "text_pair": True},
     "text_pair applies to task classification, multi_label or regression, not 'squad'"),
    ({"task": "squad", "do_lower_case": True, "max_seq_length": 8, "max_query_length": 0},
     "max_query_length=0 must be an integer >= 1"),
    ({"task": "squad", "do_lower_case": True, "max_seq_length": 8,
      "null_score_diff_threshold": "1.5"}, "null_score_diff_threshold='1.5' must be a finite "
     "number"),
    ({"task": "multi_label", "do_lower_case": True, "max_seq_length": 8, "labels": ["a", "b"],
      "label_separator": ""}, "label_separator='' must be a non-empty string"),
    ({"task": "classification", "do_lower_case": True, "max_seq_length": 8,
      "labels": ["a", "b"], "label_separator": ","},
     "label_separator applies to task multi_label, not 'classification'"),
    ({"task": "multi_label", "do_lower_case": True, "max_seq_length": 8, "labels": ["a", "b"],
      "multi_label_threshold": 1}, "multi_label_threshold=1 must be a number in (0, 1) (a "
     "probability a label must exceed)"),
    ({"task": "classification", "do_lower_case": True, "max_seq_length": 8,
      "labels": ["a", "b"], "multi_label_threshold": 0.5},
     "multi_label_threshold applies to task multi_label, not 'classification'"),
])
def test_reader_names_the_file_and_the_field(tmp_path, values, message):
    path = tmp_path / "task_info.json"
    path.write_text(json.dumps(values))
    with pytest.raises(TaskInfoError) as error:
        read_task_info(str(path))
    assert str(error.value) == f"{path}: {message}"


def test_writer_checks_before_writing(tmp_path):
    with pytest.raises(TaskInfoError, match=r"^write_task_info: task='tagging' needs labels"):
        write_task_info(str(tmp_path), "tagging", do_lower_case=True, max_seq_length=128)
    with pytest.raises(TaskInfoError, match=r"^write_task_info: unknown field\(s\) num_labels$"):
        write_task_info(str(tmp_path), "regression", do_lower_case=True, max_seq_length=128,
                        num_labels=1)
    assert os.listdir(tmp_path) == []


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="task_info.json: no such task_info file"):
        read_task_info(str(tmp_path))
    (tmp_path / "task_info.json").write_text("{not json")
    with pytest.raises(TaskInfoError, match=r"task_info.json: not valid JSON \("):
        read_task_info(str(tmp_path))
    (tmp_path / "task_info.json").write_text("[1, 2]")
    with pytest.raises(TaskInfoError, match="task_info.json: expected a JSON object, got list"):
        read_task_info(str(tmp_path))
