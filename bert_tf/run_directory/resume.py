"""The one resume check: a run that trains in a directory holding checkpoints must be the run
that wrote them (its record, its backend)."""

import os

from absl import logging

from bert_tf import fileio
from bert_tf.file_names import RECORD_FILE
from bert_tf.run_directory.checkpoints import checkpoint_backend, has_checkpoint
from bert_tf.run_directory.errors import ResumeMismatchError
from bert_tf.run_directory.record import read_record
from bert_tf.training.budget import duration_flag_text


def _as_list(value):
    # Lists and tuples compare as lists (a record read back holds lists).
    return list(value) if isinstance(value, (list, tuple)) else value


def _show(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_show(v) for v in value)
    return "unset" if value is None else str(value)


# Settings a run records in seconds (--time_budget: bert_tf.jobs.pretraining), shown in the
# flag's own form (45s, 1h30m) rather than as 45.0.
_SECONDS_SETTINGS = ("time_budget",)


def _show_setting(name, value):
    if (name in _SECONDS_SETTINGS and isinstance(value, (int, float))
            and not isinstance(value, bool)):
        return duration_flag_text(value)
    return _show(value)


def resume_problems(recorded, wanted, tokenizer_path=None):
    """What differs between the record of the run that wrote the checkpoints and this run's.

    Compared: the command, task and labels, the model config, the tokenizer digest, the casing
    and every setting both records hold; a field either side does not know is not compared.

    Args:
      recorded, wanted: RunRecords.
      tokenizer_path: this run's tokenizer file (for a legacy record holding its SHA-256).

    Returns:
      list of str, one per difference, each naming the flag or field with both values.
    """
    problems = []
    if recorded.job != wanted.job or (recorded.command and wanted.command
                                      and recorded.command != wanted.command):
        problems.append(f"a {recorded.command or recorded.job} run then, "
                        f"{wanted.command or wanted.job} now")
    for name in ("task", "labels"):
        before, now = getattr(recorded, name), getattr(wanted, name)
        if before is not None and now is not None and _as_list(before) != _as_list(now):
            problems.append(f"{name}={_show(before)} then, {_show(now)} now")
    if recorded.model_config is not None and wanted.model_config is not None:
        before, now = recorded.model_config, wanted.model_config
        problems += [f"bert_config {key}={before.get(key)!r} then, {now.get(key)!r} now"
                     for key in sorted(set(before) | set(now)) if before.get(key) != now.get(key)]
    if recorded.tokenizer_sha256 and wanted.tokenizer_sha256 and (
            recorded.tokenizer_sha256 != wanted.tokenizer_sha256):
        if not (recorded.accepts_file_sha256 and tokenizer_path
                and recorded.tokenizer_sha256 == fileio.sha256(tokenizer_path)):
            where = f": --vocab_file={tokenizer_path}" if tokenizer_path else ""
            problems.append(f"the tokenizer differs (sha256 {recorded.tokenizer_sha256:.16} "
                            f"then, {wanted.tokenizer_sha256:.16} now{where})")
    if (recorded.do_lower_case is not None and wanted.do_lower_case is not None
            and recorded.do_lower_case != wanted.do_lower_case):
        problems.append(f"--do_lower_case={_show(recorded.do_lower_case)} then, "
                        f"{_show(wanted.do_lower_case)} now")
    for name in sorted(set(recorded.settings) & set(wanted.settings)):
        before, now = recorded.settings[name], wanted.settings[name]
        if before is not None and now is not None and _as_list(before) != _as_list(now):
            problems.append(f"--{name}={_show_setting(name, before)} then, "
                            f"{_show_setting(name, now)} now")
    return problems


_BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX"}


def check_checkpoints_backend(directory, backend, flag="--output_dir", evaluating=False):
    """The training checkpoints in `directory` (if any) must be of `backend`'s loop ("tensorflow"
    or "jax"): each loop reads only its own. `evaluating`: for a run that evaluates them
    (--do_eval without --do_train), which is told so, else for one that resumes them.

    Raises:
      ResumeMismatchError naming both backends and the flag to rerun with.
    """
    directory = str(directory)
    written_by = checkpoint_backend(directory)
    if written_by is None or written_by == backend:
        return
    then, now = _BACKEND_NAMES[written_by], _BACKEND_NAMES[backend]
    if evaluating:
        raise ResumeMismatchError(
            f"{flag}={directory} holds checkpoints of a run on the {then} backend; this "
            f"evaluation is on {now} (--backend={backend}), which cannot read them. Rerun with "
            f"--backend={written_by} to evaluate them (--init_checkpoint is not read while "
            f"{flag} holds the run's own checkpoints)")
    raise ResumeMismatchError(
        f"{flag}={directory} holds checkpoints of a run on the {then} backend; this run is on "
        f"{now} (--backend={backend}), whose loop cannot resume them. Rerun with "
        f"--backend={written_by} to resume it, or choose a new {flag} (--init_checkpoint="
        f"{directory} starts from its weights on either backend)")


def check_resume(directory, wanted, tokenizer_path=None, flag="--output_dir", backend=None):
    """A run about to train in `directory` must be the run whose checkpoints are there.

    When `directory` holds a checkpoint and a record (bert_tf_run.json, or a bert_tf 0.1 run's
    files: read_record), compares it with `wanted` (resume_problems). Reads only: a refusal
    leaves the directory unchanged. A different --init_checkpoint is not a difference: it is
    logged that the run's own checkpoint is resumed. With `backend` ("tensorflow" or "jax"),
    checkpoints another backend's loop wrote are refused too: each loop reads only its own.

    Raises:
      ResumeMismatchError naming every difference, each with its flag and both values.
    """
    directory = str(directory)
    if not has_checkpoint(directory):
        return
    if backend is not None:
        check_checkpoints_backend(directory, backend, flag)
    recorded = read_record(directory)
    if recorded is None:
        return
    problems = resume_problems(recorded, wanted, tokenizer_path)
    if problems:
        raise ResumeMismatchError(
            f"{flag}={directory} holds checkpoints of a run with other settings "
            f"({recorded.source}); resuming would mix them: {'; '.join(problems)}. Rerun with "
            f"the run's settings to resume it, or choose a new {flag} (--init_checkpoint="
            f"{directory} starts from its weights)")
    # A bert_tf 0.1 record may not say where its run started.
    said = recorded.init_checkpoint or os.path.basename(recorded.source) == RECORD_FILE
    if wanted.init_checkpoint and said and wanted.init_checkpoint != recorded.init_checkpoint:
        logging.warning("--init_checkpoint=%s is not read: %s=%s holds this run's own "
                        "checkpoints (it started from %s), which are resumed",
                        wanted.init_checkpoint, flag, directory,
                        recorded.init_checkpoint or "a new model")
