"""The one rule every command follows for what it writes, checked before any work.

1. An output is never an input of the same command. Paths are compared resolved (absolute,
   `./` and `..` folded, symlinks followed), after splitting comma lists and expanding globs as
   the commands do; two outputs that resolve to one file are refused too.
2. A directory that holds a run (checkpoints, the run lock, a run record) is never written
   into or deleted, unless the run is the command's own (a fine-tuning run resuming its
   --output_dir).
3. `--overwrite` replaces only the command's own kind of output: an export replaces an export.
4. Every output location is writable (probed by creating a file there) before the work.

Plain functions of paths and the flag names used in messages; no flags are read here, and no
TensorFlow is imported for local paths (the data tools stay TF-free). Each raises OutputError
(a ValueError) with a one-line message naming the flag.
"""

import glob
import os

from bert_tf import fileio, run_directory

# The entries of what tf.saved_model.save writes (bert_tf.serving.export): an export directory.
EXPORT_ENTRIES = frozenset(("saved_model.pb", "variables", "assets", "assets.extra",
                            "fingerprint.pb"))


class OutputError(ValueError):
    """An output that would destroy something the user has, or cannot be written."""


def resolve(path):
    """`path` as compared: absolute with symlinks followed; a remote URL with `/./` and
    trailing slashes folded."""
    path = str(path)
    if fileio.is_remote(path):
        scheme, rest = path.split("://", 1)
        return f"{scheme}://{os.path.normpath('/' + rest).lstrip('/')}"
    return os.path.realpath(os.path.expanduser(path))


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


def _pairs(named):
    """[(flag, path)] of a {flag: value} mapping (values may be comma lists / globs)."""
    pairs = []
    for flag, value in dict(named).items():
        if value is None:
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            pairs.extend((flag, path) for path in expand(item))
    return pairs


def check_not_inputs(outputs, inputs):
    """Output files that are an input, or the same file twice, are refused.

    Args:
      outputs: {flag: value} of the files the command writes ("--output_file": "a,b").
      inputs: {flag: value} of what it reads ("--input_file": "corpus/*.txt").

    Raises:
      OutputError naming both flags and the resolved path.
    """
    seen = {}
    for flag, path in _pairs(outputs):
        key = resolve(path)
        if key in seen:
            raise OutputError(f"{flag}={path} names the same file as {seen[key][0]}="
                              f"{seen[key][1]} ({key}); give each output once")
        seen[key] = (flag, path)
    for in_flag, in_path in _pairs(inputs):
        key = resolve(in_path)
        if key in seen:
            flag, path = seen[key]
            raise OutputError(f"{flag}={path} is also {in_flag}={in_path} ({key}): a command "
                              "never writes over its own input; choose another output")


def check_dir_clear_of_inputs(flag, directory, inputs, role="an input of this command"):
    """An output directory (written into or replaced) that is an input or holds one is refused.

    Args:
      inputs: {flag: path} of what the command reads (or also writes: `role` says which).

    Raises:
      OutputError naming both flags.
    """
    root = resolve(directory)
    for in_flag, in_path in _pairs(inputs):
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


def check_not_a_run(flag, directory, own=False):
    """A directory holding a run is refused as an output unless `own` (the run is this
    command's, e.g. a fine-tuning run resuming its --output_dir).

    Raises:
      OutputError naming the flag and the run's files.
    """
    records = run_directory.markers(directory)
    if records and not own:
        raise OutputError(f"{flag}={directory} holds a training run ({', '.join(records[:4])}"
                          f"{', ...' if len(records) > 4 else ''}); a command never writes "
                          "into or deletes another run's directory: choose a new directory")


def is_export_dir(directory):
    """True when `directory` holds a SavedModel export and nothing else (saved_model.pb,
    variables/, assets/, ...)."""
    names = set(fileio.listdir(directory)) if fileio.isdir(directory) else set()
    return "saved_model.pb" in names and names <= EXPORT_ENTRIES


