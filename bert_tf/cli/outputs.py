"""The one rule every command follows for what it writes, checked before any work.

1. An output is never an input of the same command, including what the command reads without
   a flag naming it: the vocabulary, tokenizer and config files beside --init_checkpoint.
   Paths are compared resolved (absolute, `./` and `..` folded, symlinks followed), after
   splitting comma lists and expanding globs as the commands do; two outputs that resolve to
   one file are refused too.
2. A model directory (bert_tf.model_directory: a bert_tf run or model, a SavedModel or LiteRT
   export, a TF1/ALBERT checkpoint, a Hugging Face, sentence-transformers or keras-hub
   directory) is never written into, and no file output is placed inside one, unless it is the
   command's own earlier output of the same kind: a fine-tuning run resuming its --output_dir,
   an export replacing an export with --overwrite, a conversion replacing a conversion to the
   same format with --overwrite.
3. `--overwrite` replaces only the command's own kind of output.
4. Every output location is writable (probed by creating a file there) before the work.

What is checked here is also what the final move compares with (fileio.state): an output that
appears or changes while the command works is never replaced (publishing, bert_tf.fileio).

Plain functions of paths and the flag names used in messages; no flags are read here, and no
TensorFlow is imported for local paths (the data tools stay TF-free). Each raises OutputError
(a ValueError) with a one-line message naming the flag.
"""

import glob
import os

from bert_tf import file_names, fileio, model_directory, run_directory


class OutputError(ValueError):
    """An output that would destroy something the user has, or cannot be written."""


resolve = fileio.resolve


def expand(value):
    """The paths a flag value names: comma-separated, each a glob expanded as the commands
    expand them; a pattern that matches nothing stays as written."""
    paths = []
    for part in str(value or "").split(","):
        part = part.strip()
        if not part:
            continue
        matches = []
        if glob.has_magic(part):
            matches = (sorted(fileio.gfile().glob(part)) if fileio.is_remote(part)
                       else sorted(glob.glob(os.path.expanduser(part))))
        paths.extend(matches or [part])
    return paths


def output_paths(named):
    """[(flag, path)] of a {flag: value} mapping (values may be comma lists / globs), in
    order."""
    pairs = []
    for flag, value in dict(named).items():
        if value is None:
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            pairs.extend((flag, path) for path in expand(item))
    return pairs


def check_not_inputs(outputs, inputs, beside=None):
    """Output files that are an input, or the same file twice, are refused.

    Args:
      outputs: {flag: value} of the files the command writes ("--output_file": "a,b").
      inputs: {flag: value} of what it reads ("--input_file": "corpus/*.txt").
      beside: {flag: checkpoint} of the models it reads ("--init_checkpoint": "runs/base"):
        the files it finds beside them (files_read_beside) are inputs too.

    Raises:
      OutputError naming both flags and the resolved path.
    """
    seen = {}
    for flag, path in output_paths(outputs):
        key = resolve(path)
        if key in seen:
            raise OutputError(f"{flag}={path} names the same file as {seen[key][0]}="
                              f"{seen[key][1]} ({key}); give each output once")
        seen[key] = (flag, path)
    for in_flag, in_path in output_paths(inputs):
        key = resolve(in_path)
        if key in seen:
            flag, path = seen[key]
            raise OutputError(f"{flag}={path} is also {in_flag}={in_path} ({key}): a command "
                              "never writes over its own input; choose another output")
    for in_flag, checkpoint in (beside or {}).items():
        for found in files_read_beside(checkpoint):
            key = resolve(found)
            if key in seen:
                flag, path = seen[key]
                raise OutputError(f"{flag}={path} is read beside {in_flag}={checkpoint} "
                                  f"({key}): a command never writes over its own input; "
                                  "choose another output")


def files_read_beside(checkpoint):
    """The files beside a model (a directory, a checkpoint prefix or a model file) that a
    command may read with it: its model files, config and tokenizer files
    (model_directory.COMPANION_FILES) that exist."""
    if not checkpoint:
        return []
    checkpoint = str(checkpoint)
    directory = checkpoint if fileio.isdir(checkpoint) else os.path.dirname(
        fileio.abspath(checkpoint))
    names = (*model_directory.COMPANION_FILES, *run_directory.MODEL_FILES)
    return [run_directory.path(directory, name) for name in names
            if fileio.exists(run_directory.path(directory, name))]


