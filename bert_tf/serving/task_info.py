"""task_info.json: what a fine-tuned model needs at serving time, written next to model.keras.

The fine-tuning CLIs (run_classifier, run_squad, run_tagging) write it with `write_task_info`;
`bert-tf-export` reads it with `read_task_info` to build the text signatures.

Schema (a JSON object):

  task               "classification" | "multi_label" | "regression" | "squad" | "tagging" |
                     "sentence_embedding" (bert-tf-embed) | "fill_mask" (a
                     pre-trained model saved by bert_tf.tasks.FillMask)          (required)
  do_lower_case      bool, the tokenizer's casing                                (required)
  max_seq_length     int >= 3, the sequence length the model was trained with   (required)
  labels             list of distinct non-empty str, the class (tagging: tag) names in
                     logit order; required, with >= 2 entries, for classification,
                     multi_label and tagging, absent (or empty) otherwise
  text_pair          bool, classification/multi_label/regression only: the model reads
                     sentence pairs
                     (the text signature then has a `text_pair` input)                (optional)
  max_query_length   int >= 1, squad: question tokens kept                           (optional)
  max_answer_length  int >= 1, squad: longest answer in tokens                       (optional)
  doc_stride         int >= 1, squad: the training windows' stride                   (optional)
  version_2_with_negative  bool, squad: questions may have no answer (SQuAD 2.0)     (optional)
  null_score_diff_threshold  finite number, squad v2.0: answer "" when the null score beats
                     the best span by more                                           (optional)
  n_best_size        int >= 1, squad: candidates per window and n-best answers kept (optional)
  label_separator    non-empty str, multi_label: what joins a row's label names in the
                     training files (its predictions.tsv; bert-tf-export --eval_file)   (optional)
  multi_label_threshold  number in (0, 1), multi_label: a label applies where its
                     probability is above it (absent: 0.5)                            (optional)

Other fields are kept in `TaskInfo.extra` and otherwise ignored, so a newer writer's file
still reads.
"""

import dataclasses
import json
import math
import numbers
import os

from bert_tf import file_names, fileio
from bert_tf.fileio import write_text_atomic

TASK_INFO_FILE = file_names.TASK_INFO_FILE
TASKS = ("classification", "multi_label", "regression", "squad", "tagging", "sentence_embedding",
         "fill_mask")
# The tasks of a BertClassifier: sentence (pair) inputs, a head on the pooled [CLS] vector.
CLASSIFIER_TASKS = ("classification", "multi_label", "regression")
_LABELED_TASKS = ("classification", "multi_label", "tagging")
_OPTIONAL_BOOLS = {"text_pair": CLASSIFIER_TASKS,
                   "version_2_with_negative": ("squad",)}
_OPTIONAL_INTS = {"max_query_length": ("squad",), "max_answer_length": ("squad",),
                  "doc_stride": ("squad",), "n_best_size": ("squad",)}
_OPTIONAL_FLOATS = {"null_score_diff_threshold": ("squad",),
                    "multi_label_threshold": ("multi_label",)}
_OPTIONAL_STRS = {"label_separator": ("multi_label",)}
_OPTIONAL = {**_OPTIONAL_BOOLS, **_OPTIONAL_INTS, **_OPTIONAL_FLOATS, **_OPTIONAL_STRS}


class TaskInfoError(ValueError):
    """A task_info.json (or write_task_info argument) that does not follow the schema."""


