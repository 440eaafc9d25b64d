"""Running a script as on a machine with JAX and Keras only: `import tensorflow` fails in it.

`run_without_tensorflow(script, *args, backend="jax")` runs `script` in a fresh Python whose
`import tensorflow` (tensorflow_text, tf_keras) raises ModuleNotFoundError, with KERAS_BACKEND
set and the repository, the script's folder (and `extra_path`) on the path. `jax_env()` is the
environment of every JAX process the tests start. `run_fresh(code)` runs code where TensorFlow
is installed but not yet imported, and `LOADED_FRAMEWORKS` says what it imported of it.
"""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# XLA's CPU compiler spends most of its time in LLVM's optimisation of the machine code, and the
# tests' JAX programs are tiny models run for a few steps. Level 0 keeps the program as it is
# (its HLO, fusions and the matmuls' library calls) and compiles it sooner: the JAX worker of
# tests/modeling/test_backend_parity.py 51 s -> 38 s, four JAX test files 256 s -> 195 s
# (2-core Xeon with AMX). JAX processes only: TensorFlow's XLA-compiled steps, which run for
# hundreds of steps in some tests, ran slower at level 0 (five files 82 s -> 145 s).
# Without the MLIR fusion emitters XLA emits each fusion the older way, which compiles in about
# half the time: the parity JAX worker 36.5 -> 21.2 s of CPU, tests/test_run_pretraining_jax.py
# 123.5 -> 100.3 s (2-core Zen 4); the outputs stay within the parity tests' 1e-5.
JAX_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def jax_env(env=None, **more):
    """`env` (this process's by default) with `more`, for a JAX process of the tests:
    KERAS_BACKEND=jax and JAX_XLA_FLAGS before the XLA_FLAGS it has."""
    env = dict(os.environ if env is None else env, **more)
    env["KERAS_BACKEND"] = "jax"
    flags = env.get("XLA_FLAGS", "").split()
    env["XLA_FLAGS"] = " ".join([f for f in JAX_XLA_FLAGS.split() if f not in flags] + flags)
    return env

# A Python expression for run_fresh's code: the sorted names of the TensorFlow, TensorFlow Text
# and Keras modules imported so far ([] when none).
LOADED_FRAMEWORKS = ("sorted(m for m in sys.modules if m.split('.')[0] in "
                     "('tensorflow', 'tensorflow_text', 'keras'))")


def run_fresh(code, timeout=300):
    """subprocess.CompletedProcess (text) of `python -c code` in a fresh interpreter on this
    checkout (PYTHONPATH=REPO): what an import loads can only be seen there, the test process
    having TensorFlow loaded."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=REPO), timeout=timeout)


# What a machine without TensorFlow looks like to Python: `import tensorflow` (tensorflow_text,
# tf_keras) fails, and importlib.util.find_spec says it is not there (etils, which Orbax uses,
# asks that before it picks a file system). A sitecustomize.py of this text hides them from a
# whole tree of processes.
HIDE_TENSORFLOW = """import importlib.abc, importlib.util, sys

_HIDDEN = ("tensorflow", "tensorflow_text", "tf_keras")


class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None


_find_spec = importlib.util.find_spec


def _hidden_find_spec(name, package=None):
    if name.split(".")[0] in _HIDDEN:
        return None
    return _find_spec(name, package)


importlib.util.find_spec = _hidden_find_spec
sys.meta_path.insert(0, _NoTensorFlow())
"""

_RUN_HIDDEN = HIDE_TENSORFLOW + """
import runpy

sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_without_tensorflow(script, *args, backend="jax", timeout=900, extra_path=()):
    """subprocess.CompletedProcess (text) of `python script *args` without TensorFlow;
    extra_path: more folders for its imports."""
    folder = os.path.dirname(os.path.abspath(script))
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=os.pathsep.join(
        [REPO, folder, *extra_path, os.environ.get("PYTHONPATH", "")]))
    if backend == "jax":
        env = jax_env(env)
    return subprocess.run([sys.executable, "-c", _RUN_HIDDEN, str(script), *args],
                          env=env, capture_output=True, text=True, timeout=timeout)
