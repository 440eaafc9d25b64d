"""Which ops a SavedModel uses, and whether the TF Serving model server has every one of them.

The model server links TensorFlow's core ops and kernels plus tensorflow-text's op library,
nothing else. The allow-list is read, not written by hand: the op registry of a fresh Python
process that imports only tensorflow (`TF_GetAllOpList`), plus the ops each of
tensorflow-text's op libraries registers (loaded one by one with `TF_LoadLibrary`, without
importing tensorflow_text). Ops whose kernels live in TensorFlow's Python extension
(`tf.py_function`, `tf.numpy_function`) are registered in that process but cannot run in the
server, so they are refused.

The installed versions are the reference: the server must be at least as new as the
TensorFlow that wrote the export (TF Serving releases follow TensorFlow's version numbers).
"""

import collections
import dataclasses
import glob
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.client import pywrap_tf_session as c_api

from bert_tf import fileio

# Registered by core TensorFlow, but their kernels call back into Python.
PYTHON_ONLY_OPS = ("EagerPyFunc", "PyFunc", "PyFuncStateless")


def _op_names(serialized):
    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(serialized)
    return sorted(op.name for op in op_list.op)


def read_registries():
    """The ops of this process's registry and of each tensorflow-text op library.

    Meaningful only in a process that has imported tensorflow and nothing that loads ops
    (`server_op_allowlist` runs it in a fresh one). Loading the tensorflow-text libraries
    registers their ops here.

    Returns:
      dict: "core" (sorted op names), "tf_text" (library path -> op names), "versions".
    """
    core = _op_names(c_api.TF_GetBuffer(c_api.TF_GetAllOpList()))
    tf_text = {}
    spec = importlib.util.find_spec("tensorflow_text")
    for root in (spec.submodule_search_locations if spec else []):
        for path in sorted(glob.glob(os.path.join(root, "python", "**", "_*.so"),
                                     recursive=True)):
            handle = c_api.TF_LoadLibrary(path)
            try:
                tf_text[os.path.relpath(path, root)] = _op_names(c_api.TF_GetOpList(handle))
            finally:
                c_api.TF_DeleteLibraryHandle(handle)
    versions = {"tensorflow": tf.__version__}
    try:
        versions["tensorflow-text"] = importlib.metadata.version("tensorflow-text")
    except importlib.metadata.PackageNotFoundError:
        pass
    return {"core": core, "tf_text": tf_text, "versions": versions}


_REGISTRIES_SCRIPT = ("import json; from bert_tf.serving import op_check; "
                      "print(json.dumps(op_check.read_registries()))")


@dataclasses.dataclass
class ServerOps:
    """The ops the model server has: `core` and `tf_text` (op name sets) and `versions`."""

    core: frozenset
    tf_text: frozenset
    versions: dict

    def source(self, op):
        """"core", "tensorflow-text", or None when the server lacks the op."""
        if op in PYTHON_ONLY_OPS:
            return None
        if op in self.core:
            return "core"
        if op in self.tf_text:
            return "tensorflow-text"
        return None


def server_op_allowlist(in_this_process=False):
    """The ops the model server has, read from TensorFlow's and tensorflow-text's registries.

    Args:
      in_this_process: read this process's registry instead of a fresh interpreter's. Only
        for a caller that has imported nothing but TensorFlow (bert-tf-export
        --check): any other op library loaded here would count as core.

    Returns:
      `ServerOps`.

    Raises:
      RuntimeError: the fresh interpreter failed (its stderr is in the message).
    """
    if in_this_process:
        values = read_registries()
    else:
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                   PYTHONPATH=os.pathsep.join(
                       [package_root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        result = subprocess.run([sys.executable, "-c", _REGISTRIES_SCRIPT],
                                capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise RuntimeError(f"Reading TensorFlow's op registry failed:\n{result.stderr}")
        values = json.loads(result.stdout.strip().splitlines()[-1])
    tf_text = frozenset(op for ops in values["tf_text"].values() for op in ops)
    return ServerOps(core=frozenset(values["core"]), tf_text=tf_text,
                     versions=values["versions"])


def list_ops(export_dir):
    """Counts the ops of a SavedModel: its graphs and every function in their libraries.

    Args:
      export_dir: a SavedModel directory (holding saved_model.pb).

    Returns:
      collections.Counter op name -> number of nodes.

    Raises:
      FileNotFoundError: no saved_model.pb in export_dir.
    """
    path = os.path.join(export_dir, "saved_model.pb")
    if not fileio.isfile(path):
        raise FileNotFoundError(f"{export_dir}: no saved_model.pb; expected a SavedModel "
                                "version directory such as EXPORT/1")
    saved_model = saved_model_pb2.SavedModel()
    with fileio.open_file(path, "rb") as f:
        saved_model.ParseFromString(f.read())
    counts = collections.Counter()
    for meta_graph in saved_model.meta_graphs:
        counts.update(node.op for node in meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            counts.update(node.op for node in function.node_def)
    return counts


@dataclasses.dataclass
class OpReport:
    """The result of `check_ops`.

    Attributes:
      counts: Counter op name -> nodes using it.
      sources: dict op name -> "core" or "tensorflow-text" for the ops the server has.
      missing: dict op name -> why the server cannot run it.
      versions: the TensorFlow / tensorflow-text versions the allow-list comes from.
    """

    counts: collections.Counter
    sources: dict
    missing: dict
    versions: dict

    @property
    def ok(self):
        return not self.missing

    def format(self):
        """The report as text: one line per op type, then the verdict."""
        lines = [f"{sum(self.counts.values())} nodes of {len(self.counts)} op types "
                 "(graph and functions):"]
        width = max([len(op) for op in self.counts] + [2])
        for op in sorted(self.counts):
            where = self.sources.get(op) or f"MISSING: {self.missing[op]}"
            lines.append(f"  {op:<{width}}  {self.counts[op]:>5}  {where}")
        versions = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        if self.ok:
            lines.append(f"OK: every op is in core TensorFlow or tensorflow-text ({versions}); "
                         "serve it with a model server of the same or a newer version.")
        else:
            lines.append(f"FAILED: the TF Serving model server does not have "
                         f"{', '.join(sorted(self.missing))} (checked against {versions}).")
        return "\n".join(lines)


def check_ops(export_dir, server_ops=None):
    """Checks that every op of a SavedModel is one the TF Serving model server links.

    Args:
      export_dir: a SavedModel directory.
      server_ops: a `ServerOps` (default: `server_op_allowlist()`).

    Returns:
      `OpReport`; `.ok` is False when an op is missing, and `.missing` names why.
    """
    counts = list_ops(export_dir)
    server_ops = server_ops or server_op_allowlist()
    sources, missing = {}, {}
    for op in counts:
        source = server_ops.source(op)
        if source is not None:
            sources[op] = source
        elif op in PYTHON_ONLY_OPS:
            missing[op] = "its kernel runs Python code (tf.py_function / tf.numpy_function)"
        else:
            missing[op] = "not a core TensorFlow or tensorflow-text op"
    return OpReport(counts=counts, sources=sources, missing=missing,
                    versions=server_ops.versions)
