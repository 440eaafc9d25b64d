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

import shutil  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS)
for _folder in ("data", "finetuning", "interop", "serving", "text"):
    if os.path.join(TESTS, _folder) not in sys.path:
        sys.path.append(os.path.join(TESTS, _folder))


# The run's own temporary directory, set by the first pytest process (xdist workers inherit it).
SESSION_TMP_VARIABLE = "BERT_TF_TESTS_TMPDIR"
_SESSION_TMP = pytest.StashKey[str]()


def pytest_configure(config):
    """Everything the suite writes to the system temp directory (pytest's tmp_path folders,
    TensorFlow's autograph files, Beam's and TFDS's temporaries, what the commands it runs
    write there, ~445 MB a run) goes to one directory of this run, removed when the run
    passes. A failed run keeps it, for its tmp_path folders, and says where."""
    if os.environ.get(SESSION_TMP_VARIABLE):  # an xdist worker, or a suite run by a test
        return
    root = tempfile.mkdtemp(prefix="bert_tf_tests_")
    os.environ[SESSION_TMP_VARIABLE] = os.environ["TMPDIR"] = root
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    config.stash[_SESSION_TMP] = root


def pytest_sessionfinish(session, exitstatus):
    root = session.config.stash.get(_SESSION_TMP, None)
    if root is None:
        return
    if exitstatus == 0:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"\nThe run's temporary files (tmp_path folders included) are kept in {root}",
              file=sys.stderr)


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
