"""TensorFlow's start-up lines: filtered as TF_CPP_MIN_LOG_LEVEL says, the rest left alone."""

import logging
import os
import subprocess
import sys

import pytest

from bert_tf import quiet_logs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What TensorFlow 2.21 printed on importing and listing devices on a 2-core Xeon VM without a
# GPU, a Python warning and a traceback line mixed in.
STARTUP = b"""\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1795872834.203470   12891 port.cc:153] oneDNN custom operations are on. You may \
see slightly different numerical results.
I0000 00:00:1795872834.203790   12891 cudart_stub.cc:31] Could not find cuda drivers on your \
machine, GPU will not be used.
I0000 00:00:1795872834.250553   12891 cpu_feature_guard.cc:227] This TensorFlow binary is \
optimized to use available CPU instructions in performance-critical operations.
To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild \
TensorFlow with the appropriate compiler flags.
/x/y.py:3: UserWarning: something the user should see
W0000 00:00:1795872836.478312   12891 dataset.cc:997] a warning
E0000 00:00:1795872837.488221   12891 cuda_platform.cc:52] failed call to cuInit: INTERNAL: \
CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)
E1128 13:34:33.945620   12891 util.cc:131] an error
Traceback (most recent call last):
"""
USER_LINES = [b"/x/y.py:3: UserWarning: something the user should see\n",
              b"Traceback (most recent call last):\n"]


def _kept(level):
    return quiet_logs.filter_startup_lines(STARTUP, level).splitlines(keepends=True)


def test_levels_as_tensorflow_means_them():
    assert b"".join(_kept(0)) == STARTUP
    # 1: no INFO (nor the banner, nor the driverless cuInit); warnings and errors stay.
    assert [line[:5] for line in _kept(1)] == [b"/x/y.", b"W0000", b"E1128", b"Trace"]
    assert [line[:5] for line in _kept(2)] == [b"/x/y.", b"E1128", b"Trace"]
    assert _kept(3) == USER_LINES


def test_cuinit_failure_with_a_driver_installed_is_an_error():
    text = (b"E0000 00:00:1.5   7 cuda_platform.cc:52] failed call to cuInit: "
            b"CUDA_ERROR_NO_DEVICE\n")
    assert quiet_logs.filter_startup_lines(text, 2) == text


@pytest.mark.parametrize("level", ["2", None])
def test_importing_tensorflow_after_the_filter_writes_nothing(level):
    code = ("from bert_tf.quiet_logs import quiet_tensorflow_startup\n"
            "quiet_tensorflow_startup()\n"
            "import keras\n"
            "import tensorflow as tf\n"
            "print(int(tf.reduce_sum(tf.constant([1, 2]))))\n")
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    if level is None:  # a command: the launcher sets level 2 before TensorFlow loads
        code = "import bert_tf.cli\n" + code
    else:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0 and proc.stdout == "3\n", proc.stderr[-3000:]
    assert proc.stderr == ""


@pytest.mark.parametrize("library_file", [
    ("tensorflow", "python", "saver.py"),
    # Orbax writes about 35 of them per checkpoint of a --backend=jax run.
    ("orbax", "checkpoint", "_src", "path", "atomicity.py")])
def test_library_python_info_records_are_dropped_and_warnings_kept(monkeypatch, library_file):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")

    def record(path, level):
        return logging.LogRecord("absl", level, path, 1, "msg", (), None)

    library = os.path.join(os.sep, "site-packages", *library_file)
    assert not quiet_logs.LIBRARY_INFO.filter(record(library, logging.INFO))
    assert quiet_logs.LIBRARY_INFO.filter(record(library, logging.WARNING))
    assert quiet_logs.LIBRARY_INFO.filter(record(library, logging.ERROR))
    assert quiet_logs.LIBRARY_INFO.filter(record(os.path.join(REPO, "bert_tf", "x.py"),
                                                 logging.INFO))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert quiet_logs.LIBRARY_INFO.filter(record(library, logging.INFO))


# A user's script: `import bert_tf` first, then Keras' fit (XLA clusters), a task's predict
# (inference attention on TensorFlow's own kernels: oneDNN's one-time type notice) and Keras'
# predict, with output redirected to a file as in a log.
_SCRIPT = """
import bert_tf
import numpy as np
from bert_tf import tasks
from bert_tf.config import BertConfig
from bert_tf.text import WordpieceTokenizer

vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "plot", "."]
model = bert_tf.BertClassifier(bert_tf.BertEncoder(BertConfig.from_preset(
    "bert_tiny", vocab_size=len(vocab))), num_classes=2)
classifier = tasks.TextClassifier(model, WordpieceTokenizer(vocab), ["neg", "pos"],
                                  max_seq_length=16)
texts = ["good film .", "bad plot .", "good plot .", "bad film ."]
classifier.fit(texts, ["pos", "neg", "pos", "neg"], epochs=1, batch_size=4)
print([answer["label"] for answer in classifier.predict(texts)])
ids = np.array([[2, 5, 7, 3]], np.int32)
model.predict({"input_word_ids": ids, "input_mask": np.ones_like(ids),
               "input_type_ids": np.zeros_like(ids)})
"""


def test_an_import_bert_tf_script_prints_nothing_a_user_cannot_act_on(tmp_path):
    from quiet_check import noisy_lines

    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as in a user's shell
    (tmp_path / "script.py").write_text(_SCRIPT)
    proc = subprocess.run([sys.executable, str(tmp_path / "script.py")], capture_output=True,
                          text=True, env=env, timeout=600, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert noisy_lines(proc.stderr) == [] and noisy_lines(proc.stdout) == []
    # Keras' progress without a terminal: one plain line per epoch.
    assert "1/1 - " in proc.stdout and "\b" not in proc.stdout
