"""Running a script as on a machine with JAX and Keras only: `import tensorflow` fails in it.

`run_without_tensorflow(script, *args, backend="jax")` runs `script` in a fresh Python whose
`import tensorflow` (tensorflow_text, tf_keras) raises ModuleNotFoundError, with KERAS_BACKEND
set and the repository, the script's folder (and `extra_path`) on the path.
"""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_HIDE_TENSORFLOW = """
import importlib.abc, runpy, sys

class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text", "tf_keras"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, _NoTensorFlow())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_without_tensorflow(script, *args, backend="jax", timeout=900, extra_path=()):
    """subprocess.CompletedProcess (text) of `python script *args` without TensorFlow;
    extra_path: more folders for its imports."""
    folder = os.path.dirname(os.path.abspath(script))
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=os.pathsep.join(
        [REPO, folder, *extra_path, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", _HIDE_TENSORFLOW, str(script), *args],
                          env=env, capture_output=True, text=True, timeout=timeout)
