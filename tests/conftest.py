"""Shared pytest set-up: quiet TensorFlow, the helper modules, and fixtures several folders use.

tests/ mirrors the package: tests/<subpackage>/ tests bert_tf/<subpackage>/, tests/test_<module>.py
a top-level module, tests/finetuning/ the fine-tuning driver and tasks (bert_tf.jobs),
tests/test_notebooks.py the notebooks. Test modules need unique basenames (the folders have no
__init__.py). Helper modules shared across folders (finetuning_helpers, interop_reference,
serving_cases, text_samples, glue_files, and command_batch here, which runs several CLI runs in
one process) are importable from every test.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# Under xdist each worker, and every command it runs (they inherit the environment), gets its
# share of the cores for TensorFlow's intra-op pool. With the default (all cores per process),
# two workers on 2 cores wait on each other's descheduled threads: test_demo and the resume
# kill test side by side took 122 s with the default pools and 71 s with one thread each (2-core
# AMD EPYC). Set before TensorFlow is first imported; explicit tf.config settings still win.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
if _WORKERS > 1:
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))

import pytest  # noqa: E402

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS)
for _folder in ("data", "finetuning", "interop", "serving", "text"):
    if os.path.join(TESTS, _folder) not in sys.path:
        sys.path.append(os.path.join(TESTS, _folder))


@pytest.fixture
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def pretrained_dir(tmp_path_factory):
    """A tiny pre-trained run directory (bert_config.json, vocab.txt, checkpoint)."""
    from finetuning_helpers import make_pretrained_dir

    directory = tmp_path_factory.mktemp("pretrained")
    make_pretrained_dir(str(directory))
    return directory