def check_dir_clear_of_inputs(flag, directory, inputs, role="an input of this command"):
    """An output directory (written into or replaced) that is an input or holds one is refused.

    Args:
      inputs: {flag: path} of what the command reads (or also writes: `role` says which).

    Raises:
      OutputError naming both flags.
    """
    root = resolve(directory)
    for in_flag, in_path in output_paths(inputs):
        key = resolve(in_path)
        if key == root or key.startswith(root.rstrip("/") + "/"):
            raise OutputError(f"{flag}={directory} holds {in_flag}={in_path}, {role}; writing "
                              "there would replace it: choose a new directory")


def other_commands_records(directory, command=None):
    """The records in `directory` of a run by another command than `command` (a fine-tuning
    command's name, or bert_tf.run_directory.EMBEDDING_COMMAND): the pre-training flags file,
    another command's flags file, or a run record naming another command. With `command`
    None: the pre-training flags file only. Returns [] for a directory of `command`'s own run
    (or none)."""
    markers = run_directory.markers(directory)
    pretraining_flags = run_directory.PRETRAINING_FLAGS_FILE
    found = [name for name in markers if name == pretraining_flags]
    if command is None:
        return found
    found += [run_directory.flags_file(name) for name in run_directory.FINETUNING_COMMANDS
              if name != command and run_directory.flags_file(name) in markers]
    recorded = run_directory.recorded_command(directory)
    if recorded not in (None, command, run_directory.PRETRAINING_COMMAND):
        found.append(f"{_record_name(directory)}: cli={recorded!r}")
    return found


def _record_name(directory):
    for name in (run_directory.RECORD_FILE, run_directory.LEGACY_FINETUNING_RECORD,
                 run_directory.TASK_INFO_FILE):
        if fileio.isfile(run_directory.path(directory, name)):
            return name
    return run_directory.RECORD_FILE


def check_not_a_model_dir(flag, directory, own=()):
    """A model directory (bert_tf.model_directory) is refused as an output unless its kind is
    one of `own` (the command's own earlier output of that kind: a fine-tuning run resuming its
    --output_dir, model_directory.RUN); so is a directory inside one (its folder is a model
    directory, or one of the folders a model directory holds).

    Raises:
      OutputError naming the flag, the kind and the files that tell it.
    """
    found = model_directory.recognise(directory)
    if found is not None and found.kind not in own:
        raise OutputError(f"{flag}={directory} holds {found}; a command never writes into a "
                          "model directory that is not its own earlier output: choose a new "
                          "directory")
    check_not_inside_a_model_dir(flag, directory)


def check_not_inside_a_model_dir(flag, path):
    """An output (file or directory) inside a model directory is refused, also through a
    symbolic link.

    Raises:
      OutputError naming the flag and the model directory.
    """
    found = model_directory.enclosing(path, through_links=True)
    if found is not None:
        raise OutputError(f"{flag}={path} is inside {found.path}, which holds {found}; a "
                          "command never places an output inside a model directory: choose "
                          "another location")


def check_replaceable(flag, directory, kind, overwrite):
    """An existing non-empty output directory is replaced only with `overwrite`, and only when
    it holds the command's own kind of output and nothing else.

    Args:
      kind: the model_directory kind the command writes (model_directory.SAVED_MODEL, ...).

    Raises:
      OutputError naming the flag and what the directory holds.
    """
    directory = str(directory)
    if fileio.exists(directory) and not fileio.isdir(directory):
        raise OutputError(f"{flag}={directory} is a file; expected a new or empty directory")
    check_not_a_model_dir(flag, directory, own=(kind,))
    names = sorted(fileio.listdir(directory)) if fileio.isdir(directory) else []
    if not names:
        return
    if not model_directory.holds_only(directory, kind):
        raise OutputError(f"{flag}={directory} is not {kind} (it holds {_shown(names)}); "
                          f"--overwrite replaces only {kind}: choose a new directory")
    if not overwrite:
        raise OutputError(f"{flag}={directory} exists and is not empty; pass --overwrite to "
                          f"replace {kind}, or choose a new directory")


# What bert-tf-convert-checkpoint writes, by --to: (the model_directory kind, the names and
# name prefixes of its files). A directory of only these is an earlier conversion's.
# Every format records the casing where it is known (what interop.checkpoint_casing reads).
_CASING = "tokenizer_config.json"
_TOKENIZER_FILES = (run_directory.VOCAB_FILE, run_directory.TOKENIZER_FILE,
                    file_names.SENTENCEPIECE_FILE, _CASING, "special_tokens_map.json")
