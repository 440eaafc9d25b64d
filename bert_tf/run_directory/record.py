"""The run record (RunRecord in bert_tf_run.json): what a resume must share with the run.

Written by every job that trains (write_record). Runs written before it (bert_tf 0.1) are read
through one legacy reader: their finetuning_run.json, task_info.json or run_pretraining.flags
(an absl flagfile) become the same RunRecord. `recorded_casing` is the one reader of the casing
a run tokenized with.
"""

import dataclasses
import json
import os

from bert_tf import fileio
from bert_tf.config import ConfigError, EncoderConfig
from bert_tf.file_names import (CONFIG_FILE, EMBEDDING_COMMAND, EMBEDDING_TASK,
                                LEGACY_FINETUNING_RECORD, PRETRAINING_COMMAND,
                                PRETRAINING_FLAGS_FILE, RECORD_FILE, TASK_INFO_FILE, path)
from bert_tf.run_directory.errors import RunDirectoryError

RECORD_FORMAT = 1
JOBS = ("pretraining", "finetuning", "embedding")


@dataclasses.dataclass
class RunRecord:
    """What a training run is, as far as a resume must share it: bert_tf_run.json.

    Attributes:
      job: "pretraining", "finetuning" or "embedding".
      command: the command that trains it ("run_pretraining", "run_classifier", "run_squad",
        "run_tagging", "bert-tf-embed"); None when a legacy file does not say.
      model_config: the model config (EncoderConfig.to_dict(): the bert_config.json fields).
      tokenizer_sha256: hex SHA-256 of what the tokenizer's ids depend on
        (the Tokenizer's digest()).
      do_lower_case: the casing the run tokenized with; None: not known (pre-training records
        made by create_pretraining_data with no --do_lower_case given to the run).
      task, labels: a fine-tuning run's task ("sst-2", "tagging", "squad") and its label
        names in logit order (None: no label set).
      settings: the other flags that shape the checkpoints, by flag name: sequence length,
        batch size, objectives, pooling, optimizer, ... (each job says which).
      init_checkpoint: what the run started from (not compared: a resume reads the run's own
        checkpoints).
      source: the file the record was read from (not written).
      accepts_file_sha256: a finetuning_run.json written before token digests may hold the
        tokenizer file's own SHA-256 (not written).
    """

    job: str
    command: str | None = None
    model_config: dict | None = None
    tokenizer_sha256: str | None = None
    do_lower_case: bool | None = None
    task: str | None = None
    labels: list | None = None
    settings: dict = dataclasses.field(default_factory=dict)
    init_checkpoint: str | None = None
    source: str | None = dataclasses.field(default=None, compare=False)
    accepts_file_sha256: bool = dataclasses.field(default=False, compare=False)

    def to_dict(self):
        """The JSON object of bert_tf_run.json (as read back: lists, not tuples)."""
        values = {"format": RECORD_FORMAT, "job": self.job, "command": self.command,
                  "model_config": self.model_config, "tokenizer_sha256": self.tokenizer_sha256,
                  "do_lower_case": self.do_lower_case, "task": self.task,
                  "labels": None if self.labels is None else list(self.labels),
                  "settings": dict(self.settings), "init_checkpoint": self.init_checkpoint}
        return json.loads(json.dumps(values))

    @classmethod
    def from_dict(cls, values, source):
        """The record of a bert_tf_run.json object; raises RunDirectoryError naming `source`."""
        if not isinstance(values, dict) or values.get("job") not in JOBS:
            raise RunDirectoryError(f"{source}: not a bert_tf run record (expected a JSON "
                                    f"object with job one of {', '.join(JOBS)})")
        version = values.get("format", RECORD_FORMAT)
        if not isinstance(version, int) or version > RECORD_FORMAT:
            raise RunDirectoryError(f"{source}: format={version!r} was written by a newer "
                                    "bert_tf (or is not a format number); upgrade to read "
                                    "this run")
        settings = values.get("settings") or {}
        if not isinstance(settings, dict):
            raise RunDirectoryError(f"{source}: settings must be a JSON object")
        return cls(job=values["job"], command=values.get("command"),
                   model_config=values.get("model_config"),
                   tokenizer_sha256=values.get("tokenizer_sha256"),
                   do_lower_case=values.get("do_lower_case"), task=values.get("task"),
                   labels=values.get("labels"), settings=settings,
                   init_checkpoint=values.get("init_checkpoint"), source=source)


