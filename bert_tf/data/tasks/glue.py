"""The GLUE tasks: their TSV files as GLUE ships them, the same data through TFDS, submissions.

`--task_name` values: cola, sst-2, mrpc, sts-b, qqp, mnli (dev_matched / test_matched),
mnli-mm (dev_mismatched / test_mismatched), qnli, rte, wnli. Every task's train/dev files and
its test file differ in layout (the test file has an index column first and no label; CoLA's
train/dev files have no header), so each task lists the columns of both, by position as the
files are tab-separated without quoting. Label names are those of the TSV files and of the
GLUE submission format ("0"/"1" for the binary tasks, words for the NLI tasks); the TFDS
`glue/*` builders' integer labels are mapped onto the same names.

Malformed rows (fewer fields than the layout needs) and rows with an empty text are skipped
and counted in training and dev files; in test files every row must be predicted, so a
malformed row is an error and an empty text is kept.
"""

import csv
import dataclasses
import os

from absl import logging

from bert_tf import fileio, optional
from bert_tf.data.tasks.classifier_data import InputExample, SkipCounter, label_string
from bert_tf.data.tasks.task_errors import (DataError, decoded_lines, next_row, tsv_lines,
                                             where)

SPLITS = ("train", "dev", "test")


@dataclasses.dataclass(frozen=True)
class Layout:
    """Column positions of a GLUE TSV file (label -1 = the last column)."""

    text_a: int
    text_b: int | None
    label: int | None = None
    index: int | None = None
    header: bool = True


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task: its files, columns, labels (None: regression) and TFDS builder."""

    name: str
    labels: tuple | None
    submission_name: str
    labelled: Layout
    test: Layout
    tfds_name: str
    tfds_text: tuple
    files: tuple = ("train.tsv", "dev.tsv", "test.tsv")
    tfds_splits: tuple = ("train", "validation", "test")

    @property
    def is_regression(self):
        return self.labels is None

    def file_name(self, split):
        return self.files[SPLITS.index(split)]

    def tfds_split(self, split):
        return self.tfds_splits[SPLITS.index(split)]


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")
_MNLI = ("contradiction", "entailment", "neutral")
_PAIR = dict(labelled=Layout(1, 2, label=-1), test=Layout(1, 2, index=0))

GLUE_TASKS = {task.name: task for task in (
    GlueTask("cola", _BINARY, "CoLA", Layout(3, None, label=1, header=False),
             Layout(1, None, index=0), "glue/cola", ("sentence", None)),
    GlueTask("sst-2", _BINARY, "SST-2", Layout(0, None, label=1), Layout(1, None, index=0),
             "glue/sst2", ("sentence", None)),
    GlueTask("mrpc", _BINARY, "MRPC", Layout(3, 4, label=0), Layout(3, 4, index=0),
             "glue/mrpc", ("sentence1", "sentence2")),
    GlueTask("sts-b", None, "STS-B", Layout(7, 8, label=-1), Layout(7, 8, index=0),
             "glue/stsb", ("sentence1", "sentence2")),
    GlueTask("qqp", _BINARY, "QQP", Layout(3, 4, label=5), Layout(1, 2, index=0),
             "glue/qqp", ("question1", "question2")),
    GlueTask("mnli", _MNLI, "MNLI-m", Layout(8, 9, label=-1), Layout(8, 9, index=0),
             "glue/mnli", ("premise", "hypothesis"),
             files=("train.tsv", "dev_matched.tsv", "test_matched.tsv"),
             tfds_splits=("train", "validation_matched", "test_matched")),
    GlueTask("mnli-mm", _MNLI, "MNLI-mm", Layout(8, 9, label=-1), Layout(8, 9, index=0),
             "glue/mnli", ("premise", "hypothesis"),
             files=("train.tsv", "dev_mismatched.tsv", "test_mismatched.tsv"),
             tfds_splits=("train", "validation_mismatched", "test_mismatched")),
    GlueTask("qnli", _NLI2, "QNLI", tfds_name="glue/qnli", tfds_text=("question", "sentence"),
             **_PAIR),
    GlueTask("rte", _NLI2, "RTE", tfds_name="glue/rte", tfds_text=("sentence1", "sentence2"),
             **_PAIR),
    GlueTask("wnli", _BINARY, "WNLI", tfds_name="glue/wnli",
             tfds_text=("sentence1", "sentence2"), **_PAIR),
)}

_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "mnli-m": "mnli", "mnli_matched": "mnli",
            "mnli_mismatched": "mnli-mm"}


def glue_task(name):
    """The GlueTask of a --task_name (case-insensitive; sst2, stsb, mnli-m also accepted), or
    None for a name that is not a GLUE task."""
    key = name.lower()
    return GLUE_TASKS.get(_ALIASES.get(key, key))


def _row_fields_needed(layout):
    columns = [c for c in (layout.text_a, layout.text_b, layout.label, layout.index)
               if c is not None and c >= 0]
    needed = max(columns) + 1
    # A label in the last column comes after every other column read.
    return needed + 1 if layout.label == -1 else needed


def read_glue_tsv(task, data_dir, split):
    """Examples of one split from the task's TSV file in `data_dir`.

    Args:
      task: a GlueTask.
      data_dir: the directory GLUE's download unpacks for the task (train.tsv, dev.tsv, ...).
      split: "train", "dev" or "test".

    Returns:
      list of InputExample; test examples have guid = the file's index column and no label.

    Raises:
      DataError: missing file, unknown label, non-numeric STS-B score, malformed test row, a
        line that is not UTF-8.
    """
    path = os.path.join(data_dir, task.file_name(split))
    if not fileio.exists(path):
        raise DataError(f"{path}: no such file (the {split} split of GLUE {task.name} in "
                        f"--data_dir={data_dir})")
    is_test = split == "test"
    layout = task.test if is_test else task.labelled
    needed = _row_fields_needed(layout)
    skips = SkipCounter(path)
    examples = []
    with fileio.open_file(path, "rb") as f:
        reader = csv.reader(tsv_lines(decoded_lines(f, path)), delimiter="\t",
                            quoting=csv.QUOTE_NONE)
        for row in iter(lambda: next_row(reader, path), None):
            number = reader.line_num
            if layout.header and number == 1:
                continue
            if len(row) < needed:
                if is_test:
                    raise DataError(f"{where(path, number)}: {len(row)} tab-separated fields, "
                                    f"expected at least {needed}")
                skips.skip(f"fewer than {needed} fields", where(path, number))
                continue
            text_a = row[layout.text_a]
            text_b = row[layout.text_b] if layout.text_b is not None else None
            if not is_test and (not text_a.strip() or (text_b is not None
                                                        and not text_b.strip())):
                skips.skip("empty text", where(path, number))
                continue
            label = None
            if not is_test:
                label = _glue_label(task, row[layout.label], path, number, layout.label)
            guid = row[layout.index] if is_test else f"{split}-{len(examples)}"
            examples.append(InputExample(guid, text_a, text_b, label, where(path, number)))
    skips.log_summary()
    return examples


def _glue_label(task, value, path, number, column):
    if task.is_regression:
        try:
            return float(value)
        except ValueError:
            raise DataError(f"{where(path, number, column)}: score {value!r} is not a "
                            "number") from None
    if value not in task.labels:
        raise DataError(f"{where(path, number, column)}: label {value!r} is not one of "
                        f"{', '.join(task.labels)} (GLUE {task.name})")
    return value


def read_glue_tfds(task, tfds_data_dir, split):
    """Examples of one split of the TFDS `glue/*` builder prepared in `tfds_data_dir`.

    Nothing is downloaded: the builder must have been prepared there before (e.g. with
    `tfds build glue/cola --data_dir=...` on a machine with network access).

    Returns:
      list of InputExample in the order of the builder's `idx` (the GLUE file order), with
      the same label names and test guids as read_glue_tsv.
    """
    tfds = optional.require("tensorflow_datasets")

    name = f"{task.tfds_name}:{task.tfds_split(split)}"
    try:
        builder = tfds.builder(task.tfds_name, data_dir=tfds_data_dir)
        if not builder.is_prepared():
            raise DataError(f"--tfds_data_dir={tfds_data_dir} holds no prepared "
                            f"{task.tfds_name} (expected {builder.data_dir}); prepare it "
                            "there first, nothing is downloaded")
        dataset = builder.as_dataset(split=task.tfds_split(split), shuffle_files=False)
    except (tfds.core.registered.DatasetNotFoundError, ValueError, AssertionError) as e:
        if isinstance(e, DataError):
            raise
        raise DataError(f"{name} in --tfds_data_dir={tfds_data_dir}: {e}") from None
    label_names = (None if task.is_regression
                   else builder.info.features["label"].names)
    text_a_key, text_b_key = task.tfds_text
    rows = sorted(tfds.as_numpy(dataset), key=lambda row: int(row["idx"]))
    is_test = split == "test"
    examples = []
    for row in rows:
        idx = int(row["idx"])
        text_a = row[text_a_key].decode("utf-8")
        text_b = row[text_b_key].decode("utf-8") if text_b_key else None
        label = None
        if not is_test:
            label = _tfds_label(task, row["label"], label_names)
        guid = str(idx) if is_test else f"{split}-{idx}"
        examples.append(InputExample(guid, text_a, text_b, label, f"{name} idx {idx}"))
    logging.info("Read %d examples of %s from %s", len(examples), name, tfds_data_dir)
    return examples


def _tfds_label(task, value, label_names):
    if task.is_regression:
        return float(value)
    name = label_names[int(value)]
    # The binary tasks' TSV labels are the class indices ("1" = acceptable, paraphrase, ...).
    return label_string(int(value)) if task.labels == _BINARY else name


def submission_text(examples, predictions):
    """A GLUE submission file: header 'index<TAB>prediction', then each example's test index
    and its prediction (a label name, or a score for STS-B), in file order."""
    lines = ["index\tprediction"]
    lines += [f"{example.guid}\t{prediction}" for example, prediction in zip(examples, predictions)]
    return "\n".join(lines) + "\n"