# Every format: a conversion of a sentence-transformers model carries its length there.
_ST = file_names.SENTENCE_BERT_CONFIG_FILE
CONVERSION_OUTPUTS = {
    "bert_tf": (model_directory.BERT_TF_MODEL,
                (run_directory.PRETRAINER_FILE, run_directory.ENCODER_FILE,
                 run_directory.CONFIG_FILE, *_TOKENIZER_FILES, _ST)),
    "tf1": (model_directory.TF1_CHECKPOINT,
            ("bert_model.ckpt.", run_directory.CONFIG_FILE, run_directory.VOCAB_FILE,
             file_names.SENTENCEPIECE_FILE, _CASING, _ST)),
    "albert": (model_directory.TF1_CHECKPOINT,
               ("model.ckpt.", "albert_config.json", run_directory.CONFIG_FILE,
                run_directory.VOCAB_FILE, file_names.ALBERT_SENTENCEPIECE_FILE, _CASING, _ST)),
    "huggingface": (model_directory.HUGGINGFACE,
                    (model_directory.HF_CONFIG_FILE, model_directory.SAFETENSORS_FILE,
                     *_TOKENIZER_FILES, _ST)),
}


def not_converted(directory, to_format):
    """The names in `directory` that no conversion to `to_format` writes, sorted: none when it
    holds only an earlier conversion's files."""
    names = CONVERSION_OUTPUTS[to_format][1]
    prefixes = tuple(n for n in names if n.endswith("."))
    return sorted(name for name in fileio.listdir(directory)
                  if not (name in names or name.startswith(prefixes)))


def check_conversion_output_dir(output_dir, checkpoint, bert_config_file=None, vocab_file=None,
                                to_format="bert_tf", overwrite=False):
    """The rule for convert_checkpoint's --output_dir: not the source nor a directory holding
    it, no model directory but an earlier conversion to the same format (replaced only with
    --overwrite), else new or empty.

    Raises:
      OutputError naming the flags.
    """
    check_dir_clear_of_inputs("--output_dir", output_dir, {
        "--checkpoint": checkpoint, "--bert_config_file": bert_config_file,
        "--vocab_file": vocab_file})
    if fileio.exists(output_dir) and not fileio.isdir(output_dir):
        raise OutputError(f"--output_dir={output_dir} is a file; expected a new or empty "
                          "directory")
    kind = CONVERSION_OUTPUTS[to_format][0]
    check_not_a_model_dir("--output_dir", output_dir, own=(kind,))
    names = sorted(fileio.listdir(output_dir)) if fileio.isdir(output_dir) else []
    if not names:
        return
    foreign = not_converted(output_dir, to_format)
    if foreign:
        raise OutputError(f"--output_dir={output_dir} holds files no conversion to "
                          f"--to={to_format} writes ({_shown(foreign)}); choose a new or empty "
                          "directory")
    if not overwrite:
        raise OutputError(f"--output_dir={output_dir} holds a conversion to --to={to_format} "
                          f"({_shown(names)}); pass --overwrite to replace it, or choose a new "
                          "directory")


def _shown(names):
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def check_writable_dir(flag, directory, create=True):
    """`directory` (made later if missing, when `create`) can receive files: a file is created
    and removed there, or in its nearest existing parent. Remote paths are not probed.

    Raises:
      OutputError naming the flag.
    """
    try:
        run_directory.check_writable(directory, flag, create=create)
    except run_directory.RunDirectoryError as e:
        raise OutputError(str(e)) from None


def check_writable_files(outputs):
    """Every output file of {flag: value (comma list)} can be written: its directory exists and
    takes a new file, and the path is not a directory.

    Raises:
      OutputError naming the flag.
    """
    for flag, path in output_paths(outputs):
        if fileio.is_remote(path):
            continue
        if os.path.isdir(path):
            raise OutputError(f"{flag}={path} is a directory; expected a file name")
        check_writable_dir(flag, os.path.dirname(os.path.abspath(path)), create=False)


def check_output_files(outputs, inputs, beside=None):
    """The rule for commands that write files: none is an input (check_not_inputs, with the
    files read beside the models of `beside`), none is inside a model directory, and each can
    be written (check_writable_files)."""
    check_not_inputs(outputs, inputs, beside)
    for flag, path in output_paths(outputs):
        check_not_inside_a_model_dir(flag, path)
    check_writable_files(outputs)


