"""The command layer: every bert_tf command, the launcher, --help, the packaged official_configs.

The commands (each a module with `define_flags()` and `run()`, installed as a console script
by setup.py; bert_tf/run_*.py keep the original script names as aliases):

  bert-tf-pretrain                   bert_tf.cli.pretrain (bert_tf.run_pretraining)
  bert-tf-classify                   bert_tf.cli.classify (bert_tf.run_classifier)
  bert-tf-tag                        bert_tf.cli.tag (bert_tf.run_tagging)
  bert-tf-squad                      bert_tf.cli.squad (bert_tf.run_squad)
  bert-tf-create-pretraining-data    bert_tf.cli.create_pretraining_data
  bert-tf-build-vocab                bert_tf.cli.build_vocab
  bert-tf-convert-checkpoint         bert_tf.cli.convert_checkpoint
  bert-tf-export                     bert_tf.cli.export_saved_model
  bert-tf-extract-features           bert_tf.cli.extract_features
  bert-tf-prepare-demo-data          bert_tf.cli.prepare_demo_data
  bert-tf-embed                      bert_tf.cli.embed

Every flag is defined once, in bert_tf.cli.flags; a command defines the groups it reads when it
runs (`run()` calls its `define_flags()` before parsing), so importing any of these modules
defines nothing and they all import into one process. Only this package reads flags; nothing
below it imports it.

A command module imports its driver (and so TensorFlow) when it runs, not when it is imported:
`--help` answers without loading TensorFlow. This module installs no import hook and sets no
environment: the filter of TensorFlow's start-up lines (bert_tf.quiet_logs) is in place before
any command loads TensorFlow because `import bert_tf`, which runs first, installs it.

This module imports no TensorFlow: the data tools stay TF-free."""

import importlib
import os
import sys

import absl.flags
import absl.logging
from absl import app

from bert_tf import quiet_logs
from bert_tf.model_directory import ModelFileError
from bert_tf.keras_setup import UnsupportedBackendError
from bert_tf.run_directory import RunDirectoryError

FLAGS = absl.flags.FLAGS

# The commands log their own progress; TensorFlow's INFO and WARNING lines (CUDA probing, XLA
# service start, tf.data notices) are not for their users unless TF_CPP_MIN_LOG_LEVEL says so:
# `import bert_tf`, which runs before this module, set it and the start-up filter
# (bert_tf.quiet_logs.quiet_tensorflow), before any command imports TensorFlow. The INFO records
# of TensorFlow's and Orbax's Python modules are left out at the same levels (run() puts
# bert_tf.quiet_logs.LIBRARY_INFO on absl's handler).

# absl's names of its help flags (--help, -?, --helpshort, --helpfull, --helpxml).
_HELP_FLAGS = ("help", "?", "helpshort", "helpfull", "helpxml")

# Paths that start with this name resolve to the copy installed with the package when they do
# not exist relative to the working directory, so `--flagfile=official_configs/...` and the
# `--bert_config_file=official_configs/models/...` inside it work from any directory.
OFFICIAL_CONFIGS = "official_configs"


def official_configs_dir():
    """The directory of the official model configs and flagfiles (models/, pretraining/).

    The copy a wheel installs inside the package (bert_tf/official_configs), else the
    checkout's official_configs/ beside bert_tf/ (an editable install or a source tree).
    """
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    installed = os.path.join(package_dir, OFFICIAL_CONFIGS)
    if os.path.isdir(os.path.join(installed, "models")):
        return installed
    return os.path.join(os.path.dirname(package_dir), OFFICIAL_CONFIGS)


def resolve_official_path(path):
    """`path` itself, or the packaged file it names when it is a missing official_configs/ path."""
    parts = os.path.normpath(path).split(os.sep)
    if parts[0] != OFFICIAL_CONFIGS or os.path.exists(path):
        return path
    packaged = os.path.join(official_configs_dir(), *parts[1:])
    return packaged if os.path.exists(packaged) else path


def _resolve_flag_values(args):
    """args with every `--name=official_configs/...` value resolved (see resolve_official_path)."""
    resolved = []
    for arg in args:
        name, has_value, value = arg.partition("=")
        if arg.startswith("-") and has_value and value.startswith(OFFICIAL_CONFIGS):
            arg = f"{name}={resolve_official_path(value)}"
        resolved.append(arg)
    return resolved


