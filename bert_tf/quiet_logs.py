"""TensorFlow's start-up lines that TF_CPP_MIN_LOG_LEVEL does not reach, kept off stderr.

TensorFlow 2.21 writes a few lines while its libraries load and its devices are first listed,
before its logging has read TF_CPP_MIN_LOG_LEVEL, so the variable does not hide them:

  WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
  I0000 ... port.cc:153] oneDNN custom operations are on. ...
  I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
  I0000 ... cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use ...
  E0000 ... cuda_platform.cc:52] failed call to cuInit: ... UNKNOWN ERROR (303)

`quiet_tensorflow_startup()` makes the process's first `import tensorflow` run with file
descriptor 2 captured, lists the physical devices inside that window (the cuInit call), then
writes back every captured line that TF_CPP_MIN_LOG_LEVEL lets through, with TensorFlow's
meaning of the levels: 1 hides INFO, 2 also WARNING, 3 also ERROR. From level 1 on, TensorFlow's
Python logger is set to WARNING as well. The failed cuInit of a machine without a CUDA driver
(after "Could not find cuda drivers") counts as INFO: there is nothing to act on, and so does
oneDNN's one-time type notice (`absorb_onednn_type_notice`). Other output (a Python warning, a
traceback) is written back unchanged.

`import bert_tf` calls `quiet_tensorflow()` (the level 2 unless TF_CPP_MIN_LOG_LEVEL is set,
and the filter), so commands, notebooks and scripts that import bert_tf before TensorFlow or
Keras print none of these lines; `TF_CPP_MIN_LOG_LEVEL=0` shows them all.

A command's log (bert_tf.cli) also leaves out the INFO records of TensorFlow's and Orbax's
Python modules from level 1 on (`LIBRARY_INFO`); their warnings and errors stay.
"""

import logging
import os
import re
import sys
import tempfile

from bert_tf import import_hooks

# An absl log line: severity letter, date (0000 before logging is set up), time (then seconds
# since the epoch), thread id, file:line].
_ABSL_LINE = re.compile(rb"^([IWEF])\d{4} [\d:.]+\s+\d+ \S+:\d+\] ")
_BANNER = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
# The second line of cpu_feature_guard's INFO message.
_CONTINUATION = b"To enable the following instructions:"
_NO_DRIVER = b"Could not find cuda drivers"
_CUINIT = b"failed call to cuInit"
# oneDNN's type check, logged as an ERROR once per process (see absorb_onednn_type_notice).
_ONEDNN_TYPE_NOTICE = re.compile(rb"oneDNN supports DT_\w+ only on platforms with AVX-512")
_LEVEL_OF = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}


def min_log_level():
    """TF_CPP_MIN_LOG_LEVEL as TensorFlow reads it (0 when unset or not a number)."""
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def filter_startup_lines(text, min_level):
    """The lines of `text` (bytes) that TensorFlow's logging would show at `min_level`."""
    kept, dropped_previous, no_driver = [], False, False
    for line in text.splitlines(keepends=True):
        match = _ABSL_LINE.match(line)
        if match:
            level = _LEVEL_OF[match.group(1)]
            if _NO_DRIVER in line:
                no_driver = True
            if (_CUINIT in line and no_driver) or _ONEDNN_TYPE_NOTICE.search(line):
                level = 0
            dropped_previous = level < min_level
        elif line.rstrip(b"\n") == _BANNER:
            dropped_previous = min_level >= 1
        elif line.startswith(_CONTINUATION) and dropped_previous:
            continue
        else:
            dropped_previous = False
        if not dropped_previous:
            kept.append(line)
    return b"".join(kept)


def _captured_stderr(run):
    """run() with file descriptor 2 captured; the lines filter_startup_lines keeps are written
    back afterwards (also when run raises)."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to capture
        return run()
    with tempfile.TemporaryFile() as capture:
        sys.stderr.flush()
        os.dup2(capture.fileno(), 2)
        try:
            return run()
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = filter_startup_lines(capture.read(), min_log_level())
            if text:
                os.write(2, text)


def _quiet_import(load):
    """The first `import tensorflow`, and its device listing, inside _captured_stderr."""

    def load_and_list_devices():
        load()
        module = sys.modules["tensorflow"]
        # The CUDA platform's cuInit runs when devices are first listed; listing the physical
        # ones leaves the runtime unconfigured (set_visible_devices still works).
        module.config.list_physical_devices()
        if min_log_level() >= 1:
            # Its Python logger too: in a notebook TensorFlow sets it to INFO ("Assets written
            # to: ..." at every SavedModel save).
            logging.getLogger("tensorflow").setLevel(logging.WARNING)

    _captured_stderr(load_and_list_devices)


def quiet_tensorflow_startup():
    """Filters TensorFlow's start-up lines (see the module docstring) from the process's first
    `import tensorflow`; nothing to do once TensorFlow is imported."""
    import_hooks.around_first_import("tensorflow", _quiet_import)


def quiet_tensorflow():
    """What `import bert_tf` (and so every command) does before TensorFlow loads:
    TF_CPP_MIN_LOG_LEVEL=2 unless set (TensorFlow's INFO and WARNING lines: device probing,
    XLA service and cluster notices, tf.data notices), and `quiet_tensorflow_startup()`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    quiet_tensorflow_startup()


# Python packages whose INFO records are chatter in a command's log: TensorFlow's ("Sharding
# callback duration: 62 microseconds" at every checkpoint), Orbax's (about 35 per --backend=jax
# checkpoint: temporary directories, handler registries, throughputs).
_CHATTY_PACKAGES = tuple(f"{os.sep}{name}{os.sep}" for name in ("tensorflow", "orbax"))


class _LibraryInfo(logging.Filter):
    """Drops the INFO records of _CHATTY_PACKAGES' modules while TF_CPP_MIN_LOG_LEVEL hides
    TensorFlow's C++ INFO lines (level 1 and up)."""

    def filter(self, record):
        if record.levelno >= logging.WARNING or min_log_level() < 1:
            return True
        return not any(package in record.pathname for package in _CHATTY_PACKAGES)


# The filter bert_tf.cli puts on absl's handler, which writes every command's log.
LIBRARY_INFO = _LibraryInfo()


_type_notice_absorbed = False


def absorb_onednn_type_notice():
    """Spends TensorFlow's one-time oneDNN type notice where nobody sees it.

    The oneDNN graph pass logs "oneDNN supports DT_INT32 only on platforms with AVX-512" (an
    ERROR line, whatever the CPU) the first time a graph holds a transpose of a non-float type
    (DT_INT64 the same), once per process; the encoder's few-row inference attention transposes
    an int32 view of its floats (bert_tf.modeling.tf_kernels), the modern encoder and the
    raw-text pre-training pipeline int64 indices. Called before such graphs are made (every
    model graph's LayerNorm in bert_tf.modeling.kernels; bert_tf.data.pretraining.text_dataset):
    the first call runs a one-op graph of that kind eagerly (tf.init_scope) with file
    descriptor 2 captured and writes back what TF_CPP_MIN_LOG_LEVEL lets through, the notice
    counting as INFO. The runtime is running by then (a model's variables or a distribution
    strategy exist), so no device setting is fixed early.
    """
    global _type_notice_absorbed
    if _type_notice_absorbed:
        return
    _type_notice_absorbed = True
    import tensorflow as tf

    def run():
        with tf.init_scope():
            tf.function(lambda x: tf.transpose(x))(tf.zeros([1, 2], tf.int32))

    _captured_stderr(run)
