"""Checks of setting (flag) values that every job shares, and the error that names the flag.

The functions take the values they check, or the section of a job's config that holds them
(bert_tf.jobs.sections); the field names are the command-line flag names, so errors name the
flag at fault. No TensorFlow: the commands check their flags before they load it.
"""

import dataclasses
import math
import os

from absl import logging

from bert_tf import fileio
from bert_tf.training.loop_config import check_gradient_accumulation_steps


class FlagValueError(ValueError):
    """A setting (flag) value that cannot work, with the flag named."""


def check_lr_schedule(trainer, *, warmup_proportion=None, num_warmup_steps=None,
                      num_train_steps=None):
    """--lr_schedule=wsd of the job's trainer section (a ScheduledTrainerConfig):
    --decay_proportion in (0, 1], and a warmup that leaves steps to decay: fine-tuning's
    `warmup_proportion` below 1, pre-training's `num_warmup_steps` below `num_train_steps` (a
    job passes the warmup it has). Raises FlagValueError."""
    if trainer.lr_schedule != "wsd":
        return
    proportion = trainer.decay_proportion
    if not 0.0 < proportion <= 1.0:
        raise FlagValueError(f"--decay_proportion={proportion} must be in (0, 1] "
                             "(the fraction of the training steps the final decay takes)")
    if warmup_proportion is not None and warmup_proportion >= 1.0:
        raise FlagValueError(f"--lr_schedule=wsd decays after warmup: --warmup_proportion="
                             f"{warmup_proportion} leaves it no step")
    if num_warmup_steps is not None and num_warmup_steps >= num_train_steps:
        raise FlagValueError(f"--lr_schedule=wsd decays after warmup: --num_warmup_steps="
                             f"{num_warmup_steps} leaves no step of --num_train_steps="
                             f"{num_train_steps} for it")


def warn_unused_decay_proportion(trainer):
    """Logs a warning when --decay_proportion is not its default but the schedule has no
    final decay to size (--lr_schedule=linear decays over the whole run)."""
    default = {f.name: f.default for f in dataclasses.fields(trainer)}["decay_proportion"]
    if trainer.lr_schedule != "wsd" and trainer.decay_proportion != default:
        logging.warning("--decay_proportion=%s is not used: it sizes --lr_schedule=wsd's final "
                        "decay, and --lr_schedule=%s decays over the whole run",
                        trainer.decay_proportion, trainer.lr_schedule)


def check_file(flag, path):
    """A file `--flag=path` names (None: not given) exists and is a file (remote paths through
    TensorFlow's file systems). Raises FlagValueError: "--flag=path: no such file", "... is a
    directory; expected a file", or a broken or looping link."""
    problem = fileio.not_a_file(path, f"--{flag}={path}") if path else None
    if problem:
        raise FlagValueError(problem)


def check_gradient_accumulation(trainer):
    """--gradient_accumulation_steps of the job's trainer section (the rule is
    training.loop_config's). Raises FlagValueError."""
    try:
        check_gradient_accumulation_steps(trainer.gradient_accumulation_steps)
    except ValueError as e:
        raise FlagValueError(str(e)) from None


def check_export_dir(export_dir):
    """--export_dir (None: not given) must be a new or empty version directory (checked before
    any training; the command checks it holds no input and can be written: bert_tf.cli.outputs).
    """
    if not export_dir:
        return
    # The export comes after training: a file in the way must fail now, not then.
    path = export_dir.rstrip("/") or export_dir
    if "://" not in path and os.path.islink(path) and not os.path.exists(path):
        raise FlagValueError(f"--export_dir={export_dir} is a symbolic link to nothing (a "
                             f"missing target or a loop: {os.readlink(path)}); expected a new or "
                             "empty version directory")
    if fileio.exists(path) and not fileio.isdir(path):
        raise FlagValueError(f"--export_dir={export_dir} is a file; expected a new or empty "
                             "version directory, e.g. EXPORT/1")
    parent = os.path.dirname(path)
    while "://" not in path and parent and parent != path:
        if os.path.exists(parent) and not os.path.isdir(parent):
            raise FlagValueError(f"--export_dir={export_dir} cannot be created: {parent} is a "
                                 "file")
        path, parent = parent, os.path.dirname(parent)
    if fileio.exists(export_dir) and fileio.listdir(export_dir):
        raise FlagValueError(f"--export_dir={export_dir} exists and is not empty; choose a new "
                             "version directory")


# Float flags and the range each must lie in: (low, high, low inclusive, high inclusive);
# None is no bound. A NaN or Inf here trained (or poisoned checkpoints) before anything said so.
_FLOAT_FLAG_RANGES = {
    "learning_rate": (0.0, None, True, True),
    "weight_decay_rate": (0.0, None, True, True),
    "masked_lm_prob": (0.0, 1.0, False, True),
    "num_train_epochs": (0.0, None, False, True),
    "warmup_proportion": (0.0, 1.0, True, True),
    "null_score_diff_threshold": (None, None, True, True),
    # A decay of 1 never updates its moment: the bias-corrected step divides by 1 - 1^t = 0.
    "adam_beta1": (0.0, 1.0, True, False),
    "adam_beta2": (0.0, 1.0, True, False),
    "adam_epsilon": (0.0, None, False, True),
    "clip_norm": (0.0, None, True, True),
}


def require_positive(**flags):
    """Each given integer flag value (batch sizes, step counts) is >= 1.

    Args:
      **flags: flag name=value, e.g. `train_batch_size=job.trainer.train_batch_size`.

    Raises:
      FlagValueError naming the first flag below 1 and its value.
    """
    for name, value in flags.items():
        if value < 1:
            raise FlagValueError(f"--{name}={value} must be >= 1")


def check_numeric_flags(*sections):
    """Refuses a NaN, Inf or out-of-range value of any float flag the given sections of a job's
    config (dataclasses: bert_tf.jobs.sections) hold.

    Raises:
      FlagValueError naming the flag, its value and the range expected.
    """
    values = {field.name: getattr(section, field.name)
              for section in sections for field in dataclasses.fields(section)}
    for name, (low, high, low_inclusive, high_inclusive) in _FLOAT_FLAG_RANGES.items():
        # The ranges cover every job's float flags; None: unset.
        value = values.get(name)
        if value is None:
            continue
        below = low is not None and (value < low if low_inclusive else value <= low)
        above = high is not None and (value > high if high_inclusive else value >= high)
        if not math.isfinite(value) or below or above:
            if low is None:
                expected = "a finite number"
            else:
                bracket = "[" if low_inclusive else "("
                expected = (f"in {bracket}{low:g}, {high:g}{']' if high_inclusive else ')'}"
                            if high is not None
                            else f"{'>=' if low_inclusive else '>'} {low:g} and finite")
            raise FlagValueError(f"--{name}={value} must be {expected}")
