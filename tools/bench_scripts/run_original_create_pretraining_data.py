"""Runs the original TF1 create_pretraining_data.py on TF 2, for tools/bench_create_data.py.

Maps `tensorflow` to tensorflow.compat.v1 with absl flags/app, which is all the script needs.
Usage: python run_original_create_pretraining_data.py <original script> <its flags...>
"""

import os
import runpy
import sys
import types

import tensorflow.compat.v1 as tf
from absl import app, flags

tf.flags = flags


def _run_main(main=None, argv=None):
    # TF1's tf.app.run() finds `main` in the calling script's globals.
    main = main or sys._getframe(1).f_globals["main"]
    app.run(main, argv=argv)


tf.app.run = _run_main
sys.modules["tensorflow"] = tf
script = sys.argv[1]
sys.path.insert(0, os.path.dirname(script))
# Some copies import `from bert import tokenization` (the pip "bert-tensorflow" layout).
_bert = types.ModuleType("bert")
_bert.__path__ = [os.path.dirname(os.path.abspath(script))]
sys.modules.setdefault("bert", _bert)
sys.argv = [script] + sys.argv[2:]
runpy.run_path(script, run_name="__main__")