def parse_flags(argv):
    """absl's parser, after resolving official_configs/ paths in argv and in its flagfiles."""
    args = _resolve_flag_values(argv[1:])
    # Expanding --flagfile here lets the paths inside the flagfile resolve the same way.
    try:
        args = _resolve_flag_values(FLAGS.read_flags_from_files(args, force_gnu=False))
    except absl.flags.CantOpenFlagFileError as e:
        message = str(e).removeprefix("ERROR:: ")
        sys.exit(f"{_program_name(argv[0])}: error: --flagfile: {message}")
    names = {_flag_name(arg).removeprefix("no") for arg in args}
    for module, recorded in _RECORDED_FOREIGN_FLAGS.items():
        if names & set(recorded):
            # Flagfiles written by runs of earlier releases hold every flag defined then,
            # absltest's and TensorFlow's too; the driver that would define them is imported
            # only after parsing.
            importlib.import_module(module)
    try:
        return app.parse_flags_with_usage([argv[0]] + args)
    except SystemExit as e:
        # absl exits with status 1 after printing the help that was asked for.
        if e.code == 1 and _asks_for_help(args):
            sys.exit(0)
        raise


# The flags of other packages that run flagfiles of earlier releases recorded, by the module
# that defines them (a run now records only its command's own: flags.flagfile_text).
_RECORDED_FOREIGN_FLAGS = {
    "absl.testing.absltest": ("test_random_seed", "test_randomize_ordering_seed", "test_srcdir",
                              "test_tmpdir", "xml_output_file"),
    "tensorflow": ("op_conversion_fallback_to_while_loop", "hbm_oom_exit", "runtime_oom_exit",
                   "delta_threshold", "tt_check_filter", "tt_single_core_summaries"),
}


def _flag_name(arg):
    return arg.lstrip("-").split("=")[0]


def _asks_for_help(args):
    for arg in args:
        if arg == "--":
            return False
        if arg.startswith("-") and _flag_name(arg) in _HELP_FLAGS:
            return True
    return False


class BackendError(ValueError):
    """A --backend this machine cannot run."""


def requested_backend(flag_values=None):
    """The Keras backend a command asks for: --backend, else KERAS_BACKEND, else tensorflow."""
    flag_values = flag_values or FLAGS
    return flag_values.backend or os.environ.get("KERAS_BACKEND") or "tensorflow"


def use_keras_backend(backend, module):
    """Makes Keras run on `backend` ("tensorflow" or "jax") for this command.

    Sets KERAS_BACKEND when Keras is not imported yet; when it runs on another backend already
    (Keras fixes its backend at import), runs the command again as `python -m <module>` with
    the same arguments under KERAS_BACKEND=<backend>.

    Raises:
      BackendError: --backend=jax without JAX installed, naming what to install.
    """
    import importlib.util

    if backend == "jax" and importlib.util.find_spec("jax") is None:
        raise BackendError('--backend=jax needs JAX, which is not installed: pip install '
                           '"bert_tf[jax]" (or jax[cuda12] / jax[tpu] on accelerators)')
    keras = sys.modules.get("keras")
    if keras is not None and keras.backend.backend() != backend:
        os.environ["KERAS_BACKEND"] = backend
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]])
    os.environ["KERAS_BACKEND"] = backend


def _program_name(path):
    return os.path.splitext(os.path.basename(path))[0]