def write_record(directory, record):
    """Writes `record` to <directory>/bert_tf_run.json atomically; returns the path."""
    record_path = path(directory, RECORD_FILE)
    fileio.write_text_atomic(record_path,
                             json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n")
    return record_path


def _read_json(json_path):
    try:
        with fileio.open_file(json_path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise RunDirectoryError(f"{json_path}: not valid JSON ({e})") from None


def read_record(directory):
    """The RunRecord of a run directory, or None when it holds none.

    bert_tf_run.json, else what a run of bert_tf 0.1 recorded (the legacy reader):
    finetuning_run.json (a fine-tuning run that trained), task_info.json (a fine-tuning or
    embedding run), run_pretraining.flags (with bert_config.json and the tokenizer file
    beside it).

    Raises:
      RunDirectoryError: a record that cannot be read, naming the file.
    """
    directory = str(directory)
    record_path = path(directory, RECORD_FILE)
    if fileio.isfile(record_path):
        return RunRecord.from_dict(_read_json(record_path), record_path)
    return _read_legacy_record(directory)


def _read_legacy_record(directory):
    legacy = path(directory, LEGACY_FINETUNING_RECORD)
    if fileio.isfile(legacy):
        values = _read_json(legacy)
        if not isinstance(values, dict):
            raise RunDirectoryError(f"{legacy}: expected a JSON object")
        # Fields a record lacks (train_batch_size came later) are not compared.
        settings = {name: values[name] for name in
                    ("max_seq_length", "trainable_encoder", "optimizer", "train_batch_size")
                    if name in values}
        return RunRecord(job="finetuning", command=values.get("cli"),
                         model_config=values.get("bert_config"),
                         tokenizer_sha256=values.get("vocab_sha256"),
                         do_lower_case=values.get("do_lower_case"), task=values.get("task"),
                         labels=values.get("labels"), settings=settings, source=legacy,
                         accepts_file_sha256=True)
    info_path = path(directory, TASK_INFO_FILE)
    if fileio.isfile(info_path):
        values = _read_json(info_path)
        if not isinstance(values, dict):
            raise RunDirectoryError(f"{info_path}: expected a JSON object")
        embedding = values.get("task") == EMBEDDING_TASK
        casing = values.get("do_lower_case")
        return RunRecord(job="embedding" if embedding else "finetuning",
                         command=EMBEDDING_COMMAND if embedding else None,
                         do_lower_case=casing if isinstance(casing, bool) else None,
                         settings={"max_seq_length": values["max_seq_length"]}
                         if "max_seq_length" in values else {},
                         source=info_path)
    flags_path = path(directory, PRETRAINING_FLAGS_FILE)
    if fileio.isfile(flags_path):
        return _read_pretraining_flags(directory, flags_path)
    return None


def read_flagfile(flagfile, names):
    """The values of `names` in an absl flagfile (one --flag=value per line).

    Booleans may be written --flag, --noflag or --flag=true/false; the last occurrence wins.

    Returns:
      {name: str}: the names present, booleans as "true" / "false".
    """
    values = {}
    with fileio.open_file(flagfile, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("--"):
                continue
            name, has_value, value = line[2:].partition("=")
            if name in names:
                values[name] = value if has_value else "true"
            elif not has_value and name.startswith("no") and name[2:] in names:
                values[name[2:]] = "false"
    return values


def _flag_bool(flagfile, name, text):
    lowered = text.lower()
    if lowered not in ("true", "false", "1", "0"):
        raise RunDirectoryError(f"{flagfile}: --{name}={text} is not a boolean")
    return lowered in ("true", "1")


def _flag_int(flagfile, name, text):
    try:
        return int(text)
    except ValueError:
        raise RunDirectoryError(f"{flagfile}: --{name}={text} is not an integer") from None


# The flags of run_pretraining.flags a resume must share, by type.
_PRETRAINING_INTS = ("max_seq_length", "max_predictions_per_seq", "train_batch_size",
                     "gradient_accumulation_steps")
_PRETRAINING_BOOLS = ("use_next_sentence_label", "sentence_order_prediction",
                      "span_boundary_objective", "full_sentences", "pack_sequences")
_PRETRAINING_STRINGS = ("optimizer",)
_PRETRAINING_INPUTS = ("input_file", "input_text_file", "input_tfds")


def _read_pretraining_flags(directory, flagfile):
    """The RunRecord of a pre-training run of bert_tf 0.1: its flagfile, bert_config.json and
    tokenizer file."""
    values = read_flagfile(flagfile, ("do_lower_case", *_PRETRAINING_INTS, *_PRETRAINING_BOOLS,
                                      *_PRETRAINING_STRINGS, *_PRETRAINING_INPUTS,
                                      "init_checkpoint"))
    settings = {name: _flag_int(flagfile, name, values[name])
                for name in _PRETRAINING_INTS if name in values}
    settings.update({name: _flag_bool(flagfile, name, values[name])
                     for name in _PRETRAINING_BOOLS if name in values})
    settings.update({name: values[name] for name in _PRETRAINING_STRINGS if name in values})
    casing = None
    if "do_lower_case" in values:
        casing = _flag_bool(flagfile, "do_lower_case", values["do_lower_case"])
        # Records were tokenized by create_pretraining_data: the run's --do_lower_case (true
        # by default) says how only when it was given against the default.
        if values.get("input_file") and not (values.get("input_text_file")
                                             or values.get("input_tfds")) and casing:
            casing = None
    config_path = path(directory, CONFIG_FILE)
    model_config = None
    if fileio.isfile(config_path):
        try:
            model_config = EncoderConfig.from_json_file(config_path).to_dict()
        except ConfigError as e:
            raise RunDirectoryError(str(e)) from None
    from bert_tf.text import tokenizer_files

    recorded_tokenizer = tokenizer_files.model_tokenizer_file(directory)
    return RunRecord(job="pretraining", command=PRETRAINING_COMMAND, model_config=model_config,
                     tokenizer_sha256=(tokenizer_digest(recorded_tokenizer)
                                       if recorded_tokenizer else None),
                     do_lower_case=casing, settings=settings,
                     init_checkpoint=values.get("init_checkpoint") or None, source=flagfile)


def tokenizer_digest(tokenizer_path):
    """Hex SHA-256 of what the ids of the tokenizer file at `tokenizer_path` depend on."""
    from bert_tf.text import tokenizer_files

    return tokenizer_files.load_tokenizer(tokenizer_path).digest()


def recorded_command(directory):
    """The command whose run `directory` holds by its record ("run_classifier", ...), or None
    (no record, or one that does not say)."""
    try:
        record = read_record(directory)
    except RunDirectoryError:
        return None
    return record.command if record is not None else None


def recorded_casing(directory):
    """(do_lower_case, where) the run in `directory` tokenized with, else (None, None).

    The one reader of a run's casing: its run record, else a bert_tf 0.1 run's
    finetuning_run.json, task_info.json or run_pretraining.flags (for records, only a
    --do_lower_case=false given against the default says how they were tokenized).
    """
    try:
        record = read_record(directory)
    except RunDirectoryError:
        return None, None
    if record is None or record.do_lower_case is None:
        return None, None
    name = os.path.basename(record.source)
    field = "--do_lower_case" if name.endswith(".flags") else "do_lower_case"
    return bool(record.do_lower_case), f"{name} {field}"