@dataclasses.dataclass(frozen=True)
class TaskInfo:
    """The contents of a task_info.json; see the module docstring for the fields."""

    task: str
    do_lower_case: bool
    max_seq_length: int
    labels: tuple = ()
    text_pair: bool = None
    max_query_length: int = None
    max_answer_length: int = None
    doc_stride: int = None
    version_2_with_negative: bool = None
    null_score_diff_threshold: float = None
    n_best_size: int = None
    label_separator: str = None
    multi_label_threshold: float = None
    extra: dict = dataclasses.field(default_factory=dict)

    def to_dict(self):
        """The JSON object: required fields, labels when there are any, set optional fields."""
        values = {"task": self.task, "do_lower_case": self.do_lower_case,
                  "max_seq_length": self.max_seq_length}
        if self.labels:
            values["labels"] = list(self.labels)
        for name in _OPTIONAL:
            if getattr(self, name) is not None:
                values[name] = getattr(self, name)
        values.update(self.extra)
        return values


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value):
    """Whether `value` is a real number (an int or float, NumPy's included; not a bool) other
    than nan and +-inf: the one finite rule of task_info.json and bert_tf.tasks' settings."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


# A multi-label model's labels apply where their probability is above this, unless the run (its
# --multi_label_threshold) or the task says otherwise.
DEFAULT_MULTI_LABEL_THRESHOLD = 0.5


def multi_label_threshold_problem(value):
    """What is wrong with a multi-label threshold (a number strictly between 0 and 1), or None:
    the one rule of --multi_label_threshold, task_info.json and TextClassifier."""
    if not is_finite_number(value) or not 0.0 < value < 1.0:
        return f"{value!r} must be a number in (0, 1) (a probability a label must exceed)"
    return None


def threshold_logit(threshold):
    """The logit above which a sigmoid output exceeds probability `threshold` (0 for 0.5):
    multi-label decisions compare logits, so 0.5 decides exactly as `logit > 0`."""
    threshold = float(threshold)
    return math.log(threshold) - math.log1p(-threshold)


def label_names_problem(labels):
    """What is wrong with a list of label names (each a non-empty str, none repeated), or None:
    the one rule of task_info.json's labels and of bert_tf.tasks' label lists."""
    bad = [label for label in labels if not isinstance(label, str) or not label]
    if bad:
        return f"labels must be non-empty strings, got {bad[0]!r}"
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        return f"labels repeat {', '.join(repeated)}"
    return None


def _validated(values, source):
    """Checks a dict of task_info fields and returns the TaskInfo; errors name `source`."""
    if not isinstance(values, dict):
        raise TaskInfoError(f"{source}: expected a JSON object, got {type(values).__name__}")
    missing = [k for k in ("task", "do_lower_case", "max_seq_length") if k not in values]
    if missing:
        raise TaskInfoError(f"{source}: missing field(s) {', '.join(missing)}")
    task = values["task"]
    if task not in TASKS:
        raise TaskInfoError(f"{source}: task={task!r} is not one of {', '.join(TASKS)}")
    if not isinstance(values["do_lower_case"], bool):
        raise TaskInfoError(f"{source}: do_lower_case={values['do_lower_case']!r} must be "
                            "true or false")
    if not _is_int(values["max_seq_length"]) or values["max_seq_length"] < 3:
        raise TaskInfoError(f"{source}: max_seq_length={values['max_seq_length']!r} must be an "
                            "integer >= 3")
    labels = values.get("labels") or []
    if not isinstance(labels, (list, tuple)):
        raise TaskInfoError(f"{source}: labels must be a list of strings, got "
                            f"{type(labels).__name__}")
    if task in _LABELED_TASKS:
        if len(labels) < 2:
            raise TaskInfoError(f"{source}: task={task!r} needs labels, a list of at least 2 "
                                f"names in logit order; got {list(labels)!r}")
        problem = label_names_problem(labels)
        if problem:
            raise TaskInfoError(f"{source}: {problem}")
    elif labels:
        raise TaskInfoError(f"{source}: task={task!r} has no labels, got {list(labels)!r}")
    optional = {}
    for name, tasks in _OPTIONAL.items():
        value = values.get(name)
        if value is None:
            continue
        if task not in tasks:
            named = " or ".join([", ".join(tasks[:-1]), tasks[-1]] if len(tasks) > 1 else tasks)
            raise TaskInfoError(f"{source}: {name} applies to task {named}, not {task!r}")
        if name in _OPTIONAL_BOOLS and not isinstance(value, bool):
            raise TaskInfoError(f"{source}: {name}={value!r} must be true or false")
        if name in _OPTIONAL_INTS and (not _is_int(value) or value < 1):
            raise TaskInfoError(f"{source}: {name}={value!r} must be an integer >= 1")
        if name in _OPTIONAL_FLOATS:
            if not is_finite_number(value):
                raise TaskInfoError(f"{source}: {name}={value!r} must be a finite number")
            if name == "multi_label_threshold" and (
                    problem := multi_label_threshold_problem(value)):
                raise TaskInfoError(f"{source}: {name}={problem}")
            value = float(value)  # a NumPy scalar as JSON writes it
        if name in _OPTIONAL_STRS and not (isinstance(value, str) and value):
            raise TaskInfoError(f"{source}: {name}={value!r} must be a non-empty string")
        optional[name] = value
    known = {"task", "do_lower_case", "max_seq_length", "labels", *_OPTIONAL}
    extra = {k: v for k, v in values.items() if k not in known}
    return TaskInfo(task=task, do_lower_case=values["do_lower_case"],
                    max_seq_length=values["max_seq_length"], labels=tuple(labels),
                    extra=extra, **optional)


def write_task_info(output_dir, task, *, do_lower_case, max_seq_length, labels=None,
                    **optional):
    """Writes output_dir/task_info.json atomically after checking it against the schema.

    Args:
      output_dir: an existing directory (the run's --output_dir).
      task: "classification", "multi_label", "regression", "squad" or "tagging".
      do_lower_case: the --do_lower_case the model was trained with.
      max_seq_length: the --max_seq_length the model was trained with.
      labels: class or tag names in logit order (classification and tagging).
      **optional: text_pair, max_query_length, max_answer_length, doc_stride,
        version_2_with_negative, null_score_diff_threshold, n_best_size, label_separator,
        multi_label_threshold (see the module docstring); None values are left out.

    Returns:
      The path written.

    Raises:
      TaskInfoError: naming the argument that does not fit the schema.
    """
    unknown = sorted(set(optional) - set(_OPTIONAL))
    if unknown:
        raise TaskInfoError(f"write_task_info: unknown field(s) {', '.join(unknown)}")
    values = {"task": task, "do_lower_case": do_lower_case, "max_seq_length": max_seq_length,
              "labels": list(labels) if labels else []}
    values.update({k: v for k, v in optional.items() if v is not None})
    info = _validated(values, "write_task_info")
    path = os.path.join(output_dir, TASK_INFO_FILE)
    write_text_atomic(path, json.dumps(info.to_dict(), indent=2, sort_keys=True) + "\n")
    return path


def read_task_info(path):
    """Reads and checks a task_info.json.

    Args:
      path: the file, or the directory that holds task_info.json.

    Returns:
      A `TaskInfo`.

    Raises:
      FileNotFoundError: no such file.
      TaskInfoError: not JSON, or not the schema (the message names the file and the field).
    """
    if fileio.isdir(path):
        path = os.path.join(path, TASK_INFO_FILE)
    if not fileio.isfile(path):
        raise FileNotFoundError(f"{path}: no such task_info file")
    with fileio.open_file(path, encoding="utf-8") as f:
        try:
            values = json.load(f)
        except json.JSONDecodeError as e:
            raise TaskInfoError(f"{path}: not valid JSON ({e})") from None
    return _validated(values, path)