def _file_errors():
    """Exceptions that mean a file could not be read or written: OSError (disk full, no
    permission, ...) and, once TensorFlow is loaded, its file-system errors (no such file, an
    unknown or unavailable scheme such as s3://, data loss). This module imports no TensorFlow."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return (OSError,)
    return (OSError, tf.errors.NotFoundError, tf.errors.UnimplementedError,
            tf.errors.PermissionDeniedError, tf.errors.DataLossError)


def _error_text(error):
    # TensorFlow's errors carry the useful part in .message; str() adds the op's context.
    return getattr(error, "message", None) or str(error)


def _own_flags_are_key_flags():
    # absl's --help lists the key flags of sys.argv[0]; a console script (or a tools/ wrapper)
    # defines none itself, so adopt those of every bert_tf module that defined flags.
    for module, module_flags in FLAGS.flags_by_module_dict().items():
        if module.startswith("bert_tf") or module == sys.argv[0]:
            for flag in module_flags:
                FLAGS.register_key_flag_for_module(sys.argv[0], flag)


def _check_required(required):
    # Checked here rather than by absl validators, which would stay registered on FLAGS and
    # bind the next command run in the same process.
    for name in required:
        if FLAGS[name].value is None:
            print(f"FATAL Flags parsing error: flag --{name}=None: Flag --{name} must have a "
                  "value other than None.\nPass --helpshort or --helpfull to see help on flags.",
                  file=sys.stderr)
            sys.exit(1)


def training_errors():
    """What the training commands (pretrain, classify, tag, squad) report as bad input in one
    line: a flag, a config, the data, a checkpoint, a loss that stopped being finite. None of
    these modules loads TensorFlow: a flag refused before the driver loads it stays quick."""
    from bert_tf.config import ConfigError
    from bert_tf.data.tasks.task_errors import DataError
    from bert_tf.jobs.flag_checks import FlagValueError
    from bert_tf.training.step_runner import CheckpointError
    from bert_tf.training.stops import NonFiniteLossError

    return (FlagValueError, ConfigError, DataError, CheckpointError, NonFiniteLossError)


def _one_line(error, errors):
    """The one-line message of `error` when it means bad input (see run's `errors`), else None."""
    if isinstance(error, (RunDirectoryError, ModelFileError, BackendError,
                          UnsupportedBackendError)):
        return str(error)
    try:
        # Only now: a command's error classes may live in modules that import Keras, which
        # fixes its backend, and main chooses the backend first (else --backend=jax re-executes).
        user_errors = tuple(errors() if callable(errors) else errors)
    except Exception:  # noqa: BLE001 - the command's own error is the one to show
        return None
    if isinstance(error, user_errors):
        return str(error)
    if isinstance(error, _file_errors()):
        return _error_text(error)
    return None


def run(main, program=None, errors=(), required=(), define_flags=None):
    """Runs an absl program: flags defined and parsed, `main(argv)` called, user errors
    reported in one line.

    Args:
      main: function(argv) doing the work; argv holds the program name and positional args.
      program: the name error messages start with (e.g. "run_pretraining"); needed with
        `errors`.
      errors: exception classes that mean bad input (a flag, file or field): printed as
        "<program>: error: <message>" with exit status 1 instead of a traceback; or a function
        returning them, called only when main raises (their modules may import Keras, whose
        backend main chooses first). Files that cannot be read or written (OSError,
        TensorFlow's file-system errors), model files that cannot be read as models, run
        directories that cannot be used (in use, another run's checkpoints) and a KERAS_BACKEND
        the models do not run on are reported the same way by every command.
      required: flags that must be given.
      define_flags: the command's `define_flags()` (bert_tf.cli.flags groups), called before
        parsing; nothing is defined at import, so any commands share one process.
    """

    def checked_main(argv):
        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
        _check_required(required)
        try:
            return main(argv)
        except KeyboardInterrupt:
            # Training turns the first Ctrl-C into a checkpoint and exit 130 itself
            # (bert_tf.training.stops.TrainingPreempted); elsewhere, or pressed twice, the
            # work stops here, without a traceback.
            print(f"{program or _program_name(sys.argv[0])}: interrupted (Ctrl-C)",
                  file=sys.stderr)
            sys.exit(130)
        except Exception as e:  # noqa: BLE001 - only bad input is reported in one line
            message = _one_line(e, errors)
            if message is None:
                raise
            print(f"{program or _program_name(sys.argv[0])}: error: {message}", file=sys.stderr)
            sys.exit(1)

    if define_flags is not None:
        define_flags()
    if FLAGS.is_parsed():
        # A command run before in this process: start from this command's defaults.
        FLAGS.unparse_flags()
    main_module = sys.modules["__main__"]
    command_module = sys.modules[main.__module__]
    if not main_module.__doc__ or getattr(main_module, "run", None) is command_module.run:
        # --help prints the __main__ docstring: a console script has none, and an alias
        # (bert_tf.run_pretraining) is not the command's own; show the command's.
        main_module.__doc__ = command_module.__doc__
    _own_flags_are_key_flags()
    absl.logging.get_absl_handler().addFilter(quiet_logs.LIBRARY_INFO)
    app.run(checked_main, flags_parser=parse_flags)