def check_replaceable(flag, directory, kind, overwrite, is_own_kind):
    """An existing non-empty output directory is replaced only with `overwrite`, and only when
    `is_own_kind(directory)` says it holds the command's own kind of output.

    Args:
      kind: what the command writes, for messages ("a SavedModel export").
      is_own_kind: function(directory) -> bool.

    Raises:
      OutputError naming the flag and what the directory holds.
    """
    directory = str(directory)
    if fileio.exists(directory) and not fileio.isdir(directory):
        raise OutputError(f"{flag}={directory} is a file; expected a new or empty directory")
    names = sorted(fileio.listdir(directory)) if fileio.isdir(directory) else []
    if not names:
        return
    check_not_a_run(flag, directory)
    if not overwrite:
        raise OutputError(f"{flag}={directory} exists and is not empty; pass --overwrite to "
                          f"replace {kind}, or choose a new directory")
    if not is_own_kind(directory):
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        raise OutputError(f"{flag}={directory} is not {kind} (it holds {shown}); --overwrite "
                          f"replaces only {kind}: choose a new directory")


# What bert-tf-convert-checkpoint writes (any --to): a directory of only these is an earlier
# conversion's and may be written over.
CONVERSION_OUTPUTS = (*run_directory.CONVERSION_FILES, "tokenizer_config.json",
                      "albert_config.json", "config.json", "model.safetensors")
CONVERSION_CHECKPOINTS = ("bert_model.ckpt.", "model.ckpt.")


def is_conversion_dir(directory):
    """True when `directory` holds only files a checkpoint conversion writes."""
    return all(name in CONVERSION_OUTPUTS or name.startswith(CONVERSION_CHECKPOINTS)
               for name in fileio.listdir(directory))


def check_conversion_output_dir(output_dir, checkpoint, bert_config_file=None, vocab_file=None):
    """The rule for convert_checkpoint's --output_dir: not the source nor a directory holding
    it, not a run's directory, and new, empty or an earlier conversion's.

    Raises:
      OutputError naming the flags.
    """
    check_dir_clear_of_inputs("--output_dir", output_dir, {
        "--checkpoint": checkpoint, "--bert_config_file": bert_config_file,
        "--vocab_file": vocab_file})
    check_not_a_run("--output_dir", output_dir)
    if fileio.isdir(output_dir) and not is_conversion_dir(output_dir):
        names = sorted(fileio.listdir(output_dir))
        raise OutputError(f"--output_dir={output_dir} holds files no conversion writes ("
                          f"{', '.join(names[:4])}{', ...' if len(names) > 4 else ''}); choose "
                          "a new or empty directory")


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
    for flag, path in _pairs(outputs):
        if fileio.is_remote(path):
            continue
        if os.path.isdir(path):
            raise OutputError(f"{flag}={path} is a directory; expected a file name")
        check_writable_dir(flag, os.path.dirname(os.path.abspath(path)), create=False)


def check_output_files(outputs, inputs):
    """check_not_inputs and check_writable_files: the rule for commands that write files."""
    check_not_inputs(outputs, inputs)
    check_writable_files(outputs)


# The training commands: their drivers (bert_tf.jobs) raise FlagValueError for every flag at
# fault, so these do too. Imported when called: this module imports no TensorFlow.

def check_finetuning_dirs(options, command=None):
    """The output rule for a fine-tuning command (`command`: "run_classifier", ...; None: only
    a pre-training run is refused): --output_dir resumes or reuses its own run, never a
    pre-training run's or another command's (its model.keras and task_info.json would be
    replaced); --export_dir holds neither --output_dir nor --init_checkpoint and can be
    written. Called by the command before the driver reads or writes anything.

    Raises:
      FlagValueError naming the flag.
    """
    from bert_tf.jobs.run_setup import FlagValueError

    if options.output_dir:
        others = other_commands_records(options.output_dir, command)
        if others:
            raise FlagValueError(
                f"--output_dir={options.output_dir} holds a run of another command "
                f"({', '.join(others)}); {command or 'fine-tuning'} there would replace its "
                "model and files: choose a new --output_dir (--init_checkpoint may name this "
                "one)")
    export_dir = getattr(options, "export_dir", None)
    if export_dir:
        try:
            check_dir_clear_of_inputs(
                "--export_dir", export_dir,
                {"--output_dir": getattr(options, "output_dir", None),
                 "--init_checkpoint": getattr(options, "init_checkpoint", None)},
                role="which this run also uses")
            check_writable_dir("--export_dir", export_dir)
        except OutputError as e:
            raise FlagValueError(str(e)) from None


def check_pretraining_output_dir(output_dir):
    """The output rule for pre-training: it never writes into a fine-tuning run's directory
    (its checkpoints would be resumed as a pre-trainer's, its files replaced).

    Raises:
      FlagValueError naming --output_dir.
    """
    from bert_tf.jobs.run_setup import FlagValueError

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