# The training commands: their drivers (bert_tf.jobs) raise FlagValueError for every flag at
# fault, so these do too. Imported when called: this module imports no TensorFlow.

def check_finetuning_dirs(output_dir, init_checkpoint=None, export_dir=None, command=None):
    """The output rule for a fine-tuning command (`command`: "run_classifier", ...; None: only
    a pre-training run is refused), given its --output_dir, --init_checkpoint and --export_dir
    (None: not given): --output_dir resumes or reuses its own run, never a
    pre-training run's or another command's (its model.keras and task_info.json would be
    replaced); --export_dir holds neither --output_dir nor --init_checkpoint and can be
    written. Called by the command before the driver reads or writes anything.

    Raises:
      FlagValueError naming the flag.
    """
    from bert_tf.jobs.flag_checks import FlagValueError

    if output_dir:
        check_training_output_dir(output_dir, command or "fine-tuning",
                                  other_commands_records(output_dir, command))
    if export_dir:
        try:
            check_dir_clear_of_inputs(
                "--export_dir", export_dir,
                {"--output_dir": output_dir, "--init_checkpoint": init_checkpoint},
                role="which this run also uses")
            # Inside the run's own --output_dir is the run's own output.
            if not (output_dir and _is_under(export_dir, output_dir)):
                check_not_inside_a_model_dir("--export_dir", export_dir)
            check_writable_dir("--export_dir", export_dir)
        except OutputError as e:
            raise FlagValueError(str(e)) from None


def _is_under(path, directory):
    root = resolve(directory).rstrip("/")
    return resolve(path).startswith(root + "/")


def check_training_output_dir(output_dir, job, others):
    """The rule for the --output_dir of a job that trains (`job`: "run_classifier",
    "pre-training", ...): new, empty or a run (which the job's resume check then compares with
    itself), never another kind of model directory, nor the run of another command (`others`:
    the files that tell it, other_commands_records).

    Raises:
      FlagValueError naming --output_dir.
    """
    from bert_tf.jobs.flag_checks import FlagValueError

    if others:
        raise FlagValueError(
            f"--output_dir={output_dir} holds a run of another command ({', '.join(others)}); "
            f"{job} there would replace its model and files: choose a new --output_dir "
            "(--init_checkpoint may name this one)")
    try:
        check_not_a_model_dir("--output_dir", output_dir, own=(model_directory.RUN,))
    except OutputError as e:
        raise FlagValueError(f"{e} (--init_checkpoint may name this one)") from None
    if fileio.isdir(output_dir) and not run_directory.markers(output_dir):
        # Not a run: a config or tokenizer there is the user's, which a run writes over.
        found = [name for name in (run_directory.CONFIG_FILE, run_directory.VOCAB_FILE,
                                   run_directory.TOKENIZER_FILE, file_names.SENTENCEPIECE_FILE)
                 if fileio.exists(run_directory.path(output_dir, name))]
        if found:
            raise FlagValueError(
                f"--output_dir={output_dir} holds {', '.join(found)} but no run; {job} writes "
                "its own there and would replace them: choose a new or empty --output_dir "
                "(--bert_config_file and --vocab_file may name them)")


def check_pretraining_output_dir(output_dir):
    """The output rule for pre-training: it never writes into a fine-tuning run's directory
    (its checkpoints would be resumed as a pre-trainer's, its files replaced), nor into a
    model directory that is not a run (check_training_output_dir).

    Raises:
      FlagValueError naming --output_dir.
    """
    from bert_tf.jobs.flag_checks import FlagValueError

    found = [name for name in run_directory.markers(output_dir)
             if name in (run_directory.LEGACY_FINETUNING_RECORD, run_directory.TASK_INFO_FILE,
                         run_directory.MODEL_FILE)]
    if run_directory.recorded_command(output_dir) not in (None,
                                                          run_directory.PRETRAINING_COMMAND):
        found.insert(0, run_directory.RECORD_FILE)
    if found:
        raise FlagValueError(f"--output_dir={output_dir} holds a fine-tuning run "
                             f"({', '.join(found)}); choose a new --output_dir "
                             "(--init_checkpoint may name this one)")
    check_training_output_dir(output_dir, "pre-training", [])
